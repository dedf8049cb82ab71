package reassign

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// unstick acts on each move in flight as the operator chose (Decide).
type unstick struct{ o unstickOpts }

type unstickOpts struct {
	Action string `opt:"action" default:"auto"`
	Rate   int    `opt:"rate" default:"10485760"`
}

func (k *unstick) choices(ctx context.Context, env *steps.Env) (*brokers.Reassigning, []Choice, error) {
	st, err := brokers.ReadReassigning(ctx, env.Cluster)
	if err != nil {
		return nil, nil, err
	}
	var cs []Choice
	var refusals []error
	for _, m := range st.Moves {
		c, err := Decide(m, Action(k.o.Action), st.Live, int64(k.o.Rate))
		if err != nil {
			refusals = append(refusals, err)
			continue
		}
		cs = append(cs, c)
	}
	return st, cs, errors.Join(refusals...)
}

func (k *unstick) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	if k.o.Rate <= 0 {
		return nil, fmt.Errorf("%w: rate %d: the throttle a raise sets must be a positive number of bytes/s; nothing was changed", steps.ErrRefused, k.o.Rate)
	}
	st, cs, err := k.choices(ctx, env)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Facts: facts(st)}
	for _, c := range cs {
		p.Notes = append(p.Notes, fmt.Sprintf("%s: %s (%s)", c.Name(), c.Action, c.Why))
		p.Actions = append(p.Actions, actionsOf(c)...)
	}
	p.Summary = fmt.Sprintf("%d moves in flight; action %s: %d changes", len(st.Moves), k.o.Action, len(p.Actions))
	p.NoOp = len(p.Actions) == 0
	if p.NoOp {
		p.Summary = fmt.Sprintf("%d moves in flight, none to cancel, retarget or raise: the sweep waits for them", len(st.Moves))
	}
	return p, nil
}

// actionsOf are a choice's requests, each one action of the plan.
func actionsOf(c Choice) []steps.Action {
	switch c.Action {
	case Cancel:
		return []steps.Action{{ID: "cancel-" + c.Name(), Op: steps.OpKafka, Target: c.Name(),
			Detail: "AlterPartitionReassignments with null replicas: the move is cancelled, the original replicas " + ids(c.Original) + " stay", Args: c}}
	case Retarget:
		return []steps.Action{{ID: "retarget-" + c.Name(), Op: steps.OpKafka, Target: c.Name(),
			Detail: "AlterPartitionReassignments to " + ids(c.Replicas) + " (was going to " + ids(c.Target) + ")", Args: c}}
	case Raise:
		var out []steps.Action
		for i, b := range c.Brokers {
			key := brokers.FollowerRate
			if i == 0 {
				key = brokers.LeaderRate
			}
			out = append(out, steps.Action{ID: fmt.Sprintf("raise-%s-%d-%s", c.Name(), b, key), Op: steps.OpKafka, Broker: b,
				Target: fmt.Sprintf("broker %d", b), Detail: fmt.Sprintf("set %s=%d", key, c.Rate), Args: raiseArgs{Broker: b, Key: key, Rate: c.Rate}})
		}
		return out
	}
	return nil
}

type raiseArgs struct {
	Broker int32  `json:"broker"`
	Key    string `json:"key"`
	Rate   int64  `json:"rate"`
}

func (k *unstick) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	ra, err := brokers.Reassigner(env.Cluster)
	if err != nil {
		return err
	}
	for _, a := range p.Actions {
		if err := env.Do(a, func() error { return apply(ctx, env.Cluster, ra, a) }); err != nil {
			return err
		}
	}
	return nil
}

func apply(ctx context.Context, cl ports.Cluster, ra ports.Reassigner, a steps.Action) error {
	if strings.HasPrefix(a.ID, "raise-") {
		r, err := steps.ArgsOf[raiseArgs](a)
		if err != nil {
			return err
		}
		v := strconv.FormatInt(r.Rate, 10)
		return ra.SetConfig(ctx, ports.ResourceBroker, strconv.Itoa(int(r.Broker)), r.Key, &v)
	}
	c, err := steps.ArgsOf[Choice](a)
	if err != nil {
		return err
	}
	if err := stillSafe(ctx, cl, c); err != nil {
		return err
	}
	if c.Action == Cancel {
		return ra.Reassign(ctx, c.Topic, c.Partition, nil)
	}
	return ra.Reassign(ctx, c.Topic, c.Partition, c.Replicas)
}

// stillSafe re-reads c's move right before its request (an approval can
// take minutes): the move is still in flight to the same target; for a
// cancel every original replica is still live and in the ISR (KAFKA-14424);
// for a retarget every broker of the new target is still live. Anything
// else is steps.ErrStalePlan: the step plans again from the cluster as it
// is now.
func stillSafe(ctx context.Context, cl ports.Cluster, c Choice) error {
	st, err := brokers.ReadReassigning(ctx, cl)
	if err != nil {
		return fmt.Errorf("re-read the move of %s before changing it: %w; nothing was sent for it: run again", c.Name(), err)
	}
	i := slices.IndexFunc(st.Moves, func(m brokers.Moving) bool { return m.Topic == c.Topic && m.Partition == c.Partition })
	var why string
	switch {
	case i < 0:
		why = "it is no longer in flight"
	case !slices.Equal(st.Moves[i].Target(), c.Target):
		why = fmt.Sprintf("its target is %s now, the plan read %s", ids(st.Moves[i].Target()), ids(c.Target))
	case c.Action == Cancel:
		if ok, bad := st.Moves[i].OriginalInSync(); !ok {
			why = fmt.Sprintf("original replica %s is down or out of the ISR %s now, so a cancel would leave it under-replicated or without a leader (KAFKA-14424)", ids(bad), ids(st.Moves[i].ISR))
		}
	case c.Action == Retarget:
		var gone []int32
		for _, b := range c.Replicas {
			if !slices.Contains(st.Live, b) {
				gone = append(gone, b)
			}
		}
		if len(gone) > 0 {
			why = fmt.Sprintf("broker %s of the new target %s is no longer live (live: %s)", ids(gone), ids(c.Replicas), ids(st.Live))
		}
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s changed since the plan: %s. Nothing was sent for it; the step plans again from the cluster as it is now and asks for a new confirmation (a resume re-plans too)", steps.ErrStalePlan, c.Name(), why)
}

// Verify: no move in flight is left with a target broker that is down.
func (k *unstick) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	st, err := brokers.ReadReassigning(ctx, env.Cluster)
	if err != nil {
		return nil, err
	}
	var stuck []string
	for _, m := range st.Moves {
		if dead := m.TargetDead(); len(dead) > 0 {
			stuck = append(stuck, fmt.Sprintf("%s-%d (target broker %s down)", m.Topic, m.Partition, ids(dead)))
		}
	}
	slices.Sort(stuck)
	detail := fmt.Sprintf("%d moves in flight, each onto live brokers", len(st.Moves))
	if len(stuck) > 0 {
		detail = fmt.Sprintf("still moving onto a dead broker: %v", stuck)
	}
	return []steps.Check{{Name: "no move in flight onto a broker that is down", OK: len(stuck) == 0, Detail: detail}}, nil
}
