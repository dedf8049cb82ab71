package cleanup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// detach makes sure no producer or consumer is attached to the topic before
// anything is deleted: with auto.create.topics.enable a client would
// recreate it behind the operator's back. It saves consumer groups'
// committed offsets, runs the inventory's client stop commands, then holds a
// gate that re-checks until nothing is attached.
type detach struct {
	o detachOpts
	// ends watch each topic's log end offsets where DescribeProducers does
	// not exist.
	ends map[string]*endWatch
}

// endWatch judges producers on brokers without DescribeProducers (Kafka
// before 2.8): every partition's log end offset, read at each re-check. A
// partition whose offset moved has a producer; the topic counts as idle
// once no offset moved for producer_idle. Until then it is not idle: "not
// seen writing yet" is not "nobody writes".
type endWatch struct {
	last  map[int32]int64
	since time.Time // when an offset last moved, or the first read
	// pending: nothing moved at the last read, but not for producer_idle yet.
	pending bool
}

// read reads the offsets again and returns the partitions that moved since
// the last read, and how long none has moved.
func (w *endWatch) read(ctx context.Context, env *steps.Env, topic string) (moved []int32, quiet time.Duration, unserved string, err error) {
	ends, err := env.Kafka.EndOffsets(ctx, topic)
	if err != nil && !allUnhosted(err) {
		return nil, 0, "", err
	} else if err != nil {
		unserved = err.Error()
	}
	now := env.Now()
	if w.last == nil {
		w.last, w.since = ends, now
		return nil, 0, unserved, nil
	}
	for p, o := range ends {
		if old, ok := w.last[p]; !ok || old != o {
			moved = append(moved, p)
		}
	}
	for p := range w.last {
		if _, ok := ends[p]; !ok {
			moved = append(moved, p) // its leader went away: not known idle
		}
	}
	slices.Sort(moved)
	moved = slices.Compact(moved)
	w.last = ends
	if len(moved) > 0 {
		w.since = now
	}
	return moved, now.Sub(w.since), unserved, nil
}

// watchEnds is the producers check without DescribeProducers: it returns
// an active "producer" per partition whose end offset moved (ProducerID
// -1: unknown) or, while the offsets have not been still for producer_idle,
// one for the topic (Partition -1), and says which in note.
func (k *detach) watchEnds(ctx context.Context, env *steps.Env, t string) (active []ports.ProducerUse, note string, err error) {
	if k.ends == nil {
		k.ends = map[string]*endWatch{}
	}
	w := k.ends[t]
	if w == nil {
		w = &endWatch{}
		k.ends[t] = w
	}
	moved, quiet, unserved, err := w.read(ctx, env, t)
	if err != nil {
		// An offset kremedy could not read may be one a producer moves.
		return []ports.ProducerUse{{Topic: t, Partition: -1, ProducerID: -1, TxnStart: -1, LastTimestamp: env.Now()}},
			fmt.Sprintf("log end offsets%s not read (%v): counted as an active producer", k.of(t), err), nil
	}
	if unserved != "" {
		env.Logf("no broker serves some partitions of %s, so no producer can write to them (%s)", t, unserved)
	}
	now := env.Now()
	w.pending = len(moved) == 0 && quiet < k.o.ProducerIdle
	for _, p := range moved {
		active = append(active, ports.ProducerUse{Topic: t, Partition: p, ProducerID: -1, TxnStart: -1, LastTimestamp: now})
	}
	switch {
	case len(moved) > 0:
		note = fmt.Sprintf("log end offsets moved on partitions %s: something writes to %q", fmt.Sprint(moved), t)
	case quiet < k.o.ProducerIdle:
		active = append(active, ports.ProducerUse{Topic: t, Partition: -1, ProducerID: -1, TxnStart: -1, LastTimestamp: now})
		note = fmt.Sprintf("log end offsets%s unchanged for %s of producer_idle %s", k.of(t), quiet.Round(time.Second), k.o.ProducerIdle)
	default:
		note = fmt.Sprintf("log end offsets%s unchanged for %s (producer_idle %s)", k.of(t), quiet.Round(time.Second), k.o.ProducerIdle)
	}
	return active, "no DescribeProducers (Kafka < 2.8): " + note, nil
}

// of is " of "t"" in a several-topic run's messages, "" in a one-topic run's.
func (k *detach) of(t string) string {
	if k.o.several() {
		return " of " + strconv.Quote(t)
	}
	return ""
}

// pending reports whether some topic's end-offset watch has not been still
// for producer_idle yet.
func (k *detach) pending() bool {
	for _, w := range k.ends {
		if w.pending {
			return true
		}
	}
	return false
}

type detachOpts struct {
	topicOpts
	// ProducerIdle: a producer that wrote within this long is attached.
	ProducerIdle time.Duration `opt:"producer_idle"`
	// Every is how often the gate re-checks.
	Every time.Duration `opt:"recheck_every" default:"2s"`
}

// attached lists what still uses the topic. unasked names partitions no
// broker answered for: when every broker said it hosts no replica, no
// producer can write to them either and they do not block; when a broker did
// not answer, they count as one active producer (the safer reading). Either
// way it is said in the check, not hidden.
func (k *detach) attached(ctx context.Context, env *steps.Env, f *Facts) (groups []ports.GroupUse, active []ports.ProducerUse, unasked string, err error) {
	reg, err := brokers.Registered(ctx, env.ZK)
	if err != nil {
		return nil, nil, "", err
	} else if len(reg) == 0 {
		// Every broker is stopped (a resumed run past the stop step): no
		// client can be attached to a cluster that does not run.
		return nil, nil, "", nil
	}
	var notes []string
	for _, t := range k.o.names() {
		g, a, u, err := k.attachedTo(ctx, env, f, t, reg)
		if err != nil {
			return nil, nil, "", err
		}
		groups, active = append(groups, g...), append(active, a...)
		if u != "" {
			notes = append(notes, u)
		}
	}
	return groups, active, strings.Join(notes, "; "), nil
}

// attachedTo is attached for topic t.
func (k *detach) attachedTo(ctx context.Context, env *steps.Env, f *Facts, t string, reg []int32) (groups []ports.GroupUse, active []ports.ProducerUse, unasked string, err error) {
	// A group a down or loading coordinator hides is left out, as
	// before ErrGroupsIncomplete: detach waits for the members it sees.
	groups, err = env.Kafka.Groups(ctx, t)
	if err != nil && !errors.Is(err, ports.ErrGroupsIncomplete) {
		return nil, nil, "", fmt.Errorf("consumer groups on %s: %w", t, err)
	}
	if k.o.several() {
		for i := range groups {
			groups[i].Topic = t
		}
	}
	var parts []int32
	for p := range f.Of(t).Partitions {
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return groups, nil, "", nil
	}
	if !f.Releases.DescribeProducers() {
		active, unasked, err = k.watchEnds(ctx, env, t)
		return groups, active, unasked, err
	}
	prods, err := env.Kafka.Producers(ctx, t, parts, reg)
	for _, pu := range prods {
		pu.Topic = t
		if env.Now().Sub(pu.LastTimestamp) < k.o.ProducerIdle || pu.TxnStart >= 0 {
			active = append(active, pu)
		}
	}
	switch {
	case err == nil:
	case allUnhosted(err):
		unasked = err.Error()
		env.Logf("no broker hosts some partitions of %s, so no producer can write to them (%v); the other partitions and the consumer groups were checked", t, err)
	default:
		// A broker that did not answer may lead a partition a producer is
		// writing to: that is not "no producer".
		unasked = err.Error()
		active = append(active, ports.ProducerUse{Topic: t, Partition: -1, ProducerID: -1, LastTimestamp: env.Now(), TxnStart: -1})
		env.Logf("could not ask every broker about producers on %s (%v): counted as an active producer until they answer", t, err)
	}
	return groups, active, unasked, nil
}

func membersOn(groups []ports.GroupUse) []string {
	var out []string
	for _, g := range groups {
		if len(g.Members) > 0 {
			on := ""
			if g.Topic != "" {
				on = " on " + g.Topic
			}
			out = append(out, fmt.Sprintf("group %s: %d members%s", g.Group, len(g.Members), on))
		}
	}
	return out
}

// saveArgs are the saved offsets of a detach's save action.
type saveArgs struct {
	Groups []ports.GroupUse `json:"groups"`
}

func (k *detach) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	f, err := facts(env)
	if err != nil {
		return nil, err
	}
	if f.Clean {
		return cleanNoOp(k.o.topicOpts, "detach from"), nil
	}
	groups, active, unasked, err := k.attached(ctx, env, f)
	if err != nil {
		return nil, err
	}
	t := k.o.quoted()
	p := &steps.Plan{Summary: fmt.Sprintf("detach every client from %s", t)}
	withOffsets := 0
	for _, g := range groups {
		if len(g.Offsets) > 0 {
			withOffsets++
		}
		p.Facts = append(p.Facts, fmt.Sprintf("group %s (%s): %d members on %s, committed offsets on %d partitions", g.Group, g.State, len(g.Members), cmp.Or(g.Topic, "the topic"), len(g.Offsets)))
	}
	for _, pu := range active {
		if pu.ProducerID < 0 {
			continue // the unanswered brokers, said below
		}
		on := fmt.Sprintf("partition %d", pu.Partition)
		if k.o.several() {
			on = fmt.Sprintf("%s-%d", pu.Topic, pu.Partition)
		}
		p.Facts = append(p.Facts, fmt.Sprintf("producer %d wrote to %s at %s", pu.ProducerID, on, pu.LastTimestamp.UTC().Format(time.RFC3339)))
	}
	if unasked != "" {
		p.Facts = append(p.Facts, "producers not asked: "+unasked)
	}
	if withOffsets > 0 {
		p.Actions = append(p.Actions, steps.Action{ID: "save-offsets", Op: steps.OpSave, Target: env.Artifact(artOffsets),
			Detail: fmt.Sprintf("committed offsets of %d groups on %s", withOffsets, t), Args: saveArgs{Groups: groups}})
	}
	for i, c := range env.Target.Clients {
		p.Actions = append(p.Actions, steps.Action{ID: fmt.Sprintf("stop-client-%d", i), Op: steps.OpSSH, Target: c.On(),
			Detail: fmt.Sprintf("%s (stop client %s)", c.Stop, c.Name), Args: c})
	}
	if m := membersOn(groups); len(m) > 0 || len(active) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("still attached: %v, %d active producers — stop them (kremedy cannot stop clients it does not know)", m, len(active)))
	} else if len(p.Actions) == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("no consumer group uses %s and no producer is active on it", t)
		return p, nil
	}
	// Whatever else the step does, it ends by waiting until nothing is
	// attached: a client may attach while the operator reads the plan.
	p.Actions = append(p.Actions, steps.Action{ID: "gate", Op: steps.OpWait, Target: strings.Join(k.o.names(), ", "),
		Detail: fmt.Sprintf("re-check every %s until no group has members on it and no producer is active", k.o.Every)})
	return p, nil
}

func (k *detach) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	f, err := facts(env)
	if err != nil {
		return err
	}
	for _, a := range p.Actions {
		switch a.Op {
		case steps.OpSave:
			args, err := steps.ArgsOf[saveArgs](a)
			if err != nil {
				return err
			}
			if err := env.Do(a, func() error { return atomicfile.WriteJSON(env.Artifact(artOffsets), args.Groups) }); err != nil {
				return err
			}
		case steps.OpSSH:
			c, err := steps.ArgsOf[ports.Client](a)
			if err != nil {
				return err
			}
			if err := env.Do(a, func() error {
				return env.Hosts.RunClient(ctx, c, c.Stop, func(l ports.Line) { env.Output(c.Name+" ("+c.Host+")", l) })
			}); err != nil {
				return fmt.Errorf("stop client %s: %w", c.Name, err)
			}
		case steps.OpWait:
			if err := env.Do(a, func() error { return k.gate(ctx, env, f) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// gate re-checks until nothing is attached, or the step's deadline.
func (k *detach) gate(ctx context.Context, env *steps.Env, f *Facts) error {
	for {
		groups, active, note, err := k.attached(ctx, env, f)
		if err != nil {
			return err
		}
		m := membersOn(groups)
		if len(m) == 0 && len(active) == 0 {
			env.Logf("no client is attached to %s%s", k.o.quoted(), suffix(note))
			return nil
		}
		env.Logf("still attached to %s: %v, %d active producers%s; waiting", k.o.quoted(), m, len(active), suffix(note))
		if env.Sleep(ctx, k.o.Every) != nil {
			return fmt.Errorf("%w: clients still attached to %s: %v, %d active producers. Nothing was deleted. Stop them and re-check", steps.ErrCheckFailed, k.o.quoted(), m, len(active))
		}
	}
}

func (k *detach) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	f, err := facts(env)
	if err != nil || f.Clean {
		return nil, err
	}
	groups, active, unasked, err := k.attached(ctx, env, f)
	// Without DescribeProducers, "idle" takes producer_idle of still end
	// offsets to see (a resume starts a new watch): wait for it, or for a
	// movement, re-checking as the gate does.
	for err == nil && k.pending() {
		if err := env.Sleep(ctx, k.o.Every); err != nil {
			return nil, err
		}
		groups, active, unasked, err = k.attached(ctx, env, f)
	}
	if err != nil {
		return nil, err
	}
	m := membersOn(groups)
	return []steps.Check{
		{Name: "no consumer group has members on " + k.o.what(), OK: len(m) == 0, Detail: fmt.Sprint(m)},
		{Name: "no producer is active on " + k.o.what(), OK: len(active) == 0, Detail: producersDetail(active, unasked)},
	}, nil
}

func suffix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
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
		if !errors.Is(e, ports.ErrUnhosted) {
			return false
		}
	}
	return true
}

func producersDetail(active []ports.ProducerUse, unasked string) string {
	d := fmt.Sprintf("%d active", len(active))
	if unasked != "" {
		d += "; not asked: " + unasked
	}
	return d
}
