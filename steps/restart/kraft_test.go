package restart_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/restart"
	"github.com/kremedy/kremedy/steps/roll"
	"github.com/kremedy/kremedy/steps/steptest"
)

// newKRaftFixture is the fake KRaft cluster (controllers 3001–3003, the
// leader 3001; brokers 1–3) and a run of the real kraft-rolling-restart
// runbook on it. The fake quorum behaves as the real one does when a
// controller stops: the stopped voter stops catching up, and a stopped
// leader's place goes to the lowest running voter.
func newKRaftFixture(t *testing.T, params map[string]string) *fixture {
	t.Helper()
	return newKRaftFixtureOn(t, steptest.KRaft(t), params)
}

func newKRaftFixtureOn(t *testing.T, g *steptest.Cluster, params map[string]string) *fixture {
	t.Helper()
	t.Cleanup(restart.SetPreflightSettle(50 * time.Millisecond))
	rb, err := runbooks.Get("kraft-rolling-restart")
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
	s, err := steps.Create(t.TempDir(), bound, steps.Meta{ID: "kroll1", Runbook: rb.Name, Params: bound.Params, Cluster: g.Ports.Target.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{Cluster: g, s: s}
	quorumFollows(f)
	return f
}

// now is the fake quorum's clock (the leader's last caught-up time).
const now = int64(1_700_000_000_000)

// quorumFollows makes the fake quorum answer from who runs: a stopped
// voter last caught up a minute ago, a stopped leader is replaced.
func quorumFollows(f *fixture) {
	// The hooks run under the fake hosts' lock: the quorum is kept here,
	// not read back through the fake Kafka (which takes that lock).
	q, err := f.Kafka.Quorum(context.Background(), roll.ControllerAddrs(f.Ports.Target))
	if err != nil {
		panic(err)
	}
	set := func(int32) {
		if !f.Hosts.Running[q.Leader] {
			q.Leader = -1
			for _, v := range q.Voters {
				if f.Hosts.Running[v.ID] {
					q.Leader = v.ID
					break
				}
			}
			q.Epoch++
		}
		voters := slices.Clone(q.Voters)
		for i, v := range voters {
			v.LastCaughtUpMs, v.LogEndOffset = now, q.HighWatermark
			if !f.Hosts.Running[v.ID] {
				v.LastCaughtUpMs, v.LogEndOffset = now-60_000, q.HighWatermark-50
			}
			voters[i] = v
		}
		q.Voters = voters
		c := q
		f.Kafka.SetQuorum(&c)
	}
	f.Hosts.OnStop, f.Hosts.OnStart = set, set
}

var kraftNodes = []string{"3001: systemctl %s kafka-controller-1", "3002: systemctl %s kafka-controller-2", "3003: systemctl %s kafka-controller-3",
	"1: systemctl %s kafka-1", "2: systemctl %s kafka-2", "3: systemctl %s kafka-3"}

func TestKRaftRollControllersFirstLeaderLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newKRaftFixture(t, nil)
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		var want []string
		for _, i := range []int{1, 2, 0, 3, 4, 5} { // 3001 leads: last of the controllers
			want = append(want, fmt.Sprintf(kraftNodes[i], "stop"), fmt.Sprintf(kraftNodes[i], "start"))
		}
		if got := f.restarts(); !slices.Equal(got, want) {
			t.Fatalf("restarts\n%v\nwant\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if q, _ := f.Kafka.Quorum(context.Background(), []string{"c1:9093"}); q.Leader == 3001 {
			t.Fatalf("the fake quorum kept its stopped leader: %+v", q)
		}
		// The header (the run's status line) follows the quorum: its leader
		// and margin before the roll, the new leader after the old one stopped.
		recs, err := journal.Read(filepath.Join(f.s.Dir(), steps.JournalFile))
		if err != nil {
			t.Fatal(err)
		}
		var status []string
		for _, r := range recs {
			var n struct {
				Text   string `json:"text"`
				Status bool   `json:"status"`
			}
			if r.Type == journal.Note && json.Unmarshal(r.Data, &n) == nil && n.Status {
				status = append(status, n.Text)
			}
		}
		all := strings.Join(status, "\n")
		if !strings.Contains(all, "metadata quorum: leader 3001, epoch 4 · 3 of 3 voters caught up, a majority is 2 · margin 1") ||
			!strings.Contains(all, "2 of 3 voters caught up, a majority is 2 · margin 0 · not caught up: 3002") ||
			!strings.Contains(all, "metadata quorum: leader 3002, epoch 5") {
			t.Fatalf("the status lines do not follow the quorum:\n%s", all)
		}
	})
}

// TestKRaftRollRefusesBeforeAnyStop: a controller already down, a voter
// behind, a quorum of one voter, or a broker already down refuse the run
// in its preflight, naming the node and the way forward; nothing restarts.
func TestKRaftRollRefusesBeforeAnyStop(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(f *fixture)
		want  []string
	}{
		"a controller stopped": {func(f *fixture) {
			f.Hosts.Running[3002] = false
			f.Hosts.OnStop(3002)
		}, []string{"controller 3002 is not caught up", "not listening on c2:9093"}},
		"a voter behind the leader": {func(f *fixture) {
			q, _ := f.Kafka.Quorum(context.Background(), []string{"c1:9093"})
			q.Voters[2].LastCaughtUpMs = now - 30_000
			q.Voters[0].LastCaughtUpMs = now
			f.Kafka.SetQuorum(&q)
		}, []string{"controller 3003 is not caught up: last caught up 30s before the leader"}},
		"a quorum of one voter": {func(f *fixture) {
			q, _ := f.Kafka.Quorum(context.Background(), []string{"c1:9093"})
			q.Voters = q.Voters[:1]
			f.Kafka.SetQuorum(&q)
			f.Ports.Target.Controllers = f.Ports.Target.Controllers[:1]
		}, []string{"a quorum of one voter has no margin", "add-controller"}},
		"a broker down": {func(f *fixture) {
			f.Hosts.Running[2] = false
		}, []string{"broker 2"}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newKRaftFixture(t, nil)
				tc.setup(f)
				out := f.run(context.Background())
				if !errors.Is(out.Err, steps.ErrRefused) || out.Failed != "preflight" || !strings.Contains(out.Err.Error(), "Nothing was changed") {
					t.Fatalf("want preflight refused, got %v (%+v)", out.Err, out)
				}
				for _, w := range tc.want {
					if !strings.Contains(out.Err.Error(), w) {
						t.Errorf("the refusal lacks %q:\n%v", w, out.Err)
					}
				}
				if r := f.restarts(); len(r) != 0 {
					t.Fatalf("nodes were touched: %v", r)
				}
			})
		})
	}
}

// TestKRaftRollResumesWithoutRestartingTwice: an interrupt after a
// controller's gate, between a controller's stop and its start, or in
// the brokers' roll resumes with no node stopped or started twice.
func TestKRaftRollResumesWithoutRestartingTwice(t *testing.T) {
	for name, tc := range map[string]struct{ step, after string }{
		"after controller 3002's gate":          {"roll-controllers", "gate-3002"},
		"between the leader's stop and start":   {"roll-controllers", "gone-3001"},
		"between broker 2's stop and its start": {"roll-brokers", "gone-2"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newKRaftFixture(t, nil)
				ctx, cancel := context.WithCancel(context.Background())
				f.s.AfterRecord(func(typ, step string) {
					if typ != "action-end" || step != tc.step {
						return
					}
					if ids, _ := steptest.EndedIDs(f.s.Dir(), tc.step); slices.Contains(ids, tc.after) {
						cancel()
					}
				})
				if out := f.run(ctx); out.Interrupted != tc.step {
					t.Fatalf("first attempt: %+v %v", out, out.Err)
				}
				f.s.AfterRecord(nil)
				if out := f.run(context.Background()); out.Err != nil {
					t.Fatal(out.Err)
				}
				got := strings.Join(f.restarts(), "\n")
				for _, n := range kraftNodes {
					for _, what := range []string{"stop", "start"} {
						if c := strings.Count(got, fmt.Sprintf(n, what)+"\n") + map[bool]int{true: 1}[strings.HasSuffix(got, fmt.Sprintf(n, what))]; c != 1 {
							t.Errorf("%q ran %d times:\n%s", fmt.Sprintf(n, what), c, got)
						}
					}
				}
			})
		})
	}
}

func TestQuorumStopRisk(t *testing.T) {
	q := ports.Quorum{Leader: 1, HighWatermark: 100}
	for id := int32(1); id <= 5; id++ {
		q.Voters = append(q.Voters, ports.Voter{ID: id, LogEndOffset: 100, LastCaughtUpMs: now})
	}
	q.Voters[3].LastCaughtUpMs = now - 1_500 // within the fetch timeout: caught up
	q.Voters[4].LastCaughtUpMs = -1          // never
	lag := brokers.Lagging(q, brokers.FetchTimeout)
	if len(lag) != 1 || lag[5] != "never caught up" {
		t.Fatalf("lagging %v, want only voter 5", lag)
	}
	m := brokers.MarginOf(q, lag)
	if m.Majority != 3 || m.CaughtUp != 4 {
		t.Fatalf("margin %+v", m)
	}
	if r := m.StopRisk(q, 2); r != "" { // 3 of 5 stay: enough
		t.Errorf("stopping 2 of a 4-caught-up quorum: %s", r)
	}
	if r := m.StopRisk(q, 5); r != "" { // 5 is behind already: its stop costs nothing more
		t.Errorf("stopping the lagging voter: %s", r)
	}
	q.Voters[3].LastCaughtUpMs = now - 2_500
	lag = brokers.Lagging(q, brokers.FetchTimeout)
	m = brokers.MarginOf(q, lag)
	r := m.StopRisk(q, 1)
	if !strings.Contains(r, "without controller 1, 2 of 5 voters are caught up and the quorum needs 3") || !strings.Contains(r, "controller 4 last caught up 2.5s before the leader") {
		t.Errorf("stopping the leader with two voters behind: %q", r)
	}
	if r := m.StopRisk(q, 9); r != "" {
		t.Errorf("a node that is no voter: %q", r)
	}
}

// TestKRaftRollCombinedNodes: combined nodes (process.roles=
// broker,controller) restart once each, with the controllers (the
// quorum's leader last); the brokers' roll restarts none of them again.
func TestKRaftRollCombinedNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newKRaftFixtureOn(t, steptest.KRaftCombined(t), nil)
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		var want []string
		for _, id := range []int{2, 3, 1} { // 1 leads: last
			want = append(want, fmt.Sprintf("%d: systemctl stop kafka-%d", id, id), fmt.Sprintf("%d: systemctl start kafka-%d", id, id))
		}
		if got := f.restarts(); !slices.Equal(got, want) {
			t.Fatalf("restarts\n%v\nwant\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		text := journalText(t, f)
		for _, w := range []string{"a combined node, so also broker 2:", "broker 2: a combined node (process.roles=broker,controller): it restarts with the controllers"} {
			if !strings.Contains(text, w) {
				t.Errorf("the journal lacks %q", w)
			}
		}
	})
}

// TestKRaftRollCombinedJudgesPartitions: before a combined node's stop the
// controllers' roll reads the partitions too, not the quorum alone: an
// ISR that shrank after the preflight stops the roll before the node
// stops, although the quorum would allow it.
func TestKRaftRollCombinedJudgesPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newKRaftFixtureOn(t, steptest.KRaftCombined(t), nil)
		f.s.AfterRecord(func(typ, step string) {
			if typ == "step-done" && step == "preflight" {
				f.ZK.Put(kafkazk.PartitionStatePath("orders", 0), `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":1,"isr":[1,3]}`)
			}
		})
		out := f.run(context.Background())
		if !errors.Is(out.Err, steps.ErrRefused) || out.Failed != "roll-controllers" || !strings.Contains(out.Err.Error(), "orders-0") {
			t.Fatalf("want roll-controllers refused on orders-0, got %+v %v", out, out.Err)
		}
		if got := f.restarts(); len(got) != 0 {
			t.Fatalf("a node restarted: %v", got)
		}
	})
}
