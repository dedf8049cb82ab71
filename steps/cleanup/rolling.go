package cleanup

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// The cleanup's modes: full stops every broker at once (field report 000's
// procedure, the default); rolling restarts them one at a time, moving the
// topic's directories out of each broker's log dirs while it is stopped.
const (
	modeFull    = "full"
	modeRolling = "rolling"
)

// modeOpts is the mode option the brokers' steps share.
type modeOpts struct {
	Mode string `opt:"mode" default:"full"`
	// Accept: rolling mode's acceptance of the partitions no restart can
	// keep available (roll.AcceptParam), by topic.
	Accept []string `opt:"accept_unavailable" type:"topics" default:""`
}

func (o modeOpts) Validate() error {
	if o.Mode != modeFull && o.Mode != modeRolling {
		return fmt.Errorf("mode %q: it is %s (every broker stopped at once) or %s (one at a time)", o.Mode, modeFull, modeRolling)
	}
	return nil
}

// rollingWipe is the cleanup's rolling mode: every broker restarted one at
// a time, the controller last, the topic's directories moved out of its log
// dirs while it is stopped, and the health gate between brokers; the other
// topics keep a leader and min.insync.replicas throughout (each stop is
// refused otherwise). Why it is sound — with the topic's znodes deleted
// and its clients detached — is in runbooks/topic-cleanup.yaml's why-note
// and docs/rolling-cleanup.md. In full mode it does nothing.
type rollingWipe struct {
	o    rollingOpts
	roll roll.Roll
}

type rollingOpts struct {
	topicOpts
	modeOpts
	StopTimeout   time.Duration `opt:"stop_timeout" default:"5m"`
	StartTimeout  time.Duration `opt:"start_timeout" default:"5m"`
	HealthChecks  int           `opt:"health_checks"`
	HealthTimeout time.Duration `opt:"health_timeout"`
	// Batch: how many brokers stop at once (roll.BatchParam): 1, N or auto.
	Batch int `opt:"batch" type:"batch" default:"1"`
}

func newRollingWipe(o rollingOpts) *rollingWipe {
	k := &rollingWipe{o: o}
	k.roll = rollOf(o.StopTimeout, o.StartTimeout, o.HealthChecks, o.HealthTimeout)
	k.roll.Accept, k.roll.Batch = o.Accept, o.Batch
	k.roll.While = quarantineWhile{o: o.topicOpts}
	return k
}

// rollOf is the rolling mode's roll: every broker, seen in ZooKeeper.
func rollOf(stop, start time.Duration, checks int, health time.Duration) roll.Roll {
	return roll.Roll{Nodes: &roll.ZooKeeperBrokers{Key: "topic-cleanup/sessions", HealthChecks: checks, HealthTimeout: health},
		StopTimeout: stop, StartTimeout: start, HealWait: health}
}

func (k *rollingWipe) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	f, err := facts(env)
	if err != nil {
		return nil, err
	}
	t := k.o.quoted()
	switch {
	case f.Clean:
		return cleanNoOp(k.o.topicOpts, "restart brokers for"), nil
	case k.o.Mode != modeRolling:
		return &steps.Plan{NoOp: true, Summary: "full mode (the default, report 000's procedure): the next steps stop every broker at once, wipe and start them; this step restarts brokers one at a time only with --set mode=rolling"}, nil
	}
	if !env.Preview() {
		for _, t := range k.o.names() {
			if err := refuseRecreated(ctx, env, t, "No broker was stopped"); err != nil {
				return nil, err
			}
			if err := requireZnodesGone(ctx, env, t); err != nil {
				return nil, err
			}
		}
	}
	p, err := k.roll.Plan(ctx, env)
	if errors.Is(err, steps.ErrRefused) {
		return nil, fmt.Errorf("%w. The znodes of %s are deleted (restorable from %s); rolling mode cannot keep those partitions available: fix that and resume, or start a new topic-cleanup run in full mode (the default: every broker stopped at once, report 000's procedure), which finds the znodes already gone", err, t, env.Artifact(artBackup))
	}
	if err != nil || p.NoOp {
		return p, err
	}
	how := "one at a time (the controller last)"
	if b, ok := roll.Batched(p); ok {
		how = b + " (the controller last)"
	}
	p.Summary = fmt.Sprintf("restart the brokers %s, moving every directory of %s out of each broker's log dirs while it is stopped; the other topics stay available", how, t)
	return p, nil
}

func (k *rollingWipe) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	return k.roll.Apply(ctx, env, p)
}

func (k *rollingWipe) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	f, err := facts(env)
	if err != nil || f.Clean || k.o.Mode != modeRolling {
		return nil, err
	}
	checks, err := k.roll.Verify(ctx, env)
	if err != nil {
		return nil, err
	}
	left, err := topicDirs(ctx, env, f, k.o.names())
	if err != nil {
		return nil, err
	}
	checks = append(checks, steps.Check{Name: fmt.Sprintf("no log dir holds a directory of %s", k.o.quoted()), OK: len(left) == 0, Detail: text.Summarize(left)})
	if c, err := reconcileManifest(ctx, env, k.o.names()); err != nil {
		return nil, err
	} else if c != nil {
		checks = append(checks, *c)
	}
	return checks, nil
}

// quarantineWhile moves the topics' directories out of a stopped broker's
// log dirs: the rolling mode's wipe, broker by broker.
type quarantineWhile struct{ o topicOpts }

// matches lists broker id's log dirs for the topic's directories (each
// with why it matched).
func (q quarantineWhile) matches(ctx context.Context, env *steps.Env, f *Facts, id int32) ([]Move, []string, error) {
	if err := quarantineOutside(env, id, f.LogDirs[id]); err != nil {
		return nil, nil, err
	}
	h, _ := env.Target.Host(id)
	l := brokers.List(ctx, env.Hosts, ports.Target{Hosts: []ports.Host{h}}, map[int32][]string{id: f.LogDirs[id]})
	if err := l.Err(ports.Target{Hosts: []ports.Host{h}}); err != nil {
		return nil, nil, err
	}
	var out []Move
	var why []string
	for _, dir := range f.LogDirs[id] {
		ms, _ := selectAll(l.Entries[id][dir], f, q.o.names())
		for _, m := range ms {
			out = append(out, Move{Broker: id, Host: h.Host, From: filepath.Join(dir, m.Dir.Name),
				To: filepath.Join(QuarantineDir(env.RunID(), dir), m.Dir.Name), Kind: m.Dir.Kind.String(), State: "planned"})
			why = append(why, m.Reason)
		}
	}
	return out, why, nil
}

func (q quarantineWhile) Plan(ctx context.Context, env *steps.Env, id int32) ([]steps.Action, string, error) {
	f, err := facts(env)
	if err != nil {
		return nil, "", err
	}
	moves, why, err := q.matches(ctx, env, f, id)
	if err != nil || len(moves) == 0 {
		return nil, "", err
	}
	return whileMoves(env, id, moves, why), "", nil
}

// whileMoves are a stopped broker's moves as a roll's While actions: the
// manifest first, then each move with why it was chosen.
func whileMoves(env *steps.Env, id int32, moves []Move, why []string) []steps.Action {
	acts := []steps.Action{{ID: roll.WhileID(id, "manifest"), Op: steps.OpSave, Broker: id, Target: env.Artifact(artManifest),
		Detail: fmt.Sprintf("broker %d's moves recorded before and after they happen", id)}}
	for i, mv := range moves {
		acts = append(acts, steps.Action{ID: roll.WhileID(id, fmt.Sprintf("move-%d", i)), Op: steps.OpMove, Broker: id,
			Target: fmt.Sprintf("broker %d on %s: %s", id, env.Target.Node(id).On(), mv.From), Detail: "→ " + mv.To + " (" + why[i] + ")", Args: mv})
	}
	return acts
}

func (q quarantineWhile) Apply(ctx context.Context, env *steps.Env, id int32, acts []steps.Action) error {
	f, err := facts(env)
	if err != nil {
		return err
	}
	for _, t := range q.o.names() {
		if err := requireZnodesGone(ctx, env, t); err != nil {
			return err
		}
	}
	if reg, err := brokers.Registered(ctx, env.ZK); err != nil {
		return err
	} else if slices.Contains(reg, id) {
		return fmt.Errorf("%w: broker %d registered again before its directories were moved; nothing was moved", steps.ErrRefused, id)
	}
	// Move exactly what was confirmed: a directory that appeared or went
	// since the plan makes it stale (planned and confirmed again).
	now, _, err := q.matches(ctx, env, f, id)
	if err != nil {
		return err
	}
	return applyWhileMoves(ctx, env, id, acts, now, q.o.names(), "of "+q.o.quoted())
}

// applyWhileMoves moves exactly what was confirmed (acts) on stopped
// broker id, recording each move in the topics' manifest (none: a stray
// cleanup's): now, what a fresh listing finds (of what), must be the
// planned moves, else the plan is stale and nothing is moved.
func applyWhileMoves(ctx context.Context, env *steps.Env, id int32, acts []steps.Action, now []Move, topics []string, what string) error {
	var planned, found []string
	for _, a := range acts {
		if mv, err := steps.ArgsOf[Move](a); err == nil {
			planned = append(planned, mv.From)
		}
	}
	for _, mv := range now {
		found = append(found, mv.From)
	}
	slices.Sort(planned)
	slices.Sort(found)
	if !slices.Equal(planned, found) {
		return fmt.Errorf("%w: broker %d's log dirs hold %v %s now, the plan moved %v; nothing was moved on it", steps.ErrStalePlan, id, found, what, planned)
	}
	man, err := loadManifest(env, topics)
	if err != nil {
		return fmt.Errorf("quarantine manifest %s: %w", env.Artifact(artManifest), err)
	}
	hosts, err := byHost(&steps.Plan{Actions: acts})
	if err != nil {
		return err
	}
	qu := &quarantine{env: env, man: man, ends: map[string]func(error) error{}, idx: map[string]int{}}
	if err := qu.plan(hosts, acts[0]); err != nil {
		return err
	}
	return qu.moveAll(ctx, hosts)
}
