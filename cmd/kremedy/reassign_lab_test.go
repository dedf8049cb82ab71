package main

// Lab test of the reassignment-unstick runbook and its diagnose findings:
// the real binary, headless, on a ZooKeeper-mode Kafka 3.9 lab broken by
// the stuck-reassignment scenario, checked with kremedy's own clients.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/reassign"
)

func runUnstick(t *testing.T, l *lab.Lab, runDir string, extra ...string) result {
	t.Helper()
	return kremedy(t, append([]string{"run", "reassignment-unstick", "--inventory", l.InventoryPath(), "--run-dir", runDir,
		"--headless", "--yes", "--confirm", l.Inventory().Name}, extra...)...)
}

// TestReassignmentUnstickLab breaks one lab with stuck-reassignment (two
// moves onto a broker throttled at 1 KB/s, then stopped), has diagnose
// name them, has a cancel refused while an original replica is down, and
// runs the runbook to the end: no move in flight, no leaderless
// partition, no throttle config on any broker, topic or znode.
func TestReassignmentUnstickLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers = 62, 1
	l := startLab(t, cfg)
	c := connectLab(t, l)
	const topic = "moving"
	rep := breakIt(t, l, "stuck-reassignment", topic)
	target, a, b := rep.Victim, rep.Assign[0][0], rep.Assign[0][1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	moves := func() int {
		ms, err := c.kc.Reassignments(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ms)
	}

	t.Run("diagnose names the stuck reassignment and the way forward", func(t *testing.T) {
		d, code := diagnosis(t, l, "")
		if code != 1 {
			t.Fatalf("diagnose exit %d, want 1", code)
		}
		i := slices.IndexFunc(d.Findings, func(f diagnose.Finding) bool { return f.Kind == diagnose.FindStuckReassignment })
		if i < 0 {
			t.Fatalf("no %s finding", diagnose.FindStuckReassignment)
		}
		f := d.Findings[i]
		if f.Topic != topic || !slices.Equal(f.Partitions, []int32{0, 1}) || f.Severity != diagnose.Critical || f.Runbook != "reassignment-unstick" ||
			!strings.Contains(f.Summary, "down") || !strings.Contains(strings.Join(f.Evidence, "\n"), "a cancel is safe") {
			t.Fatalf("finding %+v", f)
		}
	})

	t.Run("cancel refused while an original replica is down (KAFKA-14424)", func(t *testing.T) {
		if err := l.BrokerCommand(ctx, b, "stop", func(string) {}); err != nil {
			t.Fatal(err)
		}
		r := runUnstick(t, l, filepath.Join(t.TempDir(), "run"), "--set", "action=cancel")
		if err := l.BrokerCommand(ctx, b, "start", func(string) {}); err != nil {
			t.Fatal(err)
		}
		if r.code == 0 || !strings.Contains(r.out, "KAFKA-14424") || !strings.Contains(r.out, "--set action=retarget") {
			t.Fatalf("exit %d, want a refusal naming KAFKA-14424 and retarget:\n%s", r.code, r.out)
		}
		if n := moves(); n != 2 {
			t.Fatalf("%d moves in flight after the refusal, want the 2 untouched", n)
		}
		waitInSync(t, ctx, c, a, topic, b)
	})

	t.Run("run reassignment-unstick: no move, no leaderless partition, no throttle left", func(t *testing.T) {
		run := filepath.Join(t.TempDir(), "run")
		r := runUnstick(t, l, run)
		t.Logf("reassignment-unstick took %s", r.took.Round(time.Millisecond))
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.out)
		}
		unstuck(t, ctx, c, topic, []int32{a, b}, target)
		if ts, err := brokers.ZKBrokerThrottles(ctx, c.zk, target); err != nil || len(ts) != 0 {
			t.Errorf("throttle configs left in stopped broker %d's znode: %v %v", target, ts, err)
		}
		var rb reassign.RollbackFile
		if raw, err := os.ReadFile(filepath.Join(run, "reassignment-rollback.json")); err != nil || json.Unmarshal(raw, &rb) != nil || len(rb.Partitions) != 2 ||
			!slices.Equal(rb.Partitions[0].Replicas, rep.Assign[0]) || !slices.Equal(rb.Partitions[1].Replicas, rep.Assign[1]) {
			t.Errorf("rollback artifact: %v %+v, want the original replicas %v", err, rb, rep.Assign)
		}
	})
}

// waitInSync waits until broker b is back in the ISR of every partition
// of topic, as broker asked sees it.
func waitInSync(t *testing.T, ctx context.Context, c *clients, asked int32, topic string, b int32) {
	t.Helper()
	for {
		v, err := c.kc.BrokerView(ctx, asked, topic)
		ok := err == nil && len(v.Topics[topic].Partitions) > 0
		for _, pv := range v.Topics[topic].Partitions {
			ok = ok && slices.Contains(pv.ISR, b)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("broker %d not back in the ISR of %s: %v", b, topic, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestReassignmentUnstickKRaftLab is TestReassignmentUnstickLab's run on
// a KRaft 4.1.2 lab (net 65): kraft-stuck-reassignment, diagnose naming
// kraft-reassignment-unstick, the headless run, then the stopped target
// started again to prove its own throttles were deleted at the
// controllers (a KRaft broker describes only its own configs).
func TestReassignmentUnstickKRaftLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.KRaftConfig()
	cfg.Net, cfg.KafkaVersion = 65, "4.1.2"
	reassignKRaftCase(t, startLab(t, cfg))
}

// reassignKRaftCase is TestReassignmentUnstickKRaftLab's body on lab l.
func reassignKRaftCase(t *testing.T, l *lab.Lab) {
	c := connectLab(t, l)
	const topic = "moving"
	rep := breakIt(t, l, "kraft-stuck-reassignment", topic)
	target, a, b := rep.Victim, rep.Assign[0][0], rep.Assign[0][1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	d, code := diagnosis(t, l, "")
	i := slices.IndexFunc(d.Findings, func(f diagnose.Finding) bool { return f.Kind == diagnose.FindStuckReassignment })
	if code != 1 || i < 0 || d.Findings[i].Runbook != "kraft-reassignment-unstick" || !slices.Equal(d.Findings[i].Partitions, []int32{0, 1}) {
		t.Fatalf("diagnose exit %d, want 1 with %s naming kraft-reassignment-unstick", code, diagnose.FindStuckReassignment)
	}
	run := filepath.Join(t.TempDir(), "run")
	r := kremedy(t, "run", "kraft-reassignment-unstick", "--inventory", l.InventoryPath(), "--run-dir", run, "--headless", "--yes", "--confirm", l.Inventory().Name)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	unstuck(t, ctx, c, topic, []int32{a, b}, target)
	keys := append(slices.Clone(brokers.BrokerThrottleKeys), brokers.TopicThrottleKeys...)
	if err := l.BrokerCommand(ctx, target, "start", func(string) {}); err != nil {
		t.Fatal(err)
	}
	for {
		es, err := c.kc.Overrides(ctx, keys, []int32{target}, nil)
		if err == nil {
			if len(es) != 0 {
				t.Errorf("broker %d, started again, still has %v", target, es)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("broker %d does not answer DescribeConfigs after its start: %v", target, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// unstuck checks, with kremedy's own clients, what the runbook promises:
// no move in flight, every partition of topic led and off the stopped
// target, no throttle config on the live brokers or the topic
// (DescribeConfigs).
func unstuck(t *testing.T, ctx context.Context, c *clients, topic string, live []int32, target int32) {
	t.Helper()
	if ms, err := c.kc.Reassignments(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("moves in flight after the run: %v %v", ms, err)
	}
	v, err := c.kc.BrokerView(ctx, live[0], topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, pv := range v.Topics[topic].Partitions {
		if pv.Leader < 0 || slices.Contains(pv.Replicas, target) {
			t.Errorf("%s-%d: leader %d, replicas %v: want a leader and no replica on stopped broker %d", topic, p, pv.Leader, pv.Replicas, target)
		}
	}
	keys := append(slices.Clone(brokers.BrokerThrottleKeys), brokers.TopicThrottleKeys...)
	if es, err := c.kc.Overrides(ctx, keys, live, []string{topic}); err != nil || len(es) != 0 {
		t.Errorf("throttle configs left on brokers %v or %q (DescribeConfigs): %v %v", live, topic, es, err)
	}
}
