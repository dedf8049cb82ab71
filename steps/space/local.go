package space

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// localKey is the topic config space-lower-local sets and
// space-restore-local sets back.
const localKey = "local.retention.bytes"

// loweredKey is where the run keeps what it lowered: the topics, each
// with its override before the run (kept from the first time only).
const loweredKey = "space/local-lowered"

// lowered is one tiered topic whose local retention the run lowered.
type lowered struct {
	Topic string `json:"topic"`
	Had   bool   `json:"had"` // an override was set before the run
	Old   string `json:"old,omitempty"`
	// UpTo[p] is the highest uploaded offset of each partition in the
	// broker's troubled dirs at the plan: the local copies below it go.
	UpTo map[int32]int64 `json:"up_to"`
}

// lowerLocal is space-lower-local: on a running broker with a full dir,
// a tiered topic's local copies of uploaded segments are freed by
// lowering its local.retention.bytes to 0 (the broker deletes only
// segments the remote store holds: nothing is lost, consumers read them
// from there); restoreLocal sets the old value back at the end.
type lowerLocal struct{ o lowerOpts }

type lowerOpts struct {
	brokerOpts
	// FreeTimeout is how long to wait for the broker to delete the local
	// copies: it does at its next retention check
	// (log.retention.check.interval.ms, 5 minutes by default).
	FreeTimeout time.Duration `opt:"free_timeout" default:"10m"`
}

type lowerArgs struct {
	Topic string          `json:"topic"`
	UpTo  map[int32]int64 `json:"up_to"`
}

func (k *lowerLocal) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	p := &steps.Plan{NoOp: true}
	tk, ok1 := env.Kafka.(ports.Tiered)
	_, ok2 := env.Kafka.(ports.Reassigner)
	if !ok1 || !ok2 {
		p.Summary = "this Kafka client cannot read tiered storage or set topic configs: nothing to do here"
		return p, nil
	}
	l, err := k.o.look(ctx, env)
	if err != nil {
		return nil, err
	}
	p.Facts = l.dfFacts()
	if !l.up {
		p.Summary = fmt.Sprintf("broker %d is down: a stopped broker deletes nothing, so lowering local retention frees nothing on it now; the next steps make room", l.id)
		return p, nil
	}
	parts := fullOnline(ctx, env, l)
	if len(parts) == 0 {
		p.Summary = fmt.Sprintf("no online log dir of broker %d is full: nothing to do", l.id)
		return p, nil
	}
	var topics []string
	for _, ps := range parts {
		if !slices.Contains(topics, ps.Topic) && !strings.HasPrefix(ps.Topic, "__") {
			topics = append(topics, ps.Topic)
		}
	}
	slices.Sort(topics)
	up, err := tk.Tiered(ctx, topics)
	if err != nil && len(up) == 0 {
		p.Summary = fmt.Sprintf("tiered storage not read (%v): nothing lowered; the next steps free space without it", err)
		return p, nil
	}
	acts, total := lowerActions(l.id, parts, up)
	if len(acts) == 0 {
		p.Summary = fmt.Sprintf("no tiered topic in broker %d's full dirs has local copies of uploaded segments: nothing to do", l.id)
		return p, nil
	}
	p.NoOp, p.Actions = false, acts
	p.Summary = fmt.Sprintf("lower %s to 0 on %d tiered topics: broker %d deletes about %s of local copies of segments the remote store holds (and so does every other replica); nothing is lost, consumers read them from the remote store; the last step sets each value back", localKey, len(acts), l.id, brokers.Bytes(total))
	p.Notes = append(p.Notes, fmt.Sprintf("the broker deletes them at its next retention check (log.retention.check.interval.ms, 5 minutes by default): the step waits up to %s", k.o.FreeTimeout))
	if err != nil {
		p.Notes = append(p.Notes, "some partitions' uploads were not read, and are left alone: "+err.Error())
	}
	return p, nil
}

// fullOnline are the partitions in the broker's full dirs that are online
// (an offline dir's logs are not managed: lowering frees nothing there).
func fullOnline(ctx context.Context, env *steps.Env, l *look) []brokers.PartitionSpace {
	off, _ := offlineDirs(ctx, env, l.id)
	var out []brokers.PartitionSpace
	for _, s := range l.space {
		if !s.Full() || slices.ContainsFunc(off, func(d string) bool { return strings.HasPrefix(d, s.Dir+" ") }) {
			continue
		}
		out = append(out, s.Partitions...)
	}
	return out
}

// lowerActions is one action per tiered topic whose partitions hold local
// copies of uploaded segments, and the bytes that frees on the broker.
func lowerActions(id int32, parts []brokers.PartitionSpace, up map[string]map[int32]int64) ([]steps.Action, int64) {
	byTopic := map[string]map[int32]int64{}
	freed := map[string]int64{}
	for _, ps := range parts {
		u, ok := up[ps.Topic][ps.Partition]
		if !ok || u < 0 {
			continue
		}
		if c := uploadedCopies(ps, u); c > 0 {
			if byTopic[ps.Topic] == nil {
				byTopic[ps.Topic] = map[int32]int64{}
			}
			byTopic[ps.Topic][ps.Partition] = u
			freed[ps.Topic] += c
		}
	}
	var acts []steps.Action
	var total int64
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		total += freed[t]
		acts = append(acts, steps.Action{ID: "lower-local/" + t, Op: steps.OpKafka, Target: t, Broker: id,
			Detail: fmt.Sprintf("set %s=0 on tiered topic %s: about %s of local copies of uploaded segments freed on broker %d (each partition's copies below its highest uploaded offset %v); the old value is kept and set back at the end", localKey, t, brokers.Bytes(freed[t]), id, byTopic[t]),
			Args:   lowerArgs{Topic: t, UpTo: byTopic[t]}})
	}
	return acts, total
}

// uploadedCopies are the bytes of p's whole segments up to offset up (the
// highest the remote store holds): local copies. The active segment is
// never one.
func uploadedCopies(p brokers.PartitionSpace, up int64) int64 {
	var b int64
	for i, s := range p.Segments {
		if i+1 < len(p.Segments) && p.Segments[i+1].Base <= up+1 {
			b += s.Bytes
		}
	}
	return b
}

func (k *lowerLocal) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	rs := env.Kafka.(ports.Reassigner)
	var done []lowered
	if _, err := env.Load(loweredKey, &done); err != nil {
		return err
	}
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[lowerArgs](a)
		if err != nil {
			return err
		}
		if err := env.Do(a, func() error { return lowerOne(ctx, env, rs, args, &done) }); err != nil {
			return err
		}
	}
	return nil
}

// lowerOne keeps topic's override before the run (once: a resume finds
// its own 0 there), then sets it to 0.
func lowerOne(ctx context.Context, env *steps.Env, rs ports.Reassigner, a lowerArgs, done *[]lowered) error {
	if i := slices.IndexFunc(*done, func(x lowered) bool { return x.Topic == a.Topic }); i < 0 {
		cur, err := rs.Overrides(ctx, []string{localKey}, nil, []string{a.Topic})
		if err != nil {
			return fmt.Errorf("read %s of %s before changing it: %w; nothing was changed", localKey, a.Topic, err)
		}
		was := lowered{Topic: a.Topic, UpTo: a.UpTo}
		for _, e := range cur {
			if e.Resource == ports.ResourceTopic && e.Name == a.Topic && e.Key == localKey {
				was.Had, was.Old = true, e.Value
			}
		}
		*done = append(*done, was)
		if err := env.Save(loweredKey, *done); err != nil {
			return err
		}
	}
	zero := "0"
	if err := rs.SetConfig(ctx, ports.ResourceTopic, a.Topic, localKey, &zero); err != nil {
		return fmt.Errorf("set %s=0 on %s: %w", localKey, a.Topic, err)
	}
	env.Logf("%s: %s=0; its old value is kept for the last step", a.Topic, localKey)
	return nil
}

// Verify waits until the broker has deleted the local copies: every
// partition lowered has no whole segment left below its planned highest
// uploaded offset.
func (k *lowerLocal) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	var done []lowered
	if _, err := env.Load(loweredKey, &done); err != nil || len(done) == 0 {
		return nil, err
	}
	deadline := env.Now().Add(k.o.FreeTimeout)
	for {
		l, err := k.o.look(ctx, env)
		if err != nil {
			return nil, err
		}
		left := copiesLeft(l, done)
		if len(left) == 0 || !env.Now().Before(deadline) {
			return []steps.Check{{Name: fmt.Sprintf("broker %d deleted the local copies of uploaded segments of the tiered topics lowered", l.id), OK: len(left) == 0,
				Detail: fmt.Sprintf("still there: %v; the broker deletes them at its retention check (log.retention.check.interval.ms): resume later, or read its server.log", left)}}, nil
		}
		if err := env.Sleep(ctx, 5*time.Second); err != nil {
			return nil, err
		}
	}
}

// copiesLeft names each partition lowered that still has a whole local
// segment below its planned highest uploaded offset.
func copiesLeft(l *look, done []lowered) []string {
	var left []string
	for _, s := range l.space {
		for _, ps := range s.Partitions {
			for _, d := range done {
				if u, ok := d.UpTo[ps.Partition]; ok && d.Topic == ps.Topic && uploadedCopies(ps, u) > 0 {
					left = append(left, fmt.Sprintf("%s-%d", ps.Topic, ps.Partition))
				}
			}
		}
	}
	return left
}

// restoreLocal is space-restore-local: the local retention the run
// lowered set back to what it was (the override deleted when there was
// none).
type restoreLocal struct{}

type restoreArgs struct {
	Topic string `json:"topic"`
	Had   bool   `json:"had"`
	Old   string `json:"old,omitempty"`
}

func (k *restoreLocal) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	p := &steps.Plan{NoOp: true}
	var done []lowered
	if _, err := env.Load(loweredKey, &done); err != nil {
		return nil, err
	}
	rs, ok := env.Kafka.(ports.Reassigner)
	if len(done) == 0 || !ok {
		p.Summary = "this run lowered no local retention: nothing to set back"
		return p, nil
	}
	var topics []string
	for _, d := range done {
		topics = append(topics, d.Topic)
	}
	cur, err := currentLocal(ctx, rs, topics)
	if err != nil {
		return nil, err
	}
	for _, d := range done {
		now, set := cur[d.Topic]
		if set == d.Had && now == d.Old {
			p.Facts = append(p.Facts, fmt.Sprintf("%s: %s is as it was before the run (%s)", d.Topic, localKey, was(d)))
			continue
		}
		p.Actions = append(p.Actions, steps.Action{ID: "restore-local/" + d.Topic, Op: steps.OpKafka, Target: d.Topic,
			Detail: fmt.Sprintf("set %s of %s back to %s", localKey, d.Topic, was(d)), Args: restoreArgs{Topic: d.Topic, Had: d.Had, Old: d.Old}})
	}
	if len(p.Actions) == 0 {
		p.Summary = "every local retention this run lowered is as it was: nothing to set back"
		return p, nil
	}
	p.NoOp = false
	p.Summary = fmt.Sprintf("set %s back on %d tiered topics, as it was before this run", localKey, len(p.Actions))
	return p, nil
}

// was says a topic's local retention before the run.
func was(d lowered) string {
	if !d.Had {
		return "no override (the topic's default: retention.bytes)"
	}
	return d.Old
}

// currentLocal is each topic's local.retention.bytes override now.
func currentLocal(ctx context.Context, rs ports.Reassigner, topics []string) (map[string]string, error) {
	es, err := rs.Overrides(ctx, []string{localKey}, nil, topics)
	if err != nil {
		return nil, fmt.Errorf("read %s of %v: %w; nothing was changed", localKey, topics, err)
	}
	out := map[string]string{}
	for _, e := range es {
		if e.Resource == ports.ResourceTopic && e.Key == localKey {
			out[e.Name] = e.Value
		}
	}
	return out, nil
}

func (k *restoreLocal) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	rs := env.Kafka.(ports.Reassigner)
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[restoreArgs](a)
		if err != nil {
			return err
		}
		var v *string
		if args.Had {
			v = &args.Old
		}
		if err := env.Do(a, func() error { return rs.SetConfig(ctx, ports.ResourceTopic, args.Topic, localKey, v) }); err != nil {
			return fmt.Errorf("set %s of %s back: %w; `kremedy resume` tries again", localKey, args.Topic, err)
		}
	}
	return nil
}

// Verify: every topic lowered has its local retention as before the run.
func (k *restoreLocal) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	var done []lowered
	if _, err := env.Load(loweredKey, &done); err != nil || len(done) == 0 {
		return nil, err
	}
	rs, ok := env.Kafka.(ports.Reassigner)
	if !ok {
		return nil, nil
	}
	var topics []string
	for _, d := range done {
		topics = append(topics, d.Topic)
	}
	cur, err := currentLocal(ctx, rs, topics)
	if err != nil {
		return nil, err
	}
	var checks []steps.Check
	for _, d := range done {
		now, set := cur[d.Topic]
		checks = append(checks, steps.Check{Name: fmt.Sprintf("%s of %s as before the run", localKey, d.Topic), OK: set == d.Had && now == d.Old,
			Detail: fmt.Sprintf("now %q (set: %v), before %s", now, set, was(d))})
	}
	return checks, nil
}
