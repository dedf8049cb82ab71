package steps

import (
	"context"
	"fmt"
	"time"
)

// detach makes sure no producer or consumer is attached to the topic before
// anything is deleted: with auto.create.topics.enable a client would
// recreate it behind the operator's back. It saves consumer groups'
// committed offsets, runs the inventory's client stop commands, then holds a
// gate that re-checks until nothing is attached.
type detach struct{}

type detachPayload struct {
	Groups    []GroupUse    `json:"groups"`
	Producers []ProducerUse `json:"producers"`
}

func (k *detach) attached(ctx context.Context, r *Run) (groups []GroupUse, active []ProducerUse, err error) {
	t := r.Topic()
	if reg, err := r.registered(ctx); err != nil {
		return nil, nil, err
	} else if len(reg) == 0 {
		// Every broker is stopped (a resumed run past the stop step): no
		// client can be attached to a cluster that does not run.
		return nil, nil, nil
	}
	all, err := r.Kafka.Groups(ctx, t)
	if err != nil {
		return nil, nil, fmt.Errorf("consumer groups on %s: %w", t, err)
	}
	groups = all
	var parts []int32
	for p := range r.Facts.Partitions {
		parts = append(parts, p)
	}
	if len(parts) > 0 {
		prods, err := r.Kafka.Producers(ctx, t, parts)
		if err != nil {
			r.Logf("could not list producers on %s (%v); relying on the consumer-group check", t, err)
		}
		idle := r.Meta.Params.Duration("producer_idle", 30*time.Second)
		for _, pu := range prods {
			if r.now().Sub(pu.LastTimestamp) < idle || pu.TxnStart >= 0 {
				active = append(active, pu)
			}
		}
	}
	return groups, active, nil
}

func membersOn(groups []GroupUse) []string {
	var out []string
	for _, g := range groups {
		if len(g.Members) > 0 {
			out = append(out, fmt.Sprintf("group %s: %d members", g.Group, len(g.Members)))
		}
	}
	return out
}

func (k *detach) Plan(ctx context.Context, r *Run) (*Plan, error) {
	if r.Facts.Clean {
		return r.cleanNoOp("detach from"), nil
	}
	groups, active, err := k.attached(ctx, r)
	if err != nil {
		return nil, err
	}
	p := &Plan{Summary: fmt.Sprintf("detach every client from %q", r.Topic())}
	withOffsets := 0
	for _, g := range groups {
		if len(g.Offsets) > 0 {
			withOffsets++
		}
		p.Facts = append(p.Facts, fmt.Sprintf("group %s (%s): %d members on the topic, committed offsets on %d partitions", g.Group, g.State, len(g.Members), len(g.Offsets)))
	}
	for _, pu := range active {
		p.Facts = append(p.Facts, fmt.Sprintf("producer %d wrote to partition %d at %s", pu.ProducerID, pu.Partition, pu.LastTimestamp.UTC().Format(time.RFC3339)))
	}
	if withOffsets > 0 {
		p.Actions = append(p.Actions, Action{Kind: "save", Target: r.OffsetsPath(), Detail: fmt.Sprintf("committed offsets of %d groups on %s", withOffsets, r.Topic())})
	}
	for _, c := range r.Target.Clients {
		p.Actions = append(p.Actions, Action{Kind: "ssh", Target: c.Host, Detail: fmt.Sprintf("%s (stop client %s)", c.Stop, c.Name)})
	}
	if m := membersOn(groups); len(m) > 0 || len(active) > 0 {
		p.Actions = append(p.Actions, Action{Kind: "wait", Target: r.Topic(), Detail: "re-check every 2s until no group has members on it and no producer is active"})
		p.Notes = append(p.Notes, fmt.Sprintf("still attached: %v, %d active producers — stop them (kremedy cannot stop clients it does not know)", m, len(active)))
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("no consumer group uses %q and no producer is active on it", r.Topic())
	}
	b, _ := jsonRaw(detachPayload{Groups: groups, Producers: active})
	p.Payload = b
	return p, nil
}

func (k *detach) Apply(ctx context.Context, r *Run, p *Plan) error {
	var pl detachPayload
	if err := fromRaw(p.Payload, &pl); err != nil {
		return err
	}
	for _, a := range p.Actions {
		if a.Kind == "save" {
			if err := r.Do(a, func() error { return WriteJSON(r.OffsetsPath(), pl.Groups) }); err != nil {
				return err
			}
		}
	}
	for _, c := range r.Target.Clients {
		a := Action{Kind: "ssh", Target: c.Host, Detail: c.Stop}
		if err := r.Do(a, func() error {
			return r.Remote.RunClient(ctx, c, c.Stop, func(l Line) { r.Output(c.Name+" ("+c.Host+")", l) })
		}); err != nil {
			return fmt.Errorf("stop client %s: %w", c.Name, err)
		}
	}
	// The gate: re-check until clear, or the step's deadline.
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		groups, active, err := k.attached(ctx, r)
		if err != nil {
			return err
		}
		m := membersOn(groups)
		if len(m) == 0 && len(active) == 0 {
			r.Logf("no client is attached to %q", r.Topic())
			return nil
		}
		r.Logf("still attached to %q: %v, %d active producers; waiting", r.Topic(), m, len(active))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: clients still attached to %q: %v, %d active producers. Nothing was deleted. Stop them and re-check", ErrCheckFailed, r.Topic(), m, len(active))
		case <-t.C:
		}
	}
}

func (k *detach) Verify(ctx context.Context, r *Run) ([]Check, error) {
	if r.Facts.Clean {
		return nil, nil
	}
	groups, active, err := k.attached(ctx, r)
	if err != nil {
		return nil, err
	}
	m := membersOn(groups)
	return []Check{
		{Name: "no consumer group has members on the topic", OK: len(m) == 0, Detail: fmt.Sprint(m)},
		{Name: "no producer is active on the topic", OK: len(active) == 0, Detail: fmt.Sprintf("%d active", len(active))},
	}, nil
}
