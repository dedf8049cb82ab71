package restart_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/steptest"
)

// newRacked is the rolling-restart runbook on a healthy fake cluster of
// six brokers in three racks (steptest.Racked: each partition has one
// replica per rack, the controller is broker 1).
func newRacked(t *testing.T, params map[string]string) *fixture {
	t.Helper()
	return fixtureOn(t, steptest.Racked(t, 6, 3), params)
}

// batchesRun reads the restarts as batches: a run of stops, then the run
// of starts of the same brokers. It fails the test when a batch's brokers
// are not all stopped before any of them starts, or start as another set.
func batchesRun(t *testing.T, cmds []string) [][]int32 {
	t.Helper()
	var out [][]int32
	var stopped, started []int32
	flush := func() {
		if len(stopped) == 0 {
			return
		}
		slices.Sort(stopped)
		slices.Sort(started)
		if !slices.Equal(stopped, started) {
			t.Fatalf("batch stopped %v but started %v: %v", stopped, started, cmds)
		}
		out = append(out, stopped)
		stopped, started = nil, nil
	}
	for _, c := range cmds {
		var id int32
		var what string
		if _, err := fmt.Sscanf(c, "%d: systemctl %s", &id, &what); err != nil {
			t.Fatalf("command %q", c)
		}
		switch what {
		case "stop":
			if len(started) > 0 {
				flush()
			}
			stopped = append(stopped, id)
		case "start":
			started = append(started, id)
		}
	}
	flush()
	return out
}

func TestBatchRollStopsRacksTogetherControllerLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRacked(t, map[string]string{"batch": "auto"})
		var mu sync.Mutex
		var summary string
		out := f.s.Run(context.Background(), f.Ports, approver(func(info steps.Info, p *steps.Plan) steps.Approval {
			if info.ID == "roll" {
				mu.Lock()
				summary = p.Summary + "\n" + strings.Join(p.Facts, "\n")
				mu.Unlock()
			}
			return steps.Approval{Decision: steps.Approve, Typed: "test", By: "test", Digest: p.Digest()}
		}), nil)
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		// The controller goes last within its rack's batch: 3 batches, not 4.
		want := [][]int32{{2, 5}, {3, 6}, {1, 4}}
		if got := batchesRun(t, f.restarts()); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		for _, w := range []string{"restart brokers in 3 batches, in this order: [2 5], [3 6], [4 1] (the controller 1 last: stopped once the others are gone)",
			"broker 5: stopping it with brokers [2] keeps each of its 3 in-sync partitions online and at min.insync.replicas; rack r2, like broker 2",
			"broker 4: first of rack r1's brokers left in the roll order",
			"broker 1: the controller: last in its batch, stopped once the others are gone, so it moves once; stopping it with brokers [4] keeps"} {
			if !strings.Contains(summary, w) {
				t.Errorf("the plan lacks %q:\n%s", w, summary)
			}
		}
		// One safety check and one gate per batch, each naming the batch.
		ids, err := readJournal(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"safe-2+5", "gate-2+5", "safe-3+6", "gate-3+6", "safe-4+1", "gate-4+1"} {
			if !slices.Contains(ids, w) {
				t.Errorf("journal lacks %s: %v", w, ids)
			}
		}
		// The controller's stop begins only once its batch-mate is gone;
		// the two start at once after.
		seq := startsAndEnds(t, f)
		if i, j := slices.Index(seq, "end gone-4"), slices.Index(seq, "start stop-1"); i < 0 || j < i {
			t.Errorf("the controller's stop began before broker 4 was gone: %v", seq)
		}
		if i, j := slices.Index(seq, "end gone-1"), slices.Index(seq, "start start-4"); i < 0 || j < i {
			t.Errorf("broker 4 started before the controller was gone: %v", seq)
		}
	})
}

// startsAndEnds is the roll's action records in journal order, as
// "start ID" and "end ID".
func startsAndEnds(t *testing.T, f *fixture) []string {
	t.Helper()
	recs, err := journal.Read(filepath.Join(f.s.Dir(), steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if r.Step != "roll" || r.Type != journal.ActionStart && r.Type != journal.ActionEnd {
			continue
		}
		var id string
		if r.Type == journal.ActionStart {
			a, err := journal.Decode[steps.Action](r)
			if err != nil {
				t.Fatal(err)
			}
			id = a.ID
		} else {
			e, err := journal.Decode[struct {
				Action steps.Action `json:"action"`
			}](r)
			if err != nil {
				t.Fatal(err)
			}
			id = e.Action.ID
		}
		out = append(out, strings.TrimPrefix(r.Type, "action-")+" "+id)
	}
	return out
}

// TestBatchRollResumesBeforeTheControllersStop: killed with the
// controller's batch-mate gone and the controller not stopped yet, the
// resume starts the batch-mate first and then restarts the controller,
// alone; no broker is stopped or started twice.
func TestBatchRollResumesBeforeTheControllersStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRacked(t, map[string]string{"batch": "auto"})
		ctx, cancel := context.WithCancel(context.Background())
		f.s.AfterRecord(func(typ, step string) {
			if typ == "action-end" && step == "roll" && slices.Contains(history(f), "gone-4") {
				cancel()
			}
		})
		if out := f.run(ctx); out.Interrupted != "roll" {
			t.Fatalf("first attempt: %+v %v", out, out.Err)
		}
		first := f.restarts()
		if n := len(first); n == 0 || first[n-1] != "4: systemctl stop kafka-4" || slices.Contains(first, "1: systemctl stop kafka-1") {
			t.Fatalf("first attempt ran %v, want broker 4 stopped last and the controller not", first)
		}
		f.s.AfterRecord(nil)
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		got := f.restarts()
		for b := 1; b <= 6; b++ {
			for _, what := range []string{"stop", "start"} {
				if n := strings.Count(strings.Join(got, "\n"), fmt.Sprintf("%d: systemctl %s kafka-%d", b, what, b)); n != 1 {
					t.Errorf("broker %d: %s ran %d times: %v", b, what, n, got)
				}
			}
		}
		if rest := got[len(first):]; !slices.Equal(rest, []string{"4: systemctl start kafka-4", "1: systemctl stop kafka-1", "1: systemctl start kafka-1"}) {
			t.Errorf("the resume ran %v, want broker 4 started, then the controller restarted", rest)
		}
	})
}

func TestBatchOneIsOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRacked(t, map[string]string{"batch": "1"})
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		want := [][]int32{{2}, {3}, {4}, {5}, {6}, {1}}
		if got := batchesRun(t, f.restarts()); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		rb, err := runbooks.Get("rolling-restart")
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"0", "-2", "all", "2.5"} {
			if _, err := rb.Bind(map[string]string{"batch": bad}, "test"); err == nil || !strings.Contains(err.Error(), "is not a batch size: 1 (one broker at a time), a number of brokers such as 3, or auto") {
				t.Errorf("batch=%s: %v", bad, err)
			}
		}
	})
}

// TestBatchRollReadsTheBatchAgain: the ISR moved after the plan so that
// the second batch's brokers now share an in-sync partition; that batch is
// not stopped (the roll stops, resumable, saying so), and resume plans the
// batches again from the cluster as it is, restarting no broker twice.
func TestBatchRollReadsTheBatchAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRacked(t, map[string]string{"batch": "auto"})
		var once sync.Once
		f.s.AfterRecord(func(typ, step string) {
			if typ != "action-end" || step != "roll" || !slices.Contains(history(f), "gate-2+5") {
				return
			}
			once.Do(func() {
				// A topic created meanwhile, placed without regard to racks.
				f.ZK.Put(kafkazk.TopicPath("late"), `{"version":3,"partitions":{"0":[3,6,1]},"topic_id":"DDDDDDDDDDDDDDDDDDDDDD"}`)
				f.ZK.Put(kafkazk.PartitionStatePath("late", 0), `{"controller_epoch":7,"leader":3,"version":1,"leader_epoch":0,"isr":[3,6,1]}`)
			})
		})
		out := f.run(context.Background())
		if !errors.Is(out.Err, steps.ErrRefused) || out.Failed != "roll" {
			t.Fatalf("want the roll stopped before batch 2, got %+v", out)
		}
		for _, w := range []string{"brokers [3 6] together was not stopped after waiting 2s for it to heal", "late-0 would fall below min.insync.replicas=2: isr [3 6 1] without brokers [3 6]",
			"it plans the batches again from the cluster as it is then", "brokers [4 1] were not touched"} {
			if !strings.Contains(out.Err.Error(), w) {
				t.Errorf("the refusal lacks %q:\n%v", w, out.Err)
			}
		}
		if got := batchesRun(t, f.restarts()); !slices.EqualFunc(got, [][]int32{{2, 5}}, slices.Equal) {
			t.Fatalf("first attempt restarted %v", got)
		}
		f.s.AfterRecord(nil)
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		want := [][]int32{{2, 5}, {3}, {6}, {1, 4}} // rack r3's two apart now, then rack r1's 4 with the controller last
		if got := batchesRun(t, f.restarts()); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("batches %v, want %v", got, want)
		}
	})
}

// TestBatchRollResumesAHalfDoneBatch: killed with batch 1's brokers
// stopped, the resume starts both first, gates them, and batches the rest;
// no broker is stopped twice.
func TestBatchRollResumesAHalfDoneBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRacked(t, map[string]string{"batch": "auto"})
		ctx, cancel := context.WithCancel(context.Background())
		f.s.AfterRecord(func(typ, step string) {
			if typ != "action-end" || step != "roll" {
				return
			}
			h := history(f)
			if slices.Contains(h, "gone-2") && slices.Contains(h, "gone-5") {
				cancel()
			}
		})
		if out := f.run(ctx); out.Interrupted != "roll" {
			t.Fatalf("first attempt: %+v %v", out, out.Err)
		}
		if got := f.restarts(); len(got) != 2 || !slices.Contains(got, "2: systemctl stop kafka-2") || !slices.Contains(got, "5: systemctl stop kafka-5") {
			t.Fatalf("first attempt ran %v", got)
		}
		f.s.AfterRecord(nil)
		if out := f.run(context.Background()); out.Err != nil {
			t.Fatal(out.Err)
		}
		got := f.restarts()
		for b := 1; b <= 6; b++ {
			for _, what := range []string{"stop", "start"} {
				if n := strings.Count(strings.Join(got, "\n"), fmt.Sprintf("%d: systemctl %s kafka-%d", b, what, b)); n != 1 {
					t.Errorf("broker %d: %s ran %d times: %v", b, what, n, got)
				}
			}
		}
		if got[2] != "2: systemctl start kafka-2" && got[2] != "5: systemctl start kafka-5" {
			t.Errorf("the resume did not start the stopped batch first: %v", got)
		}
	})
}
