package space

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// freeRecords is space-free-records: DeleteRecords, per partition in the
// broker's dirs, up to the lowest offset every consumer group committed.
type freeRecords struct{ o brokerOpts }

// deleteArgs are one DeleteRecords action's: the partition, the offset
// the plan bound it to, the log start then.
type deleteArgs struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Before    int64  `json:"before"`
	Start     int64  `json:"start"`
	Freed     int64  `json:"freed"`
}

func (k *freeRecords) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	if _, ok := env.Kafka.(ports.Records); !ok {
		return nil, fmt.Errorf("%w: this Kafka client cannot send DeleteRecords; nothing was changed", ports.ErrUnsupported)
	}
	l, err := k.o.look(ctx, env)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Facts: l.dfFacts()}
	if l.up {
		off, err := offlineDirs(ctx, env, l.id)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(l.space, brokers.Space.Full) && len(off) == 0 {
			p.NoOp = true
			p.Summary = fmt.Sprintf("broker %d runs with every log dir online and none full (95%% used or under 1 MiB free): no record is deleted", l.id)
			return p, nil
		}
	}
	groups := map[string]topicRead{}
	var total int64
	var gone []string
	for _, s := range l.space {
		for _, ps := range s.Partitions {
			a, note, err := k.planOne(ctx, env, l, ps, groups)
			if err != nil {
				return nil, err
			}
			p.Facts = append(p.Facts, note)
			if a != nil {
				args := a.Args.(deleteArgs)
				total += args.Freed
				gone = append(gone, fmt.Sprintf("%s-%d: offsets %d to %d (%d records)", args.Topic, args.Partition, args.Start, args.Before-1, args.Before-args.Start))
				p.Actions = append(p.Actions, *a)
			}
		}
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("no record of broker %d's dirs may be deleted: no partition has records every consumer group committed past in a whole segment", l.id)
		return p, nil
	}
	p.Summary = fmt.Sprintf("delete records every consumer group has committed past on %d partitions: about %s of whole segments freed on broker %d (and on every replica holding the same segments)", len(p.Actions), brokers.Bytes(total), l.id)
	p.Notes = append([]string{"CANNOT BE UNDONE: DeleteRecords deletes these records for good, on every replica; every consumer group has committed past them: " + strings.Join(gone, "; ") + ". " + unseen}, p.Notes...)
	if !l.up {
		p.Notes = append(p.Notes, fmt.Sprintf("broker %d is down: its own copies shrink only once it is back and learns the new log start offsets; until then the next step makes room on its filesystem", l.id))
	}
	return p, nil
}

// unseen is what the bound cannot see: offsets committed anywhere but to
// Kafka's groups.
const unseen = "The bound sees only offsets committed to Kafka's consumer groups: it cannot see consumers that keep their offsets elsewhere (MirrorMaker 2 sources, Flink or Spark jobs' checkpoints, a consumer using assign() without commits) nor a group whose offsets expired (offsets.retention.minutes); make sure none of them still reads these topics before you confirm"

// topicRead is what planOne reads once per topic: its groups and its
// partitions' log ends (a partition absent: its leader did not say).
type topicRead struct {
	groups []ports.GroupUse
	ends   map[int32]int64
}

// planOne plans one partition: an action, or none with why (the fact).
func (k *freeRecords) planOne(ctx context.Context, env *steps.Env, l *look, ps brokers.PartitionSpace, topics map[string]topicRead) (*steps.Action, string, error) {
	name := fmt.Sprintf("%s-%d", ps.Topic, ps.Partition)
	if strings.HasPrefix(ps.Topic, "__") {
		return nil, fmt.Sprintf("%s: %s; an internal topic (offsets, transactions): kremedy never deletes its records", name, brokers.Bytes(ps.Bytes)), nil
	}
	pv, ok := l.partition(ps)
	if !ok || pv.Leader < 0 || pv.Leader == l.id && !l.up {
		return nil, fmt.Sprintf("%s: %s; no leader to delete records on: left alone", name, brokers.Bytes(ps.Bytes)), nil
	}
	tr, ok := topics[ps.Topic]
	if !ok {
		var err error
		if tr.groups, err = env.Kafka.Groups(ctx, ps.Topic); err != nil {
			return nil, "", groupsUnread(ps.Topic, err, "nothing was changed")
		}
		// A partition whose leader does not say its end yet (latest
		// OFFSET_NOT_AVAILABLE after an election) is bounded by the
		// commits alone, and Kafka refuses DeleteRecords past its end.
		tr.ends, _ = env.Kafka.EndOffsets(ctx, ps.Topic)
		topics[ps.Topic] = tr
	}
	start, err := logStart(ctx, env, ps.Topic, ps.Partition)
	if err != nil {
		return nil, "", fmt.Errorf("%w; nothing was changed", err)
	}
	end, known := tr.ends[ps.Partition]
	if !known {
		end = -1
	}
	before, ok, why := Bound(tr.groups, ps.Partition, start, end)
	head := fmt.Sprintf("%s: %s in %d segments (oldest from %d), log start %d, log end %s on leader %d", name, brokers.Bytes(ps.Bytes), len(ps.Segments), ps.Oldest(), start, orUnknown(end), pv.Leader)
	if !ok {
		return nil, head + ": " + why + ": nothing deleted", nil
	}
	freed, n := ps.FreedBelow(before)
	if n == 0 {
		return nil, head + ": " + why + ", but no whole segment lies below it: nothing deleted", nil
	}
	a := &steps.Action{ID: "delete-records/" + name, Op: steps.OpKafka, Target: name, Broker: pv.Leader,
		Detail: fmt.Sprintf("DeleteRecords below offset %d on leader %d (log start %d → %d, %d records): %s; frees %d segments, %s on broker %d", before, pv.Leader, start, before, before-start, why, n, brokers.Bytes(freed), l.id),
		Args:   deleteArgs{Topic: ps.Topic, Partition: ps.Partition, Before: before, Start: start, Freed: freed}}
	return a, head + ": " + why, nil
}

func (k *freeRecords) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	rec := env.Kafka.(ports.Records)
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[deleteArgs](a)
		if err != nil {
			return err
		}
		if err := env.Do(a, func() error { return deleteOne(ctx, env, rec, args) }); err != nil {
			return err
		}
	}
	return nil
}

// deleteOne deletes one partition's records below the planned offset,
// after checking again that every group is still at or past it; done
// already (the log start there) is success.
func deleteOne(ctx context.Context, env *steps.Env, rec ports.Records, a deleteArgs) error {
	name := fmt.Sprintf("%s-%d", a.Topic, a.Partition)
	gs, err := env.Kafka.Groups(ctx, a.Topic)
	if err != nil {
		return groupsUnread(a.Topic, err, "no record of "+name+" was deleted")
	}
	if ok, why := StillBound(gs, a.Partition, a.Before); !ok {
		return fmt.Errorf("%w: %s: %s since the plan; no record of %s was deleted. Run again: the new plan bounds it to the groups' offsets now", steps.ErrRefused, name, why, name)
	}
	got, err := rec.DeleteRecords(ctx, a.Topic, map[int32]int64{a.Partition: a.Before})
	if err != nil {
		// The leader moves its log start at once, then waits for every
		// replica on a live broker to follow: one in a broker's offline
		// dir never does (REQUEST_TIMED_OUT, seen on the JBOD lab), and
		// catches up once that broker starts again.
		start, err2 := logStart(ctx, env, a.Topic, a.Partition)
		if err2 != nil || start < a.Before {
			return fmt.Errorf("%w (the records of %s below %d may or may not be deleted: `kremedy resume` checks again)", err, name, a.Before)
		}
		env.Logf("%s: DeleteRecords answered %v, but the leader's log start is %d: deleted there; a replica that cannot fetch now (in an offline dir) follows once its broker starts again", name, err, start)
		got = map[int32]int64{a.Partition: start}
	}
	if got[a.Partition] < a.Before {
		return fmt.Errorf("%w: %s's log start is %d after DeleteRecords below %d", steps.ErrCheckFailed, name, got[a.Partition], a.Before)
	}
	env.Logf("%s: log start offset now %d (%d records deleted; about %s of segments freed once retention runs)", name, got[a.Partition], a.Before-a.Start, brokers.Bytes(a.Freed))
	return env.Save(deletedKey(a.Topic, a.Partition), a.Before)
}

// deletedKey is where a DeleteRecords this run sent is journaled: Verify
// checks only the partitions this run trimmed.
func deletedKey(topic string, p int32) string { return fmt.Sprintf("space/deleted/%s-%d", topic, p) }

// Verify: on every partition this run sent DeleteRecords for, no record a
// group has not committed past is gone: the log start is at or below every
// group's commit. (Other partitions may have a stale group's commit below
// a log start retention moved: not this run's doing, and not its check.)
func (k *freeRecords) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	l, err := k.o.look(ctx, env)
	if err != nil {
		return nil, err
	}
	var bad []string
	n := 0
	for _, s := range l.space {
		for _, ps := range s.Partitions {
			var before int64
			if did, err := env.Load(deletedKey(ps.Topic, ps.Partition), &before); err != nil {
				return nil, err
			} else if !did {
				continue
			}
			gs, err := env.Kafka.Groups(ctx, ps.Topic)
			if err != nil {
				return nil, groupsUnread(ps.Topic, err, "the check was not made")
			}
			start, err := logStart(ctx, env, ps.Topic, ps.Partition)
			if err != nil {
				return nil, err
			}
			n++
			for _, g := range gs {
				if o, has := g.Offsets[ps.Partition]; has && o < start {
					bad = append(bad, fmt.Sprintf("%s-%d: log start %d past group %s's commit %d", ps.Topic, ps.Partition, start, g.Group, o))
				}
			}
		}
	}
	return []steps.Check{{Name: "no record a consumer group has not committed past was deleted", OK: len(bad) == 0,
		Detail: fmt.Sprintf("%d partitions this run trimmed read again: %s", n, orNone(bad))}}, nil
}

func orUnknown(end int64) string {
	if end < 0 {
		return "unknown"
	}
	return fmt.Sprint(end)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "every log start at or below every group's commit"
	}
	return strings.Join(s, "; ")
}

// logStart is one partition's log start offset, from its leader.
func logStart(ctx context.Context, env *steps.Env, topic string, p int32) (int64, error) {
	starts, err := env.Kafka.(ports.Records).StartOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	s, ok := starts[p]
	if !ok {
		return 0, fmt.Errorf("%s-%d: no log start offset in the leader's answer", topic, p)
	}
	return s, nil
}
