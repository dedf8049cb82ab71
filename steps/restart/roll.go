package restart

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// roll is the rolling-restart kind: a Roll of the brokers its options
// name.
type roll struct{ Roll }

func newRoll(o rollOpts) *roll {
	return &roll{Roll{Key: "restart/sessions", Brokers: o.Brokers, StopTimeout: o.StopTimeout, StartTimeout: o.StartTimeout,
		HealthChecks: o.HealthChecks, HealthTimeout: o.HealthTimeout}}
}

// Roll restarts brokers one at a time, the controller last: for each, a
// safety check (the cluster whole, and stopping it leaves every partition
// online and at or above min.insync.replicas), its own stop command over
// SSH, its registration gone and port closed, what While does on its host
// while it is stopped, its start command, its registration back under a new
// ZooKeeper session, and the health gate before the next broker. A kind
// embeds it to restart brokers; its Plan, Apply and Verify are the kind's.
type Roll struct {
	// Key names the run fact holding the brokers' ZooKeeper sessions when
	// the roll first planned: a broker this run started is a new process
	// when its session differs.
	Key string
	// Brokers to restart; empty: every broker of the inventory.
	Brokers []int32
	// StopTimeout bounds a broker's stop command and the wait for its
	// registration to vanish; StartTimeout its start command and the wait
	// for its new registration.
	StopTimeout, StartTimeout time.Duration
	// The health gate after each broker: HealthChecks healthy rounds in a
	// row, one a second, within HealthTimeout.
	HealthChecks  int
	HealthTimeout time.Duration
	// While, when set, is work done on each broker's host while it is
	// stopped (moving a topic's directories out of its log dirs).
	While While
}

// While is work a Roll does on a broker's host while the broker is
// stopped. Its actions' IDs start with "while-<broker>-".
type While interface {
	// Plan lists the actions for broker id, read now (the broker may run).
	Plan(ctx context.Context, env *steps.Env, id int32) ([]steps.Action, error)
	// Apply performs them; the broker is stopped (its registration gone,
	// its port closed). A plan no longer true is steps.ErrStalePlan: the
	// roll is planned and confirmed again, that broker still stopped.
	Apply(ctx context.Context, env *steps.Env, id int32, acts []steps.Action) error
}

// WhileID is the ID of a While action of broker id.
func WhileID(id int32, name string) string { return fmt.Sprintf("while-%d-%s", id, name) }

// rollOpts are the rolling-restart kind's options.
type rollOpts struct {
	// Brokers to restart; empty: every broker of the inventory.
	Brokers []int32 `opt:"brokers"`
	// StopTimeout bounds a broker's stop command and the wait for its
	// registration to vanish; StartTimeout its start command and the wait
	// for its new registration.
	StopTimeout  time.Duration `opt:"stop_timeout"`
	StartTimeout time.Duration `opt:"start_timeout"`
	// The health gate after each broker: Checks healthy rounds in a row,
	// one a second, within Timeout.
	HealthChecks  int           `opt:"health_checks"`
	HealthTimeout time.Duration `opt:"health_timeout"`
}

// unit says what is left of one broker's restart.
type unit int

const (
	unitDone      unit = iota // restarted and gated (an earlier attempt)
	unitGate                  // a new process already: only the gate is left
	unitStart                 // this run stopped it: start, then the gate
	unitFull                  // still the process the roll began with
	unitUntouched             // down, and not by this run: refused
	unitDownAgain             // restarted by this run, down again: refused
)

// brokerArgs name the broker an action is about.
type brokerArgs struct {
	Broker  int32  `json:"broker"`
	Addr    string `json:"addr,omitempty"`
	Session int64  `json:"session,omitempty"` // its registration's session when the roll began
}

// sessions are the brokers' ZooKeeper sessions when the roll first
// planned, saved in the run's history then: every later plan, apply and
// resume measures "a new process" against them.
func (k *Roll) sessions(ctx context.Context, env *steps.Env) (map[int32]int64, error) {
	var s map[int32]int64
	if ok, err := env.Load(k.Key, &s); err != nil || ok {
		return s, err
	}
	s = map[int32]int64{}
	for _, id := range brokers.HostIDs(env.Target) {
		_, session, ok, err := brokers.Registration(ctx, env.ZK, id)
		if err != nil {
			return nil, err
		}
		if ok {
			s[id] = session
		}
	}
	return s, env.Save(k.Key, s)
}

// order is the brokers to restart, ascending, the controller last.
func (k *Roll) order(env *steps.Env, ctrl int32) ([]int32, error) {
	inv := brokers.HostIDs(env.Target)
	ids := inv
	if len(k.Brokers) > 0 {
		ids = nil
		for _, id := range k.Brokers {
			if !slices.Contains(inv, id) {
				return nil, fmt.Errorf("%w: broker %d is not in the inventory (its brokers are %s); nothing was changed", steps.ErrRefused, id, brokers.I32s(inv))
			}
			ids = append(ids, id)
		}
		slices.Sort(ids)
	}
	if i := slices.Index(ids, ctrl); i >= 0 {
		ids = append(append(slices.Clone(ids[:i]), ids[i+1:]...), ctrl)
	}
	return ids, nil
}

// state reads what is left of each broker's restart, from the cluster and
// the run's history.
func (k *Roll) state(ctx context.Context, env *steps.Env, sessions map[int32]int64, ids []int32) (map[int32]unit, error) {
	hist := env.History().Actions(env.Step().ID)
	did := func(id string) (started, ok bool) {
		for _, a := range hist {
			if a.Action.ID == id {
				started, ok = true, ok || a.Ended && a.OK
			}
		}
		return
	}
	out := map[int32]unit{}
	for _, id := range ids {
		_, session, registered, err := brokers.Registration(ctx, env.ZK, id)
		if err != nil {
			return nil, err
		}
		stopped, _ := did(fmt.Sprintf("stop-%d", id))
		started, _ := did(fmt.Sprintf("start-%d", id))
		_, gated := did(fmt.Sprintf("gate-%d", id))
		switch {
		case gated && registered:
			out[id] = unitDone
		case gated:
			out[id] = unitDownAgain
		// Only this run's own start makes a new process count: a broker
		// re-registers under a new session after a session expiry too,
		// without restarting.
		case registered && started && session != sessions[id]:
			out[id] = unitGate
		case registered:
			out[id] = unitFull
		case stopped:
			out[id] = unitStart
		default:
			out[id] = unitUntouched
		}
	}
	return out, nil
}

// restarted reports whether broker id was started by this run and runs
// now as a new process (its registration's session is not the one the
// roll began with).
func restarted(ctx context.Context, env *steps.Env, sessions map[int32]int64, id int32) (bool, error) {
	started := false
	for _, a := range env.History().Actions(env.Step().ID) {
		if a.Action.ID == fmt.Sprintf("start-%d", id) && a.Ended && a.OK {
			started = true
		}
	}
	_, session, registered, err := brokers.Registration(ctx, env.ZK, id)
	return started && registered && session != sessions[id], err
}

// safety is what a broker's stop must not break, read at one moment: the
// cluster must be whole (every inventory broker registered, no partition
// offline or under-replicated), and stopping the broker must leave every
// partition online and at or above min.insync.replicas.
type safety struct {
	st     *kafkazk.ClusterState
	down   []int32 // inventory brokers not registered
	short  []string
	minISR int
}

// readSafety reads ZooKeeper's view of every partition and the brokers'
// default min.insync.replicas. A default no broker reports is an error: the
// check does not guess.
func readSafety(ctx context.Context, env *steps.Env) (*safety, error) {
	st, err := env.ZK.ReadState(ctx)
	if err != nil {
		return nil, fmt.Errorf("read ZooKeeper %s: %w", env.Target.ZKConnect, err)
	}
	s := &safety{st: st, short: brokers.Short(st), minISR: -1}
	for _, id := range brokers.HostIDs(env.Target) {
		if !slices.Contains(st.Brokers, id) {
			s.down = append(s.down, id)
		}
	}
	var errs []string
	for _, b := range st.Brokers {
		v, err := env.Kafka.BrokerConfig(ctx, b, "min.insync.replicas")
		if err == nil {
			if n, err := strconv.Atoi(v); err == nil {
				s.minISR = n
				break
			}
		}
		errs = append(errs, fmt.Sprintf("broker %d: %v %q", b, err, v))
	}
	if s.minISR < 0 {
		return nil, fmt.Errorf("%w: no broker reported its min.insync.replicas (%s), so kremedy cannot tell which stop is safe. No broker was stopped", steps.ErrRefused, strings.Join(errs, "; "))
	}
	return s, nil
}

// whole says why the cluster is not whole, "" when it is.
func (s *safety) whole() string {
	var why []string
	if len(s.down) > 0 {
		why = append(why, fmt.Sprintf("brokers %s are not registered", brokers.I32s(s.down)))
	}
	if len(s.short) > 0 {
		why = append(why, "partitions already short: "+brokers.Summarize(slices.Clone(s.short)))
	}
	return strings.Join(why, "; ")
}

// loses says, for the plan, what broker id's restart costs the other
// partitions: by topic, which lose an in-sync replica while it is down,
// how many it leads, and the fewest in-sync replicas they keep — never
// below min.insync.replicas (Plan refuses otherwise).
func (s *safety) loses(id int32) string {
	ls := brokers.Losses(s.st, id, s.minISR)
	if len(ls) == 0 {
		return fmt.Sprintf("broker %d: no partition loses an in-sync replica while it restarts", id)
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
	return fmt.Sprintf("broker %d: %d partitions lose an in-sync replica while it restarts (it leads %d: controlled shutdown moves those first), none below its min.insync.replicas: %s", id, n, led, strings.Join(each, "; "))
}

// Rollable says why a roll of every inventory broker could not begin now,
// "" when it could, leaving out topic skip (about to be deleted: its own
// partitions do not count). A runbook with a rolling mode asks it before it
// changes anything, so that the mode is refused up front, not half-way.
func Rollable(ctx context.Context, env *steps.Env, skip string) (string, error) {
	s, err := readSafety(ctx, env)
	if err != nil {
		return "", err
	}
	delete(s.st.Topics, skip)
	s.short = brokers.Short(s.st)
	var why []string
	if w := s.whole(); w != "" {
		why = append(why, "the cluster is not whole: "+w)
	}
	for _, id := range brokers.HostIDs(env.Target) {
		if rs := s.risks(id); len(rs) > 0 {
			why = append(why, fmt.Sprintf("stopping broker %d would not be safe: %s", id, brokers.Summarize(rs)))
		}
	}
	return strings.Join(why, "; "), nil
}

// risks says what stopping broker id would break.
func (s *safety) risks(id int32) []string { return brokers.StopRisks(s.st, id, s.minISR) }

// roster is what Plan and Verify start from: the sessions the roll began
// with, the controller now, and the brokers to restart in order.
func (k *Roll) roster(ctx context.Context, env *steps.Env) (map[int32]int64, int32, []int32, error) {
	sessions, err := k.sessions(ctx, env)
	if err != nil {
		return nil, 0, nil, err
	}
	ctrl, err := brokers.Controller(ctx, env.ZK)
	if err != nil {
		return nil, 0, nil, err
	}
	ids, err := k.order(env, ctrl)
	return sessions, ctrl, ids, err
}

func (k *Roll) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	sessions, ctrl, ids, err := k.roster(ctx, env)
	if err != nil {
		return nil, err
	}
	left, err := k.state(ctx, env, sessions, ids)
	if err != nil {
		return nil, err
	}
	safe, err := readSafety(ctx, env)
	if err != nil {
		return nil, err
	}
	// A broker this run stopped or started and has not gated yet (a
	// resume) goes first, whatever the order is now (the controller may
	// have moved); until it is back the others' ISRs are short, so their
	// stops are checked right before each (the safe-N action), not here.
	slices.SortStableFunc(ids, func(a, b int32) int {
		first := func(id int32) bool { return left[id] == unitStart || left[id] == unitGate }
		switch {
		case first(a) && !first(b):
			return -1
		case first(b) && !first(a):
			return 1
		}
		return 0
	})
	p := &steps.Plan{Summary: fmt.Sprintf("restart brokers %s one at a time, in this order (the controller, %d, last): each stopped with its own command, started again, and the cluster healthy before the next", brokers.I32s(ids), ctrl)}
	if refusals := refusals(ids, left, safe); len(refusals) > 0 {
		return nil, fmt.Errorf("%w: %s. No broker was stopped", steps.ErrRefused, strings.Join(refusals, "; "))
	}
	pending := 0
	for _, id := range ids {
		if left[id] == unitDone {
			p.Facts = append(p.Facts, fmt.Sprintf("broker %d: restarted and gated in an earlier attempt of this run; not restarted again", id))
			continue
		}
		fact, acts, err := k.brokerActions(ctx, env, id, left[id], sessions[id], safe)
		if err != nil {
			return nil, err
		}
		p.Facts, p.Actions = append(p.Facts, fact), append(p.Actions, acts...)
		pending++
	}
	if pending == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("every broker of %s was restarted by this run already", brokers.I32s(ids))
		return p, nil
	}
	p.Notes = append(p.Notes, "controlled shutdown moves each broker's leaderships away before it stops; clients retry NOT_LEADER_OR_FOLLOWER and reconnect, and producers with acks=all and retries lose nothing while every partition keeps min.insync.replicas")
	return p, nil
}

// refusals says why the roll cannot go on: a broker down that this run did
// not stop, or stopped and restarted already; and, unless a broker this run
// stopped is still to come back (its absence shortens the ISRs, and the
// others' stops are then checked right before each), a cluster that is not
// whole or a stop that is not safe.
func refusals(ids []int32, left map[int32]unit, safe *safety) []string {
	var out []string
	restoring := false
	for _, id := range ids {
		switch left[id] {
		case unitUntouched:
			out = append(out, fmt.Sprintf("broker %d is down (not registered) and this run did not stop it: start it first (its start command, or `kremedy lab broker start %d` on a lab); a rolling restart begins with every broker up", id, id))
		case unitDownAgain:
			out = append(out, fmt.Sprintf("broker %d was restarted by this run and is down again: read its server log, start it, then resume (it is not restarted again)", id))
		case unitStart, unitGate:
			restoring = true
		}
	}
	if restoring {
		return out
	}
	if why := safe.whole(); why != "" {
		out = append(out, "the cluster is not whole: "+why+"; a rolling restart starts from a cluster with every broker up and every partition fully in sync")
	}
	for _, id := range ids {
		if left[id] != unitFull {
			continue
		}
		if rs := safe.risks(id); len(rs) > 0 {
			out = append(out, fmt.Sprintf("stopping broker %d now is not safe: %s", id, brokers.Summarize(rs)))
		}
	}
	return out
}

// brokerActions plans what is left of broker id's restart, with the fact
// the plan says about it.
func (k *Roll) brokerActions(ctx context.Context, env *steps.Env, id int32, left unit, session int64, safe *safety) (string, []steps.Action, error) {
	h, _ := env.Target.Host(id)
	addr := brokers.Addr(ctx, env.ZK, id, h.Addr)
	args := brokerArgs{Broker: id, Addr: addr, Session: session}
	a := func(op steps.Op, name, target, detail string) steps.Action {
		return steps.Action{ID: fmt.Sprintf("%s-%d", name, id), Op: op, Broker: id, Target: target, Detail: detail, Args: args}
	}
	zn := fmt.Sprintf("%s%s/%d", env.ZK.Chroot(), kafkazk.BrokerIDsPath, id)
	gate := a(steps.OpWait, "gate", "cluster", fmt.Sprintf("health gate: every broker registered, a controller, no offline or under-replicated partition, the brokers' metadata agreeing; %d checks in a row, at most %s", max(1, k.HealthChecks), k.HealthTimeout))
	if left == unitGate {
		return fmt.Sprintf("broker %d: started by an earlier attempt of this run and a new process now; only its health gate is left", id), []steps.Action{gate}, nil
	}
	var acts []steps.Action
	fact := fmt.Sprintf("broker %d: stopped by an earlier attempt of this run; it is started, not stopped again", id)
	if left == unitFull {
		fact = safe.loses(id)
		acts = append(acts,
			a(steps.OpCheck, "safe", fmt.Sprintf("broker %d", id), "read right before the stop: every broker registered, no partition short, and stopping it leaves every partition online and at or above min.insync.replicas"),
			a(steps.OpSSH, "stop", fmt.Sprintf("broker %d on %s", id, h.Host), h.Stop),
			a(steps.OpWait, "gone", zn, fmt.Sprintf("znode gone, port %s closed, at most %s", brokers.OrDash(addr), k.StopTimeout)))
	}
	if k.While != nil {
		while, err := k.While.Plan(ctx, env, id)
		if err != nil {
			return "", nil, err
		}
		acts = append(acts, while...)
	}
	acts = append(acts,
		a(steps.OpSSH, "start", fmt.Sprintf("broker %d on %s", id, h.Host), h.Start),
		a(steps.OpWait, "back", zn, fmt.Sprintf("registered again under a new session, at most %s", k.StartTimeout)),
		gate)
	return fact, acts, nil
}

func (k *Roll) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	sessions, err := k.sessions(ctx, env)
	if err != nil {
		return err
	}
	var done []int32
	for i := 0; i < len(p.Actions); i++ {
		a := p.Actions[i]
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped before %s: %w; %s", a.ID, err, notYet(p, a.Broker, done))
		}
		id := a.Broker
		not := func() string { return notYet(p, id, done) }
		if strings.HasPrefix(a.ID, fmt.Sprintf("while-%d-", id)) {
			n, err := k.while(ctx, env, p.Actions[i:])
			if err != nil {
				return fmt.Errorf("%w; broker %d is stopped, %s", err, id, not())
			}
			i += n - 1
			continue
		}
		b, err := steps.ArgsOf[brokerArgs](a)
		if err != nil {
			return err
		}
		h, _ := env.Target.Host(id)
		switch {
		case strings.HasPrefix(a.ID, "safe-"):
			err = env.Do(a, func() error { return safeNow(ctx, env, id, not) })
		case strings.HasPrefix(a.ID, "stop-"):
			err = env.Do(a, func() error {
				cctx, cancel := context.WithTimeout(ctx, k.StopTimeout)
				defer cancel()
				return brokers.RunOn(cctx, env, id, h.Stop)
			})
			if code, ok := brokers.ExitStatus(err); ok {
				err = fmt.Errorf("broker %d's stop command exited %d: it is probably still running. %s: %w", id, code, not(), err)
			} else if err != nil {
				err = fmt.Errorf("stop broker %d: %w. Its state is unknown; %s", id, err, not())
			}
		case strings.HasPrefix(a.ID, "gone-"):
			err = env.Do(a, func() error { return brokers.WaitGone(ctx, env, id, b.Addr, k.StopTimeout) })
		case strings.HasPrefix(a.ID, "start-"):
			err = env.Do(a, func() error {
				cctx, cancel := context.WithTimeout(ctx, k.StartTimeout)
				defer cancel()
				return brokers.RunOn(cctx, env, id, h.Start)
			})
			if err != nil {
				err = fmt.Errorf("broker %d did not start: %w (its log is on %s). It is down: fix the cause and resume, which starts it and goes on; %s", id, err, h.Host, not())
			}
		case strings.HasPrefix(a.ID, "back-"):
			err = env.Do(a, func() error { return waitBack(ctx, env, id, sessions[id], k.StartTimeout) })
		case strings.HasPrefix(a.ID, "gate-"):
			done = append(done, id)
			err = env.Do(a, func() error { return k.gate(ctx, env, sessions) })
			if err != nil {
				err = fmt.Errorf("%w; broker %d was restarted, %s", err, id, notYet(p, id, done))
			}
		default:
			err = fmt.Errorf("rolling restart: unknown action %s", a.ID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// while applies the While actions at the head of acts (one broker's, in a
// row) and says how many there were.
func (k *Roll) while(ctx context.Context, env *steps.Env, acts []steps.Action) (int, error) {
	id := acts[0].Broker
	n := 0
	for n < len(acts) && acts[n].Broker == id && strings.HasPrefix(acts[n].ID, fmt.Sprintf("while-%d-", id)) {
		n++
	}
	if k.While == nil {
		return n, fmt.Errorf("rolling restart: action %s, but nothing to do while a broker is stopped", acts[0].ID)
	}
	return n, k.While.Apply(ctx, env, id, acts[:n])
}

// safeNow refuses broker id's stop unless the cluster is whole and the
// stop leaves every partition online and at min.insync.replicas, read now.
func safeNow(ctx context.Context, env *steps.Env, id int32, not func() string) error {
	safe, err := readSafety(ctx, env)
	if err != nil {
		return err
	}
	if why := safe.whole(); why != "" {
		return fmt.Errorf("%w: broker %d was not stopped: the cluster is not whole (%s); %s", steps.ErrRefused, id, why, not())
	}
	if rs := safe.risks(id); len(rs) > 0 {
		return fmt.Errorf("%w: stopping broker %d now is not safe: %s. It was not stopped; %s", steps.ErrRefused, id, brokers.Summarize(rs), not())
	}
	return nil
}

// notYet says which brokers of the plan have not been restarted yet.
func notYet(p *steps.Plan, current int32, done []int32) string {
	var rest []int32
	for _, a := range p.Actions {
		if a.Broker != current && !slices.Contains(done, a.Broker) && !slices.Contains(rest, a.Broker) {
			rest = append(rest, a.Broker)
		}
	}
	if len(rest) == 0 {
		return "no other broker is left"
	}
	return fmt.Sprintf("brokers %s were not touched", brokers.I32s(rest))
}

// waitBack waits for broker id to register again under a new session.
func waitBack(ctx context.Context, env *steps.Env, id int32, old int64, timeout time.Duration) error {
	start := env.Now()
	regStart := env.Now()
	stop := env.ProgressEvery(5*time.Second, func() string {
		return fmt.Sprintf("waiting for broker %d to register: %s of %s", id, env.Now().Sub(regStart).Round(time.Second), timeout)
	})
	err := brokers.WaitRegistered(ctx, env.ZK, []int32{id}, timeout)
	stop()
	brokers.ReportDown(ctx, env)
	if err != nil {
		return fmt.Errorf("broker %d did not register again within %s after its start command: %w", id, timeout, err)
	}
	_, session, ok, err := brokers.Registration(ctx, env.ZK, id)
	switch {
	case err != nil:
		return err
	case !ok || session == old:
		return fmt.Errorf("%w: broker %d is registered under the ZooKeeper session it had before its stop (%#x): it was not restarted", steps.ErrCheckFailed, id, old)
	}
	env.Logf("broker %d registered again %s after its start command (session %#x)", id, env.Now().Sub(start).Round(time.Millisecond), session)
	return nil
}

// gate holds the health gate after a broker's restart: the brokers that
// are new processes must serve no topic ZooKeeper lacks; the others, still
// the processes the roll began with, may (only their restart clears it).
func (k *Roll) gate(ctx context.Context, env *steps.Env, sessions map[int32]int64) error {
	inv := brokers.HostIDs(env.Target)
	var pending []int32
	for _, id := range inv {
		if _, session, ok, err := brokers.Registration(ctx, env.ZK, id); err == nil && ok && session == sessions[id] {
			pending = append(pending, id)
		}
	}
	g := brokers.Gate{Want: inv, Rolling: true, Pending: pending}
	checks, err := holdGate(ctx, env, g, max(1, k.HealthChecks), k.HealthTimeout)
	for _, c := range checks {
		env.Check(c)
	}
	return err
}

// holdGate holds the gate until n rounds in a row pass, or timeout.
func holdGate(ctx context.Context, env *steps.Env, g brokers.Gate, n int, timeout time.Duration) ([]steps.Check, error) {
	return brokers.Hold(ctx, env, func() []steps.Check { return g.Check(ctx, env.Cluster) }, n, timeout)
}

// Verify: every broker of the roll is a new process, and the whole cluster
// is healthy with every broker's metadata agreeing about every topic.
func (k *Roll) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	sessions, _, ids, err := k.roster(ctx, env)
	if err != nil {
		return nil, err
	}
	var same []string
	for _, id := range ids {
		ok, err := restarted(ctx, env, sessions, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			same = append(same, fmt.Sprintf("broker %d", id))
		}
	}
	restartedAll := steps.Check{Name: "every broker of the roll was started by this run and runs as a new process (a new ZooKeeper session)", OK: len(same) == 0, Detail: "not restarted: " + brokers.Summarize(same)}
	n, timeout := max(1, k.HealthChecks), k.HealthTimeout
	if env.Rechecking() {
		n, timeout = 1, 0
	}
	checks, _ := holdGate(ctx, env, brokers.Gate{Want: brokers.HostIDs(env.Target)}, n, timeout)
	return append([]steps.Check{restartedAll}, checks...), nil
}
