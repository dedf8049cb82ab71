package diagnose_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// moving is a healthy fake cluster (brokers 1–3 running, broker 4 in the
// inventory and stopped) with "moving" (partition 0 on [1,2]) being moved
// to [1,4]: throttled, onto a stopped broker.
func moving(t *testing.T) (*steptest.Cluster, *steptest.Reassigning) {
	t.Helper()
	g := steptest.Ghost(t)
	g.ZK.Remove(kafkazk.DeleteTopicPath("orders"))
	g.Ports.Target.Hosts = append(g.Ports.Target.Hosts, ports.Host{ID: 4, Host: "b4"})
	g.ZK.Put(kafkazk.TopicPath("moving"), `{"version":3,"partitions":{"0":[1,2]}}`)
	g.ZK.Put(kafkazk.PartitionStatePath("moving", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`)
	r := steptest.NewReassigning(g.Kafka)
	r.Moves = []ports.Reassignment{{Topic: "moving", Partition: 0, Replicas: []int32{1, 4, 2}, Adding: []int32{4}, Removing: []int32{2}}}
	r.Configs = []ports.ConfigEntry{{Resource: "broker", Name: "1", Key: brokers.LeaderRate, Value: "1024"},
		{Resource: "topic", Name: "moving", Key: brokers.LeaderReplicas, Value: "*"}}
	g.Ports.Kafka = r
	return g, r
}

// endsAfterFirstRead is a move that finishes between diagnose's two reads.
type endsAfterFirstRead struct {
	*steptest.Reassigning
	reads int
}

func (e *endsAfterFirstRead) Reassignments(ctx context.Context) ([]ports.Reassignment, error) {
	if e.reads++; e.reads > 1 {
		return nil, nil
	}
	return e.Reassigning.Reassignments(ctx)
}

// startsAfterFirstRead is a move submitted just after its throttles were
// set (kafka-reassign-partitions --execute), between diagnose's reads.
type startsAfterFirstRead struct {
	*steptest.Reassigning
	reads int
}

func (e *startsAfterFirstRead) Reassignments(ctx context.Context) ([]ports.Reassignment, error) {
	if e.reads++; e.reads == 1 {
		return nil, nil
	}
	return e.Reassigning.Reassignments(ctx)
}

func TestDiagnoseReassignments(t *testing.T) {
	kinds := func(d *diagnose.Diagnosis) []string {
		var out []string
		for _, f := range d.Findings {
			out = append(out, f.Kind)
		}
		return out
	}
	t.Run("a move onto a stopped broker is stuck, with the runbook", func(t *testing.T) {
		g, _ := moving(t)
		d, err := diagnose.Run(context.Background(), g.Ports, diagnose.Options{Settle: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(d.Findings, func(f diagnose.Finding) bool { return f.Kind == diagnose.FindStuckReassignment })
		if i < 0 || d.Healthy {
			t.Fatalf("findings %v, healthy %v: want %s", kinds(d), d.Healthy, diagnose.FindStuckReassignment)
		}
		f := d.Findings[i]
		ev := strings.Join(f.Evidence, "\n")
		if f.Severity != diagnose.Critical || f.Topic != "moving" || !slices.Equal(f.Partitions, []int32{0}) || f.Runbook != "reassignment-unstick" ||
			!strings.Contains(ev, "adding [4 (down)]") || !strings.Contains(ev, "removing [2 (live, in ISR)]") || !strings.Contains(ev, "a cancel is safe") {
			t.Fatalf("finding %+v", f)
		}
		if slices.Contains(kinds(d), diagnose.FindThrottleLeft) {
			t.Errorf("throttles of a move in flight reported as left behind: %v", kinds(d))
		}
	})
	t.Run("a move held by a throttle too low is stuck, a warning", func(t *testing.T) {
		g, r := moving(t)
		r.Moves[0] = ports.Reassignment{Topic: "moving", Partition: 0, Replicas: []int32{1, 3, 2}, Adding: []int32{3}, Removing: []int32{2}}
		r.Sizes[1] = map[string]map[int32]int64{"moving": {0: 4 << 20}}
		d, err := diagnose.Run(context.Background(), g.Ports, diagnose.Options{Settle: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(d.Findings, func(f diagnose.Finding) bool { return f.Kind == diagnose.FindStuckReassignment })
		if i < 0 {
			t.Fatalf("findings %v, want %s", kinds(d), diagnose.FindStuckReassignment)
		}
		f := d.Findings[i]
		if ev := strings.Join(f.Evidence, "\n"); f.Severity != diagnose.Warning || !strings.Contains(ev, "4194304 bytes left at a throttle of 1024 bytes/s") || !strings.Contains(f.Summary, "throttle too low") {
			t.Fatalf("finding %+v", f)
		}
	})
	t.Run("a move that ends before the second read is not stuck", func(t *testing.T) {
		g, r := moving(t)
		g.Ports.Kafka = &endsAfterFirstRead{Reassigning: r}
		d, err := diagnose.Run(context.Background(), g.Ports, diagnose.Options{Settle: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(kinds(d), diagnose.FindStuckReassignment) {
			t.Fatalf("findings %v: a move that ended was reported stuck", kinds(d))
		}
		// Read the second time, no move is in flight: the throttles are left behind.
		if !slices.Contains(kinds(d), diagnose.FindThrottleLeft) {
			t.Fatalf("findings %v, want %s", kinds(d), diagnose.FindThrottleLeft)
		}
	})
	t.Run("throttles of a move submitted after the first read are not left behind", func(t *testing.T) {
		g, r := moving(t)
		g.Ports.Kafka = &startsAfterFirstRead{Reassigning: r}
		d, err := diagnose.Run(context.Background(), g.Ports, diagnose.Options{Settle: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(kinds(d), diagnose.FindThrottleLeft) {
			t.Fatalf("findings %v: the throttles of a move that started between the reads reported as left behind", kinds(d))
		}
	})
	t.Run("throttles with no move in flight are left behind", func(t *testing.T) {
		g, r := moving(t)
		r.Moves = nil
		d, err := diagnose.Run(context.Background(), g.Ports, diagnose.Options{Settle: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(d.Findings, func(f diagnose.Finding) bool { return f.Kind == diagnose.FindThrottleLeft })
		if i < 0 {
			t.Fatalf("findings %v, want %s", kinds(d), diagnose.FindThrottleLeft)
		}
		f := d.Findings[i]
		if f.Severity != diagnose.Warning || !slices.Equal(f.Brokers, []int32{1}) || f.Runbook != "reassignment-unstick" || len(f.Evidence) != 2 {
			t.Fatalf("finding %+v", f)
		}
	})
}
