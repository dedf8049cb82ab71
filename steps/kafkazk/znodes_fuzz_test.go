package kafkazk

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeZNodes: Kafka's znode JSON from a damaged or hostile ZooKeeper
// never panics the decoders, and what decodes re-encodes to the same value.
func FuzzDecodeZNodes(f *testing.F) {
	for _, s := range []string{
		`{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{},"removing_replicas":{},"topic_id":"Ss0sKu5VTNKOAcCP7BdE-w"}`,
		`{"version":1,"partitions":{"0":[1]}}`,
		`{"version":3,"partitions":{"-1":[1],"x":[2]}}`,
		`{"controller_epoch":5,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2,3]}`,
		`{"version":5,"host":"127.0.0.1","port":9092,"endpoints":["PLAINTEXT://127.0.0.1:9092"],"features":{}}`,
		`{"version":2,"brokerid":1,"timestamp":"1","kraftControllerEpoch":-1}`,
		`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}`,
		`null`, `[]`, `{`, `{"partitions":null}`, "\x00", `{"isr":"nope"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var tz TopicZNode
		if err := DecodeZNode("/brokers/topics/t", b, &tz); err == nil {
			if as, err := tz.Assignment(); err == nil {
				for p := range as {
					if p < 0 {
						t.Fatalf("negative partition %d accepted", p)
					}
				}
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("assignment error %v does not wrap ErrCorrupt", err)
			}
			again, _ := json.Marshal(tz)
			var tz2 TopicZNode
			if err := json.Unmarshal(again, &tz2); err != nil {
				t.Fatalf("re-decode: %v", err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
		}
		var ps PartitionState
		_ = DecodeZNode("/state", b, &ps)
		var br BrokerRegistration
		if DecodeZNode("/brokers/ids/1", b, &br) == nil {
			_ = br.Addr()
		}
		var rz ReassignZNode
		_ = DecodeZNode("/admin/reassign_partitions", b, &rz)
	})
}
