package roll

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// Phase is what one roller action does to its node. Every roller action
// carries it in its Args: Apply switches on it, and the run's history is
// read by step, phase and node — never by the action's ID.
type Phase int

const (
	phaseNone  Phase = iota // not a roller action (a While action, another kind's record)
	PhaseSafe               // read right before the stop: may the node stop now (the one stop-safety rule)
	PhaseStop               // the node's own stop command, over SSH
	PhaseGone               // wait: the node is gone
	PhaseStart              // the node's own start command
	PhaseBack               // wait: it serves again, a new process
	PhaseGate               // the health gate before the next node
)

var phaseNames = [...]string{"", "safe", "stop", "gone", "start", "back", "gate"}

func (p Phase) String() string {
	if p <= phaseNone || int(p) >= len(phaseNames) {
		return fmt.Sprintf("Phase(%d)", int(p))
	}
	return phaseNames[p]
}

// MarshalText writes the phase's name (the journal stays readable).
func (p Phase) MarshalText() ([]byte, error) {
	if p <= phaseNone || int(p) >= len(phaseNames) {
		return nil, fmt.Errorf("roll: no phase %d", int(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText reads a phase's name.
func (p *Phase) UnmarshalText(b []byte) error {
	for i, n := range phaseNames {
		if i > 0 && n == string(b) {
			*p = Phase(i)
			return nil
		}
	}
	return fmt.Errorf("roll: unknown phase %q", b)
}

// Args are a roller action's typed arguments: its phase, its node, and
// the address its waits watch.
type Args struct {
	Phase Phase  `json:"phase"`
	Node  int32  `json:"node"`
	Addr  string `json:"addr,omitempty"`
	// Batch numbers the batch of a batch roll (1, 2, …; 0 when the node
	// rolls alone): the stops, waits and starts of one phase and batch
	// run at once.
	Batch int `json:"batch,omitempty"`
	// Set is the batch's nodes on the actions done once for all of them
	// (the safety check right before the stops, the health gate after).
	Set []int32 `json:"set,omitempty"`
}

// Nodes are the nodes the action is about: its Set, else its Node.
func (a Args) Nodes() []int32 {
	if len(a.Set) > 0 {
		return a.Set
	}
	return []int32{a.Node}
}

// Who names the action's nodes in a plan: "broker 3", "brokers [2 5]".
func (a Args) Who(noun string) string {
	if len(a.Set) > 1 {
		return fmt.Sprintf("%ss %v", noun, a.Set)
	}
	return fmt.Sprintf("%s %d", noun, a.Node)
}

// Action is the roller action of phase ph for node id (its ID, "stop-3",
// is for people and the journal; nothing dispatches on it).
func Action(ph Phase, id int32, addr string, op steps.Op, target, detail string) steps.Action {
	return steps.Action{ID: fmt.Sprintf("%s-%d", ph, id), Op: op, Broker: id, Target: target, Detail: detail, Args: Args{Phase: ph, Node: id, Addr: addr}}
}

// Look is how a node looks now.
type Look struct {
	// Up: it serves (registered in ZooKeeper; listening).
	Up bool
	// New: it is a new process since the roll began, as far as the kind
	// can tell (a new ZooKeeper session); a kind that cannot tell says Up.
	// Only a node this run started counts as restarted, whatever New says.
	New bool
	// Addr is where its waits watch it (its listener).
	Addr string
}

// Nodes is what differs between rolls — what is rolled and how a node is
// seen: ZooKeeperBrokers (brokers registered in ZooKeeper), KafkaBrokers
// (brokers seen only through Kafka's Metadata, as in a migration) and
// Controllers (KRaft controllers). A new kind of roll is a new Nodes.
type Nodes interface {
	// Noun names a node in messages: "broker", "controller".
	Noun() string
	// Hosts are the inventory's nodes of this kind (their stop and start
	// commands, hosts, addresses).
	Hosts(env *steps.Env) []ports.Host
	// Begin reads, the first time the roll plans, what later looks are
	// measured against (the ZooKeeper sessions), and loads it from the
	// run's history afterwards.
	Begin(ctx context.Context, env *steps.Env) error
	// Last is the node that goes last (the active controller, the quorum
	// leader) and what it is ("the controller"); -1 for none.
	Last(ctx context.Context, env *steps.Env) (int32, string)
	Look(ctx context.Context, env *steps.Env, id int32) (Look, error)
	// Wait waits for a's node to be gone (PhaseGone), back (PhaseBack,
	// within timeout) or for the health gate after it (PhaseGate).
	Wait(ctx context.Context, env *steps.Env, a Args, timeout time.Duration) error
	// Plain is what an action of phase ph (Safe, Gone, Back, Gate) says
	// in the plan: its target and detail.
	Plain(env *steps.Env, ph Phase, a Args, timeout time.Duration) (target, detail string)
	// Verify is the cluster after the roll: the health gate held (once,
	// when the engine is only re-checking).
	Verify(ctx context.Context, env *steps.Env) []steps.Check
}

// Guard is a Nodes that can read what a stop must not break. Rolls of
// brokers have one: each stop is planned only when the one stop-safety
// rule (brokers.StopRisks) allows it, and is read again right before it
// (the PhaseSafe action). A roll whose Nodes is no Guard has no safe
// action.
type Guard interface {
	Snapshot(ctx context.Context, env *steps.Env) (*Snapshot, error)
}

// Snapshot is the cluster as a Guard read it at one moment.
type Snapshot struct {
	// Problems say why the cluster is not whole besides its partitions (a
	// broker not registered, one that does not list another).
	Problems   []string
	Partitions []brokers.Partition
	MinISR     brokers.MinISR
	// Quorum is the KRaft metadata quorum a controller roll judges (nil
	// in a roll of brokers), Margin what each voter's stop leaves of it.
	Quorum *ports.Quorum
	Margin brokers.QuorumMargin
}

// Without is the snapshot without the partitions of topics (topics about
// to be deleted: their own partitions do not count).
func (s *Snapshot) Without(topics ...string) *Snapshot {
	c := *s
	c.Partitions = slices.DeleteFunc(slices.Clone(s.Partitions), func(p brokers.Partition) bool { return slices.Contains(topics, p.Topic) })
	return &c
}

// Broken says why the cluster is not whole: its problems, and the
// partitions already offline or under-replicated.
func (s *Snapshot) Broken() string {
	why := slices.Clone(s.Problems)
	if short := brokers.Short(s.Partitions); len(short) > 0 {
		why = append(why, "partitions already short: "+text.Summarize(short))
	}
	return strings.Join(why, "; ")
}

// Risks is what stopping node id now would break (the one rule), with the
// partitions no restart can keep available (brokers.Unavailables) that
// accept does not cover.
func (s *Snapshot) Risks(id int32, accept brokers.Accept) []string {
	rs := brokers.StopRisks(s.Partitions, []int32{id}, s.MinISR)
	if s.Quorum != nil {
		if r := s.Margin.StopRisk(*s.Quorum, id); r != "" {
			rs = append(rs, r)
		}
	}
	for _, u := range brokers.Unavailables(s.Partitions, []int32{id}, s.MinISR) {
		if !accept.Covers(u.Topic) {
			rs = append(rs, u.String()+": no restart can keep it available")
		}
	}
	slices.Sort(rs)
	return rs
}

// RisksOf is what stopping the nodes of set at once would break: Risks
// for one node, the one rule applied to the whole set for a batch
// (brokers.SetRisks), with the partitions no restart can keep available
// that accept does not cover.
func (s *Snapshot) RisksOf(set []int32, accept brokers.Accept) []string {
	if len(set) == 1 {
		return s.Risks(set[0], accept)
	}
	rs := brokers.SetRisks(s.Partitions, set, s.MinISR)
	for _, u := range brokers.Unavailables(s.Partitions, set, s.MinISR) {
		if !accept.Covers(u.Topic) {
			rs = append(rs, u.String()+": no restart can keep it available")
		}
	}
	slices.Sort(rs)
	return rs
}

// Unavailable lists, by topic, the partitions no restart can keep
// available that the roll of ids takes out of service (each while one of
// its brokers is down), each partition once.
func (s *Snapshot) Unavailable(ids []int32) map[string][]brokers.Unavailable {
	out := map[string][]brokers.Unavailable{}
	seen := map[string]int{}
	for _, id := range ids {
		for _, u := range brokers.Unavailables(s.Partitions, []int32{id}, s.MinISR) {
			if i, ok := seen[u.Key()]; ok {
				out[u.Topic][i].Offline = out[u.Topic][i].Offline || u.Offline
				continue
			}
			seen[u.Key()] = len(out[u.Topic])
			out[u.Topic] = append(out[u.Topic], u)
		}
	}
	return out
}

// AcceptParam is the runbook parameter that accepts the partitions no
// restart can keep available (Roll.Accept).
const AcceptParam = brokers.AcceptParam

// checkAccept refuses an acceptance that names a topic the roll lists no
// such partition of (a typo must not silently accept nothing), and says
// which topics are still not accepted.
func checkAccept(accept brokers.Accept, unavail map[string][]brokers.Unavailable) (refusal string, unaccepted []string) {
	listed := slices.Sorted(maps.Keys(unavail))
	stray := accept.Unlisted(listed)
	for _, t := range listed {
		if !accept.Covers(t) {
			unaccepted = append(unaccepted, t)
		}
	}
	if len(stray) > 0 {
		what := "the roll takes no partition out of service that no restart can keep available"
		if len(listed) > 0 {
			what = "the topics whose partitions no restart can keep available are " + strings.Join(listed, ", ")
		}
		refusal = fmt.Sprintf("%s=%s names %s, but %s: a typo must not accept nothing. Correct it (or leave it out)", AcceptParam, strings.Join(accept, ","), strings.Join(stray, ", "), what)
	}
	return refusal, unaccepted
}

// While is work a roll does on a node's host while the node is stopped
// (moving a topic's directories out of its log dirs, editing its config).
// Its actions carry its own typed args, never roll.Args; their IDs are
// WhileID's.
type While interface {
	// Plan lists node id's actions, read now (the node may run), and a
	// fact for the plan ("" for none).
	Plan(ctx context.Context, env *steps.Env, id int32) ([]steps.Action, string, error)
	// Apply performs them; the node is stopped (gone). A plan no longer
	// true is steps.ErrStalePlan: the roll is planned and confirmed again,
	// that node still stopped.
	Apply(ctx context.Context, env *steps.Env, id int32, acts []steps.Action) error
}

// Skipper is a While that can tell a node needs no restart at all (its
// config is already what the roll makes it): it says why, "" when the node
// must roll. It is asked only about nodes this run did not stop yet.
type Skipper interface {
	Skip(ctx context.Context, env *steps.Env, id int32) (string, error)
}

// WhileID is the ID of a While action of node id.
func WhileID(id int32, name string) string { return fmt.Sprintf("while-%d-%s", id, name) }

// Roll restarts nodes one at a time, the last one (the controller) last:
// for each, a safety check read right before its stop (a Guard's nodes), its
// own stop command over SSH, its wait until it is gone, what While does on
// its host while it is stopped, its start command, its wait until it is
// back, and the health gate before the next node. A node this run already
// touched goes first on resume, and no node is restarted twice in a run.
// Kinds embed it and may change its plan's summary and notes.
type Roll struct {
	Nodes Nodes
	// Only restricts the roll to these nodes; empty: every node Nodes lists.
	Only []int32
	// StopTimeout bounds a node's stop command and the wait until it is
	// gone; StartTimeout its start command and the wait until it is back.
	StopTimeout, StartTimeout time.Duration
	While                     While
	// Accept is the operator's acceptance (AcceptParam) of the partitions
	// no restart can keep available: they do not hold the roll back, and
	// the plan says what happens to them.
	Accept brokers.Accept
	// HealWait bounds how long a node's safety check, right before its
	// stop, waits for a cluster that is not whole or a stop that is not
	// safe yet (a replica fell behind) to heal, reading it again every
	// healEvery; 0 refuses at once. Past it the roll stops resumable.
	HealWait time.Duration
	// Batch is how many nodes stop at once: 0 or 1, one at a time;
	// BatchAuto, the largest batches the one stop-safety rule allows
	// (brokers.Batches, from the live ISR); N, at most N. Only a Guard's
	// rolls of brokers batch; controllers always roll one at a time.
	Batch int
}

// BatchAuto is Roll.Batch's "auto": the largest safe batches (a batch
// option's "auto" reads as it).
const BatchAuto = steps.BatchAuto

// BatchParam is the runbook parameter that sets Roll.Batch.
const BatchParam = "batch"

// batching reports whether the roll stops several nodes at once.
func (r *Roll) batching(snap *Snapshot) bool {
	return (r.Batch == BatchAuto || r.Batch > 1) && snap != nil && snap.Quorum == nil
}

// Racker is a Nodes that knows its nodes' broker.rack: a batch roll
// prefers the brokers of one rack in a batch (the rule decides, never the
// rack).
type Racker interface {
	Racks(ctx context.Context, env *steps.Env) map[int32]string
}

// healEvery is how often a waiting safety check reads the cluster again
// (on the run's clock: Env.Sleep).
const healEvery = 2 * time.Second

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

func (r *Roll) host(env *steps.Env, id int32) ports.Host {
	for _, h := range r.Nodes.Hosts(env) {
		if h.ID == id {
			return h
		}
	}
	return env.Target.Node(id)
}

// order is the nodes to restart, ascending, the last one last.
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
	last, what := r.Nodes.Last(ctx, env)
	if i := slices.Index(ids, last); i >= 0 {
		ids = append(append(slices.Clone(ids[:i]), ids[i+1:]...), last)
	}
	return ids, last, what, nil
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

func (r *Roll) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
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
	noun := r.Nodes.Noun()
	lastText := ""
	if last >= 0 {
		lastText = fmt.Sprintf(" (%s, %d, last)", what, last)
	}
	p := &steps.Plan{Summary: fmt.Sprintf("restart %ss %s one at a time, in this order%s: each stopped with its own command, started again, and the cluster healthy before the next", noun, fmt.Sprint(ids), lastText)}
	if refusals := r.refusals(ids, lefts, snap); len(refusals) > 0 {
		return nil, fmt.Errorf("%w: %s. No %s was stopped", steps.ErrRefused, strings.Join(refusals, "; "), noun)
	}
	var unavail map[string][]brokers.Unavailable
	if snap != nil {
		unavail = snap.Unavailable(ids)
	}
	plans := map[int32]nodePlanned{}
	for _, id := range ids {
		fact, acts, err := r.nodePlan(ctx, env, id, lefts[id], looks[id], snap)
		if err != nil {
			return nil, err
		}
		plans[id] = nodePlanned{fact, acts}
		p.Facts = append(p.Facts, fact)
	}
	units := r.singles(ids, plans)
	if r.batching(snap) {
		var why []string
		if units, why, err = r.batches(ctx, env, ids, last, lefts, plans, snap); err != nil {
			return nil, err
		}
		p.Facts = append(why, p.Facts...)
		p.Summary = batchSummary(noun, units, last, what)
		p.Notes = append(p.Notes, r.batchNote())
	}
	pending := 0
	for k, u := range units {
		if len(u) == 1 {
			p.Actions = append(p.Actions, plans[u[0]].acts...)
		} else {
			p.Actions = append(p.Actions, r.batchActions(env, k+1, u, plans)...)
		}
		pending += len(u)
	}
	if pending == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("every %s of %s was restarted by this run already", noun, fmt.Sprint(ids))
		return p, nil
	}
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
	return p, nil
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
		if s, ok := r.While.(Skipper); ok {
			why, err := s.Skip(ctx, env, id)
			if err != nil {
				return "", nil, err
			}
			if why != "" {
				return fmt.Sprintf("%s %d: %s; not restarted", noun, id, why), nil, nil
			}
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

// Apply performs the plan's actions in order: the roller's by their phase
// (the stops, waits and starts of one phase of a batch at once), a run of
// While actions of one node by While.
func (r *Roll) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	if err := r.Nodes.Begin(ctx, env); err != nil {
		return err
	}
	noun := r.Nodes.Noun()
	var done []int32
	for i := 0; i < len(p.Actions); i++ {
		a := p.Actions[i]
		id := a.Broker
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped before %s: %w; %s", a.ID, err, r.notYet(p, []int32{id}, done))
		}
		args, isRoll := a.Args.(Args)
		if !isRoll {
			n := 0
			for n < len(p.Actions)-i && p.Actions[i+n].Broker == id {
				if _, ok := p.Actions[i+n].Args.(Args); ok {
					break
				}
				n++
			}
			if r.While == nil {
				return fmt.Errorf("roll: action %s is no roller action, and nothing is done while a %s is stopped", a.ID, noun)
			}
			if err := r.While.Apply(ctx, env, id, p.Actions[i:i+n]); err != nil {
				return fmt.Errorf("%w; %s %d is stopped, %s", err, noun, id, r.notYet(p, r.batchOf(p, i), done))
			}
			i += n - 1
			continue
		}
		if n := group(p.Actions, i); n > 1 {
			acts := p.Actions[i : i+n]
			set := make([]int32, n)
			for j, b := range acts {
				set[j] = b.Broker
			}
			errs := par.Each(set, func(id int32) error {
				j := slices.Index(set, id)
				return r.do(ctx, env, p, acts[j], acts[j].Args.(Args), set, done)
			})
			if err := errors.Join(errs...); err != nil {
				return err
			}
			i += n - 1
			continue
		}
		if args.Phase == PhaseGate {
			done = append(done, args.Nodes()...)
		}
		if err := r.do(ctx, env, p, a, args, args.Nodes(), done); err != nil {
			return err
		}
	}
	return nil
}

// batchOf is the nodes of the batch action i belongs to (its node alone
// when it rolls alone).
func (r *Roll) batchOf(p *steps.Plan, i int) []int32 {
	k := 0
	for j := i; j >= 0 && k == 0; j-- {
		if a, ok := p.Actions[j].Args.(Args); ok {
			k = a.Batch
		}
	}
	if k == 0 {
		return []int32{p.Actions[i].Broker}
	}
	var out []int32
	for _, a := range p.Actions {
		if b, ok := a.Args.(Args); ok && b.Batch == k && !slices.Contains(out, a.Broker) && len(b.Set) == 0 {
			out = append(out, a.Broker)
		}
	}
	return out
}

// do performs one roller action; cur are the nodes in its batch (its node
// alone when it rolls alone), done the nodes gated before it.
func (r *Roll) do(ctx context.Context, env *steps.Env, p *steps.Plan, a steps.Action, args Args, cur, done []int32) error {
	noun := r.Nodes.Noun()
	id := args.Node
	not := func() string { return r.notYet(p, cur, done) }
	h := r.host(env, id)
	var err error
	switch args.Phase {
	case PhaseSafe:
		err = env.Do(a, func() error { return r.safeNow(ctx, env, args.Nodes(), not) })
	case PhaseStop:
		err = env.Do(a, func() error { return r.command(ctx, env, id, h.Stop, r.StopTimeout) })
		if code, ok := brokers.ExitStatus(err); ok {
			err = fmt.Errorf("%s %d's stop command exited %d: it is probably still running. %s. %s: %w", noun, id, code, not(), brokers.StuckStop(noun, id, h.Host), err)
		} else if err != nil {
			err = fmt.Errorf("stop %s %d: %w. Its state is unknown; %s", noun, id, err, not())
		}
	case PhaseGone:
		err = env.Do(a, func() error { return r.Nodes.Wait(ctx, env, args, r.StopTimeout) })
	case PhaseStart:
		err = env.Do(a, func() error { return r.command(ctx, env, id, h.Start, r.StartTimeout) })
		if err != nil {
			err = fmt.Errorf("%s %d did not start: %w (its log is on %s). It is down: fix the cause and resume, which starts it and goes on; %s", noun, id, err, h.Host, not())
		}
	case PhaseBack:
		err = env.Do(a, func() error { return r.Nodes.Wait(ctx, env, args, r.StartTimeout) })
	case PhaseGate:
		err = env.Do(a, func() error { return r.Nodes.Wait(ctx, env, args, 0) })
		if err != nil {
			err = fmt.Errorf("%w; %s restarted, %s", err, args.Who(noun), r.notYet(p, nil, done))
		}
	default:
		err = fmt.Errorf("roll: action %s has no phase the roller knows (%v)", a.ID, args.Phase)
	}
	return err
}

func (r *Roll) command(ctx context.Context, env *steps.Env, id int32, cmd string, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return RunOn(cctx, env, id, cmd)
}

// safeNow refuses the stop of the nodes of set (one node, or a batch)
// unless the cluster is whole and stopping all of them leaves every
// partition online and at min.insync.replicas, read now. A
// cluster that is not so yet is read again every healEvery for up to
// HealWait (a replica that fell behind catches up), with progress; only
// then is the stop refused, the roll resumable.
func (r *Roll) safeNow(ctx context.Context, env *steps.Env, set []int32, not func() string) error {
	g, ok := r.Nodes.(Guard)
	if !ok {
		return nil
	}
	who := Args{Node: set[0], Set: set}.Who(r.Nodes.Noun())
	if len(set) > 1 {
		who += " together"
	}
	start := env.Now()
	var why string
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		s, err := g.Snapshot(ctx, env)
		if err != nil {
			return fmt.Errorf("%w; %s was not stopped, %s", err, who, not())
		}
		why = ""
		if w := s.Broken(); w != "" {
			why = "the cluster is not whole (" + w + ")"
		} else if rs := s.RisksOf(set, r.Accept); len(rs) > 0 {
			why = "stopping it now is not safe: " + text.Summarize(rs)
		}
		if why == "" {
			if waited := env.Now().Sub(start); waited >= healEvery {
				env.Logf("%s may stop: the cluster healed after %s", who, waited.Round(time.Second))
			}
			return nil
		}
		waited := env.Now().Sub(start)
		if waited >= r.HealWait {
			break
		}
		if stop == nil {
			env.Logf("%s is not stopped yet: %s — waiting up to %s for the cluster to heal", who, why, r.HealWait)
			stop = env.ProgressEvery(5*time.Second, func() string {
				return fmt.Sprintf("waiting for the cluster to heal before stopping %s: %s of at most %s", who, env.Now().Sub(start).Round(time.Second), r.HealWait)
			})
		}
		if err := env.Sleep(ctx, healEvery); err != nil {
			return fmt.Errorf("stopped while waiting for the cluster to heal before stopping %s: %w; it was not stopped, %s", who, err, not())
		}
	}
	waited := ""
	if r.HealWait > 0 {
		waited = fmt.Sprintf(" after waiting %s for it to heal", r.HealWait)
	}
	again := fmt.Sprintf("it goes on with this %s", r.Nodes.Noun())
	if len(set) > 1 {
		again = "it plans the batches again from the cluster as it is then"
	}
	return fmt.Errorf("%w: %s was not stopped%s: %s. Fix it (or wait) and resume the run: %s; %s", steps.ErrRefused, who, waited, why, again, not())
}

// notYet says which nodes of the plan have not been restarted yet, besides
// cur (the nodes being restarted) and done.
func (r *Roll) notYet(p *steps.Plan, cur, done []int32) string {
	var rest []int32
	for _, a := range p.Actions {
		if !slices.Contains(cur, a.Broker) && !slices.Contains(done, a.Broker) && !slices.Contains(rest, a.Broker) {
			rest = append(rest, a.Broker)
		}
	}
	if len(rest) == 0 {
		return fmt.Sprintf("no other %s is left", r.Nodes.Noun())
	}
	return fmt.Sprintf("%ss %s were not touched", r.Nodes.Noun(), fmt.Sprint(rest))
}

// Verify: every node of the roll that had to restart was started by this
// run and runs as a new process, and the cluster is healthy (Nodes.Verify).
func (r *Roll) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if err := r.Nodes.Begin(ctx, env); err != nil {
		return nil, err
	}
	prog, err := r.history(env)
	if err != nil {
		return nil, err
	}
	ids, _, _, err := r.order(ctx, env)
	if err != nil {
		return nil, err
	}
	var same []string
	for _, id := range ids {
		if !prog[id].stopped {
			if s, ok := r.While.(Skipper); ok {
				why, err := s.Skip(ctx, env, id)
				if err != nil {
					return nil, err
				}
				if why != "" {
					continue
				}
			}
		}
		l, err := r.Nodes.Look(ctx, env, id)
		if err != nil {
			return nil, err
		}
		if !prog[id].startOK || !l.New {
			same = append(same, fmt.Sprintf("%s %d", r.Nodes.Noun(), id))
		}
	}
	restarted := steps.Check{Name: fmt.Sprintf("every %s of the roll was started by this run and runs as a new process", r.Nodes.Noun()), OK: len(same) == 0, Detail: "not restarted: " + text.Summarize(same)}
	return append([]steps.Check{restarted}, r.Nodes.Verify(ctx, env)...), nil
}

// Rollable says why a roll of every node could not begin now, "" when it
// could, leaving out the topics of skip (about to be deleted: their own
// partitions do not count). A runbook that rolls asks it before it changes anything, so
// that a roll is refused up front, not half-way.
func (r *Roll) Rollable(ctx context.Context, env *steps.Env, skip ...string) (string, error) {
	g, ok := r.Nodes.(Guard)
	if !ok {
		return "", nil
	}
	s, err := g.Snapshot(ctx, env)
	if err != nil {
		return "", err
	}
	if len(skip) > 0 {
		s = s.Without(skip...)
	}
	var why []string
	if w := s.Broken(); w != "" {
		why = append(why, "the cluster is not whole: "+w)
	}
	var ids []int32
	for _, h := range r.Nodes.Hosts(env) {
		ids = append(ids, h.ID)
		if rs := s.Risks(h.ID, r.Accept); len(rs) > 0 {
			why = append(why, fmt.Sprintf("stopping %s %d would not be safe: %s", r.Nodes.Noun(), h.ID, text.Summarize(rs)))
		}
	}
	refusal, unaccepted := checkAccept(r.Accept, s.Unavailable(ids))
	if refusal != "" {
		why = append(why, refusal)
	}
	if len(unaccepted) > 0 {
		why = append(why, brokers.WayOut(unaccepted))
	}
	return strings.Join(why, "; "), nil
}

// Began reports whether this step, in any attempt of the run, began the
// roller action of phase ph for node id (read by phase and node, from the
// journal).
func Began(env *steps.Env, ph Phase, id int32) bool {
	for _, rec := range env.History().Actions(env.Step().ID) {
		if a, err := steps.ArgsOf[Args](rec.Action); err == nil && a.Phase == ph && a.Node == id {
			return true
		}
	}
	return false
}
