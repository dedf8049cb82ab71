package space

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// moveDirs is space-move-dirs: on a running broker with several log dirs
// (JBOD), move whole replicas off a dir short of headroom to the broker's
// online dir with the most room (AlterReplicaLogDirs), and wait until
// Kafka swapped each copy in and deleted the old one. Nothing is lost:
// the replica stays on the same broker.
type moveDirs struct{ o moveDirsOpts }

type moveDirsOpts struct {
	brokerOpts
	// Headroom is the share of each dir's filesystem to have free
	// (percent): a source is relieved until it has that much, a target
	// takes a replica only if it keeps that much after it.
	Headroom int `opt:"headroom" default:"20"`
	// Timeout bounds each wait: a future replica catching up, the old
	// copy deleted (file.delete.delay.ms after the swap, 60 s by default).
	Timeout time.Duration `opt:"move_timeout" default:"30m"`
}

// movePhase is what one of move-dirs' actions does.
type movePhase string

const (
	phaseMove movePhase = "move" // AlterReplicaLogDirs, then the swap
	phaseRoom movePhase = "room" // the source dir's filesystem freed
)

// dirMoveArgs are one action's: a replica's move from one dir to another,
// or the wait for From's filesystem to have Expect bytes free.
type dirMoveArgs struct {
	Phase     movePhase `json:"phase"`
	Topic     string    `json:"topic,omitempty"`
	Partition int32     `json:"partition"`
	From      string    `json:"from"`
	To        string    `json:"to,omitempty"`
	Bytes     int64     `json:"bytes,omitempty"`
	Expect    int64     `json:"expect,omitempty"`
}

// dirRoom is one log dir's room as the plan spends it.
type dirRoom struct {
	s       brokers.Space
	free    int64
	want    int64
	offline string // DescribeLogDirs' error for an offline dir
}

func (k *moveDirs) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	mv, ok := env.Kafka.(ports.DirMover)
	rec, ok2 := env.Kafka.(ports.Records)
	if !ok || !ok2 {
		return nil, fmt.Errorf("%w: this Kafka client cannot send AlterReplicaLogDirs; nothing was changed", ports.ErrUnsupported)
	}
	l, err := k.o.look(ctx, env)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Facts: l.dfFacts()}
	switch {
	case len(l.host.LogDirs) < 2:
		p.NoOp, p.Summary = true, fmt.Sprintf("broker %d has one log dir: there is no other dir of it to move replicas to", l.id)
		return p, nil
	case !l.up:
		p.NoOp, p.Summary = true, fmt.Sprintf("broker %d is down: AlterReplicaLogDirs needs it running; the next steps free space while it is down", l.id)
		return p, nil
	}
	rooms, err := k.rooms(ctx, rec, l)
	if err != nil {
		return nil, err
	}
	reps, err := mv.Replicas(ctx, l.id)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was moved", err)
	}
	for _, src := range rooms {
		k.planDir(l, src, rooms, reps, p)
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("no replica of broker %d is moved to another of its dirs: every online dir has %d%% free, or no other dir has room for a replica plus headroom", l.id, k.o.Headroom)
		return p, nil
	}
	n := 0
	for _, a := range p.Actions {
		if a.Args.(dirMoveArgs).Phase == phaseMove {
			n++
		}
	}
	p.Summary = fmt.Sprintf("move %d replicas of broker %d to another of its log dirs (AlterReplicaLogDirs): the broker keeps every record, only the dir changes", n, l.id)
	p.Notes = append(p.Notes, "nothing is deleted: Kafka copies each replica into the new dir (a future replica), swaps it in once caught up, and deletes the old copy file.delete.delay.ms later (60 s by default)")
	p.Rollback = k.rollback(env, l, p)
	return p, nil
}

// rooms is every log dir's room: df's free bytes, the headroom wanted,
// and DescribeLogDirs' error for an offline one.
func (k *moveDirs) rooms(ctx context.Context, rec ports.Records, l *look) ([]*dirRoom, error) {
	states, err := rec.DescribeLogDirs(ctx, l.id)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was moved", err)
	}
	var out []*dirRoom
	for _, s := range l.space {
		r := &dirRoom{s: s, free: s.Avail, want: s.Size * int64(k.o.Headroom) / 100}
		for _, st := range states {
			if st.Dir == s.Dir && st.Err != "" {
				r.offline = st.Err
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// planDir plans the moves off one dir short of headroom: largest replica
// first, each to the online dir on another filesystem with the most room
// that keeps its headroom after it, until the source has its headroom.
func (k *moveDirs) planDir(l *look, src *dirRoom, rooms []*dirRoom, reps []ports.ReplicaDir, p *steps.Plan) {
	if src.free >= src.want {
		return
	}
	if src.offline != "" {
		p.Facts = append(p.Facts, fmt.Sprintf("broker %d's %s is offline (%s): AlterReplicaLogDirs cannot move its replicas while it is; the next steps free records and restart the broker, which brings it back", l.id, src.s.Dir, src.offline))
		return
	}
	start := src.free
	for _, ps := range src.s.Partitions {
		if src.free >= src.want {
			break
		}
		name := fmt.Sprintf("%s-%d", ps.Topic, ps.Partition)
		if !holds(reps, src.s.Dir, ps.Topic, ps.Partition) {
			p.Facts = append(p.Facts, fmt.Sprintf("%s: not listed in %s by broker %d (or a move of it is under way): left alone", name, src.s.Dir, l.id))
			continue
		}
		dst := target(src, rooms, ps.Bytes)
		if dst == nil {
			p.Facts = append(p.Facts, fmt.Sprintf("%s (%s): no other online dir of broker %d on another filesystem has room for it and %d%% free after: left in %s", name, brokers.Bytes(ps.Bytes), l.id, k.o.Headroom, src.s.Dir))
			continue
		}
		src.free += ps.Bytes
		dst.free -= ps.Bytes
		p.Actions = append(p.Actions, steps.Action{ID: "move-dir/" + name, Op: steps.OpKafka, Broker: l.id, Target: name,
			Detail: fmt.Sprintf("AlterReplicaLogDirs on broker %d: %s (%s) from %s to %s, then wait until the copy there caught up and was swapped in (at most %s)", l.id, name, brokers.Bytes(ps.Bytes), src.s.Dir, dst.s.Dir, k.o.Timeout),
			Args:   dirMoveArgs{Phase: phaseMove, Topic: ps.Topic, Partition: ps.Partition, From: src.s.Dir, To: dst.s.Dir, Bytes: ps.Bytes}})
	}
	if src.free == start {
		return
	}
	expect := min(src.want, start+(src.free-start)*9/10)
	p.Actions = append(p.Actions, steps.Action{ID: "room" + src.s.Dir, Op: steps.OpWait, Broker: l.id, Target: src.s.Dir,
		Detail: fmt.Sprintf("broker %d's %s has %s free or more: Kafka deleted the old copies (at most %s)", l.id, src.s.Dir, brokers.Bytes(expect), k.o.Timeout),
		Args:   dirMoveArgs{Phase: phaseRoom, From: src.s.Dir, Expect: expect}})
	if src.free < src.want {
		p.Notes = append(p.Notes, fmt.Sprintf("%s keeps %s free after these moves, short of its %d%% (%s): the next step frees records every consumer group committed past", src.s.Dir, brokers.Bytes(src.free), k.o.Headroom, brokers.Bytes(src.want)))
	}
}

// holds reports whether the broker lists topic-partition in dir, with no
// future replica of it anywhere (a move under way).
func holds(reps []ports.ReplicaDir, dir, topic string, p int32) bool {
	in := false
	for _, r := range reps {
		if r.Topic != topic || r.Partition != p {
			continue
		}
		if r.Future {
			return false
		}
		in = in || r.Dir == dir
	}
	return in
}

// target is the online dir on another filesystem than src with the most
// room that keeps its headroom with n more bytes; nil when none does.
func target(src *dirRoom, rooms []*dirRoom, n int64) *dirRoom {
	var best *dirRoom
	for _, r := range rooms {
		if r == src || r.offline != "" || r.s.Mount == src.s.Mount || r.free-n < r.want {
			continue
		}
		if best == nil || r.free > best.free {
			best = r
		}
	}
	return best
}

// rollback is the move back, as kafka-reassign-partitions takes it (the
// same replicas, each log dir named: "any" for the other brokers').
func (k *moveDirs) rollback(env *steps.Env, l *look, p *steps.Plan) string {
	type part struct {
		Topic     string   `json:"topic"`
		Partition int32    `json:"partition"`
		Replicas  []int32  `json:"replicas"`
		LogDirs   []string `json:"log_dirs"`
	}
	var parts []part
	for _, a := range p.Actions {
		args := a.Args.(dirMoveArgs)
		if args.Phase != phaseMove {
			continue
		}
		pv, _ := l.partition(brokers.PartitionSpace{Topic: args.Topic, Partition: args.Partition})
		dirs := make([]string, len(pv.Replicas))
		for i, r := range pv.Replicas {
			dirs[i] = "any"
			if r == l.id {
				dirs[i] = args.From
			}
		}
		parts = append(parts, part{Topic: args.Topic, Partition: args.Partition, Replicas: pv.Replicas, LogDirs: dirs})
	}
	js, _ := json.Marshal(map[string]any{"version": 1, "partitions": parts})
	return fmt.Sprintf("nothing was deleted; every replica is still on broker %d. To move them back (only once %s has room again), save this as back.json and run `kafka-reassign-partitions.sh --bootstrap-server %s --reassignment-json-file back.json --execute`: %s",
		l.id, strings.Join(sources(p), ", "), strings.Join(env.Target.Bootstrap, ","), js)
}

// sources are the dirs the plan moves replicas off.
func sources(p *steps.Plan) []string {
	var out []string
	for _, a := range p.Actions {
		if f := a.Args.(dirMoveArgs).From; !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

func (k *moveDirs) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[dirMoveArgs](a)
		if err != nil {
			return err
		}
		if err := env.Do(a, func() error { return k.do(ctx, env, a.Broker, args) }); err != nil {
			return err
		}
	}
	return nil
}

func (k *moveDirs) do(ctx context.Context, env *steps.Env, id int32, a dirMoveArgs) error {
	if a.Phase == phaseRoom {
		return roll.WaitFor(ctx, env, k.o.Timeout, fmt.Sprintf("broker %d's %s with %s free", id, a.From, brokers.Bytes(a.Expect)), func() (bool, string) {
			s, err := brokers.ReadSpace(ctx, env.Hosts, id, []string{a.From})
			if err != nil || len(s) != 1 {
				return false, fmt.Sprint(err)
			}
			return s[0].Avail >= a.Expect, fmt.Sprintf("%s free", brokers.Bytes(s[0].Avail))
		})
	}
	mv := env.Kafka.(ports.DirMover)
	reg, err := live(ctx, env)
	if err != nil {
		return err
	}
	if !slices.Contains(reg, id) {
		return fmt.Errorf("%w: broker %d no longer serves: AlterReplicaLogDirs needs it running; %s-%d was not moved. Run again: the plan then takes the broker-down path", steps.ErrRefused, id, a.Topic, a.Partition)
	}
	name := fmt.Sprintf("%s-%d", a.Topic, a.Partition)
	if err := mv.MoveReplicaDir(ctx, id, a.To, a.Topic, a.Partition); err != nil {
		return fmt.Errorf("%w; %s stays in %s. Read broker %d's server.log; `kremedy resume` plans again", err, name, a.From, id)
	}
	err = roll.WaitFor(ctx, env, k.o.Timeout, fmt.Sprintf("%s swapped into %s on broker %d", name, a.To, id), func() (bool, string) {
		reps, err := mv.Replicas(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		return where(reps, a.Topic, a.Partition) == a.To, "in " + where(reps, a.Topic, a.Partition)
	})
	if err != nil {
		return fmt.Errorf("%w. The copy may still be catching up (a busy partition): `kremedy resume` waits again; nothing was deleted", err)
	}
	env.Logf("%s: broker %d keeps it in %s now", name, id, a.To)
	return env.Save(movedKey(id, a.Topic, a.Partition), a.To)
}

// where is the dir of the broker's current replica of topic-partition
// with "+future in D" while a move is under way ("" when it holds none).
func where(reps []ports.ReplicaDir, topic string, p int32) string {
	cur, fut := "", ""
	for _, r := range reps {
		if r.Topic == topic && r.Partition == p {
			if r.Future {
				fut = r.Dir
			} else {
				cur = r.Dir
			}
		}
	}
	if fut != "" {
		return cur + " (a copy catching up in " + fut + ")"
	}
	return cur
}

// movedKey is where a move this run made is journaled, for Verify.
func movedKey(id int32, topic string, p int32) string {
	return fmt.Sprintf("space/moved/%d/%s-%d", id, topic, p)
}

// Verify: every replica this run moved is in its new dir, no copy under
// way.
func (k *moveDirs) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	id := int32(k.o.Broker)
	mv, ok := env.Kafka.(ports.DirMover)
	if !ok {
		return nil, ports.ErrUnsupported
	}
	name := fmt.Sprintf("every replica this run moved is in its new dir of broker %d", id)
	reg, err := live(ctx, env)
	if err != nil {
		return nil, err
	}
	if h, _ := env.Target.Host(id); len(h.LogDirs) < 2 || !slices.Contains(reg, id) {
		return []steps.Check{{Name: name, OK: true, Detail: "a broker down or with one log dir: AlterReplicaLogDirs moves nothing there"}}, nil
	}
	reps, err := mv.Replicas(ctx, id)
	if err != nil {
		return nil, err
	}
	var bad []string
	n := 0
	for _, r := range reps {
		var to string
		if did, err := env.Load(movedKey(id, r.Topic, r.Partition), &to); err != nil {
			return nil, err
		} else if !did || r.Future {
			continue
		}
		n++
		if r.Dir != to {
			bad = append(bad, fmt.Sprintf("%s-%d in %s, moved to %s", r.Topic, r.Partition, r.Dir, to))
		}
	}
	return []steps.Check{{Name: name, OK: len(bad) == 0,
		Detail: fmt.Sprintf("%d moved replicas read again (DescribeLogDirs): %s", n, orNoneList(bad))}}, nil
}
