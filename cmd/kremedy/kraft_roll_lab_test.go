package main

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/steptest"
)

// kraftNodePIDs are the lab's processes by node id: controllers 3001…,
// brokers 1….
func kraftNodePIDs(l *lab.Lab) map[int32]int {
	out := map[int32]int{}
	for k := 1; k <= l.State.Config.KRaftControllers; k++ {
		out[int32(3000+k)] = l.ControllerPID(k)
	}
	for n := 1; n <= l.State.Config.Brokers; n++ {
		out[int32(n)] = l.BrokerPID(n)
	}
	return out
}

func runKRaftRoll(t *testing.T, l *lab.Lab, runDir string) result {
	t.Helper()
	return kremedy(t, "run", "kraft-rolling-restart", "--inventory", l.InventoryPath(), "--run-dir", runDir,
		"--headless", "--yes", "--confirm", l.Inventory().Name, "--set", "health_timeout=3m")
}

// stepSpan is the time from a step's start to its end in a run's journal.
func stepSpan(t *testing.T, runDir, step string) (from, to time.Time) {
	t.Helper()
	recs, err := journal.Read(filepath.Join(runDir, steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Step != step {
			continue
		}
		if from.IsZero() {
			from = r.Time
		}
		to = r.Time
	}
	return from, to
}

// kraftRollingRestart: `run kraft-rolling-restart` on the KRaft lab under
// an acks=all idempotent producer on a replication-factor-3,
// min.insync.replicas=2 topic: no failed send, every controller and
// broker a new process exactly once, the controllers before the brokers
// and the quorum's leader last among them. With a controller stopped
// first it refuses before any node stops. `run rolling-restart` on the
// KRaft inventory names the KRaft runbook.
func kraftRollingRestart(t *testing.T, l *lab.Lab, kc *kafka.Client, dir string) {
	t.Helper()
	if r := kremedy(t, "run", "rolling-restart", "--inventory", l.InventoryPath(), "--headless", "--yes"); r.code != exitUsage || !strings.Contains(r.out, "run kraft-rolling-restart instead") {
		t.Fatalf("rolling-restart on a KRaft inventory: exit %d\n%s", r.code, r.out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kc.CreateTopic(ctx, "kledger", nil, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	kraftWaitServed(t, kc, "kledger", 3)
	leader := kraftQuorum(t, l).Leader
	before := kraftNodePIDs(l)
	run := filepath.Join(t.TempDir(), "run")
	stop := make(chan struct{})
	wait := produceDuring(t, l, "kledger", stop)
	r := runKRaftRoll(t, l, run)
	close(stop)
	got := wait()
	if r.code != 0 {
		t.Fatalf("kraft-rolling-restart: exit %d\n%s", r.code, r.out)
	}
	if got.failed != 0 || got.acked == 0 {
		t.Fatalf("%d sends failed (%d acknowledged): %v", got.failed, got.acked, got.errs)
	}
	after := kraftNodePIDs(l)
	for id, pid := range before {
		if after[id] == pid || after[id] == 0 {
			t.Errorf("node %d: pid %d before, %d after: not a new process", id, pid, after[id])
		}
	}
	acts, err := steptest.Ended(run, "")
	if err != nil {
		t.Fatal(err)
	}
	var order []int32
	for _, a := range acts {
		if strings.HasPrefix(a.ID, "stop-") {
			order = append(order, a.Broker)
		}
	}
	if len(order) != 6 || slices.Compact(slices.Sorted(slices.Values(order)))[5] != 3003 || len(slices.Compact(slices.Sorted(slices.Values(order)))) != 6 {
		t.Fatalf("stops %v: want each of the six nodes once", order)
	}
	if order[2] != leader || order[0] < 3000 || order[1] < 3000 || !slices.Equal(order[3:], []int32{1, 2, 3}) {
		t.Fatalf("stops in order %v: want the controllers first, leader %d last among them, then brokers 1, 2, 3", order, leader)
	}
	cf, ct := stepSpan(t, run, "roll-controllers")
	bf, bt := stepSpan(t, run, "roll-brokers")
	t.Logf("FIGURE kraft-rolling-restart (Kafka %s): %s whole run, controllers %s (%.1fs a controller), brokers %s (%.1fs a broker); %d sends acknowledged, 0 failed, longest send %s",
		l.State.Kafka, r.took.Round(time.Second), ct.Sub(cf).Round(time.Second), ct.Sub(cf).Seconds()/3, bt.Sub(bf).Round(time.Second), bt.Sub(bf).Seconds()/3, got.acked, got.longest.Round(time.Millisecond))
	if got.longestAt.After(cf) && got.longestAt.Before(ct) {
		t.Logf("FIGURE kraft-rolling-restart (Kafka %s): the longest send was during the controllers' roll", l.State.Kafka)
	}

	// A controller stopped first: refused before any node stops.
	if r := kremedy(t, "lab", "controller", "stop", "2", "--dir", dir); r.code != 0 {
		t.Fatalf("lab controller stop 2: exit %d\n%s", r.code, r.out)
	}
	before = kraftNodePIDs(l)
	run = filepath.Join(t.TempDir(), "refused")
	r = runKRaftRoll(t, l, run)
	if r.code != 1 || !strings.Contains(r.out, "controller 3002 is not caught up") || !strings.Contains(r.out, "Nothing was changed") {
		t.Errorf("with controller 3002 stopped: exit %d, want 1 naming it\n%s", r.code, r.out)
	}
	for id, pid := range kraftNodePIDs(l) {
		if id != 3002 && pid != before[id] {
			t.Errorf("node %d was restarted by a refused roll (pid %d → %d)", id, before[id], pid)
		}
	}
	if s := stops(t, run); len(s) != 0 {
		t.Errorf("a refused roll ran stop commands: %v", s)
	}
	if r := kremedy(t, "lab", "controller", "start", strconv.Itoa(2), "--dir", dir); r.code != 0 {
		t.Fatalf("lab controller start 2: exit %d\n%s", r.code, r.out)
	}
	kraftRollKilled(t, l)
}

// kraftRollKilled: kremedy SIGKILLed right after it stopped the second
// controller (each node's roll is six actions: safe, stop, gone, start,
// back, gate); `resume` starts that controller and goes on, and no node is
// stopped twice: every controller and broker a new process, each stopped
// exactly once in the run's journal.
func kraftRollKilled(t *testing.T, l *lab.Lab) {
	t.Helper()
	kraftWaitServed(t, connectLab(t, l).kc, "kledger", 3)
	before := kraftNodePIDs(l)
	run := filepath.Join(t.TempDir(), "killed")
	killed := runWithFault(t, "sigkill@action-end:roll-controllers:8", "run", "kraft-rolling-restart", "--inventory", l.InventoryPath(), "--run-dir", run,
		"--headless", "--yes", "--confirm", l.Inventory().Name, "--set", "health_timeout=3m")
	if killed.code != -1 {
		t.Fatalf("the roll was not killed at the second controller's stop (exit %d):\n%s", killed.code, killed.out)
	}
	down := 0
	for wait := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		down = 0
		for id, pid := range kraftNodePIDs(l) {
			if id > 3000 && pid == 0 {
				down++
			}
		}
		if down == 1 || time.Now().After(wait) {
			break
		}
	}
	if s := stops(t, run); len(s) != 2 || down != 1 {
		t.Fatalf("killed after the second controller's stop: stops %v, %d controllers down; want 2 stopped, 1 down", s, down)
	}
	r := kremedy(t, "resume", run, "--headless", "--yes", "--confirm", l.Inventory().Name)
	if r.code != 0 {
		t.Fatalf("resume after SIGKILL mid-roll: exit %d\n%s", r.code, r.out)
	}
	after := kraftNodePIDs(l)
	for id, pid := range before {
		if after[id] == pid || after[id] == 0 {
			t.Errorf("node %d: pid %d before, %d after the killed and resumed roll: not a new process", id, pid, after[id])
		}
	}
	s := stops(t, run)
	for id := range before {
		if s[id] != 1 {
			t.Errorf("node %d stopped %d times in the killed and resumed roll, want once: %v", id, s[id], s)
		}
	}
	t.Logf("FIGURE kraft-rolling-restart killed with SIGKILL after the second controller's stop, resumed (Kafka %s): resume took %s, 6 nodes each stopped once", l.State.Kafka, r.took.Round(time.Second))
}

// kraftWaitServed waits until every broker of the lab serves topic's parts
// partitions, each with a leader and its whole ISR (a topic just created
// is not served by every broker at once).
func kraftWaitServed(t *testing.T, kc *kafka.Client, topic string, parts int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for !allServeParts(ctx, kc, []string{topic}, parts) {
		select {
		case <-ctx.Done():
			t.Fatalf("the brokers do not all serve %s with its whole ISR within 2 minutes", topic)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// allServeParts reports whether brokers 1–3 each serve every topic of
// names with parts partitions, each with a leader and its whole ISR.
func allServeParts(ctx context.Context, kc *kafka.Client, names []string, parts int) bool {
	for id := int32(1); id <= 3; id++ {
		v, err := kc.BrokerView(ctx, id)
		if err != nil {
			return false
		}
		for _, n := range names {
			tv, ok := v.Topics[n]
			if !ok || !tv.Present() || len(tv.Partitions) != parts {
				return false
			}
			for _, p := range tv.Partitions {
				if p.Leader < 0 || len(p.ISR) != 3 {
					return false
				}
			}
		}
	}
	return true
}
