package ports

import (
	"encoding/json"
	"testing"
)

// TestViewJSON: a typed error code writes the JSON the string did — Kafka's
// name under "error", nothing at all for none — and reads it back.
func TestViewJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		view TopicView
		want string
	}{
		{"none is left out", TopicView{Name: "orders", ID: "AAAAAAAAAAAAAAAAAAAAAA", Partitions: map[int32]PartitionView{0: {Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}},
			`{"name":"orders","id":"AAAAAAAAAAAAAAAAAAAAAA","partitions":{"0":{"partition":0,"leader":1,"leader_epoch":0,"replicas":[1],"isr":[1]}}}`},
		{"gone", TopicView{Name: "orders", Err: KafkaUnknownTopicOrPartition},
			`{"name":"orders","error":"UNKNOWN_TOPIC_OR_PARTITION"}`},
		{"not allowed", TopicView{Name: "orders", Err: KafkaTopicAuthorizationFailed},
			`{"name":"orders","error":"TOPIC_AUTHORIZATION_FAILED"}`},
		{"a partition's error", TopicView{Name: "orders", Partitions: map[int32]PartitionView{1: {Partition: 1, Leader: -1, Err: KafkaLeaderNotAvailable}}},
			`{"name":"orders","partitions":{"1":{"partition":1,"leader":-1,"leader_epoch":0,"replicas":null,"isr":null,"error":"LEADER_NOT_AVAILABLE"}}}`},
		{"a code newer than the table", TopicView{Name: "orders", Err: KafkaErr(999)},
			`{"name":"orders","error":"KAFKA_ERROR_999"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.view)
			if err != nil || string(b) != tc.want {
				t.Fatalf("marshal: %s %v\nwant %s", b, err, tc.want)
			}
			var back TopicView
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if b2, _ := json.Marshal(back); string(b2) != tc.want {
				t.Fatalf("round trip: %s, want %s", b2, tc.want)
			}
		})
	}
}

func TestKafkaErrText(t *testing.T) {
	for _, tc := range []struct {
		text string
		want KafkaErr
		ok   bool
	}{
		{"", KafkaNone, true}, // views written before the code was typed
		{"NONE", KafkaNone, true},
		{"UNKNOWN_SERVER_ERROR", KafkaUnknownServerError, true},
		{"UNKNOWN_TOPIC_OR_PARTITION", KafkaUnknownTopicOrPartition, true},
		{"LEADER_NOT_AVAILABLE", KafkaLeaderNotAvailable, true},
		{"NOT_LEADER_OR_FOLLOWER", KafkaNotLeaderOrFollower, true},
		{"NOT_LEADER_FOR_PARTITION", KafkaNotLeaderOrFollower, true}, // the older name, franz-go's
		{"REPLICA_NOT_AVAILABLE", KafkaReplicaNotAvailable, true},
		{"INVALID_TOPIC_EXCEPTION", KafkaInvalidTopic, true},
		{"TOPIC_AUTHORIZATION_FAILED", KafkaTopicAuthorizationFailed, true},
		{"LISTENER_NOT_FOUND", KafkaListenerNotFound, true},
		{"INCONSISTENT_TOPIC_ID", KafkaInconsistentTopicID, true},
		{"KAFKA_ERROR_999", KafkaErr(999), true},
		{"unknown_topic_or_partition", 0, false},
		{"KAFKA_ERROR_x", 0, false},
		{"BOGUS", 0, false},
	} {
		var got KafkaErr
		err := got.UnmarshalText([]byte(tc.text))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %d %v, want %d ok=%v", tc.text, got, err, tc.want, tc.ok)
		}
	}
	for c := KafkaErr(-1); c < KafkaErr(len(kafkaErrNames))+2; c++ {
		var back KafkaErr
		if err := back.UnmarshalText([]byte(c.String())); err != nil || back != c {
			t.Errorf("code %d: %q reads back as %d %v", c, c, back, err)
		}
	}
}

func TestPresentGoneUnsure(t *testing.T) {
	for _, tc := range []struct {
		err                   KafkaErr
		present, gone, unsure bool
	}{
		{KafkaNone, true, false, false},
		{KafkaUnknownTopicOrPartition, false, true, false},
		{KafkaTopicAuthorizationFailed, false, false, true},
		{KafkaInvalidTopic, false, false, true},
		{KafkaLeaderNotAvailable, false, false, true},
	} {
		tv := TopicView{Name: "orders", Err: tc.err}
		if tv.Present() != tc.present || tv.Gone() != tc.gone || (tv.Unsure() != "") != tc.unsure {
			t.Errorf("%s: present %v gone %v unsure %q", tc.err, tv.Present(), tv.Gone(), tv.Unsure())
		}
	}
}

// TestOfflineMeansNoLeader: a partition whose replica is on a stopped
// broker — Kafka lists it in offline_replicas while the leader serves (the
// conformance suite shows it on real Kafka) — is under-replicated, not
// offline; one without a leader is offline.
func TestOfflineMeansNoLeader(t *testing.T) {
	stopped := PartitionView{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Offline: []int32{3}}
	if stopped.IsOffline() || !stopped.UnderReplicated() {
		t.Errorf("%+v: offline %v, under-replicated %v; want a leader serving, under-replicated", stopped, stopped.IsOffline(), stopped.UnderReplicated())
	}
	leaderless := PartitionView{Leader: -1, Replicas: []int32{1, 2, 3}, ISR: []int32{3}, Offline: []int32{1, 2, 3}}
	if !leaderless.IsOffline() {
		t.Errorf("%+v is not offline", leaderless)
	}
}
