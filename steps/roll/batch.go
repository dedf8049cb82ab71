package roll

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
)

// A batch roll (Roll.Batch) stops several brokers at once when, for every
// partition, stopping the whole batch keeps it online and at its
// min.insync.replicas — the one stop-safety rule applied to the set
// (brokers.Batches plans the batches from the live ISR, brokers.SetRisks
// checks each batch again right before it stops). A batch's actions are
// the same per-node actions as a roll one at a time, grouped by phase:
// one safety check for the set, the stops at once, the waits until they
// are gone, what While does on each, the starts at once, the waits until
// they are back, one health gate for the set. The journal reads the same
// by phase and node, so resume restarts no broker twice: the brokers a
// batch had stopped are started first, and the rest are batched again
// from the cluster as it is then.

// nodePlanned is one node's part of a plan: its fact and its actions (none
// when it needs no restart, or had it already).
type nodePlanned struct {
	fact string
	acts []steps.Action
}

// singles is the roll one node at a time: every node with actions is a
// unit of its own, in order.
func (r *Roll) singles(ids []int32, plans map[int32]nodePlanned) [][]int32 {
	var out [][]int32
	for _, id := range ids {
		if len(plans[id].acts) > 0 {
			out = append(out, []int32{id})
		}
	}
	return out
}

// batches groups the nodes with actions: the ones this run stopped or
// started and has not gated yet (a resume) first, together — their starts
// are all that is left of the batch they were in — then the others in
// batches the rule allows on the cluster read now, planned as if the first
// group were back in sync (the gate after it waits for that). It returns
// the units and, for the plan's facts, why each broker is in its batch.
func (r *Roll) batches(ctx context.Context, env *steps.Env, ids []int32, last int32, lefts map[int32]left, plans map[int32]nodePlanned, snap *Snapshot) ([][]int32, []string, error) {
	var resumed, full []int32
	for _, id := range ids {
		switch {
		case len(plans[id].acts) == 0:
		case lefts[id] == leftFull:
			full = append(full, id)
		default:
			resumed = append(resumed, id)
		}
	}
	var units [][]int32
	var facts []string
	if len(resumed) > 0 {
		units = append(units, resumed)
		facts = append(facts, fmt.Sprintf("batch 1: %ss %v, stopped by an earlier attempt of this run: started together first, then the health gate", r.Nodes.Noun(), resumed))
	}
	if len(full) == 0 {
		return units, facts, nil
	}
	o := brokers.BatchOptions{Max: max(r.Batch, 0)}
	if slices.Contains(full, last) {
		o.Last = &last
	}
	if rk, ok := r.Nodes.(Racker); ok {
		o.Racks = rk.Racks(ctx, env)
	}
	bs, err := brokers.Batches(healed(snap.Partitions, resumed), full, snap.MinISR, o)
	if err != nil {
		if errors.Is(err, brokers.ErrNoBatches) {
			return nil, nil, fmt.Errorf("%w: %v. No %s was stopped", steps.ErrRefused, err, r.Nodes.Noun())
		}
		return nil, nil, err
	}
	for _, b := range bs {
		units = append(units, b.Brokers)
		var each []string
		for _, id := range b.Brokers {
			each = append(each, fmt.Sprintf("%s %d: %s", r.Nodes.Noun(), id, b.Why[id]))
		}
		facts = append(facts, fmt.Sprintf("batch %d: %ss %v — %s", len(units), r.Nodes.Noun(), b.Brokers, strings.Join(each, "; ")))
	}
	return units, facts, nil
}

// healed is parts with the nodes of back in the ISR of every partition
// they are a replica of: the cluster the next batch will meet once the
// gate after them has passed.
func healed(parts []brokers.Partition, back []int32) []brokers.Partition {
	if len(back) == 0 {
		return parts
	}
	out := slices.Clone(parts)
	for i, p := range out {
		isr := slices.Clone(p.ISR)
		for _, b := range back {
			if slices.Contains(p.Replicas, b) && !slices.Contains(isr, b) {
				isr = append(isr, b)
			}
		}
		out[i].ISR = isr
	}
	return out
}

// batchSummary is a batch roll's plan summary: the batches in order (in
// the digest the approval signs).
func batchSummary(noun string, units [][]int32, last int32, what string) string {
	var each []string
	for _, u := range units {
		s := fmt.Sprint(u)
		switch {
		case what == "" || u[len(u)-1] != last:
		case len(u) == 1:
			s += fmt.Sprintf(" (%s, alone and last)", what)
		default:
			s += fmt.Sprintf(" (%s %d last: stopped once the others are gone)", what, last)
		}
		each = append(each, s)
	}
	return fmt.Sprintf("restart %ss in %d batches, in this order: %s — the %ss of a batch stopped together, each with its own command, started again, and the cluster healthy before the next batch", noun, len(units), strings.Join(each, ", "), noun)
}

// batchNote says how the batches were chosen and what is checked again.
func (r *Roll) batchNote() string {
	size := "the largest batches the rule allows (batch=auto)"
	if r.Batch > 1 {
		size = fmt.Sprintf("batches of at most %d (batch=%d)", r.Batch, r.Batch)
	}
	return fmt.Sprintf("%s: a batch holds brokers only when stopping all of them at once keeps every partition online and at its min.insync.replicas, counted from the live ISR read now (the one stop-safety rule applied to the set); a batch holds one broker.rack's brokers first, and batches of two racks join only where the rule allows them together and it saves a batch; the rule decides, never the rack (nothing in Kafka enforces rack-aware placement). The ISR moves while brokers restart: right before each batch stops the rule is read again on the whole batch, and a batch it no longer allows is not stopped (resume plans the batches again)", size)
}

// batchActions lays out batch k's actions by phase: one safety check for
// the brokers it stops, their stops, their waits until gone, each one's
// While actions, their starts, their waits until back, one health gate.
//
// The last node (the controller) in a batch stops after the others: Apply
// runs a phase's run of actions of one batch at once (group), so its stop
// and its wait until gone come after the others' waits, each a run of its
// own. Stopped at once with them, the controller would meet their
// controlled shutdowns while it resigns (they retry, or stop uncleanly),
// and ZooKeeper could elect one of them, which then stops too: the
// controller would move twice. Once they are gone it moves once, to a
// broker outside the batch. The safety check before the first stop still
// reads the rule on the whole batch, controller included; the starts are
// at once.
func (r *Roll) batchActions(env *steps.Env, k int, unit []int32, last int32, plans map[int32]nodePlanned) []steps.Action {
	byPhase := map[Phase][]steps.Action{}
	var lastDown []steps.Action // the last node's stop and wait until gone
	var while []steps.Action
	var safe, gated []int32
	var gate *steps.Action
	for _, id := range unit {
		for _, a := range plans[id].acts {
			args, ok := a.Args.(Args)
			if !ok {
				while = append(while, a)
				continue
			}
			args.Batch = k
			a.Args = args
			switch args.Phase {
			case PhaseSafe:
				safe = append(safe, id)
			case PhaseGate:
				gated = append(gated, id)
				if gate == nil {
					gate = &a
				}
			case PhaseStop, PhaseGone:
				if id == last {
					lastDown = append(lastDown, a)
					continue
				}
				byPhase[args.Phase] = append(byPhase[args.Phase], a)
			default:
				byPhase[args.Phase] = append(byPhase[args.Phase], a)
			}
		}
	}
	var out []steps.Action
	if len(safe) > 0 {
		out = append(out, r.setAction(env, PhaseSafe, k, safe))
	}
	out = append(out, byPhase[PhaseStop]...)
	out = append(out, byPhase[PhaseGone]...)
	out = append(out, lastDown...)
	out = append(out, while...)
	out = append(out, byPhase[PhaseStart]...)
	out = append(out, byPhase[PhaseBack]...)
	if gate != nil {
		g := r.setAction(env, PhaseGate, k, gated)
		out = append(out, g)
	}
	return out
}

// setAction is the action of phase ph done once for the nodes of set.
func (r *Roll) setAction(env *steps.Env, ph Phase, k int, set []int32) steps.Action {
	a := Args{Phase: ph, Node: set[0], Batch: k, Set: set}
	target, detail := r.Nodes.Plain(env, ph, a, 0)
	ids := make([]string, len(set))
	for i, id := range set {
		ids[i] = fmt.Sprint(id)
	}
	return steps.Action{ID: fmt.Sprintf("%s-%s", ph, strings.Join(ids, "+")), Op: phaseOp(ph), Broker: set[0], Target: target, Detail: detail, Args: a}
}

func phaseOp(ph Phase) steps.Op {
	switch ph {
	case PhaseSafe:
		return steps.OpCheck
	case PhaseStop, PhaseStart:
		return steps.OpSSH
	}
	return steps.OpWait
}

// group is the length of the run of actions from i that run at once: the
// stops, waits or starts of one phase of one batch.
func group(acts []steps.Action, i int) int {
	a, ok := acts[i].Args.(Args)
	if !ok || a.Batch == 0 || len(a.Set) > 0 {
		return 1
	}
	switch a.Phase {
	case PhaseStop, PhaseGone, PhaseStart, PhaseBack:
	default:
		return 1
	}
	n := 1
	for ; i+n < len(acts); n++ {
		b, ok := acts[i+n].Args.(Args)
		if !ok || b.Batch != a.Batch || b.Phase != a.Phase {
			break
		}
	}
	return n
}

// them is what a safety check stops: "it", or "them together" for a batch.
func them(a Args) string {
	if len(a.Set) > 1 {
		return "them together"
	}
	return "it"
}

// Racks are the brokers' broker.rack from their registrations.
func (z *ZooKeeperBrokers) Racks(ctx context.Context, env *steps.Env) map[int32]string {
	out := map[int32]string{}
	for _, id := range brokers.HostIDs(env.Target) {
		if reg, _, ok, err := brokers.Registration(ctx, env.ZK, id); err == nil && ok && reg.Rack != "" {
			out[id] = reg.Rack
		}
	}
	return out
}

// Racks are the brokers' broker.rack as the cluster describes them.
func (k *KafkaBrokers) Racks(ctx context.Context, env *steps.Env) map[int32]string {
	out := map[int32]string{}
	if cv, err := env.Kafka.DescribeCluster(ctx); err == nil {
		for _, b := range cv.Brokers {
			if b.Rack != "" {
				out[b.ID] = b.Rack
			}
		}
	}
	return out
}

var (
	_ Racker = (*ZooKeeperBrokers)(nil)
	_ Racker = (*KafkaBrokers)(nil)
)

// Batched says, for a kind's own plan summary, in which batches a plan
// restarts its nodes ("in 3 batches: [2 5], [3 6], [1]"); false when it
// restarts them one at a time.
func Batched(p *steps.Plan) (string, bool) {
	var units [][]int32
	batched := false
	key := 0
	for _, a := range p.Actions {
		args, ok := a.Args.(Args)
		if !ok {
			continue
		}
		k := args.Batch
		if k == 0 {
			k = -1 - int(args.Node)
		} else {
			batched = true
		}
		if len(units) == 0 || k != key {
			units, key = append(units, nil), k
		}
		u := &units[len(units)-1]
		for _, n := range args.Nodes() {
			if !slices.Contains(*u, n) {
				*u = append(*u, n)
			}
		}
	}
	if !batched {
		return "one at a time", false
	}
	each := make([]string, len(units))
	for i, u := range units {
		each[i] = fmt.Sprint(u)
	}
	return fmt.Sprintf("in %d batches: %s", len(units), strings.Join(each, ", ")), true
}
