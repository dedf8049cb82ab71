package main

// Lab test of the batch roll (issue 26): six real ZooKeeper-mode brokers
// in three racks, rolled one at a time and then with batch=auto under an
// acks=all producer, the two times side by side.

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
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
	t.Run("batch=auto: racks together, no batch the rule forbids, the controller alone and last", func(t *testing.T) {
		plan := kremedy(t, "plan", "rolling-restart", "--inventory", l.InventoryPath(), "--set", "batch=auto")
		if plan.code != 0 || !strings.Contains(plan.out, "restart brokers in 4 batches, in this order:") || !strings.Contains(plan.out, "(the controller, alone and last)") {
			t.Fatalf("plan: exit %d\n%s", plan.code, plan.out)
		}
		r, got, run := roll(t, "--set", "batch=auto")
		batched = r.took
		bs := batchesOf(t, run)
		t.Logf("batch=auto: %s in batches %v; %d sends acknowledged, 0 failed, longest send %s", r.took.Round(time.Millisecond), bs, got.acked, got.longest.Round(time.Millisecond))
		if len(bs) != 4 {
			t.Errorf("batches %v, want 4 (two racks of two, the controller's rack-mate, the controller)", bs)
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
		ctrl := bs[len(bs)-1]
		if len(ctrl) != 1 {
			t.Errorf("the last batch %v is not the controller alone", ctrl)
		}
	})
	if single > 0 && batched > 0 {
		t.Logf("FIGURE rolling restart of 6 brokers (3 racks, RF 3, min.insync.replicas 2, acks=all producer, 0 failed sends in both): one at a time %.1fs, batch=auto %.1fs, ratio %.2f",
			single.Seconds(), batched.Seconds(), batched.Seconds()/single.Seconds())
	}
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
