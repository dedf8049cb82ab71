package roll

// This file holds the applying: each roller action by its phase, the
// batches' actions at once, While's actions of a stopped node, and the
// safety check read right before a stop.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
)

// healEvery is how often a waiting safety check reads the cluster again
// (on the run's clock: Env.Sleep).
const healEvery = 2 * time.Second

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
		cur := args.Nodes()
		if args.Batch != 0 {
			cur = r.batchOf(p, i) // the controller's stop, after its batch's others
		}
		if err := r.do(ctx, env, p, a, args, cur, done); err != nil {
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
		err = env.Do(a, func() error {
			// One run per cluster, before every stop of a long roll.
			if err := env.CheckLease(ctx); err != nil {
				return fmt.Errorf("%w; %s was not stopped, %s", err, args.Who(noun), not())
			}
			return r.safeNow(ctx, env, args.Nodes(), not)
		})
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
