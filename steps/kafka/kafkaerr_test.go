package kafka

import (
	"testing"

	"github.com/kremedy/kremedy/steps/ports"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestKafkaErrNames holds ports.KafkaErr's names to franz-go's kerr, the
// names this adapter wrote into views when they were strings: the JSON of
// a view (--json, the journal) does not change with the type. The one
// difference is deliberate: code 6 is Kafka's NOT_LEADER_OR_FOLLOWER
// (Errors.java), kerr's older NOT_LEADER_FOR_PARTITION.
func TestKafkaErrNames(t *testing.T) {
	known := 0
	for code := int16(-1); code < 1000; code++ {
		e := kerr.TypedErrorForCode(code)
		if code == 0 || e == nil || e.Code != code {
			continue // none, or a code kerr does not know
		}
		known++
		want := e.Message
		if code == kerr.NotLeaderForPartition.Code {
			want = "NOT_LEADER_OR_FOLLOWER"
		}
		if got := ports.KafkaErr(code).String(); got != want {
			t.Errorf("code %d: ports says %s, kerr %s", code, got, e.Message)
		}
		var back ports.KafkaErr
		if err := back.UnmarshalText([]byte(e.Message)); err != nil || back != ports.KafkaErr(code) {
			t.Errorf("kerr's name %s reads back as %d %v", e.Message, back, err)
		}
	}
	if known < 100 {
		t.Fatalf("only %d codes known to kerr: the loop is wrong", known)
	}
	for _, c := range []struct {
		port ports.KafkaErr
		kerr *kerr.Error
	}{
		{ports.KafkaUnknownServerError, kerr.UnknownServerError},
		{ports.KafkaUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
		{ports.KafkaLeaderNotAvailable, kerr.LeaderNotAvailable},
		{ports.KafkaNotLeaderOrFollower, kerr.NotLeaderForPartition},
		{ports.KafkaReplicaNotAvailable, kerr.ReplicaNotAvailable},
		{ports.KafkaInvalidTopic, kerr.InvalidTopicException},
		{ports.KafkaTopicAuthorizationFailed, kerr.TopicAuthorizationFailed},
		{ports.KafkaListenerNotFound, kerr.ListenerNotFound},
		{ports.KafkaInconsistentTopicID, kerr.InconsistentTopicID},
	} {
		if int16(c.port) != c.kerr.Code {
			t.Errorf("%s is %d, kerr says %d", c.port, int16(c.port), c.kerr.Code)
		}
	}
}
