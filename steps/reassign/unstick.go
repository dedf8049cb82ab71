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
		if err := env.Do(a, func() error { return apply(ctx, ra, a) }); err != nil {
			return err
		}
	}
	return nil
}

func apply(ctx context.Context, ra ports.Reassigner, a steps.Action) error {
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
	if c.Action == Cancel {
		return ra.Reassign(ctx, c.Topic, c.Partition, nil)
	}
	return ra.Reassign(ctx, c.Topic, c.Partition, c.Replicas)
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
