package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// TestOfflineLogEndsIsTheCause: one offline-log-ends finding per set of
// dead brokers, naming them, each replica's end in its evidence, the
// runbook; it explains the topic's offline-partitions and its
// under-replicated twin (a broker that is down does not).
func TestOfflineLogEndsIsTheCause(t *testing.T) {
	o := brokers.Offline{Topic: "pay", Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{3}, Dead: []int32{3}, Committed: -1,
		Ends:   map[int32]brokers.LogEnd{1: {Broker: 1, End: 20, Epoch: 0, Dir: "/d/pay-0"}, 2: {Broker: 2, End: 35, Epoch: 1, Dir: "/d/pay-0"}},
		Unread: map[int32]string{3: "host unreachable"}}
	f := offlineFinding([]brokers.Offline{o})
	ev := strings.Join(f.Evidence, "\n")
	for _, w := range []string{"pay-0 broker 1: log end 20, last leader epoch 0 (live", "pay-0 broker 2: log end 35, last leader epoch 1 (live",
		"pay-0 broker 3: log end not read (dead): host unreachable", "the longest live log is broker 2's (35)", "Kafka's own would pick broker 1"} {
		if !strings.Contains(ev, w) {
			t.Errorf("evidence lacks %q:\n%s", w, ev)
		}
	}
	if f.Runbook != "offline-partitions" || len(f.Brokers) != 1 || f.Brokers[0] != 3 {
		t.Fatalf("finding %+v", f)
	}
	fs := linkCauses([]Finding{
		{Kind: FindBrokerDown, Brokers: []int32{3}},
		{Kind: FindOffline, Topic: "pay", Brokers: []int32{3, 3}, Partitions: []int32{0}},
		{Kind: FindOffline, Topic: "kraft", Brokers: []int32{1, 2, 3}, Partitions: []int32{0}}, // KRaft: ISR empty
		{Kind: FindUnderReplicated, Topic: "pay", Brokers: []int32{1, 2}, Partitions: []int32{0}},
		f,
	})
	for _, x := range fs {
		switch x.Kind {
		case FindOffline, FindUnderReplicated:
			if x.Cause != "offline-log-ends/3" {
				t.Errorf("%s: cause %q, want offline-log-ends/3", x.Kind, x.Cause)
			}
		case FindOfflineLogEnds, FindBrokerDown:
			if x.Cause != "" {
				t.Errorf("%s is a cause, got cause %q", x.Kind, x.Cause)
			}
		}
	}
}

// TestOfflineLogEndsWithALiveLogUnread: live broker 1's log end could not
// be read: diagnose names no longest live log (broker 2's is only the
// longest read).
func TestOfflineLogEndsWithALiveLogUnread(t *testing.T) {
	o := brokers.Offline{Topic: "pay", Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{3}, Dead: []int32{3}, Committed: -1,
		Ends:   map[int32]brokers.LogEnd{2: {Broker: 2, End: 35, Epoch: 1, Dir: "/d/pay-0"}},
		Unread: map[int32]string{1: "host b1: no route", 3: "host unreachable"}}
	ev := strings.Join(offlineFinding([]brokers.Offline{o}).Evidence, "\n")
	if strings.Contains(ev, "the longest live log is broker 2's") || !strings.Contains(ev, "pay-0: the longest live log is not known: live broker(s) [1] could not be read") {
		t.Errorf("evidence:\n%s", ev)
	}
}

// TestKRaftOfflineNamesTheDeadReplica: a KRaft partition without a leader
// is waiting for the replicas the brokers list offline — on 3.9 the dead
// last leader stays in the ISR (isr [3], offline [3]); on 4.1 with ELR
// the ISR empties — not the live ones out of the ISR (seen on the 3.9.2
// lab: the finding named brokers [1 2] and lost its offline-log-ends
// cause).
func TestKRaftOfflineNamesTheDeadReplica(t *testing.T) {
	for _, pv := range []ports.PartitionView{
		{Partition: 0, Leader: -1, Replicas: []int32{1, 2, 3}, ISR: []int32{3}, Offline: []int32{3}}, // 3.9
		{Partition: 0, Leader: -1, Replicas: []int32{1, 2, 3}, ISR: nil, Offline: []int32{3}},        // 4.1, ELR
	} {
		g := &kraftDiag{diagnoser: diagnoser{d: &Diagnosis{}, minISR: brokers.MinISR{Default: 2},
			views: map[int32]ports.BrokerView{1: {Broker: 1, Topics: map[string]ports.TopicView{"pay": {Name: "pay", Partitions: map[int32]ports.PartitionView{0: pv}}}}}}}
		g.partitions("pay")
		var f *Finding
		for i := range g.d.Findings {
			if g.d.Findings[i].Kind == FindOffline {
				f = &g.d.Findings[i]
			}
		}
		if f == nil || !slices.Equal(f.Brokers, []int32{3}) {
			t.Errorf("isr %v: offline-partitions %+v, want brokers [3]", pv.ISR, f)
		}
	}
}
