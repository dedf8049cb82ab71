package migrate

import (
	"context"
	"fmt"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/diagnose"
)

// preflightOpts: the migration's preflight, or the revert's.
type preflightOpts struct {
	Revert bool `opt:"revert" default:"false"`
	// Accept: the topics whose partitions no restart can keep available
	// that the rolls accept (roll.AcceptParam); readiness judges them so.
	Accept []string `opt:"accept_unavailable" type:"topics" default:""`
	// ControllerListener and ControllerSettings: how the brokers will
	// reach the controllers (rollOpts'); a secured cluster is checked
	// before anything changes (CheckSecurity).
	ControllerListener string `opt:"controller_listener" default:"CONTROLLER"`
	ControllerSettings string `opt:"controller_settings" default:""`
	StaticJAAS         bool   `opt:"static_jaas" default:"false"`
}

// preflight says where the migration stands and whether it may go on. For
// the migration, a cluster nothing has changed yet (ZooKeeper mode, or
// only the controllers started) must pass the readiness check (`kremedy
// diagnose --migration`): every blocker is named with its fix and nothing
// is changed. For the revert, a finalized migration is refused. It reads
// every node's config file over SSH and changes nothing.
type preflight struct {
	o      preflightOpts
	checks []steps.Check
}

// phaseKey is where preflight saves the phase the run began in.
const phaseKey = "zk-to-kraft/phase"

func (k *preflight) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{NoOp: true, Summary: fmt.Sprintf("read-only look at cluster %s: phase %s", env.Target.Name, st.Phase), Facts: st.Facts()}
	k.checks = []steps.Check{{Name: "the migration's phase is known", OK: st.Phase != PhaseUnknown, Detail: fmt.Sprintf("%s: %s", st.Phase, st.Why)}}
	if st.Phase == PhaseUnknown {
		return p, fmt.Errorf("%w: the nodes' configs do not say where the migration stands: %s. Nothing was changed", steps.ErrRefused, st.Why)
	}
	var prior Phase
	if ok, err := env.Load(phaseKey, &prior); err != nil {
		return p, err
	} else if !ok && !env.Preview() {
		if err := env.Save(phaseKey, st.Phase); err != nil {
			return p, err
		}
	}
	if prior != "" {
		p.Facts = append(p.Facts, fmt.Sprintf("this run began in phase %s", prior))
	}
	if k.o.Revert {
		return p, k.revert(st, p)
	}
	return p, k.forward(ctx, env, st, p)
}

func (k *preflight) revert(st *State, p *steps.Plan) error {
	ok, how := st.Phase.Revertible()
	k.checks = append(k.checks, steps.Check{Name: "the migration can be reverted", OK: ok, Detail: how})
	switch {
	case !ok:
		return fmt.Errorf("%w: %s. Nothing was changed", steps.ErrRefused, how)
	case st.Phase == PhaseZooKeeper:
		p.EndsRun, p.Summary = true, "nothing to revert: every broker is a ZooKeeper broker and no KRaft controller runs"
	}
	return nil
}

func (k *preflight) forward(ctx context.Context, env *steps.Env, st *State, p *steps.Plan) error {
	switch st.Phase {
	case PhaseFinalized:
		p.EndsRun, p.Summary = true, "the migration is finalized: nothing left to do"
		return nil
	case PhaseZooKeeper, PhaseControllers:
	default:
		p.Facts = append(p.Facts, "the migration is under way: the readiness check ran before it began (a half-migrated cluster is checked by each step's own gate)")
		return nil
	}
	d, err := diagnose.Run(ctx, env.Cluster, diagnose.Options{Disk: true, Migration: true, Accept: k.o.Accept})
	if err != nil {
		return fmt.Errorf("readiness check: %w", err)
	}
	m := d.Migration
	var blockers []string
	for _, id := range m.Blockers {
		for _, f := range d.Findings {
			if f.ID == id {
				blockers = append(blockers, fmt.Sprintf("%s — %s. Fix: %s", f.Summary, m.Why[id], f.Fix))
			}
		}
	}
	k.checks = append(k.checks, steps.Check{Name: "ready for the migration (kremedy diagnose --migration)", OK: m.Ready, Detail: orNone(m.Blockers)})
	if !m.Ready {
		return fmt.Errorf("%w: not ready for the ZooKeeper → KRaft migration, %d blockers: %s. Nothing was changed; fix them and run again (`kremedy diagnose --migration` shows the evidence)",
			steps.ErrRefused, len(blockers), strings.Join(blockers, "; "))
	}
	set, err := ReadControllerSettings(k.o.ControllerSettings, k.o.ControllerListener)
	if err != nil {
		return fmt.Errorf("%w: %v. Nothing was changed", steps.ErrRefused, err)
	}
	set.StaticJAAS = k.o.StaticJAAS
	sec := st.security(k.o.ControllerListener, set)
	k.checks = append(k.checks, steps.Check{Name: "the brokers and the controllers are secured alike (listeners, logins, ZooKeeper ACLs and TLS, authorizer)", OK: len(sec.Problems) == 0, Detail: orNone(sec.Problems)})
	if len(sec.Problems) > 0 {
		return fmt.Errorf("%w: phase %s; the brokers and the KRaft controllers are not configured to work together on this secured cluster: %s. Nothing was changed; mend what each names and run again",
			steps.ErrRefused, st.Phase, strings.Join(sec.Problems, "; "))
	}
	p.Facts = append(p.Facts, sec.Facts...)
	for _, id := range m.Advice {
		p.Facts = append(p.Facts, "advice: "+id)
	}
	p.Facts = append(p.Facts, "ready: no condition that stalls or corrupts the migration was found")
	return nil
}

func (k *preflight) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

func (k *preflight) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if k.checks != nil {
		c := k.checks
		k.checks = nil
		return c, nil
	}
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	return []steps.Check{{Name: "the migration's phase is known", OK: st.Phase != PhaseUnknown, Detail: fmt.Sprintf("%s: %s", st.Phase, st.Why)}}, nil
}
