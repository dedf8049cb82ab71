package cleanup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

// newRolling is the ghost-topic fixture run in rolling mode; the fake
// controller takes a stopped broker out of orders-v2's ISRs and puts it
// back when it starts, as the real one does.
func newRolling(t *testing.T, params map[string]string) *fixture {
	t.Helper()
	set := map[string]string{"mode": "rolling"}
	for k, v := range params {
		set[k] = v
	}
	f := newFixture(t, set)
	f.kafka.Configs = map[string]string{"min.insync.replicas": "2"}
	isr := func() { isrFollowsRunning(f) }
	f.hosts.OnStop = func(int32) { isr() }
	f.hosts.OnStart = func(int32) { isr() }
	return f
}

// isrFollowsRunning sets orders-v2's ISRs to the brokers running now.
func isrFollowsRunning(f *fixture) {
	var up []string
	for _, b := range []int32{1, 2, 3} {
		if f.hosts.Running[b] {
			up = append(up, fmt.Sprint(b))
		}
	}
	for p := range 3 {
		f.zk.Put(kafkazk.PartitionStatePath("orders-v2", int32(p)), fmt.Sprintf(`{"controller_epoch":7,"leader":%s,"version":1,"leader_epoch":1,"isr":[%s]}`, up[0], strings.Join(up, ",")))
	}
}

// events lists, in order, each broker's stop, start and moves as
// "stop 1", "move 1 /data/k1/orders-0", "start 1".
func (f *fixture) events() []string {
	var out []string
	for _, c := range f.hosts.Commands {
		b, cmd, _ := strings.Cut(c, ": ")
		switch {
		case strings.HasPrefix(cmd, "systemctl stop"):
			out = append(out, "stop "+b)
		case strings.HasPrefix(cmd, "systemctl start"):
			out = append(out, "start "+b)
		case strings.Contains(cmd, "kremedy_move() {"):
			out = append(out, "move "+b)
		}
	}
	return out
}

// TestRollingModeRepairsGhostTopic: in rolling mode no broker is down
// while another is, the controller (3) goes last, and each broker's
// directories of orders move into quarantine while that broker is stopped;
// the end state is the full mode's.
func TestRollingModeRepairsGhostTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRolling(t, nil)
		out, err := f.run(context.Background(), f.typing("orders"))
		if err != nil {
			t.Fatalf("run: %v (%+v)\n%s", err, out, strings.Join(f.hosts.Commands, "\n"))
		}
		want := []string{"stop 1", "move 1", "start 1", "stop 2", "move 2", "start 2", "stop 3", "move 3", "start 3"}
		if got := f.events(); !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		for id := int32(1); id <= 3; id++ {
			for _, n := range f.hosts.Names(id, "/data/k1") {
				if strings.HasPrefix(n, "orders-") {
					t.Fatalf("broker %d kept %s", id, n)
				}
			}
			if got := f.hosts.Names(id, "/data/k2"); len(got) != 4 {
				t.Fatalf("broker %d /data/k2 = %v; want meta.properties and orders-v2-0..2 untouched", id, got)
			}
			if q := f.hosts.Names(id, "/data/kremedy-quarantine/run1/k1"); len(q) != 3 {
				t.Fatalf("broker %d quarantine %v", id, q)
			}
		}
		if q := f.hosts.Names(1, "/data/kremedy-quarantine/run1/k2"); len(q) != 1 || !strings.HasSuffix(q[0], "-delete") {
			t.Fatalf("the -delete form was not quarantined: %v", q)
		}
		var man cleanup.Manifest
		b, err := os.ReadFile(f.artifact("manifest"))
		if err != nil || json.Unmarshal(b, &man) != nil {
			t.Fatalf("manifest: %v", err)
		}
		if len(man.Moves) != 10 {
			t.Fatalf("manifest holds %d moves, want 10: %+v", len(man.Moves), man.Moves)
		}
		for _, m := range man.Moves {
			if m.State != "moved" {
				t.Fatalf("manifest move %+v not marked moved", m)
			}
		}
		// The full mode's stop and wipe steps do nothing; the start step holds
		// only the final gate, so nothing there is confirmed.
		if !slices.Equal(f.asked, []string{"delete-znodes", "rolling-wipe"}) {
			t.Fatalf("asked for %v", f.asked)
		}
	})
}

// TestFullModeSkipsTheRollingStep: the default mode never restarts a
// broker one at a time.
func TestFullModeSkipsTheRollingStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		if _, err := f.run(context.Background(), f.typing("orders")); err != nil {
			t.Fatal(err)
		}
		want := []string{"stop 1", "stop 2", "stop 3"}
		if got := f.events(); len(got) < 3 || !slices.Equal(got[:3], want) {
			t.Fatalf("events %v: full mode stops every broker first", got)
		}
		if slices.Contains(f.asked, "rolling-wipe") {
			t.Fatal("full mode asked to confirm the rolling step")
		}
	})
}

func TestModeMustBeKnown(t *testing.T) {
	rb, err := runbooks.Get("topic-cleanup")
	if err != nil {
		t.Fatal(err)
	}
	_, err = rb.Bind(map[string]string{"topic": "orders", "mode": "fast"}, "c")
	if err == nil || !strings.Contains(err.Error(), `mode "fast": it is full`) {
		t.Fatalf("want the mode refused, got %v", err)
	}
}

// TestRollingModeResumesWithoutRestartingTwice: a run killed between
// broker 2's stop and its start, or after its moves, resumes with that
// broker: its remaining directories moved, it started, no broker stopped
// or started twice.
func TestRollingModeResumesWithoutRestartingTwice(t *testing.T) {
	for name, after := range map[string]string{
		"after broker 2 stopped":         "gone-2",
		"after broker 2's manifest save": "while-2-manifest",
		"after broker 2's first move":    "while-2-move-0",
		"after broker 2 started":         "back-2",
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newRolling(t, nil)
				ctx, cancel := context.WithCancel(context.Background())
				f.s.AfterRecord(func(typ, step string) {
					if typ != "action-end" || step != "rolling-wipe" {
						return
					}
					if ids, _ := steptest.EndedIDs(f.dir, "rolling-wipe"); slices.Contains(ids, after) {
						cancel()
					}
				})
				out, _ := f.run(ctx, f.typing("orders"))
				if out.Interrupted != "rolling-wipe" {
					t.Fatalf("first attempt: %+v %v\n%v", out, out.Err, f.events())
				}
				f.s.AfterRecord(nil)
				if out, err := f.run(context.Background(), f.typing("orders")); err != nil {
					t.Fatalf("resume: %v %+v\n%v", err, out, f.events())
				}
				ev := strings.Join(f.events(), ",")
				for b := 1; b <= 3; b++ {
					for _, what := range []string{"stop", "start"} {
						if n := strings.Count(ev, fmt.Sprintf("%s %d", what, b)); n != 1 {
							t.Errorf("broker %d: %s ran %d times: %s", b, what, n, ev)
						}
					}
					if q := f.hosts.Names(int32(b), "/data/kremedy-quarantine/run1/k1"); len(q) != 3 {
						t.Errorf("broker %d quarantine %v", b, q)
					}
				}
			})
		})
	}
}

// TestRollingModeReplansWhenDirectoriesChanged: a directory of the topic
// that appears on a broker after the plan makes the plan stale; nothing is
// moved on that broker until the new plan is confirmed, and then it is
// moved too.
func TestRollingModeReplansWhenDirectoriesChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRolling(t, nil)
		added := false
		f.hosts.OnStop = func(b int32) {
			if b == 2 && !added {
				added = true
				// OnStop runs inside the fake host's command: its lock is held.
				f.hosts.FS[2]["/data/k1"]["orders-7"] = steptest.Entry{IsDir: true, TopicID: curID}
			}
			isrFollowsRunning(f)
		}
		var plans int
		a := approver(func(info steps.Info, p *steps.Plan) steps.Approval {
			if info.ID == "rolling-wipe" {
				plans++
			}
			return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
		})
		if out, err := f.run(context.Background(), a); err != nil {
			t.Fatalf("%v %+v", err, out)
		}
		if plans != 2 {
			t.Fatalf("the rolling step was confirmed %d times; a stale plan is planned and confirmed again", plans)
		}
		if q := f.hosts.Names(2, "/data/kremedy-quarantine/run1/k1"); !slices.Contains(q, "orders-7") {
			t.Fatalf("the new directory was not moved: %v", q)
		}
		if n := strings.Count(strings.Join(f.events(), ","), "stop 2"); n != 1 {
			t.Fatalf("broker 2 stopped %d times: %v", n, f.events())
		}
	})
}

// TestRollingModeRefusesAnUnsafeStop: a partition of another topic that a
// broker's stop would take below min.insync.replicas refuses rolling mode
// in preflight, before anything changes; the same found only once the
// znodes are gone stops the rolling step before any broker stops, and
// says where the backup is and that full mode remains.
func TestRollingModeRefusesAnUnsafeStop(t *testing.T) {
	short := `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":1,"isr":[1,2]}`
	t.Run("known before anything changes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newRolling(t, nil)
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), short)
			out, err := f.run(context.Background(), f.typing("orders"))
			if !errors.Is(err, steps.ErrRefused) || out.Failed != "preflight" || !strings.Contains(err.Error(), "stopping broker 1 would not be safe: orders-v2-1 would fall below min.insync.replicas=2") ||
				!strings.Contains(err.Error(), "Nothing was changed") {
				t.Fatalf("want preflight to refuse rolling mode, got %v (%+v)", err, out)
			}
			if len(f.zk.Deleted()) != 0 || len(f.events()) != 0 {
				t.Fatalf("refused, yet deleted %v, brokers %v", f.zk.Deleted(), f.events())
			}
		})
	})
	t.Run("found after the znodes were deleted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newRolling(t, nil)
			a := approver(func(info steps.Info, p *steps.Plan) steps.Approval {
				if info.ID == "delete-znodes" {
					f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), short)
				}
				return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
			})
			out, err := f.run(context.Background(), a)
			if !errors.Is(err, steps.ErrRefused) || out.Failed != "rolling-wipe" || !strings.Contains(err.Error(), "orders-v2-1 would fall below min.insync.replicas=2") ||
				!strings.Contains(err.Error(), "backup/znodes.json") || !strings.Contains(err.Error(), "full mode") {
				t.Fatalf("want the rolling step refused, got %v (%+v)", err, out)
			}
			if ev := f.events(); len(ev) != 0 {
				t.Fatalf("brokers were touched: %v", ev)
			}
		})
	})
}

// TestRollingModeRefusesARecreatedTopic: a client that recreated the topic
// after its znodes were deleted stops the roll before any broker stops.
func TestRollingModeRefusesARecreatedTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRolling(t, nil)
		a := approver(func(info steps.Info, p *steps.Plan) steps.Approval {
			if info.ID == "rolling-wipe" {
				f.zk.Put(kafkazk.TopicPath("orders"), `{"version":3,"partitions":{"0":[1]}}`)
			}
			return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
		})
		out, err := f.run(context.Background(), a)
		if !errors.Is(err, steps.ErrRefused) || out.Failed != "rolling-wipe" {
			t.Fatalf("want the rolling step refused, got %v (%+v)", err, out)
		}
		if ev := f.events(); len(ev) != 0 {
			t.Fatalf("brokers were touched: %v", ev)
		}
	})
}

// TestRollingPlanNamesWhatEachBrokerCosts: the plan says, per broker,
// which partitions of other topics lose an in-sync replica while it
// restarts and what they keep against min.insync.replicas, and lists its
// moves between its stop and its start.
func TestRollingPlanNamesWhatEachBrokerCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRolling(t, nil)
		var plan *steps.Plan
		a := approver(func(info steps.Info, p *steps.Plan) steps.Approval {
			if info.ID == "rolling-wipe" && plan == nil {
				plan = p
			}
			return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
		})
		if _, err := f.run(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		facts := strings.Join(plan.Facts, "\n")
		for _, w := range []string{
			"broker 1: 3 partitions lose an in-sync replica while it restarts (it leads 3",
			"orders-v2 [0,1,2] leads 3, keeps isr ≥ 2 (min.insync.replicas 2)",
			"broker 3: 3 partitions lose an in-sync replica",
		} {
			if !strings.Contains(facts, w) {
				t.Errorf("plan facts lack %q:\n%s", w, facts)
			}
		}
		var ids []string
		for _, a := range plan.Actions {
			if a.Broker == 2 {
				ids = append(ids, a.ID)
			}
		}
		want := []string{"safe-2", "stop-2", "gone-2", "while-2-manifest", "while-2-move-0", "while-2-move-1", "while-2-move-2", "start-2", "back-2", "gate-2"}
		if !slices.Equal(ids, want) {
			t.Fatalf("broker 2's actions %v, want %v", ids, want)
		}
	})
}
