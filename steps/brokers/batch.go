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
	// prefers brokers of its first broker's rack; the rule decides, never
	// the rack: nothing in Kafka enforces rack-aware placement (Strimzi
	// rejected rack batches for that reason).
	Racks map[int32]string
	// Last, when set and in the order, is alone in the last batch: the
	// controller (the active controller in KRaft). A pointer, because 0 is
	// a broker id.
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
// offline where one-at-a-time would not. Brokers join greedily in order,
// those of the first broker's rack tried first. The plan is a plan: the ISR
// moves while brokers restart, so the roll applies the rule again to each
// batch right before it stops it.
func Batches(parts []Partition, order []int32, m MinISR, o BatchOptions) ([]Batch, error) {
	if risks := StopRisks(parts, nil, m); len(risks) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoBatches, risks[0])
	}
	// The partitions each broker is an in-sync replica of, and per
	// partition how many in-sync replicas the batch being built stops.
	isrOf := map[int32][]int{}
	for i, p := range parts {
		for _, r := range p.ISR {
			isrOf[r] = append(isrOf[r], i)
		}
	}
	stopped := make([]int, len(parts))
	// fits says why c cannot join the batch, or "".
	fits := func(c int32, batch []int32) string {
		for _, i := range isrOf[c] {
			p := parts[i]
			minISR := m.Of(p.Topic)
			switch left := len(p.ISR) - stopped[i] - 1; {
			case Unavoidable(p, minISR) && stopped[i] > 0:
				return fmt.Sprintf("%s (replication factor %d, min.insync.replicas %d) would lose two in-sync replicas with brokers %v", p.Key(), len(p.Replicas), minISR, plus(batch, c))
			case !Unavoidable(p, minISR) && left == 0:
				return fmt.Sprintf("%s would go offline with brokers %v: isr %v", p.Key(), plus(batch, c), p.ISR)
			case !Unavoidable(p, minISR) && left < minISR:
				return fmt.Sprintf("%s would fall below min.insync.replicas=%d with brokers %v: isr %v", p.Key(), minISR, plus(batch, c), p.ISR)
			}
		}
		return ""
	}
	for _, b := range order {
		if why := fits(b, nil); why != "" {
			if risks := StopRisks(parts, []int32{b}, m); len(risks) > 0 {
				why = risks[0] // the rule's own words
			}
			return nil, fmt.Errorf("%w: stopping broker %d alone: %s", ErrNoBatches, b, why)
		}
	}
	var out []Batch
	left := slices.Clone(order)
	last := o.Last != nil && slices.Contains(order, *o.Last)
	if last {
		left = slices.DeleteFunc(left, func(b int32) bool { return b == *o.Last })
	}
	refused := map[int32]string{} // the first batch a broker could not join, and why
	for len(left) > 0 {
		first := left[0]
		batch := []int32{first}
		why := map[int32]string{first: "first of the brokers left in the roll order"}
		if r, ok := refused[first]; ok {
			why[first] += "; " + r
		}
		for _, i := range isrOf[first] {
			stopped[i]++
		}
		// Candidates: the first broker's rack first, then the rest, each
		// group in roll order.
		cands := left[1:]
		if rack := o.Racks[first]; rack != "" {
			var same, other []int32
			for _, c := range cands {
				if o.Racks[c] == rack {
					same = append(same, c)
				} else {
					other = append(other, c)
				}
			}
			cands = append(same, other...)
		}
		for _, c := range cands {
			if o.Max > 0 && len(batch) >= o.Max {
				break
			}
			if r := fits(c, batch); r != "" {
				if _, ok := refused[c]; !ok {
					refused[c] = fmt.Sprintf("not in batch %d: %s", len(out)+1, r)
				}
				continue
			}
			w := fmt.Sprintf("stopping it with brokers %v keeps each of its %d in-sync partitions online and at min.insync.replicas", batch, len(isrOf[c]))
			if rack := o.Racks[first]; rack != "" && o.Racks[c] == rack {
				w += fmt.Sprintf("; rack %s, like broker %d", rack, first)
			}
			if r, ok := refused[c]; ok {
				w += "; " + r
			}
			why[c] = w
			batch = append(batch, c)
			for _, i := range isrOf[c] {
				stopped[i]++
			}
		}
		clear(stopped)
		out = append(out, Batch{Brokers: batch, Why: why})
		left = slices.DeleteFunc(left, func(b int32) bool { return slices.Contains(batch, b) })
	}
	if last {
		out = append(out, Batch{Brokers: []int32{*o.Last}, Why: map[int32]string{*o.Last: "the controller: alone and last"}})
	}
	return out, nil
}

// plus is batch with c, for a why.
func plus(batch []int32, c int32) []int32 { return append(slices.Clone(batch), c) }

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
