package main

// Lab test of the batch roll (issue 26): six real ZooKeeper-mode brokers
// in three racks, rolled one at a time and then with batch=auto under an
// acks=all producer, the two times side by side.

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/roll"
)

// batchParts is the batch lab's ledger: six partitions, so that every
// broker leads one and is written through.
const batchParts = 6

func TestBatchRollLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Brokers, cfg.Racks, cfg.Net = 6, 3, 41
	l := startLab(t, cfg)
	c := connectLab(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.kc.CreateTopic(ctx, ledger, nil, batchParts, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, l)

	roll := func(t *testing.T, extra ...string) (result, sent, string) {
		t.Helper()
		before := brokerPIDs(l)
		run := filepath.Join(t.TempDir(), "run")
		var r result
		got := writingN(t, l, batchParts, func() { r = runRoll(t, l, run, extra...) })
		if r.code != 0 {
			t.Fatalf("rolling-restart %v: exit %d\n%s", extra, r.code, r.out)
		}
		if got.failed != 0 || got.acked == 0 {
			t.Fatalf("%d sends failed (%d acknowledged): %v", got.failed, got.acked, got.errs)
		}
		restartedOnce(t, l, run, before)
		t.Logf("where the time went: %s", timeGoes(t, run))
		return r, got, run
	}
	var single, batched time.Duration
	t.Run("one at a time", func(t *testing.T) {
		r, got, run := roll(t)
		if bs := batchesOf(t, run); len(bs) != 6 {
			t.Errorf("one at a time ran %d batches: %v", len(bs), bs)
		}
		single = r.took
		t.Logf("one at a time: %s; %d sends acknowledged, 0 failed, longest send %s", r.took.Round(time.Millisecond), got.acked, got.longest.Round(time.Millisecond))
	})
	t.Run("batch=auto: racks together, no batch the rule forbids, the controller last in its rack's batch", func(t *testing.T) {
		plan := kremedy(t, "plan", "rolling-restart", "--inventory", l.InventoryPath(), "--set", "batch=auto")
		m := regexp.MustCompile(`\(the controller (\d+) last: stopped once the others are gone\)`).FindStringSubmatch(plan.out)
		if plan.code != 0 || !strings.Contains(plan.out, "restart brokers in 3 batches, in this order:") || m == nil {
			t.Fatalf("plan: exit %d\n%s", plan.code, plan.out)
		}
		ctrl, _ := strconv.Atoi(m[1])
		r, got, run := roll(t, "--set", "batch=auto")
		batched = r.took
		bs := batchesOf(t, run)
		t.Logf("batch=auto: %s in batches %v; %d sends acknowledged, 0 failed, longest send %s", r.took.Round(time.Millisecond), bs, got.acked, got.longest.Round(time.Millisecond))
		if len(bs) != 3 {
			t.Errorf("batches %v, want 3 (each rack's two, the controller's rack last)", bs)
		}
		// No batch the rule forbids, checked against the assignment Kafka
		// made (independently of the planner): no partition of replication
		// factor 3 at min.insync.replicas 2 may have two replicas in one batch.
		vctx, vcancel := context.WithTimeout(context.Background(), time.Minute)
		defer vcancel()
		v, err := c.kc.BrokerView(vctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			for name, tv := range v.Topics {
				for _, p := range tv.Partitions {
					in := 0
					for _, r := range p.Replicas {
						if slices.Contains(b, r) {
							in++
						}
					}
					if in > 1 {
						t.Errorf("batch %v holds %d replicas of %s-%d (replicas %v)", b, in, name, p.Partition, p.Replicas)
					}
				}
			}
			rack := cfg.Rack(int(b[0]))
			for _, id := range b {
				if cfg.Rack(int(id)) != rack {
					t.Errorf("batch %v mixes racks although each rack could stop alone", b)
				}
			}
		}
		if last := bs[len(bs)-1]; len(last) != 2 || !slices.Contains(last, int32(ctrl)) {
			t.Errorf("the last batch %v is not the controller %d with its rack-mate", last, ctrl)
		}
		stopsAfterGone(t, run, int32(ctrl))
	})
	// The ratio is logged, not asserted: beside other lab tests the two
	// rolls meet different loads (0.50 to 0.81 here), and two JVMs
	// starting at once pay more for it than one. BenchmarkBatchRollLab
	// (make bench-roll) measures it alone (docs/rolling-restart.md).
	if single > 0 && batched > 0 {
		t.Logf("FIGURE rolling restart of 6 brokers (3 racks, RF 3, min.insync.replicas 2, acks=all producer, 0 failed sends in both): one at a time %.1fs, batch=auto %.1fs, ratio %.2f",
			single.Seconds(), batched.Seconds(), batched.Seconds()/single.Seconds())
	}
}

// stopsAfterGone fails t unless the controller's stop began after the
// others of its batch were gone (their waits ended), and none of them
// started before it was gone.
func stopsAfterGone(t *testing.T, runDir string, ctrl int32) {
	t.Helper()
	recs, err := journal.Read(filepath.Join(runDir, steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, rec := range recs {
		if rec.Step != "roll" || rec.Type != journal.ActionStart && rec.Type != journal.ActionEnd {
			continue
		}
		var a struct {
			ID     string `json:"id"`
			Action struct {
				ID string `json:"id"`
			} `json:"action"`
		}
		if err := json.Unmarshal(rec.Data, &a); err != nil {
			t.Fatalf("journal: %v", err)
		}
		seq = append(seq, rec.Type+" "+a.ID+a.Action.ID)
	}
	stop := slices.Index(seq, fmt.Sprintf("action-start stop-%d", ctrl))
	gone := slices.Index(seq, fmt.Sprintf("action-end gone-%d", ctrl))
	if stop < 0 || gone < stop {
		t.Fatalf("the controller %d was not stopped and gone: %v", ctrl, seq)
	}
	// Its batch: the stops after the last start before its stop.
	from := 0
	for i := stop; i >= 0; i-- {
		if strings.HasPrefix(seq[i], "action-start start-") {
			from = i + 1
			break
		}
	}
	for _, s := range seq[from:stop] {
		if id, ok := strings.CutPrefix(s, "action-start stop-"); ok && !slices.Contains(seq[from:stop], "action-end gone-"+id) {
			t.Errorf("the controller %d's stop began before broker %s was gone: %v", ctrl, id, seq[from:])
		}
	}
	for _, s := range seq[stop:gone] {
		if strings.HasPrefix(s, "action-start start-") {
			t.Errorf("%s began before the controller %d was gone", s, ctrl)
		}
	}
}

// timeGoes says where a roll's time went, from its journal: per unit (a
// batch, or one broker), the wall time of each phase (a phase's actions of
// one batch run at once: from the first start to the last end).
func timeGoes(t *testing.T, runDir string) string {
	t.Helper()
	recs, err := journal.Read(filepath.Join(runDir, steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ from, to time.Time }
	var units []string
	spans := map[string]map[roll.Phase]*span{}
	unitOf := map[string]string{}
	var first, lastEnd, prev time.Time
	var idle time.Duration // in the roll step, no action running
	open := 0
	for _, rec := range recs {
		if rec.Step != "roll" || rec.Type != journal.ActionStart && rec.Type != journal.ActionEnd {
			continue
		}
		if open == 0 && !prev.IsZero() {
			idle += rec.Time.Sub(prev)
		}
		prev = rec.Time
		if rec.Type == journal.ActionStart {
			open++
		} else {
			open--
		}
		var a struct {
			ID     string    `json:"id"`
			Args   roll.Args `json:"args"`
			Action struct {
				ID   string    `json:"id"`
				Args roll.Args `json:"args"`
			} `json:"action"`
		}
		if err := json.Unmarshal(rec.Data, &a); err != nil {
			t.Fatalf("journal: %v", err)
		}
		id, args := a.ID+a.Action.ID, a.Args
		if rec.Type == journal.ActionEnd {
			args = a.Action.Args
		}
		u := fmt.Sprintf("batch %d", args.Batch)
		if args.Batch == 0 {
			u = fmt.Sprintf("broker %d", args.Node)
		}
		if rec.Type == journal.ActionStart {
			unitOf[id] = u
			if first.IsZero() {
				first = rec.Time
			}
		}
		u = unitOf[id]
		if spans[u] == nil {
			spans[u] = map[roll.Phase]*span{}
			units = append(units, u)
		}
		sp := spans[u][args.Phase]
		if sp == nil {
			sp = &span{from: rec.Time}
			spans[u][args.Phase] = sp
		}
		sp.to, lastEnd = rec.Time, rec.Time
	}
	var out []string
	for _, u := range units {
		var each []string
		for _, ph := range []roll.Phase{roll.PhaseSafe, roll.PhaseStop, roll.PhaseGone, roll.PhaseStart, roll.PhaseBack, roll.PhaseGate} {
			if sp := spans[u][ph]; sp != nil {
				each = append(each, fmt.Sprintf("%s %.1fs", ph, sp.to.Sub(sp.from).Seconds()))
			}
		}
		out = append(out, u+": "+strings.Join(each, " "))
	}
	whole := recs[len(recs)-1].Time.Sub(recs[0].Time)
	return fmt.Sprintf("journal %.1fs, roll step %.1fs of which %.1fs between actions; %s", whole.Seconds(), lastEnd.Sub(first).Seconds(), idle.Seconds(), strings.Join(out, "; "))
}

// batchesOf reads a roll's batches from its journal: the brokers whose
// stops began before any of them started, in order.
func batchesOf(t *testing.T, runDir string) [][]int32 {
	t.Helper()
	recs, err := journal.Read(filepath.Join(runDir, steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int32
	var cur []int32
	starting := false
	for _, rec := range recs {
		if rec.Type != journal.ActionStart || rec.Step != "roll" {
			continue
		}
		var a struct {
			Args roll.Args `json:"args"`
		}
		if err := json.Unmarshal(rec.Data, &a); err != nil {
			t.Fatalf("journal: %v", err)
		}
		switch a.Args.Phase {
		case roll.PhaseStop:
			if starting {
				out, cur, starting = append(out, cur), nil, false
			}
			cur = append(cur, a.Args.Node)
		case roll.PhaseStart:
			starting = true
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	for _, b := range out {
		slices.Sort(b)
	}
	return out
}
