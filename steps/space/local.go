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
// space-restore-local sets back; copyOff is the one that makes a tiered
// topic stop uploading (Kafka 3.9+): its local retention is then its
// retention, and Kafka refuses a lower one.
const (
	localKey = "local.retention.bytes"
	copyOff  = "remote.log.copy.disable"
)

// loweredKey is where the run keeps what it lowered: the topics, each
// with its override before the run (kept from the first time only).
const loweredKey = "space/local-lowered"

// lowered is one tiered topic whose local retention the run lowered.
type lowered struct {
	Topic string `json:"topic"`
	Had   bool   `json:"had"` // an override was set before the run
	Old   string `json:"old,omitempty"`
	// UpTo[p] is the highest uploaded offset of each partition in the
	// broker's full dirs at the plan: the local copies below it go.
	UpTo map[int32]int64 `json:"up_to"`
}

// lowerLocal is space-lower-local: on a running broker with a full online
// dir, a tiered topic's local copies of uploaded segments are freed by
// lowering its local.retention.bytes to 0 (the broker deletes only
// segments the remote store holds: nothing is lost, consumers read them
// from there); restoreLocal sets the old value back at the end.
type lowerLocal struct{ o lowerOpts }

type lowerOpts struct {
	brokerOpts
	// FreeTimeout is how long to wait for the broker to delete the local
	// copies: it does at its next retention check
	// (log.retention.check.interval.ms, 5 minutes by default), and
	// removes the files file.delete.delay.ms later (a minute).
	FreeTimeout time.Duration `opt:"free_timeout" default:"10m"`
}

// lowerArgs are one topic's: the partitions' highest uploaded offsets and
// the override before the run, as the plan read it.
type lowerArgs struct {
	Topic string          `json:"topic"`
	UpTo  map[int32]int64 `json:"up_to"`
	Had   bool            `json:"had"`
	Old   string          `json:"old,omitempty"`
}

func (k *lowerLocal) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	p := &steps.Plan{NoOp: true}
	tk, ok1 := env.Kafka.(ports.Tiered)
	rs, ok2 := env.Kafka.(ports.Reassigner)
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
	parts := onlineParts(ctx, env, l, true)
	topics := topicsOf(parts)
	if len(topics) == 0 {
		p.Summary = fmt.Sprintf("no online log dir of broker %d is full: nothing to do", l.id)
		return p, nil
	}
	up, err := tk.Tiered(ctx, topics)
	if err != nil && len(up) == 0 {
		p.Summary = fmt.Sprintf("tiered storage not read (%v): nothing lowered; the next steps free space without it", err)
		return p, nil
	}
	if err != nil {
		p.Notes = append(p.Notes, "some partitions' uploads were not read, and are left alone: "+err.Error())
	}
	cur, err := rs.Overrides(ctx, []string{localKey, copyOff}, nil, slices.Sorted(maps.Keys(up)))
	if err != nil {
		return nil, fmt.Errorf("read %s of the tiered topics: %w; nothing was changed", localKey, err)
	}
	var done []lowered
	if _, err := env.Load(loweredKey, &done); err != nil {
		return nil, err
	}
	acts, total, notes := lowerActions(l.id, parts, up, overridesOf(cur), done)
	p.Notes = append(p.Notes, notes...)
	if len(acts) == 0 {
		p.Summary = fmt.Sprintf("no tiered topic in broker %d's full online dirs has local copies of uploaded segments to free: nothing to do", l.id)
		return p, nil
	}
	p.NoOp, p.Actions = false, acts
	p.Summary = fmt.Sprintf("lower %s to 0 on %d tiered topics: broker %d deletes about %s of local copies of segments the remote store holds (and so does every other replica); nothing is lost, consumers read them from the remote store; the last step sets each value back", localKey, len(acts), l.id, brokers.Bytes(total))
	p.Notes = append(p.Notes, fmt.Sprintf("the broker deletes them at its next retention check (log.retention.check.interval.ms, 5 minutes by default) and removes the files a minute later (file.delete.delay.ms): the step waits up to %s", k.o.FreeTimeout))
	return p, nil
}

// onlineParts are the partitions in the broker's online dirs, only the
// full ones when full (an offline dir's logs are not managed: lowering
// frees nothing there; a dir no longer full may still hold the copies).
func onlineParts(ctx context.Context, env *steps.Env, l *look, full bool) []brokers.PartitionSpace {
	off, _ := offlineDirs(ctx, env, l.id)
	var out []brokers.PartitionSpace
	for _, s := range l.space {
		if full && !s.Full() || slices.ContainsFunc(off, func(d string) bool { return strings.HasPrefix(d, s.Dir+" ") }) {
			continue
		}
		out = append(out, s.Partitions...)
	}
	return out
}

// topicsOf are the partitions' topics, internal ones left out.
func topicsOf(parts []brokers.PartitionSpace) []string {
	var out []string
	for _, ps := range parts {
		if !slices.Contains(out, ps.Topic) && !strings.HasPrefix(ps.Topic, "__") {
			out = append(out, ps.Topic)
		}
	}
	slices.Sort(out)
	return out
}

// overridesOf maps topic → key → its override.
func overridesOf(es []ports.ConfigEntry) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, e := range es {
		if e.Resource != ports.ResourceTopic {
			continue
		}
		if out[e.Name] == nil {
			out[e.Name] = map[string]string{}
		}
		out[e.Name][e.Key] = e.Value
	}
	return out
}

// lowerActions is one action per tiered topic whose partitions hold local
// copies of uploaded segments, the bytes that frees on the broker, and
// notes on the topics left alone: uploads turned off (Kafka refuses a
// lower local retention), lowered by this run already, or at 0 with no
// word of it in this run (an earlier run's, probably: its resume sets it
// back; kremedy never takes 0 for a topic's own value).
func lowerActions(id int32, parts []brokers.PartitionSpace, up map[string]map[int32]int64, cur map[string]map[string]string, done []lowered) ([]steps.Action, int64, []string) {
	byTopic := map[string]map[int32]int64{}
	freed := map[string]int64{}
	for _, ps := range parts {
		u, ok := up[ps.Topic][ps.Partition]
		if !ok || u < 0 {
			continue
		}
		if c, _ := ps.FreedBelow(u + 1); c > 0 {
			if byTopic[ps.Topic] == nil {
				byTopic[ps.Topic] = map[int32]int64{}
			}
			byTopic[ps.Topic][ps.Partition] = u
			freed[ps.Topic] += c
		}
	}
	var acts []steps.Action
	var notes []string
	var total int64
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		old, had := cur[t][localKey]
		switch {
		case strings.EqualFold(cur[t][copyOff], "true"):
			notes = append(notes, fmt.Sprintf("%s: %s=true (uploads off): its local retention is its retention and Kafka refuses a lower one; left alone", t, copyOff))
			continue
		case slices.ContainsFunc(done, func(d lowered) bool { return d.Topic == t }):
			notes = append(notes, fmt.Sprintf("%s: lowered by this run already; the broker deletes its copies at its next retention check", t))
			continue
		case had && old == "0":
			notes = append(notes, fmt.Sprintf("%s: %s is 0 already, and this run did not set it: probably an earlier kremedy run's, whose last step would set it back (`kremedy resume` that run), or set it back yourself (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config %s=OLD, or --delete-config %s when it had none); left alone", t, localKey, t, localKey, localKey))
			continue
		}
		total += freed[t]
		was := "no override"
		if had {
			was = old
		}
		acts = append(acts, steps.Action{ID: "lower-local/" + t, Op: steps.OpKafka, Target: t, Broker: id,
			Detail: fmt.Sprintf("set %s=0 on tiered topic %s (now: %s): about %s of local copies of uploaded segments freed on broker %d (each partition's copies below its highest uploaded offset %v); the last step sets it back to %s", localKey, t, was, brokers.Bytes(freed[t]), id, byTopic[t], was),
			Args:   lowerArgs{Topic: t, UpTo: byTopic[t], Had: had, Old: old}})
	}
	return acts, total, notes
}

func (k *lowerLocal) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	rs := env.Kafka.(ports.Reassigner)
	var done []lowered
	if _, err := env.Load(loweredKey, &done); err != nil {
		return err
	}
	for i, a := range p.Actions {
		args, err := steps.ArgsOf[lowerArgs](a)
		if err != nil {
			return err
		}
		if err := env.Do(a, func() error { return lowerOne(ctx, env, rs, args, &done) }); err != nil {
			return fmt.Errorf("%w. Lowered so far (set back by the last step, or by hand): %v; not lowered: %d topics. Fix the cause and `kremedy resume`", err, loweredTopics(done), len(p.Actions)-i)
		}
	}
	return nil
}

func loweredTopics(done []lowered) []string {
	var out []string
	for _, d := range done {
		out = append(out, fmt.Sprintf("%s (was %s)", d.Topic, was(d)))
	}
	return out
}

// lowerOne journals the topic's override before the run (once: a resume
// finds it there, never its own 0), then sets it to 0.
func lowerOne(ctx context.Context, env *steps.Env, rs ports.Reassigner, a lowerArgs, done *[]lowered) error {
	if !slices.ContainsFunc(*done, func(x lowered) bool { return x.Topic == a.Topic }) {
		*done = append(*done, lowered{Topic: a.Topic, Had: a.Had, Old: a.Old, UpTo: a.UpTo})
		if err := env.Save(loweredKey, *done); err != nil {
			return err
		}
	}
	zero := "0"
	if err := rs.SetConfig(ctx, ports.ResourceTopic, a.Topic, localKey, &zero); err != nil {
		return fmt.Errorf("set %s=0 on %s: %w", localKey, a.Topic, err)
	}
	env.Logf("%s: %s=0 (it was %s; the last step sets it back)", a.Topic, localKey, was(lowered{Had: a.Had, Old: a.Old}))
	return nil
}

// Verify waits until the broker has deleted the local copies and removed
// their files: no partition lowered keeps a whole segment below its
// planned highest uploaded offset, nor a *.deleted file. A broker that is
// down, or a dir gone offline, deletes nothing: the next steps make room,
// and the copies go once it runs.
func (k *lowerLocal) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	var done []lowered
	if _, err := env.Load(loweredKey, &done); err != nil || len(done) == 0 {
		return nil, err
	}
	name := "the local copies of uploaded segments of the tiered topics lowered are deleted"
	deadline := env.Now().Add(k.o.FreeTimeout)
	for {
		l, err := k.o.look(ctx, env)
		if err != nil {
			return nil, err
		}
		if !l.up {
			return []steps.Check{{Name: name, OK: true, Detail: fmt.Sprintf("broker %d is down: it deletes them once it runs; the next steps make room meanwhile", l.id)}}, nil
		}
		left := copiesLeft(onlineParts(ctx, env, l, false), done)
		if len(left) == 0 || !env.Now().Before(deadline) {
			return []steps.Check{{Name: name, OK: len(left) == 0,
				Detail: fmt.Sprintf("still there after %s: %v. The broker deletes them at its retention check (log.retention.check.interval.ms) and removes the files file.delete.delay.ms later; read its server.log, then `kremedy resume` (a higher --set free_timeout waits longer)", k.o.FreeTimeout, left)}}, nil
		}
		if err := env.Sleep(ctx, 5*time.Second); err != nil {
			return nil, err
		}
	}
}

// copiesLeft names each partition lowered that still has a whole local
// segment below its planned highest uploaded offset, or files renamed for
// deletion and not yet removed.
func copiesLeft(parts []brokers.PartitionSpace, done []lowered) []string {
	var left []string
	for _, ps := range parts {
		for _, d := range done {
			u, ok := d.UpTo[ps.Partition]
			if !ok || d.Topic != ps.Topic {
				continue
			}
			if c, _ := ps.FreedBelow(u + 1); c > 0 {
				left = append(left, fmt.Sprintf("%s-%d (%s of copies)", ps.Topic, ps.Partition, brokers.Bytes(c)))
			} else if ps.Deleted > 0 {
				left = append(left, fmt.Sprintf("%s-%d (%s renamed *.deleted, not yet removed)", ps.Topic, ps.Partition, brokers.Bytes(ps.Deleted)))
			}
		}
	}
	return left
}
