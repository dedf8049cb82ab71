package brokers

import (
	"errors"
	"fmt"
	"slices"
)

// Batch is a set of brokers a roll would stop together, and why each one is
// in it.
type Batch struct {
	Brokers []int32
	Why     map[int32]string
}

// BatchOptions shape Batches.
type BatchOptions struct {
	// Max caps a batch's size; 0 is auto: the largest batch the rule allows.
	Max int
	// Racks are the brokers' broker.rack (none: no preference). A batch
	// holds one rack's brokers first, and batches of two racks join only
	// where that saves a batch; the rule decides, never the rack: nothing
	// in Kafka enforces rack-aware placement (Strimzi rejected rack
	// batches for that reason).
	Racks map[int32]string
	// Last, when set and in the order, is in the last batch, last in its
	// Brokers: the controller (the active controller in KRaft). It joins a
	// batch of its rack where the rule allows it with the whole batch (else
	// any batch the rule allows, else it is alone), and that batch goes
	// last: the controller moves once either way, and a batch fewer. The
	// roll stops it once the batch's others are gone (roll.batchActions),
	// so their controlled shutdowns meet a live controller and the new one
	// is elected among brokers that are not stopping. A pointer, because 0
	// is a broker id.
	Last *int32
}

// ErrNoBatches says that no batch plan exists: stopping even one broker is
// not safe, so the roll itself refuses (StopRisks names why).
var ErrNoBatches = errors.New("no broker can stop safely, so no batch can be planned")

// Batches splits order (the roll order, resumed brokers first) into batches
// that may each stop at once: for every partition, stopping the whole batch
// keeps a leader and at least min.insync.replicas in-sync replicas, computed
// from the live ISR of parts with the one stop-safety rule applied to the
// set (StopRisks), and a partition no restart keeps available (Unavoidable)
// loses at most one in-sync replica to a batch, so batching never takes it
// offline where one-at-a-time would not.
//
// With racks, batches hold one rack's brokers first: each rack's brokers
// (racks in the order their first broker comes in the roll order) join
// greedily in roll order, a broker the rule refuses starting another batch
// of its rack. Then a later batch joins an earlier one of another rack,
// whole, where the rule allows the two together (a batch fewer): a rack is
// never mixed where its brokers could stop alone with fewer or as many
// batches. Without racks, brokers join greedily in roll order (the second
// pass then finds nothing to join: every later batch's first broker was
// refused by each earlier one). The controller (Last) then joins a batch,
// last, where the rule allows it with the whole batch, and that batch goes
// last (withLast). The plan is a plan: the ISR moves while
// brokers restart, so the roll applies the rule again to each batch right
// before it stops it.
func Batches(parts []Partition, order []int32, m MinISR, o BatchOptions) ([]Batch, error) {
	if risks := StopRisks(parts, nil, m); len(risks) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoBatches, risks[0])
	}
	p := newPlanner(parts, m)
	for _, b := range order {
		if why := p.fits(b, nil); why != "" {
			if risks := StopRisks(parts, []int32{b}, m); len(risks) > 0 {
				why = risks[0] // the rule's own words
			}
			return nil, fmt.Errorf("%w: stopping broker %d alone: %s", ErrNoBatches, b, why)
		}
	}
	left := slices.Clone(order)
	last := o.Last != nil && slices.Contains(order, *o.Last)
	if last {
		left = slices.DeleteFunc(left, func(b int32) bool { return b == *o.Last })
	}
	var out []Batch
	for _, group := range rackGroups(left, o.Racks) {
		out = append(out, p.greedy(group, o)...)
	}
	out = p.join(out, o)
	if last {
		out = p.withLast(out, *o.Last, o)
	}
	return out, nil
}

// withLast puts c (the controller) last in the last batch: it joins, last,
// the first batch the rule allows it with, whole (and Max does) — its
// rack's batches first, the latest first, then the others — and that
// batch moves to the end of the roll. A batch that does not allow it:
// c alone and last, as one at a time.
func (p *planner) withLast(bs []Batch, c int32, o BatchOptions) []Batch {
	rack := o.Racks[c]
	var tries []int
	for _, own := range []bool{true, false} {
		for k := len(bs) - 1; k >= 0; k-- {
			if slices.ContainsFunc(bs[k].Brokers, func(b int32) bool { return o.Racks[b] == rack }) == own {
				tries = append(tries, k)
			}
		}
	}
	first := ""
	for _, k := range tries {
		b := bs[k]
		if o.Max > 0 && len(b.Brokers) >= o.Max {
			continue
		}
		for _, id := range b.Brokers {
			p.count(id)
		}
		refused := p.fits(c, b.Brokers)
		clear(p.stopped)
		if refused != "" {
			if first == "" {
				first = refused
			}
			continue
		}
		why := "the controller: last in its batch, stopped once the others are gone, so it moves once; " + p.keeps(c, b.Brokers)
		if i := slices.IndexFunc(b.Brokers, func(id int32) bool { return o.Racks[id] == rack }); rack != "" && i >= 0 {
			why += fmt.Sprintf("; rack %s, like broker %d", rack, b.Brokers[i])
		} else if rack != "" {
			why += fmt.Sprintf("; no batch of its rack %s allows it", rack)
		}
		b.Brokers = plus(b.Brokers, c)
		b.Why[c] = why
		return append(slices.Delete(slices.Clone(bs), k, k+1), b)
	}
	why := "the controller: alone and last"
	if first != "" {
		why += "; no batch allows it: " + first
	}
	return append(bs, Batch{Brokers: []int32{c}, Why: map[int32]string{c: why}})
}

// rackGroups splits brokers (in roll order) by rack, the racks in the order
// their first broker comes; brokers without a rack are one group, in its
// place. No racks at all: one group.
func rackGroups(brokers []int32, racks map[int32]string) [][]int32 {
	var out [][]int32
	at := map[string]int{}
	for _, b := range brokers {
		r := racks[b]
		i, ok := at[r]
		if !ok {
			i = len(out)
			at[r] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], b)
	}
	return out
}

// planner applies the rule to a batch being built: per partition, how many
// of its in-sync replicas the batch stops.
type planner struct {
	parts   []Partition
	m       MinISR
	isrOf   map[int32][]int // broker → the partitions it is an in-sync replica of
	stopped []int
	// refused is the first batch a broker could not join, and why.
	refused map[int32]string
}

func newPlanner(parts []Partition, m MinISR) *planner {
	p := &planner{parts: parts, m: m, isrOf: map[int32][]int{}, stopped: make([]int, len(parts)), refused: map[int32]string{}}
	for i, part := range parts {
		for _, r := range part.ISR {
			p.isrOf[r] = append(p.isrOf[r], i)
		}
	}
	return p
}

// fits says why c cannot join batch (whose stops are counted), or "".
func (p *planner) fits(c int32, batch []int32) string {
	for _, i := range p.isrOf[c] {
		part := p.parts[i]
		minISR := p.m.Of(part.Topic)
		switch left := len(part.ISR) - p.stopped[i] - 1; {
		case Unavoidable(part, minISR) && p.stopped[i] > 0:
			return fmt.Sprintf("%s (replication factor %d, min.insync.replicas %d) would lose two in-sync replicas with brokers %v", part.Key(), len(part.Replicas), minISR, plus(batch, c))
		case !Unavoidable(part, minISR) && left == 0:
			return fmt.Sprintf("%s would go offline with brokers %v: isr %v", part.Key(), plus(batch, c), part.ISR)
		case !Unavoidable(part, minISR) && left < minISR:
			return fmt.Sprintf("%s would fall below min.insync.replicas=%d with brokers %v: isr %v", part.Key(), minISR, plus(batch, c), part.ISR)
		}
	}
	return ""
}

// keeps is why c is in a batch with brokers batch.
func (p *planner) keeps(c int32, batch []int32) string {
	return fmt.Sprintf("stopping it with brokers %v keeps each of its %d in-sync partitions online and at min.insync.replicas", batch, len(p.isrOf[c]))
}

// count adds b's stops to the batch being built.
func (p *planner) count(b int32) {
	for _, i := range p.isrOf[b] {
		p.stopped[i]++
	}
}

// greedy splits one group (one rack's brokers, in roll order) into
// batches: each starts with the first broker left, and the others join in
// order while the rule allows.
func (p *planner) greedy(group []int32, o BatchOptions) []Batch {
	var out []Batch
	left := slices.Clone(group)
	for len(left) > 0 {
		first := left[0]
		rack := o.Racks[first]
		batch := []int32{first}
		why := map[int32]string{first: "first of the brokers left in the roll order"}
		if rack != "" {
			why[first] = fmt.Sprintf("first of rack %s's brokers left in the roll order", rack)
		}
		if r, ok := p.refused[first]; ok {
			why[first] += "; " + r
		}
		p.count(first)
		for _, c := range left[1:] {
			if o.Max > 0 && len(batch) >= o.Max {
				break
			}
			if r := p.fits(c, batch); r != "" {
				if _, ok := p.refused[c]; !ok {
					p.refused[c] = fmt.Sprintf("not in a batch with brokers %v: %s", batch, r)
				}
				continue
			}
			w := p.keeps(c, batch)
			if rack != "" {
				w += fmt.Sprintf("; rack %s, like broker %d", rack, first)
			}
			if r, ok := p.refused[c]; ok {
				w += "; " + r
			}
			why[c] = w
			batch = append(batch, c)
			p.count(c)
		}
		clear(p.stopped)
		out = append(out, Batch{Brokers: batch, Why: why})
		left = slices.DeleteFunc(left, func(b int32) bool { return slices.Contains(batch, b) })
	}
	return out
}

// join lets a later batch join an earlier one, whole, where the rule
// allows the two together (and Max does): fewer batches, each rack's own
// batches kept whole.
func (p *planner) join(bs []Batch, o BatchOptions) []Batch {
	var out []Batch
	for _, b := range bs {
		joined := false
		for k := range out {
			into := &out[k]
			if o.Max > 0 && len(into.Brokers)+len(b.Brokers) > o.Max {
				continue
			}
			for _, id := range into.Brokers {
				p.count(id)
			}
			ok := true
			var added []int32
			for _, c := range b.Brokers {
				if p.fits(c, plus(into.Brokers, added...)) != "" {
					ok = false
					break
				}
				added = append(added, c)
				p.count(c)
			}
			clear(p.stopped)
			if !ok {
				continue
			}
			for _, c := range b.Brokers {
				why := p.keeps(c, into.Brokers)
				if rack := o.Racks[c]; rack != "" {
					why += fmt.Sprintf("; joined with its rack %s's batch %v, one batch fewer", rack, b.Brokers)
				}
				into.Why[c] = why
			}
			into.Brokers = append(into.Brokers, b.Brokers...)
			joined = true
			break
		}
		if !joined {
			out = append(out, b)
		}
	}
	return out
}

// plus is batch with c, for a why.
func plus(batch []int32, c ...int32) []int32 { return append(slices.Clone(batch), c...) }

// SetRisks is the one rule applied to a set of brokers stopped at once,
// as a batch roll checks it right before the batch stops: StopRisks on the
// whole set, and every partition no restart can keep available
// (Unavoidable) that would lose more than one in-sync replica to it — one
// broker at a time takes it out of service for a restart, two at once can
// take it offline where one would only refuse acks=all writes. Sorted.
func SetRisks(parts []Partition, set []int32, m MinISR) []string {
	out := StopRisks(parts, set, m)
	if len(set) < 2 {
		return out
	}
	for _, p := range parts {
		minISR := m.Of(p.Topic)
		if p.Leader < 0 || !Unavoidable(p, minISR) {
			continue
		}
		var hit []int32
		for _, r := range p.ISR {
			if slices.Contains(set, r) {
				hit = append(hit, r)
			}
		}
		if len(hit) > 1 {
			out = append(out, fmt.Sprintf("%s (replication factor %d, min.insync.replicas %d) would lose %d in-sync replicas at once with brokers %v", p.Key(), len(p.Replicas), minISR, len(hit), set))
		}
	}
	slices.Sort(out)
	return out
}
