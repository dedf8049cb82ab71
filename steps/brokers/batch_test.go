package brokers

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func bpart(topic string, p int32, replicas, isr []int32) Partition {
	leader := int32(-1)
	if len(isr) > 0 {
		leader = isr[0]
	}
	return Partition{Topic: topic, Partition: p, Replicas: replicas, ISR: isr, Leader: leader}
}

func ids(ns ...int32) []int32 { return ns }

func ptr(id int32) *int32 { return &id }

func TestBatches(t *testing.T) {
	m2 := MinISR{Default: 2}
	// Two replica sets of three brokers, fully in sync.
	twoSets := []Partition{
		bpart("a", 0, ids(1, 2, 3), ids(1, 2, 3)),
		bpart("a", 1, ids(4, 5, 6), ids(4, 5, 6)),
	}
	for _, c := range []struct {
		name  string
		parts []Partition
		order []int32
		m     MinISR
		o     BatchOptions
		want  [][]int32
		why   map[int32]string // a broker → a text its why must contain
		err   string
	}{{
		name:  "two replica sets of three brokers: the rule splits them into pairs",
		parts: twoSets,
		order: ids(1, 2, 3, 4, 5, 6), m: m2, o: BatchOptions{},
		want: [][]int32{{1, 4}, {2, 5}, {3, 6}},
		why:  map[int32]string{2: "not in a batch with brokers [1]: a-0 would fall below min.insync.replicas=2 with brokers [1 2]: isr [1 2 3]"},
	}, {
		name:  "max 1 is one at a time",
		parts: twoSets,
		order: ids(1, 2, 3, 4, 5, 6), m: m2, o: BatchOptions{Max: 1},
		want: [][]int32{{1}, {2}, {3}, {4}, {5}, {6}},
	}, {
		name:  "the controller last in the last batch the rule allows, wherever the order had it",
		parts: twoSets,
		order: ids(4, 1, 2, 3, 5, 6), m: m2, o: BatchOptions{Last: ptr(4)},
		want: [][]int32{{1, 5}, {2, 6}, {3, 4}},
		why:  map[int32]string{4: "the controller: last in its batch, stopped once the others are gone, so it moves once"},
	}, {
		name: "the controller alone and last when no batch allows it",
		parts: append(slices.Clone(twoSets),
			bpart("rf2", 0, ids(3, 4), ids(3, 4))),
		order: ids(1, 2, 3, 4, 5, 6), m: m2, o: BatchOptions{Last: ptr(4)},
		want: [][]int32{{1, 5}, {2, 6}, {3}, {4}},
		why:  map[int32]string{4: "the controller: alone and last; no batch allows it: rf2-0 (replication factor 2, min.insync.replicas 2) would lose two in-sync replicas with brokers [3 4]"},
	}, {
		name: "the controller joins its rack's batch before a later one of another rack",
		parts: []Partition{
			bpart("a", 0, ids(1, 2, 3), ids(1, 2, 3)),
			bpart("a", 1, ids(1, 2, 3), ids(1, 2, 3)),
		},
		order: ids(1, 2, 3, 4), m: m2,
		o:    BatchOptions{Last: ptr(4), Racks: map[int32]string{1: "r1", 2: "r2", 3: "r3", 4: "r1"}},
		want: [][]int32{{2}, {3}, {1, 4}},
		why:  map[int32]string{4: "rack r1, like broker 1"},
	}, {
		name:  "the controller joins no batch at max",
		parts: nil,
		order: ids(1, 2, 3), m: m2, o: BatchOptions{Max: 2, Last: ptr(3)},
		want: [][]int32{{1, 2}, {3}},
	}, {
		name: "racks are preferred when the rule allows it",
		parts: []Partition{
			bpart("a", 0, ids(1, 2, 3), ids(1, 2, 3)),
			bpart("a", 1, ids(2, 3, 4), ids(2, 3, 4)),
			bpart("a", 2, ids(3, 4, 1), ids(3, 4, 1)),
		},
		order: ids(1, 2, 3, 4), m: MinISR{Default: 1},
		o:    BatchOptions{Max: 2, Racks: map[int32]string{1: "r1", 2: "r2", 3: "r1", 4: "r2"}},
		want: [][]int32{{1, 3}, {2, 4}},
		why:  map[int32]string{3: "rack r1, like broker 1"},
	}, {
		// A layout of the lab's (TestBatchRollLab; CI planned [1 2] [3 6]
		// [5] [4] on it): three racks of two, every partition one replica
		// per rack, none holding both 1 and 2, the controller 4. Its
		// rack-mate goes with it, the controller last, rather than with a
		// broker of another rack: three batches, not four.
		name: "racks of two with the controller in one: it goes last with its rack-mate, no rack mixed",
		parts: []Partition{
			bpart("a", 0, ids(1, 5, 3), ids(1, 5, 3)),
			bpart("a", 1, ids(2, 4, 6), ids(2, 4, 6)),
			bpart("a", 2, ids(3, 1, 5), ids(3, 1, 5)),
			bpart("a", 3, ids(4, 2, 3), ids(4, 2, 3)),
			bpart("a", 4, ids(5, 1, 6), ids(5, 1, 6)),
			bpart("a", 5, ids(6, 4, 2), ids(6, 4, 2)),
		},
		order: ids(1, 2, 3, 4, 5, 6), m: m2,
		o:    BatchOptions{Last: ptr(4), Racks: map[int32]string{1: "r0", 2: "r1", 3: "r2", 4: "r0", 5: "r1", 6: "r2"}},
		want: [][]int32{{2, 5}, {3, 6}, {1, 4}},
		why:  map[int32]string{5: "rack r1, like broker 2", 3: "first of rack r2's brokers", 4: "rack r0, like broker 1"},
	}, {
		name: "a rack's batches join another rack's where the rule allows, whole",
		parts: []Partition{
			bpart("a", 0, ids(1, 2, 3), ids(1, 2, 3)),
			bpart("a", 1, ids(4, 5, 6), ids(4, 5, 6)),
		},
		order: ids(1, 2, 3, 4, 5, 6), m: m2,
		o:    BatchOptions{Racks: map[int32]string{1: "r1", 2: "r2", 3: "r3", 4: "r1", 5: "r2", 6: "r3"}},
		want: [][]int32{{1, 4}, {2, 5}, {3, 6}},
		why:  map[int32]string{4: "rack r1, like broker 1"},
	}, {
		name: "one broker per rack: batches join across racks as without racks",
		parts: []Partition{
			bpart("a", 0, ids(1, 2, 3), ids(1, 2, 3)),
			bpart("a", 1, ids(4, 5, 6), ids(4, 5, 6)),
		},
		order: ids(1, 2, 3, 4, 5, 6), m: m2,
		o:    BatchOptions{Racks: map[int32]string{1: "r1", 2: "r2", 3: "r3", 4: "r4", 5: "r5", 6: "r6"}},
		want: [][]int32{{1, 4}, {2, 5}, {3, 6}},
		why:  map[int32]string{4: "joined with its rack r4's batch [4], one batch fewer"},
	}, {
		name:  "one rack, but the ISR forbids the rack's batch: the rule wins",
		parts: twoSets,
		order: ids(1, 2, 3, 4, 5, 6), m: m2,
		o:    BatchOptions{Racks: map[int32]string{1: "r1", 2: "r1", 3: "r1", 4: "r2", 5: "r2", 6: "r2"}},
		want: [][]int32{{1, 4}, {2, 5}, {3, 6}},
	}, {
		name: "the live ISR, not the replica list: a shrunk ISR keeps its two members apart",
		parts: []Partition{
			bpart("a", 0, ids(1, 2, 3), ids(1, 2)),
		},
		order: ids(1, 2, 3), m: MinISR{Default: 1}, o: BatchOptions{},
		want: [][]int32{{1, 3}, {2}},
		why:  map[int32]string{2: "a-0 would go offline with brokers [1 2]: isr [1 2]"},
	}, {
		name: "a topic override of min.insync.replicas splits where the default would not",
		parts: []Partition{
			bpart("strict", 0, ids(1, 2, 3), ids(1, 2, 3)),
			bpart("loose", 0, ids(1, 2, 3), ids(1, 2, 3)),
		},
		order: ids(1, 2, 3), m: MinISR{Default: 1, Topics: map[string]int{"strict": 2}}, o: BatchOptions{},
		want: [][]int32{{1}, {2}, {3}},
	}, {
		name: "a partition no restart keeps available loses at most one replica to a batch",
		parts: []Partition{
			bpart("rf2", 0, ids(1, 2), ids(1, 2)),
			bpart("a", 0, ids(1, 2, 3, 4), ids(1, 2, 3, 4)),
		},
		order: ids(1, 2, 3, 4), m: m2, o: BatchOptions{},
		want: [][]int32{{1, 3}, {2, 4}},
		why:  map[int32]string{2: "rf2-0 (replication factor 2, min.insync.replicas 2) would lose two in-sync replicas"},
	}, {
		name: "broker 0 is a broker like any other, not the controller by default",
		parts: []Partition{
			bpart("a", 0, ids(0, 1, 2), ids(0, 1, 2)),
			bpart("a", 1, ids(3, 4, 5), ids(3, 4, 5)),
		},
		order: ids(0, 1, 2, 3, 4, 5), m: m2, o: BatchOptions{},
		want: [][]int32{{0, 3}, {1, 4}, {2, 5}},
	}, {
		name:  "a cluster already below min.insync.replicas has no batch plan",
		parts: []Partition{bpart("a", 0, ids(1, 2, 3), ids(1))},
		order: ids(1, 2, 3), m: m2, o: BatchOptions{},
		err: "a-0 is already below min.insync.replicas=2 (isr [1])",
	}, {
		name:  "a broker that cannot stop alone: no batch plan, and the roll refuses it anyway",
		parts: []Partition{bpart("a", 0, ids(1, 2, 3), ids(1, 2))},
		order: ids(1, 2, 3), m: m2, o: BatchOptions{},
		err: "stopping broker 1 alone: a-0 would fall below min.insync.replicas=2",
	}} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Batches(c.parts, c.order, c.m, c.o)
			if c.err != "" {
				if !errors.Is(err, ErrNoBatches) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrNoBatches with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var brokers [][]int32
			for _, b := range got {
				brokers = append(brokers, b.Brokers)
			}
			if fmt.Sprint(brokers) != fmt.Sprint(c.want) {
				t.Fatalf("batches %v, want %v", brokers, c.want)
			}
			for b, w := range c.why {
				found := false
				for _, bt := range got {
					if strings.Contains(bt.Why[b], w) {
						found = true
					}
				}
				if !found {
					t.Errorf("no why of broker %d contains %q: %+v", b, w, got)
				}
			}
			checkBatches(t, c.parts, c.order, c.m, c.o, got)
		})
	}
}

// checkBatches holds any plan to the one stop-safety rule: every broker in
// exactly one batch, each with a why; every batch safe to stop as a set by
// StopRisks; no partition no restart keeps available hit twice by a batch;
// the last broker last in the last batch, alone only when the rule allows
// it with no other batch.
func checkBatches(t *testing.T, parts []Partition, order []int32, m MinISR, o BatchOptions, got []Batch) {
	t.Helper()
	var all []int32
	for _, b := range got {
		all = append(all, b.Brokers...)
		for _, id := range b.Brokers {
			if b.Why[id] == "" {
				t.Errorf("broker %d has no why", id)
			}
		}
		if o.Max > 0 && len(b.Brokers) > o.Max {
			t.Errorf("batch %v is above max %d", b.Brokers, o.Max)
		}
		if r := StopRisks(parts, b.Brokers, m); len(r) > 0 {
			t.Errorf("batch %v breaks the rule: %v", b.Brokers, r)
		}
		for _, p := range parts {
			if !Unavoidable(p, m.Of(p.Topic)) {
				continue
			}
			n := 0
			for _, r := range p.ISR {
				if slices.Contains(b.Brokers, r) {
					n++
				}
			}
			if n > 1 {
				t.Errorf("batch %v stops %d in-sync replicas of %s", b.Brokers, n, p.Key())
			}
		}
	}
	if a, w := slices.Sorted(slices.Values(all)), slices.Sorted(slices.Values(order)); !slices.Equal(a, w) {
		t.Errorf("brokers in batches %v, want each of %v once", a, w)
	}
	if o.Last == nil || !slices.Contains(order, *o.Last) {
		return
	}
	c := *o.Last
	l := got[len(got)-1].Brokers
	if l[len(l)-1] != c {
		t.Errorf("last batch %v, want %d last in it", l, c)
	}
	if len(l) > 1 {
		return
	}
	// Alone only when no other batch (below max) allows it with all of
	// its brokers.
	for _, b := range got[:len(got)-1] {
		if o.Max > 0 && len(b.Brokers) >= o.Max {
			continue
		}
		if len(SetRisks(parts, plus(b.Brokers, c), m)) == 0 {
			t.Errorf("the controller %d is alone although the rule allows it with batch %v", c, b.Brokers)
		}
	}
}

// TestBatchesRandomLayouts holds random layouts (replication factors 1–4,
// shrunk ISRs, racks, overrides) to the rule.
func TestBatchesRandomLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		brokers := 3 + r.IntN(10)
		var order []int32
		racks := map[int32]string{}
		for b := 1; b <= brokers; b++ {
			order = append(order, int32(b))
			racks[int32(b)] = fmt.Sprintf("r%d", r.IntN(3))
		}
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		m := MinISR{Default: 1 + r.IntN(2), Topics: map[string]int{"t1": 1 + r.IntN(3)}}
		var parts []Partition
		for p := range 5 + r.IntN(40) {
			rf := 1 + r.IntN(min(4, brokers))
			perm := r.Perm(brokers)
			var reps []int32
			for _, i := range perm[:rf] {
				reps = append(reps, int32(i+1))
			}
			topic := fmt.Sprintf("t%d", r.IntN(3))
			isr := slices.Clone(reps)
			minISR := m.Of(topic)
			// Shrink the ISR only while the cluster stays stoppable.
			for len(isr) > minISR+1 && len(isr) > 1 && r.IntN(3) == 0 {
				isr = isr[:len(isr)-1]
			}
			parts = append(parts, bpart(topic, int32(p), reps, isr))
		}
		o := BatchOptions{Max: r.IntN(4), Racks: racks}
		if r.IntN(2) == 0 {
			o.Last = ptr(order[r.IntN(len(order))])
		}
		got, err := Batches(parts, order, m, o)
		if errors.Is(err, ErrNoBatches) {
			continue // a layout where one broker alone cannot stop
		}
		if err != nil {
			t.Fatalf("layout %d: %v", n, err)
		}
		checkBatches(t, parts, order, m, o, got)
		if t.Failed() {
			t.Fatalf("layout %d: %+v\nparts %+v", n, got, parts)
		}
	}
}

// BenchmarkBatches200k plans the batches of 100 brokers holding 200,000
// partitions of replication factor 3 (min.insync.replicas 2).
func BenchmarkBatches200k(b *testing.B) {
	const brokers, partitions = 100, 200_000
	var parts []Partition
	for p := range partitions {
		var reps []int32
		for k := range 3 {
			reps = append(reps, int32((p+k*7)%brokers+1))
		}
		parts = append(parts, bpart(fmt.Sprintf("t%d", p/10), int32(p%10), reps, reps))
	}
	var order []int32
	for i := 1; i <= brokers; i++ {
		order = append(order, int32(i))
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := Batches(parts, order, MinISR{Default: 2}, BatchOptions{Last: ptr(1)})
		if err != nil || len(got) < 2 {
			b.Fatal(got, err)
		}
	}
}
