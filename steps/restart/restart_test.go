package restart_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/lease"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// fixture is a healthy three-broker fake cluster (the ghost state without
// its pending deletion; min.insync.replicas=2, replication factor 3) and a
// run of the real rolling-restart runbook on it.
type fixture struct {
	*steptest.Cluster
	s *steps.Session
}

func newFixture(t *testing.T, params map[string]string) *fixture {
	t.Helper()
	g := steptest.Ghost(t)
	g.ZK.Remove(kafkazk.DeleteTopicPath("orders"))
	g.Kafka.Configs = map[string]string{"min.insync.replicas": "2"}
	return fixtureOn(t, g, params)
}

// fixtureOn is a run of the real rolling-restart runbook on cluster g,
// with the health gate shortened and params set.
func fixtureOn(t *testing.T, g *steptest.Cluster, params map[string]string) *fixture {
	t.Helper()
	rb, err := runbooks.Get("rolling-restart")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{"health_checks": "1", "health_timeout": "2s"}
	for k, v := range params {
		set[k] = v
	}
	bound, err := rb.Bind(set, g.Ports.Target.Name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := steps.Create(t.TempDir(), bound, steps.Meta{ID: "roll1", Runbook: rb.Name, Params: bound.Params, Cluster: g.Ports.Target.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{Cluster: g, s: s}
}

// typing approves every plan, typing the cluster's name.
var typing = approver(func(_ steps.Info, p *steps.Plan) steps.Approval {
	return steps.Approval{Decision: steps.Approve, Typed: "test", By: "test", Digest: p.Digest()}
})

type approver func(steps.Info, *steps.Plan) steps.Approval

func (a approver) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	return a(info, p), nil
}

func (f *fixture) run(ctx context.Context) steps.Outcome { return f.s.Run(ctx, f.Ports, typing, nil) }

// runLogged runs the fixture, approving every plan, and returns what it
// said, a line an event.
func (f *fixture) runLogged() (steps.Outcome, string) {
	var logs []string
	var mu sync.Mutex
	out := f.s.Run(context.Background(), f.Ports, typing, steps.ReporterFunc(func(ev steps.Event) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, ev.Text)
	}))
	return out, strings.Join(logs, "\n")
}

// restarts lists the stop and start commands in the order they ran.
func (f *fixture) restarts() []string {
	var out []string
	for _, c := range f.Hosts.Commands {
		if strings.Contains(c, "systemctl stop") || strings.Contains(c, "systemctl start") {
			out = append(out, c)
		}
	}
	return out
}

func TestRollRestartsEachBrokerOnceControllerLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		want := []string{"1: systemctl stop kafka-1", "1: systemctl start kafka-1", "2: systemctl stop kafka-2", "2: systemctl start kafka-2",
			"3: systemctl stop kafka-3", "3: systemctl start kafka-3"} // broker 3 is the controller
		if got := f.restarts(); !slices.Equal(got, want) {
			t.Fatalf("restarts %v, want %v", got, want)
		}
	})
}

func TestRollOnlyTheBrokersAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, map[string]string{"brokers": "3,1"})
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		want := []string{"1: systemctl stop kafka-1", "1: systemctl start kafka-1", "3: systemctl stop kafka-3", "3: systemctl start kafka-3"}
		if got := f.restarts(); !slices.Equal(got, want) {
			t.Fatalf("restarts %v, want %v", got, want)
		}
	})
}

// TestRollRefusesBeforeStoppingAnything: a broker already down, or a
// partition whose ISR stopping a broker would take below
// min.insync.replicas, stops the run before any broker is stopped.
func TestRollRefusesBeforeStoppingAnything(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(f *fixture)
		want  []string
	}{
		"a broker already down": {func(f *fixture) {
			f.Hosts.Running[2] = false
			f.ZK.Remove("/brokers/ids/2")
			for p := 0; p < 3; p++ { // the controller shrank the ISR
				f.ZK.Put(kafkazk.PartitionStatePath("orders-v2", int32(p)), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":1,"isr":[1,3]}`)
			}
		}, []string{"broker 2 is down (not registered) and this run did not stop it", "stopping broker 1 now is not safe: orders-v2-0 would fall below min.insync.replicas=2: isr [1 3] without broker 1"}},
		"an ISR already at min.insync.replicas": {func(f *fixture) {
			f.ZK.Put(kafkazk.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":1,"isr":[1,2]}`)
		}, []string{"stopping broker 1 now is not safe: orders-v2-1 would fall below min.insync.replicas=2: isr [1 2] without broker 1",
			"stopping broker 2 now is not safe: orders-v2-1 would fall below"}},
		"a topic's own min.insync.replicas": {func(f *fixture) {
			f.Kafka.Configs["min.insync.replicas"] = "1"
			f.ZK.Put(kafkazk.ConfigTopicPath("orders-v2"), `{"version":1,"config":{"min.insync.replicas":"3"}}`)
		}, []string{"orders-v2-0 refuses acks=all writes while its broker is down (replication factor 3, min.insync.replicas 3): no restart can keep it available",
			"--set accept_unavailable=orders-v2 (or * for every such topic"}},
		"a partition with a single replica": {func(f *fixture) {
			f.ZK.Put(kafkazk.TopicPath("single"), `{"version":3,"partitions":{"0":[2]},"topic_id":"DDDDDDDDDDDDDDDDDDDDDD"}`)
			f.ZK.Put(kafkazk.PartitionStatePath("single", 0), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":0,"isr":[2]}`)
		}, []string{"stopping broker 2 now is not safe: single-0 goes offline while its broker is down (replication factor 1, min.insync.replicas 2)",
			"raise their replication factor", "lower the topic's min.insync.replicas"}},
		"a partition only just above min.insync.replicas, out of sync": {func(f *fixture) {
			f.ZK.Put(kafkazk.PartitionStatePath("orders-v2", 2), `{"controller_epoch":7,"leader":3,"version":1,"leader_epoch":1,"isr":[3]}`)
		}, []string{"the cluster is not whole", "orders-v2-2 under-replicated"}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil)
				tc.setup(f)
				out := f.run(context.Background())
				if !errors.Is(out.Err, steps.ErrRefused) || out.Failed != "roll" || !strings.Contains(out.Err.Error(), "No broker was stopped") {
					t.Fatalf("want roll refused, got %v (%+v)", out.Err, out)
				}
				for _, w := range tc.want {
					if !strings.Contains(out.Err.Error(), w) {
						t.Errorf("the refusal lacks %q:\n%v", w, out.Err)
					}
				}
				if r := f.restarts(); len(r) != 0 {
					t.Fatalf("brokers were touched: %v", r)
				}
			})
		})
	}
}

// TestRollResumesWithoutRestartingTwice: a run interrupted after a
// broker's restart, or between a broker's stop and its start, resumes with
// the next broker, or starts the stopped one; no broker is stopped twice.
func TestRollResumesWithoutRestartingTwice(t *testing.T) {
	for name, tc := range map[string]struct {
		after string // the action whose end interrupts the first attempt
		first []string
	}{
		"after broker 1's gate":                   {"gate-1", []string{"1: systemctl stop kafka-1", "1: systemctl start kafka-1"}},
		"between broker 2's stop and start":       {"gone-2", []string{"1: systemctl stop kafka-1", "1: systemctl start kafka-1", "2: systemctl stop kafka-2"}},
		"after broker 2's start, before its gate": {"back-2", []string{"1: systemctl stop kafka-1", "1: systemctl start kafka-1", "2: systemctl stop kafka-2", "2: systemctl start kafka-2"}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil)
				shrinkOnStop(f)
				ctx, cancel := context.WithCancel(context.Background())
				f.s.AfterRecord(func(typ, step string) {
					if typ != "action-end" || step != "roll" {
						return
					}
					for _, a := range history(f) {
						if a == tc.after {
							cancel()
						}
					}
				})
				out := f.run(ctx)
				if out.Interrupted != "roll" {
					t.Fatalf("first attempt: %+v %v", out, out.Err)
				}
				if got := f.restarts(); !slices.Equal(got, tc.first) {
					t.Fatalf("first attempt restarted %v, want %v", got, tc.first)
				}
				f.s.AfterRecord(nil)
				if out := f.run(context.Background()); out.Err != nil {
					t.Fatal(out.Err)
				}
				got := f.restarts()
				for _, b := range []int{1, 2, 3} {
					for _, what := range []string{"stop", "start"} {
						if n := strings.Count(strings.Join(got, "\n"), fmt.Sprintf("%d: systemctl %s kafka-%d", b, what, b)); n != 1 {
							t.Errorf("broker %d: %s ran %d times: %v", b, what, n, got)
						}
					}
				}
			})
		})
	}
}

// shrinkOnStop makes the fake controller do what the real one does when
// a broker stops: take it out of every ISR (and back in once it runs).
func shrinkOnStop(f *fixture) {
	isr := func() {
		var up []string
		for _, b := range []int32{1, 2, 3} {
			if f.Hosts.Running[b] {
				up = append(up, fmt.Sprint(b))
			}
		}
		for p := 0; p < 3; p++ {
			f.ZK.Put(kafkazk.PartitionStatePath("orders-v2", int32(p)), fmt.Sprintf(`{"controller_epoch":7,"leader":%s,"version":1,"leader_epoch":1,"isr":[%s]}`, up[0], strings.Join(up, ",")))
		}
	}
	f.Hosts.OnStop = func(int32) { isr() }
	f.Hosts.OnStart = func(int32) { isr() }
}

// history lists the ids of the roll's actions that ended, from the journal.
func history(f *fixture) []string {
	recs, err := readJournal(f)
	if err != nil {
		return nil
	}
	return recs
}

// TestRollGateNamesStaleTopics: a topic ZooKeeper no longer has, still in
// a broker's cache, is named while that broker waits for its restart and
// fails the gate once it has restarted and still serves it.
func TestRollGateNamesStaleTopics(t *testing.T) {
	ghost := map[string]ports.TopicView{"gone": {Name: "gone", ID: "X", Partitions: map[int32]ports.PartitionView{0: {Leader: 2, Replicas: []int32{2}, ISR: []int32{2}}}}}
	t.Run("cleared by each restart", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			f.Kafka.Stale[2], f.Kafka.Stale[3] = ghost, ghost
			f.Hosts.OnStart = func(b int32) { delete(f.Kafka.Stale, b) } // a restarted broker forgets it
			if out := f.run(context.Background()); out.Err != nil {
				t.Fatal(out.Err)
			}
			if j := journalText(t, f); !strings.Contains(j, "not compared: broker 2 still serves gone (its restart clears it)") {
				t.Fatalf("the gate after broker 1 did not name the stale topic on broker 2:\n%s", j)
			}
		})
	})
	t.Run("still served after a restart", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			f.Kafka.Stale[1] = ghost // never cleared
			out := f.run(context.Background())
			if !errors.Is(out.Err, steps.ErrCheckFailed) || !strings.Contains(out.Err.Error(), "broker 1 serves gone, which ZooKeeper does not have") {
				t.Fatalf("want the gate after broker 1 to fail, got %v", out.Err)
			}
			if got := f.restarts(); len(got) != 2 {
				t.Fatalf("the roll went on after a failed gate: %v", got)
			}
		})
	})
}

// TestRollRefusesABrokerDownAgain: a broker this run restarted that is
// down again is not started (or restarted) a second time: the resume
// refuses and says why.
func TestRollRefusesABrokerDownAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		f.Hosts.Running[1] = false
		f.ZK.Remove("/brokers/ids/1")
		n := len(f.restarts())
		out := f.run(context.Background())
		if !errors.Is(out.Err, steps.ErrRefused) || !strings.Contains(out.Err.Error(), "broker 1 was restarted by this run and is down again") {
			t.Fatalf("want a refusal naming broker 1, got %v", out.Err)
		}
		if got := f.restarts(); len(got) != n {
			t.Fatalf("commands ran: %v", got[n:])
		}
	})
}

// TestRollRestartsABrokerWhoseSessionChanged: a broker re-registers under a
// new ZooKeeper session after a session expiry without restarting; only
// this run's own start counts, so it is still restarted.
func TestRollRestartsABrokerWhoseSessionChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		f.s.AfterRecord(func(typ, step string) {
			if typ == "step-done" && step == "preflight" {
				f.ZK.PutEphemeral("/brokers/ids/2", `{"version":5,"host":"b2","port":9092,"endpoints":["PLAINTEXT://b2:9092"]}`, 0xbeef)
			}
		})
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		if got := strings.Join(f.restarts(), "\n"); !strings.Contains(got, "2: systemctl stop kafka-2") || !strings.Contains(got, "2: systemctl start kafka-2") {
			t.Fatalf("broker 2 was not restarted:\n%s", got)
		}
	})
}

// TestRollResumeStartsItsStoppedBrokerFirst: the controller moved between
// two attempts; the broker the first attempt stopped is started before any
// other stops, whatever the new order.
func TestRollResumeStartsItsStoppedBrokerFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		f.Kafka.Configs["min.insync.replicas"] = "1"
		f.ZK.Put("/controller", `{"version":2,"brokerid":1}`) // order 2, 3, 1
		shrinkOnStop(f)
		ctx, cancel := context.WithCancel(context.Background())
		f.s.AfterRecord(func(typ, step string) {
			if typ == "action-end" && slices.Contains(history(f), "gone-3") {
				cancel()
			}
		})
		if out := f.run(ctx); out.Interrupted != "roll" {
			t.Fatalf("first attempt: %+v", out)
		}
		f.s.AfterRecord(nil)
		f.ZK.Put("/controller", `{"version":2,"brokerid":2}`) // order 1, 3, 2 now
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		want := []string{"2: systemctl stop kafka-2", "2: systemctl start kafka-2", "3: systemctl stop kafka-3", // first attempt
			"3: systemctl start kafka-3", "1: systemctl stop kafka-1", "1: systemctl start kafka-1"}
		if got := f.restarts(); !slices.Equal(got, want) {
			t.Fatalf("restarts %v, want %v", got, want)
		}
	})
}

// TestRollRefusesAClusterThatIsNotWhole: a broker outside the roll that is
// down, a partition already short, or a min.insync.replicas no broker
// reports, stops the run before any broker is stopped.
func TestRollRefusesAClusterThatIsNotWhole(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(f *fixture)
		want  string
	}{
		"a broker outside the roll is down": {func(f *fixture) {
			f.Kafka.Configs["min.insync.replicas"] = "1"
			f.Hosts.Running[2] = false
			f.ZK.Remove("/brokers/ids/2")
		}, "the cluster is not whole: brokers [2] are not registered"},
		"a partition already under-replicated": {func(f *fixture) {
			f.Kafka.Configs["min.insync.replicas"] = "1"
			f.ZK.Put(kafkazk.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":1,"isr":[1,2]}`)
		}, "partitions already short: orders-v2-1 under-replicated (replicas [2 3 1], isr [1 2])"},
		"min.insync.replicas unreadable": {func(f *fixture) { delete(f.Kafka.Configs, "min.insync.replicas") },
			"no broker reported its min.insync.replicas"},
		"a topic znode that does not decode": {func(f *fixture) { f.ZK.Put(kafkazk.TopicPath("bad"), "{not json") },
			"bad: its topic znode does not decode"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, map[string]string{"brokers": "1"})
				tc.setup(f)
				out := f.run(context.Background())
				if !errors.Is(out.Err, steps.ErrRefused) || !strings.Contains(out.Err.Error(), tc.want) {
					t.Fatalf("want a refusal with %q, got %v", tc.want, out.Err)
				}
				if r := f.restarts(); len(r) != 0 {
					t.Fatalf("brokers were touched: %v", r)
				}
			})
		})
	}
}

// TestRollRefusesAJournalWithoutPhases: a roll begun by a kremedy that
// named sub-actions only by their IDs (no phase in their args) is refused
// on resume, never guessed from the IDs: nothing more is stopped.
func TestRollRefusesAJournalWithoutPhases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		f.s.AfterRecord(func(typ, step string) {
			if typ == "action-end" && step == "roll" && slices.Contains(history(f), "gone-1") {
				cancel()
			}
		})
		if out := f.run(ctx); out.Interrupted != "roll" {
			t.Fatalf("first attempt: %+v", out)
		}
		f.s.AfterRecord(nil)
		f.s.Close()
		path := filepath.Join(f.s.Dir(), steps.JournalFile)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// What the earlier kremedy wrote: {"broker":1,"addr":…}, no phase.
		old := regexp.MustCompile(`"phase":"[a-z]+","node":`).ReplaceAll(b, []byte(`"broker":`))
		if bytes.Equal(old, b) {
			t.Fatal("the journal holds no phased roller action to rewrite")
		}
		// That kremedy hashed plans another way, and its run-start said none.
		old = bytes.Replace(old, []byte(`,"plan_digest":"v2"`), nil, 1)
		if err := os.WriteFile(path, old, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := steps.Open(f.s.Dir(), func(m steps.Meta) (*steps.Runbook, error) { return f.s.Runbook(), nil })
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		before := len(f.restarts())
		out := s.Run(context.Background(), f.Ports, typing, nil)
		if !errors.Is(out.Err, steps.ErrRefused) || !strings.Contains(out.Err.Error(), "names a roll's sub-actions only by their IDs") {
			t.Fatalf("resume of a journal without phases: %v", out.Err)
		}
		if got := f.restarts(); len(got) != before {
			t.Fatalf("brokers touched after the refusal: %v", got[before:])
		}
	})
}

// single adds a topic of replication factor 1 on broker 2 and one of
// replication factor 2 (at the cluster's min.insync.replicas=2) on 1 and 3.
func (f *fixture) single() {
	f.ZK.Put(kafkazk.TopicPath("single"), `{"version":3,"partitions":{"0":[2]},"topic_id":"DDDDDDDDDDDDDDDDDDDDDD"}`)
	f.ZK.Put(kafkazk.PartitionStatePath("single", 0), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":0,"isr":[2]}`)
	f.ZK.Put(kafkazk.TopicPath("pairs"), `{"version":3,"partitions":{"0":[1,3]},"topic_id":"EEEEEEEEEEEEEEEEEEEEEE"}`)
	f.ZK.Put(kafkazk.PartitionStatePath("pairs", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,3]}`)
}

// TestRollAcceptsWhatNoRestartCanKeep: partitions no restart can keep
// available (replication factor 1; replication factor ≤ min.insync.replicas)
// refuse the roll, naming both ways out, until accept_unavailable names
// their topics (or *); then every broker restarts once and the plan says
// what happens to them. A topic accepted that the plan does not list is
// refused (a typo accepts nothing).
func TestRollAcceptsWhatNoRestartCanKeep(t *testing.T) {
	all := []string{"1: systemctl stop kafka-1", "1: systemctl start kafka-1", "2: systemctl stop kafka-2", "2: systemctl start kafka-2",
		"3: systemctl stop kafka-3", "3: systemctl start kafka-3"}
	for name, tc := range map[string]struct {
		accept string
		refuse []string
	}{
		"none": {"", []string{"stopping broker 2 now is not safe: single-0 goes offline", "stopping broker 1 now is not safe: pairs-0 refuses acks=all writes",
			"stopping broker 3 now is not safe: pairs-0 refuses", "--set accept_unavailable=pairs,single (or *"}},
		"one of two":   {"single", []string{"stopping broker 1 now is not safe: pairs-0", "--set accept_unavailable=pairs (or *"}},
		"a typo":       {"pairs,singel", []string{"accept_unavailable=pairs,singel names singel, but the topics whose partitions no restart can keep available are pairs, single: a typo must not accept nothing"}},
		"both by name": {"pairs,single", nil},
		"every one":    {"*", nil},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, map[string]string{"accept_unavailable": tc.accept})
				f.single()
				var plans []string
				ap := approver(func(info steps.Info, p *steps.Plan) steps.Approval {
					if info.ID == "roll" {
						plans = append(plans, strings.Join(append(p.Facts, p.Notes...), "\n"))
					}
					return typing(info, p)
				})
				out := f.s.Run(context.Background(), f.Ports, ap, nil)
				if tc.refuse != nil {
					if !errors.Is(out.Err, steps.ErrRefused) || out.Failed != "roll" {
						t.Fatalf("want the roll refused, got %v", out.Err)
					}
					for _, w := range tc.refuse {
						if !strings.Contains(out.Err.Error(), w) {
							t.Errorf("the refusal lacks %q:\n%v", w, out.Err)
						}
					}
					if r := f.restarts(); len(r) != 0 {
						t.Fatalf("brokers were touched: %v", r)
					}
					return
				}
				if out.Err != nil {
					t.Fatal(out.Err)
				}
				if got := f.restarts(); !slices.Equal(got, all) {
					t.Fatalf("restarts %v, want %v", got, all)
				}
				if len(plans) != 1 {
					t.Fatalf("%d roll plans approved", len(plans))
				}
				for _, w := range []string{"ACCEPTED by accept_unavailable=" + tc.accept, "pairs (replication factor 2, min.insync.replicas 2): acks=all writes refused on 1 partition",
					"single (replication factor 1, min.insync.replicas 2): 1 partition offline",
					"broker 2: ", "ACCEPTED (accept_unavailable), no restart can keep these available: single-0 goes offline while its broker is down"} {
					if !strings.Contains(plans[0], w) {
						t.Errorf("the approved plan lacks %q:\n%s", w, plans[0])
					}
				}
			})
		})
	}
}

// TestPlanNamesLoginAndSudo: every host command of the plan names the
// login it runs as and sudo when it runs through it.
func TestPlanNamesLoginAndSudo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		for i := range f.Ports.Target.Hosts {
			f.Ports.Target.Hosts[i].Login, f.Ports.Target.Hosts[i].Sudo = "deploy", i != 1
		}
		rb, err := runbooks.Get("rolling-restart")
		if err != nil {
			t.Fatal(err)
		}
		bound, err := rb.Bind(map[string]string{}, f.Ports.Target.Name)
		if err != nil {
			t.Fatal(err)
		}
		pv := steps.Preview(context.Background(), bound, steps.Meta{ID: "p", Runbook: rb.Name, Params: bound.Params}, f.Ports)
		var ssh []string
		for _, s := range pv {
			if s.Err != nil {
				t.Fatalf("step %s: %v", s.Info.ID, s.Err)
			}
			for _, a := range s.Plan.Actions {
				if a.Op == steps.OpSSH {
					ssh = append(ssh, a.String())
				}
			}
		}
		want := []string{"ssh broker 1 on deploy@b1 via sudo -n: systemctl stop kafka-1", "ssh broker 2 on deploy@b2: systemctl stop kafka-2"}
		for _, w := range want {
			if !slices.Contains(ssh, w) {
				t.Errorf("no plan line %q in %q", w, ssh)
			}
		}
	})
}

// fallBehind: right after action gate ends, broker 2 falls out of
// orders-v2-0's ISR, and is back in it heal later (0: never).
func fallBehind(f *fixture, gate string, heal time.Duration) {
	behind := `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":2,"isr":[1,3]}`
	whole := `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2,3]}`
	var once sync.Once
	f.s.AfterRecord(func(typ, step string) {
		if typ != "action-end" || step != "roll" || !slices.Contains(history(f), gate) {
			return
		}
		once.Do(func() {
			f.ZK.Put(kafkazk.PartitionStatePath("orders-v2", 0), behind)
			if heal > 0 {
				time.AfterFunc(heal, func() { f.ZK.Put(kafkazk.PartitionStatePath("orders-v2", 0), whole) })
			}
		})
	})
}

// TestRollWaitsForTheClusterToHeal: a replica that falls behind between
// two brokers' restarts does not stop the roll at once: the safety check
// before the next stop reads the cluster again until it heals, and only a
// cluster that stays short past health_timeout stops the roll, resumable,
// that broker not stopped.
func TestRollWaitsForTheClusterToHeal(t *testing.T) {
	for name, heals := range map[string]bool{"heals within the wait": true, "stays short": false} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, map[string]string{"health_timeout": "5s"})
				heal := time.Duration(0)
				if heals {
					heal = 3 * time.Second
				}
				fallBehind(f, "gate-1", heal)
				out, all := f.runLogged()
				if !strings.Contains(all, "broker 2 is not stopped yet: the cluster is not whole (partitions already short: orders-v2-0 under-replicated") || !strings.Contains(all, "waiting up to 5s for the cluster to heal") {
					t.Errorf("the wait was not said:\n%s", all)
				}
				if heals {
					if out.Err != nil {
						t.Fatal(out.Err)
					}
					if len(f.restarts()) != 6 || !strings.Contains(all, "broker 2 may stop: the cluster healed after") {
						t.Fatalf("restarts %v\n%s", f.restarts(), all)
					}
					return
				}
				if !errors.Is(out.Err, steps.ErrRefused) || out.Failed != "roll" {
					t.Fatalf("want the roll stopped, got %v", out.Err)
				}
				for _, w := range []string{"broker 2 was not stopped after waiting 5s for it to heal", "resume the run", "brokers [3] were not touched"} {
					if !strings.Contains(out.Err.Error(), w) {
						t.Errorf("the refusal lacks %q:\n%v", w, out.Err)
					}
				}
				if got := f.restarts(); len(got) != 2 {
					t.Fatalf("restarts %v, want broker 1's only", got)
				}
			})
		})
	}
}

// TestRollStopsWhenItsLeaseIsLost: a roll is one long step. Its ZooKeeper
// session expires while broker 1 restarts, and another operator's run
// takes the cluster's lease: the roll stops before it stops broker 2,
// naming that run and the brokers not restarted yet.
func TestRollStopsWhenItsLeaseIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		f.Ports.Lease = lease.NewZK(f.ZK, 10*time.Second)
		alice := ports.Holder{RunID: "20261205T101010Z-topic-cleanup-orders", Runbook: "topic-cleanup", Operator: "alice@bastion", Host: "bastion", Since: time.Now(), Token: "alice"}
		f.Hosts.OnStart = func(b int32) {
			if b != 1 {
				return
			}
			f.ZK.Expire(steptest.Session)
			if _, err := lease.NewZK(f.ZK.As(0xa11ce), 10*time.Second).Acquire(context.Background(), alice); err != nil {
				t.Error(err)
			}
		}
		out := f.run(context.Background())
		if !errors.Is(out.Err, ports.ErrLeaseLost) || !errors.Is(out.Err, steps.ErrRefused) {
			t.Fatalf("the roll after alice took the lease: %v, want it stopped (ErrRefused, ErrLeaseLost)", out.Err)
		}
		for _, want := range []string{"now held by run " + alice.RunID, "what it did is in the journal", "broker 2 was not stopped, brokers [3] were not touched"} {
			if !strings.Contains(out.Err.Error(), want) {
				t.Errorf("the stop does not say %q:\n%v", want, out.Err)
			}
		}
		if got, want := f.restarts(), []string{"1: systemctl stop kafka-1", "1: systemctl start kafka-1"}; !slices.Equal(got, want) {
			t.Fatalf("restarts %v, want only broker 1's", got)
		}
	})
}
