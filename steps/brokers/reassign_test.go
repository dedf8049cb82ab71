package brokers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestReadReassigning: why a move is stuck — a target broker down, or
// the bytes left at the throttle that applies (the lower of the leader's
// leader rate and the follower's follower rate, where the topic's
// throttled replicas name them) beyond SlowMove — and the throttles of a
// stopped broker read from its znode.
func TestReadReassigning(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name             string
		adding           int32
		leaderRate       string
		followerReplicas string
		why              string
		rate             int64
	}{
		{name: "target down", adding: 4, leaderRate: "1024", followerReplicas: "0:4", why: "target broker 4 down"},
		{name: "1 MB at 1 KB/s: too low", adding: 3, leaderRate: "1024", followerReplicas: "0:3", why: "throttle too low: 1048576 bytes left at 1024 bytes/s", rate: 1024},
		{name: "the lower rate applies: the follower's cluster default, 512 s is not stuck", adding: 3, leaderRate: "10485760", followerReplicas: "*", rate: 2048},
		{name: "a follower the topic does not list: the leader's throttle alone", adding: 3, leaderRate: "1024", followerReplicas: "0:2", why: "throttle too low", rate: 1024},
		{name: "a follower the topic does not list, a fast leader", adding: 3, leaderRate: "10485760", followerReplicas: "0:2", rate: 10485760},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := steptest.Ghost(t)
			g.Ports.Target.Hosts = append(g.Ports.Target.Hosts, ports.Host{ID: 4, Host: "b4"})
			g.ZK.Put(kafkazk.TopicPath("moving"), `{"version":3,"partitions":{"0":[1,2]}}`)
			g.ZK.Put(kafkazk.PartitionStatePath("moving", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`)
			g.ZK.Put(brokers.BrokerConfigPath(4), `{"version":1,"config":{"follower.replication.throttled.rate":"1024"}}`)
			r := steptest.NewReassigning(g.Kafka)
			r.Moves = []ports.Reassignment{{Topic: "moving", Partition: 0, Replicas: []int32{1, tc.adding, 2}, Adding: []int32{tc.adding}, Removing: []int32{2}}}
			r.Configs = []ports.ConfigEntry{
				{Resource: "broker", Name: "1", Key: brokers.LeaderRate, Value: tc.leaderRate},
				{Resource: "broker", Name: "", Key: brokers.FollowerRate, Value: "2048"},
				{Resource: "topic", Name: "moving", Key: brokers.LeaderReplicas, Value: "0:1,0:2"},
				{Resource: "topic", Name: "moving", Key: brokers.FollowerReplicas, Value: tc.followerReplicas},
			}
			r.Sizes[1] = map[string]map[int32]int64{"moving": {0: mb}}
			g.Ports.Kafka = r
			st, err := brokers.ReadReassigning(context.Background(), g.Ports)
			if err != nil {
				t.Fatal(err)
			}
			m := st.Moves[0]
			if (tc.why == "") != (m.Why == "") || !strings.Contains(m.Why, tc.why) || m.Rate != tc.rate {
				t.Errorf("why %q rate %d, want %q and %d", m.Why, m.Rate, tc.why, tc.rate)
			}
			if n := len(st.Throttles); n != 5 || st.Throttles[4].ZKVersion == nil || st.Throttles[4].Name != "4" {
				t.Errorf("throttles %+v: want the 4 over Kafka and broker 4's from its znode", st.Throttles)
			}
		})
	}
}

// TestReadReassigningNeedsTheAbility: a Kafka port without it is named.
func TestReadReassigningNeedsTheAbility(t *testing.T) {
	g := steptest.Ghost(t)
	if _, err := brokers.ReadReassigning(context.Background(), g.Ports); !errors.Is(err, brokers.ErrNoReassigner) {
		t.Fatalf("%v, want ErrNoReassigner", err)
	}
}
