package space_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// typing approves every plan, typing the cluster's name.
type typing struct{ plans map[string]*steps.Plan }

func (a *typing) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	a.plans[info.ID] = p
	return steps.Approval{Decision: steps.Approve, Typed: "test", By: "test", Digest: p.Digest()}, nil
}

// fullBroker1 is the fake cluster with broker 1's /data/k1 full and
// /data/k2 without room for a replica: orders-0
// in segments from 0, 20, 35 and 60, orders-1 from 0, 5 and 50, orders-2
// from 0, 3 and 40; 100 records in each partition; group a at 40, 10, 5 and
// group b at 30 and 50 with no commit on partition 2.
func fullBroker1(t *testing.T) *steptest.Cluster {
	g := steptest.Ghost(t)
	g.ZK.Remove(kafkazk.DeleteTopicPath("orders"))
	ctx := context.Background()
	for p := range int32(3) {
		vals := make([]string, 100)
		if err := g.Kafka.Produce(ctx, "orders", p, vals...); err != nil {
			t.Fatal(err)
		}
	}
	must(t, g.Kafka.CommitOffsets(ctx, "a", "orders", map[int32]int64{0: 40, 1: 10, 2: 5}))
	must(t, g.Kafka.CommitOffsets(ctx, "b", "orders", map[int32]int64{0: 30, 1: 50}))
	lines := []string{"df /dev/sdb 8192 8190 2 100% /data/k1"}
	for p, bases := range map[int][]int{0: {0, 20, 35, 60}, 1: {0, 5, 50}, 2: {0, 3, 40}} {
		for _, b := range bases {
			lines = append(lines, fmt.Sprintf("f 2048 orders-%d/%020d.log", p, b), fmt.Sprintf("f 8 orders-%d/%020d.index", p, b))
		}
	}
	// /data/k2 has 2.9 MiB free of 8: no orders replica (3 MiB or more)
	// fits with 20% left (movedirs_test.go gives it room).
	g.Hosts.Space = map[int32]map[string][]string{1: {"/data/k1": lines, "/data/k2": {"df /dev/sdc 8192 5192 3000 64% /data/k2"}}}
	return g
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// runDiskFull runs disk-full on g: its outcome, and every step's plan.
func runDiskFull(t *testing.T, g *steptest.Cluster, set map[string]string) (steps.Outcome, map[string]*steps.Plan) {
	t.Helper()
	a := &typing{plans: map[string]*steps.Plan{}}
	planned := map[string]*steps.Plan{} // every plan, no-ops too
	rep := steps.ReporterFunc(func(e steps.Event) {
		if e.Kind == steps.EvPlan {
			planned[e.Step] = e.Plan
		}
	})
	out := runWith(t, g, set, a, rep)
	for id, p := range a.plans {
		planned[id] = p
	}
	return out, planned
}

// runWith runs disk-full with approver a, reporting to rep (nil: none).
func runWith(t *testing.T, g *steptest.Cluster, set map[string]string, a steps.Approver, rep steps.Reporter) steps.Outcome {
	t.Helper()
	rb, err := runbooks.Get("disk-full")
	must(t, err)
	bound, err := rb.Bind(set, g.Ports.Target.Name)
	must(t, err)
	s, err := steps.Create(t.TempDir(), bound, steps.Meta{ID: "full1", Runbook: rb.Name, Params: bound.Params, Cluster: g.Ports.Target.Name})
	must(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Run(ctx, g.Ports, a, rep)
}

// TestDeleteRecordsStopsAtTheLowestCommit: on a running broker with a full
// dir, DeleteRecords goes to the lowest offset every group committed on
// each partition (orders-0: 30 of 40 and 30; orders-1: 10 of 10 and 50),
// never beyond, only where a whole segment lies below it, not at all on
// a partition a group has no commit on (orders-2); what cannot be undone
// is said in the plan, with what the bound cannot see (consumers not
// committing to Kafka, expired offsets); nothing is moved (the broker runs) or restarted
// (its dirs are online).
func TestDeleteRecordsStopsAtTheLowestCommit(t *testing.T) {
	g := fullBroker1(t)
	// Retention moved orders-2's log start past group a's commit before
	// the run: a stale group, not this run's doing, fails nothing.
	if _, err := g.Kafka.DeleteRecords(context.Background(), "orders", map[int32]int64{2: 50}); err != nil {
		t.Fatal(err)
	}
	g.Kafka.DeletedRecords = nil
	out, plans := runDiskFull(t, g, map[string]string{"broker": "1", "health_timeout": "2s"})
	if out.Err != nil || out.Failed != "" {
		t.Fatalf("run: %+v", out)
	}
	got := slices.Sorted(slices.Values(g.Kafka.DeletedRecords))
	if want := []string{"orders-0<30", "orders-1<10"}; !slices.Equal(got, want) {
		t.Fatalf("DeleteRecords %v, want %v", got, want)
	}
	p := plans["free-records"]
	if p == nil || len(p.Notes) == 0 || !strings.HasPrefix(p.Notes[0], "CANNOT BE UNDONE") || !strings.Contains(p.Notes[0], "orders-0: offsets 0 to 29 (30 records)") ||
		!strings.Contains(p.Notes[0], "MirrorMaker 2") || !strings.Contains(p.Notes[0], "offsets expired") {
		t.Fatalf("free-records plan does not say first what cannot be undone: %+v", p)
	}
	if !slices.Contains(out.NoOp, "move-dirs") || !slices.Contains(out.NoOp, "quarantine") || !slices.Contains(out.NoOp, "start") {
		t.Fatalf("a running broker with its dirs online and no dir with room: move-dirs, quarantine and start must have nothing to do: %+v", out)
	}
	for _, c := range g.Hosts.Commands {
		if strings.Contains(c, "rm ") || strings.Contains(c, "systemctl") {
			t.Errorf("a command removed a file or restarted a broker: %s", c)
		}
	}
	// A second run: every partition at its groups' lowest commit already.
	g.Kafka.DeletedRecords = nil
	if out, _ := runDiskFull(t, g, map[string]string{"broker": "1", "health_timeout": "2s"}); out.Err != nil || len(out.NoOp) != 6 || len(g.Kafka.DeletedRecords) != 0 {
		t.Fatalf("second run: %+v, deleted %v", out, g.Kafka.DeletedRecords)
	}
}

// TestDownBrokerNeedsAQuarantine: with the broker down and its dir full,
// the quarantine step refuses without --set quarantine, naming it, and
// moves nothing.
func TestDownBrokerNeedsAQuarantine(t *testing.T) {
	g := fullBroker1(t)
	must(t, g.Hosts.Run(context.Background(), 1, "systemctl stop kafka-1", nil))
	// Broker 1 led everything; the others lead now.
	for p := range int32(3) {
		g.ZK.Put(kafkazk.PartitionStatePath("orders", p), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":1,"isr":[2,3]}`)
	}
	out, _ := runDiskFull(t, g, map[string]string{"broker": "1", "health_timeout": "2s"})
	if out.Failed != "quarantine" || out.Err == nil || !strings.Contains(out.Err.Error(), "--set quarantine=DIR") {
		t.Fatalf("want the quarantine step refused naming --set quarantine: %+v", out)
	}
	for _, c := range g.Hosts.Commands {
		if strings.Contains(c, "mv ") {
			t.Errorf("a directory was moved: %s", c)
		}
	}
}

// TestDownBrokerMovesOnlyReplicatedDirs: broker 1 down with its dir full;
// orders-0 and orders-1 are led by broker 2 with 2 and 3 in sync, orders-2
// has no leader (broker 1 held its only in-sync copy). After DeleteRecords
// to the groups' commits, the quarantine moves orders-0 and orders-1 (their
// gain reaches the headroom), never orders-2; the broker is started and
// the gate holds. A second run moves nothing and starts nothing.
func TestDownBrokerMovesOnlyReplicatedDirs(t *testing.T) {
	g := fullBroker1(t)
	ctx := context.Background()
	must(t, g.Hosts.Run(ctx, 1, "systemctl stop kafka-1", nil))
	g.ZK.Put(kafkazk.PartitionStatePath("orders", 0), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":1,"isr":[2,3]}`)
	g.ZK.Put(kafkazk.PartitionStatePath("orders", 1), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":1,"isr":[2,3]}`)
	g.ZK.Put(kafkazk.PartitionStatePath("orders", 2), `{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":1,"isr":[1]}`)
	g.Hosts.OnStart = func(id int32) { // broker 1 back: every ISR whole again
		for p := range int32(3) {
			g.ZK.Put(kafkazk.PartitionStatePath("orders", p), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":2,"isr":[2,3,1]}`)
		}
	}
	// orders-2's log start is 50 (retention): moving it would gain the
	// most (two segments), were it not the only copy.
	if _, err := g.Kafka.DeleteRecords(ctx, "orders", map[int32]int64{2: 50}); err != nil {
		t.Fatal(err)
	}
	g.Hosts.Space[1]["/q"] = []string{"df /dev/sdc 100000000 0 100000000 0% /q"}
	set := map[string]string{"broker": "1", "quarantine": "/q", "health_timeout": "5s"}
	out, plans := runDiskFull(t, g, set)
	if out.Err != nil || out.Failed != "" {
		t.Fatalf("run: %+v", out)
	}
	var moved []string
	for _, a := range plans["quarantine"].Actions {
		moved = append(moved, a.Target)
	}
	if want := []string{"/data/k1/orders-0", "/data/k1/orders-1"}; !slices.Equal(moved, want) {
		t.Fatalf("moved %v, want %v (never orders-2, the only copy)", moved, want)
	}
	for _, name := range []string{"orders-0", "orders-1"} {
		if !slices.Contains(g.Hosts.Names(1, "/q/kremedy-full1"), name) || slices.Contains(g.Hosts.Names(1, "/data/k1"), name) {
			t.Errorf("%s not moved to the quarantine: /q/kremedy-full1 %v, /data/k1 %v", name, g.Hosts.Names(1, "/q/kremedy-full1"), g.Hosts.Names(1, "/data/k1"))
		}
	}
	if !slices.Contains(g.Hosts.Names(1, "/data/k1"), "orders-2") {
		t.Error("orders-2, the only copy, left its log dir")
	}
	if !g.Hosts.Runs(1) {
		t.Fatal("broker 1 was not started")
	}
	starts := 0
	for _, c := range g.Hosts.Commands {
		if strings.HasSuffix(c, "systemctl start kafka-1") {
			starts++
		}
	}
	out2, _ := runDiskFull(t, g, set)
	for _, c := range g.Hosts.Commands {
		if strings.HasSuffix(c, "systemctl start kafka-1") {
			starts--
		}
	}
	if out2.Err != nil || len(out2.NoOp) != 6 || starts != 0 {
		t.Fatalf("second run: %+v (started again: %v)", out2, starts != 0)
	}
}

// hook approves as typing does, calling before[id] first: the cluster
// changing between the plan and its apply.
type hook struct {
	typing
	before map[string]func()
}

func (a *hook) Approve(ctx context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	if f := a.before[info.ID]; f != nil {
		f()
	}
	return a.typing.Approve(ctx, info, p)
}

// TestIncompleteGroupsRefuseDeleteRecords: group billing's coordinator is
// loading (OffsetFetch COORDINATOR_LOAD_IN_PROGRESS), so Groups answers
// ErrGroupsIncomplete beside the groups it read: the plan refuses naming
// billing and the way on (once its coordinator answers), and so does the
// re-check right before DeleteRecords when it happens after the plan.
// Nothing is deleted either way.
func TestIncompleteGroupsRefuseDeleteRecords(t *testing.T) {
	unread := fmt.Errorf("%w: group billing: OffsetFetch COORDINATOR_LOAD_IN_PROGRESS", ports.ErrGroupsIncomplete)
	for _, late := range []bool{false, true} {
		g := fullBroker1(t)
		if !late {
			g.Kafka.GroupsErr = unread
		}
		a := &hook{typing: typing{plans: map[string]*steps.Plan{}}, before: map[string]func(){"free-records": func() { g.Kafka.GroupsErr = unread }}}
		out := runWith(t, g, map[string]string{"broker": "1", "health_timeout": "2s"}, a, nil)
		if out.Failed != "free-records" || !errors.Is(out.Err, steps.ErrRefused) || !strings.Contains(out.Err.Error(), "group billing") || !strings.Contains(out.Err.Error(), "once its coordinator answers") {
			t.Fatalf("late=%v: want free-records refused naming billing and the way on: %+v", late, out)
		}
		if len(g.Kafka.DeletedRecords) != 0 {
			t.Fatalf("late=%v: records deleted with a group unread: %v", late, g.Kafka.DeletedRecords)
		}
	}
}

// TestBoundStopsAtTheLogEnd: both groups committed past orders-1's end
// (100 records; a at 150, b at 120, as after an unclean election cut the
// log): DeleteRecords goes to the end, 100, not to 120, which Kafka
// refuses (OFFSET_OUT_OF_RANGE) on every run and resume.
func TestBoundStopsAtTheLogEnd(t *testing.T) {
	g := fullBroker1(t)
	must(t, g.Kafka.CommitOffsets(context.Background(), "a", "orders", map[int32]int64{1: 150}))
	must(t, g.Kafka.CommitOffsets(context.Background(), "b", "orders", map[int32]int64{1: 120}))
	out, plans := runDiskFull(t, g, map[string]string{"broker": "1", "health_timeout": "2s"})
	if out.Err != nil || out.Failed != "" {
		t.Fatalf("run: %+v", out)
	}
	if got := slices.Sorted(slices.Values(g.Kafka.DeletedRecords)); !slices.Equal(got, []string{"orders-0<30", "orders-1<100"}) {
		t.Fatalf("DeleteRecords %v, want orders-0<30 and orders-1<100 (its end)", got)
	}
	if f := strings.Join(plans["free-records"].Facts, "\n"); !strings.Contains(f, "the log end 100: every group committed past it") {
		t.Errorf("the plan does not say the bound is the log end:\n%s", f)
	}
}

// jbodBroker1 is fullBroker1 with broker 1 running on /data/k2 while
// /data/k1 is offline (KAFKA_STORAGE_ERROR), its filesystem at used% (its
// other numbers as fullBroker1's); a start of broker 1 brings it online.
func jbodBroker1(t *testing.T, used int) *steptest.Cluster {
	g := fullBroker1(t)
	g.Kafka.Configs = map[string]string{"min.insync.replicas": "1"}
	g.Kafka.OfflineDirs = map[int32]map[string]bool{1: {"/data/k1": true}}
	g.Hosts.Space[1]["/data/k1"][0] = fmt.Sprintf("df /dev/sdb 8192 %d %d %d%% /data/k1", 8192*used/100, 8192-8192*used/100, used)
	g.Hosts.OnStart = func(id int32) { delete(g.Kafka.OfflineDirs, id) }
	return g
}

// stops counts the stop commands of broker 1 sent.
func stops(g *steptest.Cluster) int {
	n := 0
	for _, c := range g.Hosts.Commands {
		if strings.HasSuffix(c, "systemctl stop kafka-1") {
			n++
		}
	}
	return n
}

// TestRestartOnlyWhenTheStopIsSafe: broker 1 runs with /data/k1 offline
// (room on it). Where broker 1 is orders-v2-0's only in-sync replica
// (in /data/k2, online), stopping it would take orders-v2-0 offline: the
// start step refuses naming it and stops nothing. The partitions of the
// offline dir (orders-*, out of service there already) do not count. Once
// orders-v2-0 is in sync elsewhere, the broker is stopped and started.
func TestRestartOnlyWhenTheStopIsSafe(t *testing.T) {
	g := jbodBroker1(t, 50)
	g.ZK.Put(kafkazk.PartitionStatePath("orders-v2", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}`)
	for p := range int32(3) { // the offline dir's: out of ISR, and one with no copy elsewhere
		g.ZK.Put(kafkazk.PartitionStatePath("orders", p), `{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":1,"isr":[1]}`)
	}
	set := map[string]string{"broker": "1", "health_timeout": "2s", "start_timeout": "5s"}
	out, _ := runDiskFull(t, g, set)
	if out.Failed != "start" || !errors.Is(out.Err, steps.ErrRefused) || !strings.Contains(out.Err.Error(), "orders-v2-0 would go offline") || strings.Contains(out.Err.Error(), "orders-0") {
		t.Fatalf("want start refused naming orders-v2-0 only: %+v", out)
	}
	if stops(g) != 0 {
		t.Fatal("broker 1 was stopped though orders-v2-0 would go offline")
	}
	g.ZK.Put(kafkazk.PartitionStatePath("orders-v2", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`)
	g.Hosts.OnStart = func(id int32) {
		delete(g.Kafka.OfflineDirs, id)
		for p := range int32(3) {
			g.ZK.Put(kafkazk.PartitionStatePath("orders", p), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":2,"isr":[1,2,3]}`)
		}
	}
	if out, _ := runDiskFull(t, g, set); out.Err != nil || stops(g) != 1 || !g.Hosts.Runs(1) {
		t.Fatalf("a safe restart: %+v, %d stops, running %v", out, stops(g), g.Hosts.Runs(1))
	}
}

// TestStartStepIsTyped: the start step may stop a running broker, so
// both runbooks confirm it by typing, as every step that stops one.
func TestStartStepIsTyped(t *testing.T) {
	for _, name := range []string{"disk-full", "kraft-disk-full"} {
		rb, err := runbooks.Get(name)
		must(t, err)
		for _, s := range rb.Steps {
			if s.ID == "start" && (s.Risk != "destructive" || s.Confirm != "typed") {
				t.Errorf("%s: step start is %s, confirm %s; want destructive, typed", name, s.Risk, s.Confirm)
			}
		}
	}
}

// TestOfflineFullDirStopOnlyWhenSafe: broker 1 runs with /data/k1
// offline and 100% full, and is orders-v2-0's only in-sync replica (on
// /data/k2, online). Restarting it onto the full filesystem would fail
// again, so the quarantine step would stop it to move directories aside —
// but stopping it would take orders-v2-0 offline: the step refuses by the
// stop-safety rule, naming orders-v2-0 and the way on; nothing is moved,
// broker 1 is neither stopped nor started.
func TestOfflineFullDirStopOnlyWhenSafe(t *testing.T) {
	g := jbodBroker1(t, 100)
	g.ZK.Put(kafkazk.PartitionStatePath("orders-v2", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}`)
	out, _ := runDiskFull(t, g, map[string]string{"broker": "1", "quarantine": "/q", "health_timeout": "2s"})
	if out.Failed != "quarantine" || !errors.Is(out.Err, steps.ErrRefused) {
		t.Fatalf("want the quarantine step refused: %+v", out)
	}
	for _, want := range []string{"stopping broker 1 now would break", "orders-v2-0 would go offline", "broker 1 was not stopped", "then run again"} {
		if !strings.Contains(out.Err.Error(), want) {
			t.Errorf("refusal does not say %q: %v", want, out.Err)
		}
	}
	for _, c := range g.Hosts.Commands {
		if strings.Contains(c, "kremedy_quarantine ") || strings.Contains(c, "systemctl") {
			t.Errorf("a directory was moved or the broker stopped or started: %s", c)
		}
	}
}

// TestMoveRefusedWhileThePortIsOpen: broker 1 is not registered, but a
// process accepts connections on its Kafka port (b1:9092: a broker
// starting by hand): every move is refused naming the port, and nothing
// is moved.
func TestMoveRefusedWhileThePortIsOpen(t *testing.T) {
	g := fullBroker1(t)
	ctx := context.Background()
	must(t, g.Hosts.Run(ctx, 1, "systemctl stop kafka-1", nil))
	for p := range int32(3) {
		g.ZK.Put(kafkazk.PartitionStatePath("orders", p), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":1,"isr":[2,3]}`)
	}
	g.Hosts.Running[1] = true // up, not registered yet
	g.Hosts.Space[1]["/q"] = []string{"df /dev/sdc 100000000 0 100000000 0% /q"}
	out, _ := runDiskFull(t, g, map[string]string{"broker": "1", "quarantine": "/q", "health_timeout": "2s"})
	if out.Failed != "quarantine" || !errors.Is(out.Err, steps.ErrRefused) || !strings.Contains(out.Err.Error(), "Kafka port b1:9092 accepts connections") {
		t.Fatalf("want the move refused naming the open port: %+v", out)
	}
	if slices.Contains(g.Hosts.Names(1, "/q/kremedy-full1"), "orders-0") || !slices.Contains(g.Hosts.Names(1, "/data/k1"), "orders-0") {
		t.Fatal("a directory was moved while the port was open")
	}
}
