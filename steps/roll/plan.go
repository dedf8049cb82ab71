package roll

// This file holds the planning: what this run's history says is left of
// each node's restart, the order, the refusals, and each node's actions
// with the facts and notes the plan says.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// left is what is left of one node's restart.
type left int

const (
	leftDone      left = iota // restarted and gated (this run)
	leftGate                  // a new process started by this run: only the gate is left
	leftStart                 // this run stopped it: start, then the gate
	leftFull                  // still the process the roll began with
	leftUntouched             // down, and not by this run: refused
	leftDownAgain             // restarted by this run, down again: refused
)

// progress is what this run's history says it did to one node in this
// step: stop and start begun (their outcome may be unknown), the gate
// passed, the start command ended well.
type progress struct{ stopped, started, startOK, gated bool }

// history reads the step's roller actions by phase and node. A step begun
// by a kremedy that named sub-actions only by their IDs has actions but no
// phase: it is refused, never guessed.
func (r *Roll) history(env *steps.Env) (map[int32]progress, error) {
	recs := env.History().Actions(env.Step().ID)
	out := map[int32]progress{}
	typed := 0
	for _, rec := range recs {
		a, err := steps.ArgsOf[Args](rec.Action)
		if err != nil || a.Phase == phaseNone {
			continue
		}
		typed++
		ok := rec.Ended && rec.OK
		for _, n := range a.Nodes() {
			p := out[n]
			switch a.Phase {
			case PhaseStop:
				p.stopped = true
			case PhaseStart:
				p.started, p.startOK = true, p.startOK || ok
			case PhaseGate:
				p.gated = p.gated || ok
			}
			out[n] = p
		}
	}
	if len(recs) > 0 && typed == 0 {
		return nil, fmt.Errorf("%w: step %s was begun by an earlier kremedy whose journal names a roll's sub-actions only by their IDs; resume it with that version (the run's kremedy_version in its journal), or check every %s by hand and start a new run. Nothing was done", steps.ErrRefused, env.Step().ID, r.Nodes.Noun())
	}
	return out, nil
}

// order is the nodes to restart: Roll.First first, then the others
// ascending, the last one last (when it is not among the first).
func (r *Roll) order(ctx context.Context, env *steps.Env) ([]int32, int32, string, error) {
	var all []int32
	for _, h := range r.Nodes.Hosts(env) {
		all = append(all, h.ID)
	}
	slices.Sort(all)
	ids := all
	if len(r.Only) > 0 {
		ids = nil
		for _, id := range r.Only {
			if !slices.Contains(all, id) {
				return nil, 0, "", fmt.Errorf("%w: %s %d is not in the inventory (its %ss are %s); nothing was changed", steps.ErrRefused, r.Nodes.Noun(), id, r.Nodes.Noun(), fmt.Sprint(all))
			}
			ids = append(ids, id)
		}
		slices.Sort(ids)
	}
	var first []int32
	for _, id := range r.First {
		if slices.Contains(ids, id) && !slices.Contains(first, id) {
			first = append(first, id)
		}
	}
	ids = slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return slices.Contains(first, id) })
	last, what := r.Nodes.Last(ctx, env)
	if slices.Contains(first, last) {
		last, what = -1, ""
	}
	if i := slices.Index(ids, last); i >= 0 {
		ids = append(append(slices.Clone(ids[:i]), ids[i+1:]...), last)
	}
	return append(first, ids...), last, what, nil
}

// left reads what is left of each node's restart.
func (r *Roll) left(ctx context.Context, env *steps.Env, ids []int32, prog map[int32]progress) (map[int32]left, map[int32]Look, error) {
	out, looks := map[int32]left{}, map[int32]Look{}
	for _, id := range ids {
		l, err := r.Nodes.Look(ctx, env, id)
		if err != nil {
			return nil, nil, err
		}
		looks[id] = l
		p := prog[id]
		switch {
		case p.gated && l.Up:
			out[id] = leftDone
		case p.gated:
			out[id] = leftDownAgain
		// Only this run's own start makes a new process count: a broker
		// re-registers under a new session after a session expiry too,
		// without restarting.
		case l.Up && p.started && l.New:
			out[id] = leftGate
		case l.Up:
			out[id] = leftFull
		case p.stopped:
			out[id] = leftStart
		default:
			out[id] = leftUntouched
		}
	}
	return out, looks, nil
}

// Plan plans what is left of the roll, read now: the nodes in order (a
// node this run left half-restarted first, the last one last), refused
// before the first stop when a node is down that this run did not stop or
// a stop would not be safe; each node's actions, one node at a time or in
// batches (Roll.Batch); and the notes on what clients see.
func (r *Roll) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := r.read(ctx, env)
	if err != nil {
		return nil, err
	}
	ids, snap := st.ids, st.snap
	noun := r.Nodes.Noun()
	lastText := ""
	if st.last >= 0 {
		lastText = fmt.Sprintf(" (%s, %d, last)", st.what, st.last)
	}
	p := &steps.Plan{Summary: fmt.Sprintf("restart %ss %s one at a time, in this order%s: each stopped with its own command, started again, and the cluster healthy before the next", noun, fmt.Sprint(ids), lastText)}
	if refusals := r.refusals(ids, st.lefts, snap); len(refusals) > 0 {
		return nil, fmt.Errorf("%w: %s. No %s was stopped", steps.ErrRefused, strings.Join(refusals, "; "), noun)
	}
	var unavail map[string][]brokers.Unavailable
	if snap != nil {
		unavail = snap.Unavailable(ids)
	}
	plans := map[int32]nodePlanned{}
	for _, id := range ids {
		fact, acts, err := r.nodePlan(ctx, env, id, st.lefts[id], st.looks[id], snap)
		if err != nil {
			return nil, err
		}
		plans[id] = nodePlanned{fact, acts}
		p.Facts = append(p.Facts, fact)
	}
	units := r.singles(ids, plans)
	if r.batching(snap) {
		var why []string
		if units, why, err = r.batches(ctx, env, ids, st.last, st.lefts, plans, snap); err != nil {
			return nil, err
		}
		p.Facts = append(why, p.Facts...)
		p.Summary = batchSummary(noun, units, st.last, st.what)
		p.Notes = append(p.Notes, r.batchNote())
	}
	pending := 0
	for k, u := range units {
		if len(u) == 1 {
			p.Actions = append(p.Actions, plans[u[0]].acts...)
		} else {
			p.Actions = append(p.Actions, r.batchActions(env, k+1, u, st.last, plans)...)
		}
		pending += len(u)
	}
	if pending == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("every %s of %s was restarted by this run already", noun, fmt.Sprint(ids))
		return p, nil
	}
	r.clientNotes(env, p, snap, unavail)
	return p, nil
}

// planState is what a plan starts from: the nodes in the order they
// restart (the last one last, a node this run left half-restarted first)
// and which one is last (-1 for none) and what it is, what is left of each
// node's restart and how each looks, and the Guard's snapshot (nil for a
// roll whose Nodes is no Guard).
type planState struct {
	ids   []int32
	last  int32
	what  string
	lefts map[int32]left
	looks map[int32]Look
	snap  *Snapshot
}

// read reads the state a plan starts from: the nodes' begin (Nodes.Begin),
// this run's history of the step, the order, each node's look, and the
// snapshot.
func (r *Roll) read(ctx context.Context, env *steps.Env) (*planState, error) {
	if err := r.Nodes.Begin(ctx, env); err != nil {
		return nil, err
	}
	prog, err := r.history(env)
	if err != nil {
		return nil, err
	}
	ids, last, what, err := r.order(ctx, env)
	if err != nil {
		return nil, err
	}
	lefts, looks, err := r.left(ctx, env, ids, prog)
	if err != nil {
		return nil, err
	}
	// A node this run stopped or started and has not gated yet (a resume)
	// goes first, whatever the order is now (the controller may have
	// moved); until it is back the others are short of it, so their stops
	// are checked right before each (the safe action), not here.
	slices.SortStableFunc(ids, func(a, b int32) int {
		first := func(id int32) bool { return lefts[id] == leftStart || lefts[id] == leftGate }
		switch {
		case first(a) && !first(b):
			return -1
		case first(b) && !first(a):
			return 1
		}
		return 0
	})
	var snap *Snapshot
	if g, ok := r.Nodes.(Guard); ok {
		if snap, err = g.Snapshot(ctx, env); err != nil {
			return nil, fmt.Errorf("%w. No %s was stopped", err, r.Nodes.Noun())
		}
	}
	return &planState{ids: ids, last: last, what: what, lefts: lefts, looks: looks, snap: snap}, nil
}

// clientNotes adds to a plan that restarts nodes what clients see: how a
// controller's or a broker's stop reaches them, and the partitions no
// restart can keep available that the operator accepted (in the summary
// too, so in the digest the approval signs).
func (r *Roll) clientNotes(env *steps.Env, p *steps.Plan, snap *Snapshot, unavail map[string][]brokers.Unavailable) {
	if snap != nil && snap.Quorum != nil {
		p.Notes = append(p.Notes, "a controller's stop moves no partition: while a follower is down the quorum commits with the others; when the leader stops (last) the voters elect another within a few seconds (controller.quorum.election.timeout.ms), and brokers and clients wait for it: metadata changes (topic creation, ISR changes) pause, produce and fetch go on")
	} else if snap != nil {
		p.Notes = append(p.Notes, "controlled shutdown moves each broker's leaderships away before it stops; clients retry NOT_LEADER_OR_FOLLOWER and reconnect, and producers with acks=all and retries lose nothing while every partition keeps min.insync.replicas")
	}
	if len(unavail) > 0 {
		// In the summary, so in the digest the approval signs.
		p.Summary += fmt.Sprintf("; accepting (%s=%s) that the partitions of %s no restart can keep available are out of service while their broker restarts", AcceptParam, strings.Join(r.Accept, ","), strings.Join(slices.Sorted(maps.Keys(unavail)), ", "))
		p.Notes = append(p.Notes, r.acceptedNote(env, unavail))
	}
}

// refusals says why the roll cannot go on: a node down that this run did
// not stop, or stopped and restarted already; and, unless a node this run
// stopped is still to come back (its absence shortens the ISRs, and the
// others' stops are then checked right before each), a cluster that is not
// whole or a stop that is not safe.
func (r *Roll) refusals(ids []int32, lefts map[int32]left, snap *Snapshot) []string {
	var out []string
	noun := r.Nodes.Noun()
	restoring := false
	for _, id := range ids {
		switch lefts[id] {
		case leftUntouched:
			hint := ""
			if noun == "broker" {
				hint = fmt.Sprintf(", or `kremedy lab broker start %d` on a lab", id)
			}
			out = append(out, fmt.Sprintf("%s %d is down (not %s) and this run did not stop it: start it first (its start command%s); a rolling restart begins with every %s up", noun, id, upWord(noun), hint, noun))
		case leftDownAgain:
			out = append(out, fmt.Sprintf("%s %d was restarted by this run and is down again: read its server log, start it, then resume (it is not restarted again)", noun, id))
		case leftStart, leftGate:
			restoring = true
		}
	}
	if snap == nil {
		return out
	}
	// The acceptance is checked on resume too: it is part of the plan.
	refusal, unaccepted := checkAccept(r.Accept, snap.Unavailable(ids))
	if refusal != "" {
		out = append(out, refusal)
	}
	if restoring {
		return out
	}
	if why := snap.Broken(); why != "" {
		out = append(out, "the cluster is not whole: "+why+"; a rolling restart starts from a cluster with every broker up and every partition fully in sync")
	}
	for _, id := range ids {
		if lefts[id] != leftFull {
			continue
		}
		if rs := snap.Risks(id, r.Accept); len(rs) > 0 {
			out = append(out, fmt.Sprintf("stopping %s %d now is not safe: %s", noun, id, text.Summarize(rs)))
		}
	}
	if len(unaccepted) > 0 {
		out = append(out, brokers.WayOut(unaccepted))
	}
	return out
}

// acceptedNote says, for the plan, which partitions no restart can keep
// available the operator accepted, what happens to them and for how long.
func (r *Roll) acceptedNote(env *steps.Env, unavail map[string][]brokers.Unavailable) string {
	var each []string
	for _, t := range slices.Sorted(maps.Keys(unavail)) {
		us := unavail[t]
		offline := 0
		for _, u := range us {
			if u.Offline {
				offline++
			}
		}
		what := fmt.Sprintf("acks=all writes refused on %s", text.Count(len(us), "partition"))
		if offline == len(us) {
			what = fmt.Sprintf("%s offline", text.Count(len(us), "partition"))
		} else if offline > 0 {
			what = fmt.Sprintf("%s offline, acks=all writes refused on %d more", text.Count(offline, "partition"), len(us)-offline)
		}
		each = append(each, fmt.Sprintf("%s (replication factor %d, min.insync.replicas %d): %s", t, us[0].Replicas, us[0].MinISR, what))
	}
	how := "each while its broker restarts"
	if d, id, ok := lastRestart(env); ok {
		how = fmt.Sprintf("each while its broker restarts — %s %d's restart in this run took %s from its stop to its return", r.Nodes.Noun(), id, d.Round(time.Second))
	}
	return fmt.Sprintf("ACCEPTED by %s=%s — no restart can keep these available: %s; %s", AcceptParam, strings.Join(r.Accept, ","), strings.Join(each, "; "), how)
}

// lastRestart is how long the last node this step restarted was out of
// service: from its stop's start to its gate's start (the gate begins as
// soon as it is back).
func lastRestart(env *steps.Env) (time.Duration, int32, bool) {
	stops := map[int32]time.Time{}
	var d time.Duration
	var id int32
	ok := false
	for _, rec := range env.History().Actions(env.Step().ID) {
		a, err := steps.ArgsOf[Args](rec.Action)
		if err != nil {
			continue
		}
		switch a.Phase {
		case PhaseStop:
			stops[a.Node] = rec.Started
		case PhaseGate:
			if t, seen := stops[a.Node]; seen {
				d, id, ok = rec.Started.Sub(t), a.Node, true
			}
		}
	}
	return d, id, ok
}

func upWord(noun string) string {
	if noun == "broker" {
		return "registered"
	}
	return "listening"
}

// nodePlan plans what is left of node id's restart, with the fact the
// plan says about it.
func (r *Roll) nodePlan(ctx context.Context, env *steps.Env, id int32, l left, look Look, snap *Snapshot) (string, []steps.Action, error) {
	noun := r.Nodes.Noun()
	switch l {
	case leftDone:
		return fmt.Sprintf("%s %d: restarted and gated in an earlier attempt of this run; not restarted again", noun, id), nil, nil
	case leftFull:
		why, err := r.skip(ctx, env, id)
		if err != nil {
			return "", nil, err
		}
		if why != "" {
			return fmt.Sprintf("%s %d: %s; not restarted", noun, id, why), nil, nil
		}
	}
	h := r.host(env, id)
	args := Args{Node: id, Addr: look.Addr}
	act := func(ph Phase, op steps.Op, timeout time.Duration) steps.Action {
		a := args
		a.Phase = ph
		target, detail := r.Nodes.Plain(env, ph, a, timeout)
		return Action(ph, id, look.Addr, op, target, detail)
	}
	on := fmt.Sprintf("%s %d on %s", noun, id, h.On())
	gate := act(PhaseGate, steps.OpWait, 0)
	if l == leftGate {
		return fmt.Sprintf("%s %d: started by an earlier attempt of this run and a new process now; only its health gate is left", noun, id), []steps.Action{gate}, nil
	}
	var acts []steps.Action
	fact := fmt.Sprintf("%s %d: stopped by an earlier attempt of this run; it is started, not stopped again", noun, id)
	if l == leftFull {
		fact = fmt.Sprintf("%s %d: restarted", noun, id)
		switch {
		case snap != nil && snap.Quorum != nil:
			fact = quorumLoss(snap, id)
			if env.Target.Combined(id) {
				fact += "; a combined node, so also " + losses(snap, id)
			}
			acts = append(acts, act(PhaseSafe, steps.OpCheck, 0))
		case snap != nil:
			fact = losses(snap, id)
			acts = append(acts, act(PhaseSafe, steps.OpCheck, 0))
		}
		acts = append(acts,
			Action(PhaseStop, id, look.Addr, steps.OpSSH, on, h.Stop),
			act(PhaseGone, steps.OpWait, r.StopTimeout))
	}
	if r.While != nil {
		while, wfact, err := r.While.Plan(ctx, env, id)
		if err != nil {
			return "", nil, err
		}
		for _, w := range while {
			if _, isRoll := w.Args.(Args); isRoll || w.Broker != id {
				return "", nil, fmt.Errorf("roll: while-stopped action %s of %s %d must carry its own args and name the node", w.ID, noun, id)
			}
		}
		acts = append(acts, while...)
		if wfact != "" {
			fact += "; " + wfact
		}
	}
	acts = append(acts,
		Action(PhaseStart, id, look.Addr, steps.OpSSH, on, h.Start),
		act(PhaseBack, steps.OpWait, r.StartTimeout),
		gate)
	return fact, acts, nil
}

// quorumLoss says, for the plan, what controller id's restart leaves of
// the metadata quorum (never less than a majority caught up: Plan refuses
// otherwise).
func quorumLoss(s *Snapshot, id int32) string {
	m := s.Margin
	if !slices.ContainsFunc(s.Quorum.Voters, func(v ports.Voter) bool { return v.ID == id }) {
		return fmt.Sprintf("controller %d: not a voter of the quorum; its restart costs the quorum nothing", id)
	}
	role := "a follower"
	if s.Quorum.Leader == id {
		role = "the leader: the voters elect another when it stops"
	}
	return fmt.Sprintf("controller %d: %s; while it restarts %d of %d voters stay caught up, the quorum needs %d", id, role, m.CaughtUp-1, m.Voters, m.Majority)
}

// losses says, for the plan, what broker id's restart costs the other
// partitions: by topic, which lose an in-sync replica while it is down,
// how many it leads, and the fewest in-sync replicas they keep — never
// below min.insync.replicas (Plan refuses otherwise).
func losses(s *Snapshot, id int32) string {
	parts := slices.DeleteFunc(slices.Clone(s.Partitions), func(p brokers.Partition) bool { return brokers.Unavoidable(p, s.MinISR.Of(p.Topic)) })
	ls := brokers.Losses(parts, id, s.MinISR)
	var accepted string
	if us := brokers.Unavailables(s.Partitions, []int32{id}, s.MinISR); len(us) > 0 {
		each := make([]string, len(us))
		for i, u := range us {
			each[i] = u.String()
		}
		accepted = fmt.Sprintf("; ACCEPTED (%s), no restart can keep these available: %s", AcceptParam, text.Summarize(each))
	}
	if len(ls) == 0 {
		return fmt.Sprintf("broker %d: no other partition loses an in-sync replica while it restarts%s", id, accepted)
	}
	n, led := 0, 0
	var each []string
	for _, l := range ls {
		n, led = n+len(l.Partitions), led+l.Led
		each = append(each, l.String())
	}
	if len(each) > 12 {
		each = append(each[:12], fmt.Sprintf("and %d more topics", len(each)-12))
	}
	return fmt.Sprintf("broker %d: %d partitions lose an in-sync replica while it restarts (it leads %d: controlled shutdown moves those first), none below its min.insync.replicas: %s%s", id, n, led, strings.Join(each, "; "), accepted)
}
