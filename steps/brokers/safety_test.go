package brokers

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// part is one partition of a rule case: its replicas, ISR and leader.
type part struct {
	topic    string
	p        int32
	replicas []int32
	isr      []int32
	leader   int32
}

// state is the case as ZooKeeper holds it; view as a broker answers it.
func state(parts []part, minISR map[string]string) *kafkazk.ClusterState {
	st := &kafkazk.ClusterState{Topics: map[string]*kafkazk.TopicState{}}
	for _, x := range parts {
		ts, ok := st.Topics[x.topic]
		if !ok {
			ts = kafkazk.NewTopicState(x.topic)
			ts.Exists = true
			ts.Znode.Partitions = map[string][]int32{}
			ts.Config = map[string]string{}
			if v, ok := minISR[x.topic]; ok {
				ts.Config["min.insync.replicas"] = v
			}
			st.Topics[x.topic] = ts
		}
		ts.Znode.Partitions[strconv.Itoa(int(x.p))] = x.replicas
		ts.States[x.p] = kafkazk.PartitionState{Leader: x.leader, ISR: x.isr}
	}
	return st
}

func view(parts []part) ports.BrokerView {
	v := ports.BrokerView{Topics: map[string]ports.TopicView{}}
	for _, x := range parts {
		tv, ok := v.Topics[x.topic]
		if !ok {
			tv = ports.TopicView{Name: x.topic, Partitions: map[int32]ports.PartitionView{}}
		}
		tv.Partitions[x.p] = ports.PartitionView{Partition: x.p, Leader: x.leader, Replicas: x.replicas, ISR: x.isr}
		v.Topics[x.topic] = tv
	}
	return v
}

// TestStopRisksOneRuleForEveryView: the one stop-safety rule gives the
// same answer whether the partitions come from ZooKeeper's states (the
// rolling restart) or from a broker's Metadata (the migration's rolls),
// for one broker or a set of them, with the topic's override or the
// brokers' default min.insync.replicas.
func TestStopRisksOneRuleForEveryView(t *testing.T) {
	rf3 := []int32{1, 2, 3}
	for name, tc := range map[string]struct {
		parts    []part
		override map[string]string
		stopping []int32
		want     []string // substrings, one risk each; none: safe
		unavail  []string // Unavailables, one each: no restart keeps them
	}{
		"full ISR, one broker":           {[]part{{"a", 0, rf3, rf3, 1}}, nil, []int32{1}, nil, nil},
		"full ISR, two of three brokers": {[]part{{"a", 0, rf3, rf3, 1}}, nil, []int32{1, 2}, []string{"a-0 would fall below min.insync.replicas=2: isr [1 2 3] without brokers [1 2]"}, nil},
		"ISR at min, the stopped one in it": {[]part{{"a", 0, rf3, []int32{1, 2}, 1}}, nil, []int32{2},
			[]string{"a-0 would fall below min.insync.replicas=2: isr [1 2] without broker 2"}, nil},
		"ISR at min, the stopped one not in it": {[]part{{"a", 0, rf3, []int32{1, 2}, 1}}, nil, []int32{3}, nil, nil},
		"already below, another broker":         {[]part{{"a", 0, rf3, []int32{1}, 1}}, nil, []int32{3}, []string{"a-0 is already below min.insync.replicas=2 (isr [1])"}, nil},
		"already offline":                       {[]part{{"a", 0, rf3, []int32{}, -1}}, nil, []int32{3}, []string{"a-0 is already offline (no leader, isr [])"}, nil},
		"only in-sync replica of two":           {[]part{{"s", 0, []int32{2, 3}, []int32{2}, 2}}, map[string]string{"s": "1"}, []int32{2}, []string{"s-0 would go offline: broker 2 is its only in-sync replica"}, nil},
		"replication factor 1":                  {[]part{{"s", 0, []int32{2}, []int32{2}, 2}}, map[string]string{"s": "1"}, []int32{2}, nil, []string{"s-0 goes offline while its broker is down (replication factor 1, min.insync.replicas 1)"}},
		"replication factor 1 under min 2":      {[]part{{"s", 0, []int32{2}, []int32{2}, 2}}, nil, []int32{3}, nil, nil},
		"the topic's own min.insync.replicas":   {[]part{{"a", 0, rf3, rf3, 1}}, map[string]string{"a": "3"}, []int32{1}, nil, []string{"a-0 refuses acks=all writes while its broker is down (replication factor 3, min.insync.replicas 3)"}},
		"replication factor 2, min 2":           {[]part{{"p", 0, []int32{1, 2}, []int32{1, 2}, 1}}, map[string]string{"p": "2"}, []int32{1}, nil, []string{"p-0 refuses acks=all writes"}},
		"two brokers of replication factor 2":   {[]part{{"p", 0, []int32{1, 2}, []int32{1, 2}, 1}}, map[string]string{"p": "2"}, []int32{1, 2}, nil, []string{"p-0 goes offline"}},
		"a broker without replicas":             {[]part{{"p", 0, []int32{1, 2}, []int32{1, 2}, 1}}, map[string]string{"p": "2"}, []int32{3}, nil, nil},
	} {
		t.Run(name, func(t *testing.T) {
			m := MinISR{Default: 2, Topics: map[string]int{}}
			for k, v := range tc.override {
				m.Topics[k] = int(v[0] - '0')
			}
			fromZK := StopRisks(PartitionsOfState(state(tc.parts, tc.override)), tc.stopping, m)
			fromView := StopRisks(PartitionsOfView(view(tc.parts)), tc.stopping, m)
			if !slices.Equal(fromZK, fromView) {
				t.Fatalf("the rule differs by view:\nZooKeeper %q\nMetadata  %q", fromZK, fromView)
			}
			if len(fromZK) != len(tc.want) {
				t.Fatalf("risks %q, want %d like %q", fromZK, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(fromZK[i], w) {
					t.Errorf("risk %q lacks %q", fromZK[i], w)
				}
			}
			uZK := Unavailables(PartitionsOfState(state(tc.parts, tc.override)), tc.stopping, m)
			if uView := Unavailables(PartitionsOfView(view(tc.parts)), tc.stopping, m); !slices.Equal(uZK, uView) {
				t.Fatalf("unavailables differ by view:\nZooKeeper %v\nMetadata  %v", uZK, uView)
			}
			if len(uZK) != len(tc.unavail) {
				t.Fatalf("unavailable %v, want %d like %q", uZK, len(tc.unavail), tc.unavail)
			}
			for i, w := range tc.unavail {
				if !strings.Contains(uZK[i].String(), w) {
					t.Errorf("unavailable %q lacks %q", uZK[i], w)
				}
			}
		})
	}
}

// TestPartitionsOfStateUnknown: a partition without a state znode, and a
// topic pending deletion, are what the rule is told: unknown (never safe),
// and not counted.
func TestPartitionsOfStateUnknown(t *testing.T) {
	st := state([]part{{"a", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1}, {"gone", 0, []int32{1, 2, 3}, nil, -1}}, nil)
	delete(st.Topics["a"].States, 0)
	st.Topics["gone"].PendingDelete = true
	rs := StopRisks(PartitionsOfState(st), []int32{3}, MinISR{Default: 1})
	if len(rs) != 1 || !strings.Contains(rs[0], "a-0 has no state znode") {
		t.Fatalf("risks %q", rs)
	}
}

// kafkaConfigs answers BrokerConfig from a map per broker (an error where
// a broker has none).
type kafkaConfigs struct {
	ports.Kafka
	by map[int32]string
}

func (k kafkaConfigs) BrokerConfig(_ context.Context, b int32, key string) (string, error) {
	if v, ok := k.by[b]; ok && key == "min.insync.replicas" {
		return v, nil
	}
	return "", errors.New("connection refused")
}

// TestReadMinISR: the default from the first broker that reports one, the
// topics' overrides over it; none reporting is a refusal, never a guess.
func TestReadMinISR(t *testing.T) {
	m, err := ReadMinISR(context.Background(), kafkaConfigs{by: map[int32]string{2: "2", 3: "3"}}, []int32{1, 2, 3}, map[string]string{"a": "3", "bad": "x"})
	if err != nil || m.Default != 2 || m.Of("a") != 3 || m.Of("bad") != 2 || m.Of("other") != 2 {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := ReadMinISR(context.Background(), kafkaConfigs{}, []int32{1, 2}, nil); !errors.Is(err, ports.ErrRefused) || !strings.Contains(err.Error(), "cannot tell which stop is safe") {
		t.Fatalf("no broker answering: %v", err)
	}
}
