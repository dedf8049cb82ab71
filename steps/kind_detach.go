package steps

import (
	"context"
	"errors"
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

// attached lists what still uses the topic. unasked names partitions no
// broker answered for: when every broker said it hosts no replica, no
// producer can write to them either and they do not block; when a broker did
// not answer, they count as one active producer (the safer reading). Either
// way it is said in the check, not hidden.
func (k *detach) attached(ctx context.Context, r *Run) (groups []GroupUse, active []ProducerUse, unasked string, err error) {
	t := r.Topic()
	reg, err := r.registered(ctx)
	if err != nil {
		return nil, nil, "", err
	} else if len(reg) == 0 {
		// Every broker is stopped (a resumed run past the stop step): no
		// client can be attached to a cluster that does not run.
		return nil, nil, "", nil
	}
	all, err := r.Kafka.Groups(ctx, t)
	if err != nil {
		return nil, nil, "", fmt.Errorf("consumer groups on %s: %w", t, err)
	}
	groups = all
	var parts []int32
	for p := range r.Facts.Partitions {
		parts = append(parts, p)
	}
	if len(parts) > 0 {
		prods, err := r.Kafka.Producers(ctx, t, parts, reg)
		idle := r.Meta.Params.Duration("producer_idle", 30*time.Second)
		for _, pu := range prods {
			if r.now().Sub(pu.LastTimestamp) < idle || pu.TxnStart >= 0 {
				active = append(active, pu)
			}
		}
		switch {
		case err == nil:
		case allUnhosted(err):
			unasked = err.Error()
			r.Logf("no broker hosts some partitions of %s, so no producer can write to them (%v); the other partitions and the consumer groups were checked", t, err)
		default:
			// A broker that did not answer may lead a partition a
			// producer is writing to: that is not "no producer".
			unasked = err.Error()
			active = append(active, ProducerUse{Partition: -1, ProducerID: -1, LastTimestamp: r.now(), TxnStart: -1})
			r.Logf("could not ask every broker about producers on %s (%v): counted as an active producer until they answer", t, err)
		}
	}
	return groups, active, unasked, nil
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
	groups, active, unasked, err := k.attached(ctx, r)
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
		if pu.ProducerID < 0 {
			continue // the unanswered brokers, said below
		}
		p.Facts = append(p.Facts, fmt.Sprintf("producer %d wrote to partition %d at %s", pu.ProducerID, pu.Partition, pu.LastTimestamp.UTC().Format(time.RFC3339)))
	}
	if unasked != "" {
		p.Facts = append(p.Facts, "producers not asked: "+unasked)
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
		groups, active, _, err := k.attached(ctx, r)
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
	groups, active, unasked, err := k.attached(ctx, r)
	if err != nil {
		return nil, err
	}
	m := membersOn(groups)
	return []Check{
		{Name: "no consumer group has members on the topic", OK: len(m) == 0, Detail: fmt.Sprint(m)},
		{Name: "no producer is active on the topic", OK: len(active) == 0, Detail: producersDetail(active, unasked)},
	}, nil
}

// allUnhosted reports whether every partition in a Producers error is one
// no broker hosts.
func allUnhosted(err error) bool {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		if !errors.Is(e, ErrUnhosted) {
			return false
		}
	}
	return true
}

func producersDetail(active []ProducerUse, unasked string) string {
	d := fmt.Sprintf("%d active", len(active))
	if unasked != "" {
		d += "; not asked: " + unasked
	}
	return d
}
