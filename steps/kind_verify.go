package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/segments"
)

// verifyTopic proves the cleanup: the topic absent from ZooKeeper, from every
// broker's own metadata (asked without auto-creation) and from every disk;
// or, with recreate=true, recreated with one topic ID everywhere, ISR equal
// to replicas, every partition starting empty at offset 0, and an acks=all
// canary that round-trips.
type verifyTopic struct{}

type recreateSpec struct {
	Partitions int32             `json:"partitions"`
	RF         int16             `json:"replication_factor"`
	Configs    map[string]string `json:"configs,omitempty"`
	Source     string            `json:"source"`
	Canary     bool              `json:"canary"`
}

type verifyPlan struct {
	Recreate *recreateSpec `json:"recreate,omitempty"`
	Groups   []string      `json:"groups_with_offsets,omitempty"`
}

// recreateSpec takes partitions, replication factor and configs from the
// params, else from this run's znode backup, else from preflight.
func (r *Run) recreateSpec() (*recreateSpec, error) {
	s := &recreateSpec{Partitions: int32(r.Meta.Params.Int("partitions")), RF: int16(r.Meta.Params.Int("replication_factor")), Source: "parameters"}
	var assign map[int32][]int32
	configs := r.Facts.Configs
	if b, err := os.ReadFile(r.BackupPath()); err == nil {
		var bk Backup
		if err := json.Unmarshal(b, &bk); err != nil {
			return nil, fmt.Errorf("znode backup %s: %w", r.BackupPath(), err)
		}
		for _, n := range bk.Nodes {
			switch n.Path {
			case TopicPath(r.Topic()):
				var z TopicZNode
				if DecodeZNode(n.Path, n.Data, &z) == nil {
					assign, _ = z.Assignment()
				}
			case ConfigTopicPath(r.Topic()):
				var c TopicConfigZNode
				if DecodeZNode(n.Path, n.Data, &c) == nil {
					configs = c.Config
				}
			}
		}
		s.Source = "znode backup " + r.BackupPath()
	} else if len(r.Facts.Partitions) > 0 {
		assign = r.Facts.Partitions
		s.Source = "ZooKeeper at preflight"
	}
	if s.Partitions == 0 {
		s.Partitions = int32(len(assign))
	}
	if s.RF == 0 {
		for _, reps := range assign {
			s.RF = int16(len(reps))
			break
		}
	}
	if s.Partitions <= 0 || s.RF <= 0 {
		return nil, fmt.Errorf("%w: cannot tell how to recreate %q (no znode backup in this run); pass --set partitions=N --set replication_factor=R", ErrRefused, r.Topic())
	}
	s.Configs = map[string]string{}
	for k, v := range configs {
		s.Configs[k] = v
	}
	if c := r.Meta.Params.String("configs"); c != "" {
		for _, kv := range strings.Split(c, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("%w: configs %q: expected key=value[,key=value]", ErrRefused, c)
			}
			s.Configs[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return s, nil
}

func (k *verifyTopic) Plan(ctx context.Context, r *Run) (*Plan, error) {
	t := r.Topic()
	recreate := r.Meta.Params.Bool("recreate")
	p := &Plan{Summary: fmt.Sprintf("prove %q is gone from ZooKeeper, every broker's metadata and every disk", t)}
	var vp verifyPlan
	present, err := r.exists(ctx, TopicPath(t))
	if err != nil {
		return nil, err
	}
	if present && !r.Preview && !r.Facts.Clean {
		if err := r.ownsTopic(ctx); err != nil {
			return nil, err
		}
	}
	if recreate && !(r.Facts.Clean && present) {
		spec, err := r.recreateSpec()
		if err != nil {
			return nil, err
		}
		vp.Recreate = spec
		keys := make([]string, 0, len(spec.Configs))
		for k := range spec.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var cfg []string
		for _, k := range keys {
			cfg = append(cfg, k+"="+spec.Configs[k])
		}
		p.Summary = fmt.Sprintf("recreate %q and prove it is new and healthy everywhere", t)
		p.Actions = append(p.Actions,
			Action{Kind: "kafka", Target: t, Detail: fmt.Sprintf("create with %d partitions, replication factor %d, configs [%s] (from %s)", spec.Partitions, spec.RF, strings.Join(cfg, " "), spec.Source)},
			Action{Kind: "wait", Target: t, Detail: "until every broker serves it with a leader for every partition (the controller's metadata reaching each broker; asked every 50 ms, at most 60 s)"},
			Action{Kind: "check", Target: t, Detail: "every partition's earliest and latest offset is 0 (no adopted segments)"})
		if spec.Canary = r.Meta.Params.Bool("canary"); spec.Canary {
			p.Actions = append(p.Actions, Action{Kind: "kafka", Target: t + "-0", Detail: "acks=all canary record (key kremedy-canary) produced, read back, then removed with DeleteRecords so that consumers never see it (a tombstone on a compact-only topic)"})
		} else {
			p.Notes = append(p.Notes, "no canary write (canary=false): the topic's ability to take an acks=all write is not proven")
		}
	}
	if b, err := os.ReadFile(r.OffsetsPath()); err == nil {
		var groups []GroupUse
		if json.Unmarshal(b, &groups) == nil {
			for _, g := range groups {
				if len(g.Offsets) > 0 {
					vp.Groups = append(vp.Groups, g.Group)
				}
			}
		}
	}
	if len(vp.Groups) > 0 {
		if r.Meta.Params.Bool("delete_offsets") {
			for _, g := range vp.Groups {
				p.Actions = append(p.Actions, Action{Kind: "kafka", Target: "group " + g, Detail: "delete its stale committed offsets on " + t})
			}
		} else {
			p.Notes = append(p.Notes, fmt.Sprintf("groups %v still hold committed offsets on %q from before the cleanup; consumers would resume at stale positions. Delete them (rerun with --set delete_offsets=true, or kafka-consumer-groups --delete-offsets --group G --topic %s); they are saved in %s", vp.Groups, t, t, r.OffsetsPath()))
		}
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
	}
	p.Payload, _ = jsonRaw(vp)
	return p, nil
}

func (k *verifyTopic) Apply(ctx context.Context, r *Run, p *Plan) error {
	var vp verifyPlan
	if err := fromRaw(p.Payload, &vp); err != nil {
		return err
	}
	t := r.Topic()
	i := 0
	if s := vp.Recreate; s != nil {
		exists, err := r.exists(ctx, TopicPath(t))
		if err != nil {
			return err
		}
		if err := r.Do(p.Actions[0], func() error {
			if exists {
				r.Logf("%q already exists (created by an earlier attempt of this run); checking it", t)
				return nil
			}
			id, err := r.Kafka.CreateTopic(ctx, t, nil, s.Partitions, s.RF, s.Configs)
			if err == nil {
				r.Logf("%s %q with topic id %s", createdNote, t, id)
			}
			return err
		}); err != nil {
			return err
		}
		if err := r.Do(p.Actions[1], func() error { return r.waitServed(ctx, s.Partitions) }); err != nil {
			return err
		}
		if err := r.Do(p.Actions[2], func() error { return r.offsetsZero(ctx, s.Partitions) }); err != nil {
			return err
		}
		i = 3
		if s.Canary {
			i = 4
			if err := r.Do(p.Actions[3], func() error {
				res, err := r.Kafka.Canary(ctx, t, 0, fmt.Sprintf("kremedy canary %s", r.Meta.ID))
				if err == nil {
					r.Logf("canary at %s-0 offset %d: acknowledged by every in-sync replica after %s, read back after %s more, then removed (%s)", t, res.Offset, res.Produce.Round(time.Millisecond), res.Read.Round(time.Millisecond), res.Removed)
				}
				return err
			}); err != nil {
				return err
			}
		}
	}
	for _, a := range p.Actions[i:] {
		g := strings.TrimPrefix(a.Target, "group ")
		if err := r.Do(a, func() error { return r.Kafka.DeleteGroupOffsets(ctx, g, t) }); err != nil {
			return err
		}
	}
	return nil
}

// waitServed waits until every broker serves the topic with a leader for
// every partition.
func (r *Run) waitServed(ctx context.Context, parts int32) error {
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last string
	for {
		all := true
		for _, id := range r.hostIDs() {
			v, err := r.Kafka.BrokerView(wctx, id, r.Topic())
			tv := v.Topics[r.Topic()]
			if err != nil || !tv.Present() || int32(len(tv.Partitions)) != parts {
				all, last = false, fmt.Sprintf("broker %d: %v %s", id, err, tv.Err)
				break
			}
			for _, pv := range tv.Partitions {
				if pv.Leader < 0 {
					all, last = false, fmt.Sprintf("broker %d: %s-%d has no leader", id, r.Topic(), pv.Partition)
				}
			}
		}
		if all {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("%w: %q is not served by every broker after 60s: %s", ErrCheckFailed, r.Topic(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// offsetsZero proves a new topic adopted nothing: earliest = latest = 0.
func (r *Run) offsetsZero(ctx context.Context, parts int32) error {
	var bad []string
	offs := r.partitionOffsets(ctx, parts)
	for p := int32(0); p < parts; p++ {
		o := offs[p]
		if o.err != nil {
			return fmt.Errorf("offsets of %s-%d: %w", r.Topic(), p, o.err)
		}
		e, l := o.earliest, o.latest
		ok := e == 0 && l == 0
		detail := fmt.Sprintf("earliest %d, latest %d on leader %d", e, l, o.leader)
		if !ok && e < l {
			// An earlier attempt of this run may have left its canary.
			if only, err := r.Kafka.OnlyCanaries(ctx, r.Topic(), p, e, l); err == nil && only {
				ok, detail = true, detail+": only kremedy canaries of an interrupted attempt"
			}
		}
		r.Check(Check{Name: fmt.Sprintf("%s-%d starts empty at offset 0", r.Topic(), p), OK: ok, Detail: detail})
		if !ok {
			bad = append(bad, fmt.Sprintf("%s-%d earliest %d latest %d", r.Topic(), p, e, l))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: the recreated topic is not empty — old segments were adopted (or a client already wrote to it): %s", ErrCheckFailed, strings.Join(bad, ", "))
	}
	return nil
}

type partOffsets struct {
	leader           int32
	earliest, latest int64
	err              error
}

// partitionOffsets asks each partition's leader (as the first broker that
// serves the topic names it) for its earliest and latest offset, 16
// partitions at a time: a topic with hundreds of partitions is not asked
// one round trip after another.
func (r *Run) partitionOffsets(ctx context.Context, parts int32) map[int32]partOffsets {
	leaders := map[int32]int32{}
	for _, id := range r.hostIDs() {
		if v, err := r.Kafka.BrokerView(ctx, id, r.Topic()); err == nil && v.Topics[r.Topic()].Present() {
			for p, pv := range v.Topics[r.Topic()].Partitions {
				if pv.Leader >= 0 {
					leaders[p] = pv.Leader
				}
			}
			break
		}
	}
	ps := make([]int32, parts)
	for p := range ps {
		ps[p] = int32(p)
	}
	got := eachID(ps, func(p int32) partOffsets {
		leader, ok := leaders[p]
		if !ok {
			leader = r.hostIDs()[0]
		}
		e, l, err := r.Kafka.Offsets(ctx, leader, r.Topic(), p)
		return partOffsets{leader: leader, earliest: e, latest: l, err: err}
	})
	out := make(map[int32]partOffsets, parts)
	for p, o := range got {
		out[int32(p)] = o
	}
	return out
}

func (k *verifyTopic) Verify(ctx context.Context, r *Run) ([]Check, error) {
	t := r.Topic()
	var checks []Check
	if !r.Meta.Params.Bool("recreate") {
		for _, p := range []string{TopicPath(t), ConfigTopicPath(t), DeleteTopicPath(t)} {
			ok, err := r.exists(ctx, p)
			if err != nil {
				return nil, err
			}
			checks = append(checks, Check{Name: r.ZK.Chroot() + p + " absent", OK: !ok})
		}
		for _, id := range r.hostIDs() {
			v, err := r.Kafka.BrokerView(ctx, id, t)
			if err != nil {
				checks = append(checks, Check{Name: fmt.Sprintf("broker %d does not know %q", id, t), OK: false, Detail: err.Error()})
				continue
			}
			tv := v.Topics[t]
			checks = append(checks, Check{Name: fmt.Sprintf("broker %d does not know %q", id, t), OK: !tv.Present(), Detail: orDash(tv.Err)})
		}
		left, err := r.topicDirs(ctx)
		if err != nil {
			return nil, err
		}
		checks = append(checks, Check{Name: fmt.Sprintf("no log dir holds a directory of %q", t), OK: len(left) == 0, Detail: summarize(left)})
		return checks, nil
	}
	b, _, err := r.ZK.Get(ctx, TopicPath(t))
	if err != nil {
		return []Check{{Name: fmt.Sprintf("%q exists in ZooKeeper", t), OK: false, Detail: err.Error()}}, nil
	}
	var z TopicZNode
	if err := DecodeZNode(TopicPath(t), b, &z); err != nil {
		return nil, err
	}
	assign, _ := z.Assignment()
	checks = append(checks, Check{Name: fmt.Sprintf("%q exists in ZooKeeper", t), OK: true, Detail: fmt.Sprintf("%d partitions, topic_id %s", len(assign), orDash(z.TopicID))})
	var idDiff, urp []string
	for _, id := range r.hostIDs() {
		v, err := r.Kafka.BrokerView(ctx, id, t)
		if err != nil {
			idDiff = append(idDiff, fmt.Sprintf("broker %d: %v", id, err))
			continue
		}
		tv := v.Topics[t]
		if !tv.Present() || tv.ID != z.TopicID || len(tv.Partitions) != len(assign) {
			idDiff = append(idDiff, fmt.Sprintf("broker %d: %s id %s, %d partitions", id, orDash(tv.Err), orDash(tv.ID), len(tv.Partitions)))
		}
		for _, pv := range tv.Partitions {
			if !sameSet(pv.ISR, pv.Replicas) {
				urp = append(urp, fmt.Sprintf("broker %d sees %s-%d isr %s replicas %s", id, t, pv.Partition, i32s(pv.ISR), i32s(pv.Replicas)))
			}
		}
	}
	checks = append(checks,
		Check{Name: "every broker serves it with the znode's topic ID", OK: len(idDiff) == 0, Detail: summarize(idDiff)},
		Check{Name: "ISR equals replicas on every partition", OK: len(urp) == 0, Detail: summarize(urp)})
	var foreign []string
	var earliest []string
	offs := r.partitionOffsets(ctx, int32(len(assign)))
	for part := range assign {
		o := offs[part]
		e, l, err := o.earliest, o.latest, o.err
		// Empty: nothing adopted. Partition 0 starts past kremedy's canary
		// once DeleteRecords removed it; on a compact-only topic it holds
		// the canary and its tombstone.
		ok := err == nil && e == l && (e == 0 || part == 0)
		if err == nil && !ok && part == 0 && e < l {
			ok, err = r.Kafka.OnlyCanaries(ctx, t, part, e, l)
		}
		if !ok {
			earliest = append(earliest, fmt.Sprintf("%s-%d earliest %d latest %d %v", t, part, e, l, err))
		}
	}
	all, err := r.listAll(ctx)
	if err != nil {
		return nil, err
	}
	for _, h := range r.Target.Hosts {
		for _, dir := range r.Facts.LogDirs[h.ID] {
			entries := all[h.ID][dir]
			ms, _ := segments.Select(entries, t, nil)
			for _, m := range ms {
				if id := idOf(entries, m.Dir.Name); m.Dir.Kind != segments.Live || (z.TopicID != "" && id != z.TopicID) {
					foreign = append(foreign, fmt.Sprintf("broker %d %s/%s (%s, id %s)", h.ID, dir, m.Dir.Name, m.Dir.Kind, orDash(id)))
				}
			}
		}
	}
	checks = append(checks,
		Check{Name: "every partition is empty (nothing adopted; the canary removed)", OK: len(earliest) == 0, Detail: summarize(earliest)},
		Check{Name: "every directory of the topic on disk carries its current topic ID", OK: len(foreign) == 0, Detail: summarize(foreign)})
	return checks, nil
}

func sameSet(a, b []int32) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// createdNote starts the journal note the verify step writes when it has
// created the topic; ownsTopic looks for it.
const createdNote = "created"

// ownsTopic: the topic exists although this run deleted it. That is fine
// only when this run's verify step created it (an earlier attempt, then
// interrupted). Anything else is someone else's topic — most often a client
// still attached with auto-create on, right after the restart — and kremedy
// neither adopts nor deletes it.
func (r *Run) ownsTopic(ctx context.Context) error {
	t := r.Topic()
	b, _, err := r.ZK.Get(ctx, TopicPath(t))
	if err != nil {
		if r.ZK.IsNoNode(err) {
			return nil
		}
		return err
	}
	var z TopicZNode
	if err := DecodeZNode(r.ZK.Chroot()+TopicPath(t), b, &z); err != nil {
		return err
	}
	mine, maybe := "", false
	if r.Journal != nil {
		recs, err := journal.Read(r.Journal.Path())
		if err != nil {
			return err
		}
		prefix := fmt.Sprintf("%s %q with topic id ", createdNote, t)
		for _, rec := range recs {
			if rec.Step != r.step {
				continue
			}
			switch rec.Type {
			case journal.Note:
				var n struct{ Text string }
				if json.Unmarshal(rec.Data, &n) == nil && strings.HasPrefix(n.Text, prefix) {
					mine, maybe = strings.TrimPrefix(n.Text, prefix), false
				}
			case journal.ActionStart:
				var a Action
				if json.Unmarshal(rec.Data, &a) == nil && a.Kind == "kafka" && a.Target == t && strings.HasPrefix(a.Detail, "create ") {
					maybe = true // until its end says otherwise
				}
			case journal.ActionEnd:
				var e struct {
					Action  Action
					OK      bool
					Outcome string // set when the create may have happened anyway
				}
				if json.Unmarshal(rec.Data, &e) == nil && e.Action.Kind == "kafka" && strings.HasPrefix(e.Action.Detail, "create ") && !e.OK && e.Outcome == "" {
					maybe = false
				}
			}
		}
	}
	switch {
	case mine != "" && mine == z.TopicID:
		return nil
	case mine == "" && maybe:
		r.Logf("%q exists; an earlier attempt of this run was creating it when it stopped, so it is taken as this run's (topic id %s) and checked", t, orDash(z.TopicID))
		return nil
	}
	var auto []int32
	for id, on := range r.Facts.AutoCreate {
		if on {
			auto = append(auto, id)
		}
	}
	slices.Sort(auto)
	why := "someone recreated it"
	if len(auto) > 0 {
		why = fmt.Sprintf("most likely a client still attached auto-created it (auto.create.topics.enable=true on brokers %v)", auto)
	}
	return fmt.Errorf("%w: %q exists again (topic id %s, %d partitions) although this run deleted it and did not create it: %s. kremedy neither adopts nor deletes a topic it did not make. Stop that client, delete the topic (kafka-topics --delete --topic %s; the brokers are up), then resume",
		ErrRefused, t, orDash(z.TopicID), len(z.Partitions), why, t)
}
