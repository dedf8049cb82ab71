package cleanup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/cleanup"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/steptest"
)

const (
	goneID = "DDDDDDDDDDDDDDDDDDDDDD" // a deleted topic's id, not in the metadata
	stray0 = "orders-0.0123456789abcdef0123456789abcdef-stray"
	stray1 = "orders-1.0123456789abcdef0123456789abcdea-stray"
	strayX = "orders-2.0123456789abcdef0123456789abcdeb-stray"
	strayC = "orders-2.0123456789abcdef0123456789abcdec-stray"
)

// newStrays is the fake KRaft cluster (steptest.KRaft) with -stray
// directories on broker 2's /data/k1: two of a deleted "orders" (goneID),
// one without partition.metadata, one holding the live topic's id on a
// partition assigned to broker 2 — and a run of the real stray-cleanup
// runbook bound to params.
func newStrays(t *testing.T, params map[string]string) *fixture {
	t.Helper()
	return newStraysOf(t, steptest.KRaft(t), params)
}

// newStraysOf is newStrays on the KRaft cluster g.
func newStraysOf(t *testing.T, g *steptest.Cluster, params map[string]string) *fixture {
	t.Helper()
	g.Hosts.AddDir(2, "/data/k1", stray0, goneID)
	g.Hosts.AddDir(2, "/data/k1", stray1, goneID)
	g.Hosts.AddDir(2, "/data/k1", strayX, "")
	g.Hosts.AddDir(2, "/data/k1", strayC, steptest.CurID)
	rb, err := runbooks.Get("stray-cleanup")
	if err != nil {
		t.Fatal(err)
	}
	bound, err := rb.Bind(params, g.Ports.Target.Name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := steps.Create(dir, bound, steps.Meta{ID: "strays1", Runbook: rb.Name, Params: bound.Params, Inventory: "inv.yaml", Cluster: g.Ports.Target.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{zk: g.ZK, hosts: g.Hosts, kafka: g.Kafka, rb: bound, s: s, dir: dir, cluster: g.Ports}
}

func (f *fixture) quarantined(id int32) []string {
	return f.hosts.Names(id, filepath.Join("/data", "kremedy-quarantine", "strays1", "k1"))
}

// TestStrayCleanupMovesOnlyWhatItProves: with the brokers running, the
// strays of the deleted topic move into quarantine; the one without
// partition.metadata and the one with the live topic's id stay, each
// named with why; the manifest lists the moves; restore puts them back
// with the brokers running.
func TestStrayCleanupMovesOnlyWhatItProves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStrays(t, nil)
		var plans []*steps.Plan
		a := approver(func(info steps.Info, p *steps.Plan) steps.Approval {
			plans = append(plans, p)
			return steps.Approval{Decision: steps.Approve, Typed: f.cluster.Target.Name, By: "test"}
		})
		if _, err := f.run(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		for id := int32(1); id <= 3; id++ {
			if !f.hosts.Runs(id) {
				t.Fatalf("broker %d was stopped: a stray cleanup runs with the brokers up", id)
			}
		}
		left := f.hosts.Names(2, "/data/k1")
		if slices.Contains(left, stray0) || slices.Contains(left, stray1) || !slices.Contains(left, strayX) || !slices.Contains(left, strayC) {
			t.Fatalf("broker 2 /data/k1 after the cleanup: %v", left)
		}
		if q := f.quarantined(2); !slices.Equal(q, []string{stray0, stray1}) {
			t.Fatalf("quarantine holds %v", q)
		}
		last := plans[len(plans)-1]
		notes := strings.Join(last.Notes, "\n")
		if !strings.Contains(notes, strayX+": it has no partition.metadata") || !strings.Contains(notes, strayC+": its topic id "+steptest.CurID+" is the live topic's") || !strings.Contains(notes, "frees nothing") {
			t.Fatalf("the plan's notes do not name what stays and why:\n%s", notes)
		}
		var moves []string
		for _, a := range last.Actions {
			moves = append(moves, a.String())
		}
		if len(moves) != 3 || !strings.Contains(moves[1], "old topic id "+goneID) || !strings.Contains(moves[1], "4 KiB") || !strings.Contains(moves[1], "is in sync on broker 2") {
			t.Fatalf("plan actions: %q", moves)
		}
		var out strings.Builder
		if err := cleanup.RestoreSegments(context.Background(), f.cluster, f.artifact("manifest"), &out); err != nil {
			t.Fatalf("restore with the brokers running: %v\n%s", err, out.String())
		}
		if back := f.hosts.Names(2, "/data/k1"); !slices.Contains(back, stray0) || !slices.Contains(back, stray1) {
			t.Fatalf("after restore: %v", back)
		}
		if !strings.Contains(out.String(), "moved 2 directories back") {
			t.Fatalf("restore said: %s", out.String())
		}
	})
}

// TestStrayCleanupUnprovenAndOutOfSync: unproven=true moves the stray
// without partition.metadata too — but not while the live partition of
// that name is out of sync on that broker, nor on a broker that is not
// serving.
func TestStrayCleanupUnprovenAndOutOfSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStrays(t, map[string]string{"unproven": "true"})
		// orders-2 out of sync on broker 2, orders-0 in sync.
		f.zk.Put(kafkazk.PartitionStatePath("orders", 2), `{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":1,"isr":[3,1]}`)
		if _, err := f.run(context.Background(), f.typing(f.cluster.Target.Name)); err != nil {
			t.Fatal(err)
		}
		if q := f.quarantined(2); !slices.Equal(q, []string{stray0, stray1}) {
			t.Fatalf("quarantine holds %v: the unproven stray of an out-of-sync partition must stay", q)
		}
		hist := journalText(t, f)
		if !strings.Contains(hist, "not in sync on broker 2") {
			t.Fatalf("the run does not say why %s stayed:\n%s", strayX, hist)
		}

		// In sync again: a second run moves it.
		f2 := newStrays(t, map[string]string{"unproven": "true"})
		if _, err := f2.run(context.Background(), f2.typing(f2.cluster.Target.Name)); err != nil {
			t.Fatal(err)
		}
		if q := f2.quarantined(2); !slices.Contains(q, strayX) || slices.Contains(q, strayC) {
			t.Fatalf("with unproven=true the quarantine holds %v", q)
		}
	})
}

// TestStrayCleanupRefusals: a ZooKeeper-mode inventory is refused naming
// topic-cleanup; a broker not serving keeps its strays; a host that cannot
// be listed refuses the run.
func TestStrayCleanupRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStrays(t, nil)
		f.hosts.Running[2] = false
		if _, err := f.run(context.Background(), f.typing(f.cluster.Target.Name)); err != nil {
			t.Fatal(err)
		}
		if q := f.quarantined(2); len(q) != 0 {
			t.Fatalf("strays moved on a broker that is not serving: %v", q)
		}
		if hist := journalText(t, f); !strings.Contains(hist, "broker 2 is not serving") {
			t.Fatalf("the run does not say why broker 2's strays stayed:\n%s", hist)
		}

		f = newStrays(t, nil)
		f.hosts.Unreachable[1] = errors.New("dial tcp b1:22: connection refused")
		_, err := f.run(context.Background(), f.typing(f.cluster.Target.Name))
		if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "nothing was moved") {
			t.Fatalf("an unreachable host: %v", err)
		}

		g := steptest.Ghost(t)
		rb, _ := runbooks.Get("stray-cleanup")
		bound, err := rb.Bind(nil, g.Ports.Target.Name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := steps.Create(t.TempDir(), bound, steps.Meta{ID: "zk", Runbook: rb.Name, Params: bound.Params, Cluster: g.Ports.Target.Name})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out := s.Run(context.Background(), g.Ports, approver(func(steps.Info, *steps.Plan) steps.Approval {
			return steps.Approval{Decision: steps.Approve}
		}), nil)
		if !errors.Is(out.Err, steps.ErrRefused) || !strings.Contains(out.Err.Error(), "topic-cleanup") {
			t.Fatalf("a ZooKeeper-mode cluster: %v", out.Err)
		}
	})
}

// TestStrayRollRefusesACombinedNode: a combined node
// (process.roles=broker,controller) holding a live log that will become
// stray is not stopped by stray-cleanup's roll, whose stop judges only
// the partition rule: the run refuses before any stop, naming
// kraft-rolling-restart (the quorum rule too) and stray-cleanup after it.
// Before, the brokers' roll skipped every combined node — nothing was
// restarted, and Verify failed on the same log at every run.
func TestStrayRollRefusesACombinedNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStraysOf(t, steptest.KRaftCombined(t), map[string]string{"would_be": "true"})
		f.hosts.AddDir(2, "/data/k2", "gone-0", goneID)
		_, err := f.run(context.Background(), f.typing(f.cluster.Target.Name))
		if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "node(s) [2]") || !strings.Contains(err.Error(), "kremedy run kraft-rolling-restart") || !strings.Contains(err.Error(), "Nothing was done") {
			t.Fatalf("would_be=true with a combined node's would-be stray: %v", err)
		}
		if r := restarts(f); len(r) != 0 {
			t.Fatalf("restarted %v", r)
		}
	})
}

// journalText is the run's journal as text.
func journalText(t *testing.T, f *fixture) string {
	t.Helper()
	b, err := os.ReadFile(f.journal())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStrayCleanupWouldBe: with would_be=true, the broker holding a live
// log of a deleted topic (it would become stray at its next start) is
// stopped, the log moved into quarantine, started again — and only that
// broker; without would_be nothing restarts and the plan names the log.
// Restore puts the live log back only while its broker is stopped.
func TestStrayCleanupWouldBe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStrays(t, nil)
		f.hosts.AddDir(2, "/data/k2", "gone-0", goneID)
		if _, err := f.run(context.Background(), f.typing(f.cluster.Target.Name)); err != nil {
			t.Fatal(err)
		}
		if r := restarts(f); len(r) != 0 {
			t.Fatalf("would_be=false restarted %v", r)
		}
		if j := journalText(t, f); !strings.Contains(j, "/data/k2/gone-0: topic id "+goneID+", and the metadata has no topic") || !strings.Contains(j, "would_be=true") {
			t.Fatalf("the run does not name the would-be stray and the way to move it:\n%s", j)
		}

		f = newStrays(t, map[string]string{"would_be": "true"})
		f.hosts.AddDir(2, "/data/k2", "gone-0", goneID)
		if _, err := f.run(context.Background(), f.typing(f.cluster.Target.Name)); err != nil {
			t.Fatal(err)
		}
		if r := restarts(f); !slices.Equal(r, []string{"2: systemctl stop kafka-2", "2: systemctl start kafka-2"}) {
			t.Fatalf("restarts %v: want broker 2 alone, once", r)
		}
		if slices.Contains(f.hosts.Names(2, "/data/k2"), "gone-0") || !slices.Contains(f.hosts.Names(2, "/data/kremedy-quarantine/strays1/k2"), "gone-0") {
			t.Fatalf("gone-0 not in quarantine: log dir %v", f.hosts.Names(2, "/data/k2"))
		}
		var out strings.Builder
		if err := cleanup.RestoreSegments(context.Background(), f.cluster, f.artifact("manifest"), &out); !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "stop it first") {
			t.Fatalf("restore of a live log onto its running broker: %v", err)
		}
		f.hosts.Running[2] = false
		if err := cleanup.RestoreSegments(context.Background(), f.cluster, f.artifact("manifest"), &out); err != nil {
			t.Fatalf("restore with broker 2 stopped: %v\n%s", err, out.String())
		}
		if !slices.Contains(f.hosts.Names(2, "/data/k2"), "gone-0") {
			t.Fatal("gone-0 not restored")
		}
	})
}

// restarts are the stop and start commands a run sent, in order.
func restarts(f *fixture) []string {
	var out []string
	for _, c := range f.hosts.Commands {
		if strings.Contains(c, "systemctl stop") || strings.Contains(c, "systemctl start") {
			out = append(out, c)
		}
	}
	return out
}
