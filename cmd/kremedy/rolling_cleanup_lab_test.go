package main

// Lab tests of topic-cleanup's rolling mode: the real binary, headless,
// against a real ZooKeeper-mode Kafka 3.9 lab broken by the lab's
// scenarios, while an acks=all idempotent producer writes to a bystander
// topic (RF 3, min.insync.replicas=2) the whole time.

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/kafka"
)

// ledger is the bystander the producer writes to during every run.
const ledger = "ledger"

// writing runs fn while a producer writes to the ledger, from two seconds
// before to two seconds after, and proves every acknowledged record can be
// read back.
func writing(t *testing.T, l *lab.Lab, fn func()) sent {
	t.Helper()
	return writingN(t, l, 3, fn)
}

// writingN is writing to a ledger of parts partitions, each written in
// turn.
func writingN(t *testing.T, l *lab.Lab, parts int32, fn func()) sent {
	t.Helper()
	// A minute for each count, from when it starts: fn (a roll of six
	// brokers on a loaded machine) may take longer than that itself.
	count := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return countRecordsN(ctx, t, l, ledger, parts)
	}
	before := count()
	stop := make(chan struct{})
	done := produceDuringN(t, l, ledger, parts, stop)
	time.Sleep(2 * time.Second)
	fn()
	time.Sleep(2 * time.Second)
	close(stop)
	s := done()
	after := count()
	if int64(after-before) != s.acked {
		t.Fatalf("read %d new records back from %s, %d were acknowledged", after-before, ledger, s.acked)
	}
	return s
}

// countRecords counts the records of a 3-partition topic. A topic created
// a moment ago may not be in every broker's metadata yet: it asks again
// until ctx ends.
func countRecords(ctx context.Context, t *testing.T, l *lab.Lab, topic string) int {
	t.Helper()
	return countRecordsN(ctx, t, l, topic, 3)
}

// countRecordsN counts the records of a topic of parts partitions.
func countRecordsN(ctx context.Context, t *testing.T, l *lab.Lab, topic string, parts int32) int {
	t.Helper()
	for {
		n, err := 0, error(nil)
		for p := int32(0); p < parts && err == nil; p++ {
			var msgs []string
			msgs, err = kafka.ReadPartition(ctx, l.State.Config.Bootstrap(), topic, p)
			n += len(msgs)
		}
		if err == nil {
			return n
		}
		select {
		case <-ctx.Done():
			t.Fatalf("count the records of %s: %v", topic, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestRollingCleanupLab repairs ghost-topic and stale-metadata with
// --set mode=rolling while the producer writes (zero failed sends), does
// the same with the full stop for comparison, and resumes a rolling run
// killed with SIGKILL between a broker's stop and its start, then undoes
// it with segments restore and znodes restore.
func TestRollingCleanupLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net = 16
	l := startLab(t, cfg)
	c := connectLab(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.kc.CreateTopic(ctx, ledger, nil, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	onceEach := func(t *testing.T, run string) {
		t.Helper()
		if got := stops(t, run); len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
			t.Fatalf("stops per broker %v, want each broker once", got)
		}
	}
	// repair breaks the lab with scenario on topic and repairs it in
	// rolling mode while the producer writes: zero failed sends, every
	// broker a new process, restarted once, the whole cluster healthy.
	repair := func(t *testing.T, scenario, topic string, extra ...string) (*lab.Report, string) {
		t.Helper()
		rep := breakIt(t, l, scenario, topic)
		before := brokerPIDs(l)
		run := filepath.Join(t.TempDir(), "run")
		var r result
		s := writing(t, l, func() {
			r = runCleanup(t, l, topic, run, append([]string{"--set", "mode=rolling", "--set", "producer_idle=2s"}, extra...)...)
		})
		t.Logf("FIGURE rolling cleanup of %s took %s; bystander %s: %d sends acknowledged, %d failed, longest send %s",
			scenario, r.took.Round(time.Millisecond), ledger, s.acked, s.failed, s.longest.Round(time.Millisecond))
		if s.failed != 0 || s.acked == 0 {
			t.Fatalf("%d sends failed (%d acknowledged): %v", s.failed, s.acked, s.errs)
		}
		// The plan said what each broker's restart costs the bystander.
		if !strings.Contains(r.out, "ledger [0,1,2] leads ") || !strings.Contains(r.out, "keeps isr ≥ 2 (min.insync.replicas 2)") {
			t.Errorf("the plan does not name the ledger's partitions each restart costs:\n%s", r.out)
		}
		onceEach(t, run)
		after := brokerPIDs(l)
		for n, pid := range before {
			if after[n] == pid || after[n] == 0 {
				t.Errorf("broker %d: pid %d before, %d after: not a new process", n, pid, after[n])
			}
		}
		c.assertBystander(t, rep)
		assertQuarantined(t, l, run, topic, 9)
		if ks, _, code := diagnoseJSON(t, l, ""); code != 0 {
			t.Fatalf("after the rolling cleanup the whole cluster: exit %d findings %v", code, ks)
		}
		return rep, run
	}

	t.Run("ghost-topic repaired in rolling mode: zero failed sends", func(t *testing.T) {
		rep, _ := repair(t, "ghost-topic", "orders", "--set", "recreate=true")
		c.assertRecreated(t, "orders", rep.OldID, rep.NewID)
	})

	t.Run("stale-metadata repaired in rolling mode: zero failed sends", func(t *testing.T) {
		repair(t, "stale-metadata", "payments")
		c.assertGone(t, "payments")
	})

	// The same repair with the full stop (the default), for the figures:
	// every broker down at once is an outage of every topic.
	t.Run("ghost-topic repaired in full mode, for comparison", func(t *testing.T) {
		rep := breakIt(t, l, "ghost-topic", "invoices")
		run := filepath.Join(t.TempDir(), "run")
		var r result
		s := writing(t, l, func() {
			r = runCleanup(t, l, "invoices", run, "--set", "producer_idle=2s", "--set", "recreate=true")
		})
		t.Logf("FIGURE full-stop cleanup of ghost-topic took %s; bystander %s: %d sends acknowledged, %d failed, longest send %s",
			r.took.Round(time.Millisecond), ledger, s.acked, s.failed, s.longest.Round(time.Millisecond))
		c.assertRecreated(t, "invoices", rep.OldID, rep.NewID)
		assertQuarantined(t, l, run, "invoices", 9)
	})

	t.Run("SIGKILL between a broker's stop and its start, resume, then undo", func(t *testing.T) {
		rep := breakIt(t, l, "ghost-topic", "refunds")
		run := filepath.Join(t.TempDir(), "run")
		args := cleanupArgs(l, "refunds", run, "--set", "mode=rolling")
		// safe-1, stop-1, gone-1, the manifest: killed with broker 1 stopped
		// and none of its directories moved.
		killed := runWithFault(t, "sigkill@action-end:rolling-wipe:4", args...)
		if killed.code != -1 {
			t.Fatalf("run never reached 4 actions of rolling-wipe (exit %d):\n%s", killed.code, killed.out)
		}
		if got := stops(t, run); len(got) != 1 {
			t.Fatalf("killed with stops %v, want one broker stopped", got)
		}
		r := kremedy(t, resumeArgs(run, "refunds")...)
		if r.code != 0 {
			t.Fatalf("resume after SIGKILL mid-roll: exit %d\n%s", r.code, r.out)
		}
		if !strings.Contains(r.out, "stopped by an earlier attempt of this run; it is started, not stopped again") {
			t.Errorf("the resumed plan does not say the stopped broker is started, not stopped again:\n%s", r.out)
		}
		onceEach(t, run)
		c.assertGone(t, "refunds")
		assertQuarantined(t, l, run, "refunds", 9)

		// Undo: with every broker stopped, the directories and the znodes
		// go back, and the ghost is exactly as it was.
		everyBroker(t, l, "stop")
		restoreRun(t, run)
		everyBroker(t, l, "start")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		z, _, err := c.zk.Topic(ctx, "refunds")
		if err != nil || z.TopicID != rep.NewID {
			t.Fatalf("restored znode %+v (%v): want topic id %s", z, err, rep.NewID)
		}
		if ks, _, _ := diagnoseJSON(t, l, "refunds"); !slices.Contains(ks, "foreign-segments") {
			t.Fatalf("after the undo, diagnose finds %v; want the ghost's foreign segments back", ks)
		}
	})
}
