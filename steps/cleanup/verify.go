package cleanup

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/segments"
)

// verifyTopic proves the cleanup: the topic absent from ZooKeeper, from every
// broker's own metadata (asked without auto-creation) and from every disk;
// or, with recreate, recreated with one topic ID everywhere, ISR equal to
// replicas, every partition starting empty at offset 0, and an acks=all
// canary that round-trips.
type verifyTopic struct{ o verifyOpts }

type verifyOpts struct {
	topicOpts
	Recreate          bool   `opt:"recreate"`
	Partitions        int    `opt:"partitions"`         // 0: as it was
	ReplicationFactor int    `opt:"replication_factor"` // 0: as it was
	Configs           string `opt:"configs"`            // key=value[,key=value]
	Canary            bool   `opt:"canary"`
	DeleteOffsets     bool   `opt:"delete_offsets"`
	// Served bounds the wait for every broker to serve a recreated topic.
	Served time.Duration `opt:"served_timeout" default:"60s"`
}

// recreateSpec is how a topic is created again.
type recreateSpec struct {
	Topic      string            `json:"topic,omitempty"` // "": the run's one topic (an older run's plan)
	Partitions int32             `json:"partitions"`
	RF         int16             `json:"replication_factor"`
	Configs    map[string]string `json:"configs,omitempty"`
	Source     string            `json:"source"`
}

// groupArgs: a consumer group whose stale offsets on a topic are deleted.
type groupArgs struct {
	Group string `json:"group"`
	Topic string `json:"topic,omitempty"` // "": the run's one topic
}

// topicArgs: the topic an action is about.
type topicArgs struct {
	Topic string `json:"topic"`
}

// actID is the ID of verify's action kind ("create", "served", "empty",
// "canary") for topic t: the kind alone in a one-topic run, as before,
// "kind t" in a several-topic run (a topic name holds no space).
func (k *verifyTopic) actID(kind, t string) string {
	if k.o.several() {
		return kind + " " + t
	}
	return kind
}

// actKind is the kind of verify's action id.
func actKind(id string) string {
	kind, _, _ := strings.Cut(id, " ")
	return kind
}

// createdKeyOf is where verify saves that it created topic t.
func (k *verifyTopic) createdKeyOf(t string) string {
	if k.o.several() {
		return createdKey + "/" + t
	}
	return createdKey
}

// createdKey is the fact verify saves when it has created the topic: a
// resume recognises the topic as this run's by its id.
const createdKey = "topic-cleanup/created"

type created struct {
	Topic string `json:"topic"`
	ID    string `json:"id"`
}

// spec takes partitions, replication factor and configs from the options,
// else from this run's znode backup, else from preflight.
func (k *verifyTopic) spec(env *steps.Env, f *Facts, t string) (*recreateSpec, error) {
	s := &recreateSpec{Topic: t, Partitions: int32(k.o.Partitions), RF: int16(k.o.ReplicationFactor), Source: "parameters"}
	var assign map[int32][]int32
	configs := f.Of(t).Configs
	if b, err := os.ReadFile(env.Artifact(artBackup)); err == nil {
		var bk Backup
		if err := json.Unmarshal(b, &bk); err != nil {
			return nil, fmt.Errorf("znode backup %s: %w", env.Artifact(artBackup), err)
		}
		for _, n := range bk.Nodes {
			switch n.Path {
			case kafkazk.TopicPath(t):
				var z kafkazk.TopicZNode
				if kafkazk.DecodeZNode(n.Path, n.Data, &z) == nil {
					assign, _ = z.Assignment()
				}
			case kafkazk.ConfigTopicPath(t):
				var c kafkazk.TopicConfigZNode
				if kafkazk.DecodeZNode(n.Path, n.Data, &c) == nil {
					configs = c.Config
				}
			}
		}
		s.Source = "znode backup " + env.Artifact(artBackup)
	} else if tf := f.Of(t); len(tf.Partitions) > 0 {
		assign = tf.Partitions
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
		return nil, fmt.Errorf("%w: cannot tell how to recreate %q (no znode backup in this run); pass --set partitions=N --set replication_factor=R", steps.ErrRefused, t)
	}
	s.Configs = map[string]string{}
	for k, v := range configs {
		s.Configs[k] = v
	}
	if c := k.o.Configs; c != "" {
		for _, kv := range strings.Split(c, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("%w: configs %q: expected key=value[,key=value]", steps.ErrRefused, c)
			}
			s.Configs[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return s, nil
}

// Plan checks that a topic still in ZooKeeper is the one this run created,
// and plans the recreation of each topic (with --set recreate) and the
// deletion of the consumer groups' stale offsets (or a note saying how).
func (k *verifyTopic) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	f, err := facts(env)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Summary: fmt.Sprintf("prove %s gone from ZooKeeper, every broker's metadata and every disk", k.o.quoted()+map[bool]string{false: " is", true: " are"}[k.o.several()])}
	recreated := 0
	for _, t := range k.o.names() {
		present, err := exists(ctx, env, kafkazk.TopicPath(t))
		if err != nil {
			return nil, err
		}
		if present && !env.Preview() && !f.Clean {
			if err := k.ownsTopic(ctx, env, f, t); err != nil {
				return nil, err
			}
		}
		if !k.o.Recreate || f.Clean && present {
			continue
		}
		spec, err := k.spec(env, f, t)
		if err != nil {
			return nil, err
		}
		recreated++
		p.Actions = append(p.Actions, k.recreateActions(t, spec)...)
	}
	if recreated > 0 {
		p.Summary = fmt.Sprintf("recreate %s and prove %s new and healthy everywhere", k.o.quoted(), map[bool]string{false: "it is", true: "each is"}[k.o.several()])
		if !k.o.Canary {
			p.Notes = append(p.Notes, "no canary write (canary=false): the ability to take an acks=all write is not proven")
		}
	}
	k.planOffsets(env, p)
	if len(p.Actions) == 0 {
		p.NoOp = true
	}
	return p, nil
}

// recreateActions are the actions that recreate topic t as spec says and
// prove it: create, wait until served, check empty, and (canary=true) the
// canary write.
func (k *verifyTopic) recreateActions(t string, spec *recreateSpec) []steps.Action {
	keys := make([]string, 0, len(spec.Configs))
	for key := range spec.Configs {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var cfg []string
	for _, key := range keys {
		cfg = append(cfg, key+"="+spec.Configs[key])
	}
	as := []steps.Action{
		{ID: k.actID("create", t), Op: steps.OpKafka, Target: t, Args: *spec,
			Detail: fmt.Sprintf("create with %d partitions, replication factor %d, configs [%s] (from %s)", spec.Partitions, spec.RF, strings.Join(cfg, " "), spec.Source)},
		{ID: k.actID("served", t), Op: steps.OpWait, Target: t, Args: *spec,
			Detail: fmt.Sprintf("until every broker serves it with a leader for every partition (the controller's metadata reaching each broker; asked every 50 ms, at most %s)", k.o.Served)},
		{ID: k.actID("empty", t), Op: steps.OpCheck, Target: t, Args: *spec, Detail: "every partition's earliest and latest offset is 0 (no adopted segments)"}}
	if k.o.Canary {
		as = append(as, steps.Action{ID: k.actID("canary", t), Op: steps.OpKafka, Target: t + "-0", Args: topicArgs{Topic: t},
			Detail: "acks=all canary record (key kremedy-canary) produced, read back, then removed with DeleteRecords so that consumers never see it (a tombstone on a compact-only topic)"})
	}
	return as
}

// planOffsets adds to p, for each consumer group whose committed offsets
// on the topics preflight saved, an action deleting them
// (delete_offsets=true), else one note saying how to.
func (k *verifyTopic) planOffsets(env *steps.Env, p *steps.Plan) {
	type use struct{ group, topic string }
	var uses []use
	if b, err := os.ReadFile(env.Artifact(artOffsets)); err == nil {
		var saved []ports.GroupUse
		if json.Unmarshal(b, &saved) == nil {
			for _, g := range saved {
				if len(g.Offsets) > 0 {
					uses = append(uses, use{g.Group, g.Topic})
				}
			}
		}
	}
	if len(uses) == 0 {
		return
	}
	if k.o.DeleteOffsets {
		for _, u := range uses {
			t := cmp.Or(u.topic, k.o.names()[0])
			id := "offsets-" + u.group
			if u.topic != "" {
				id += " " + u.topic
			}
			p.Actions = append(p.Actions, steps.Action{ID: id, Op: steps.OpKafka, Target: "group " + u.group, Args: groupArgs{Group: u.group, Topic: u.topic},
				Detail: "delete its stale committed offsets on " + t})
		}
		return
	}
	var each []string
	for _, u := range uses {
		each = append(each, fmt.Sprintf("kafka-consumer-groups --delete-offsets --group %s --topic %s", u.group, cmp.Or(u.topic, k.o.names()[0])))
	}
	p.Notes = append(p.Notes, fmt.Sprintf("consumer groups still hold committed offsets on %s from before the cleanup; consumers would resume at stale positions. Delete them (rerun with --set delete_offsets=true, or %s); they are saved in %s", k.o.quoted(), strings.Join(each, "; "), env.Artifact(artOffsets)))
}

func (k *verifyTopic) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		var err error
		switch actKind(a.ID) {
		case "create":
			err = k.create(ctx, env, a)
		case "served":
			spec, aerr := k.specOf(a)
			if aerr != nil {
				return aerr
			}
			err = env.Do(a, func() error { return k.waitServed(ctx, env, spec.Topic, spec.Partitions) })
		case "empty":
			spec, aerr := k.specOf(a)
			if aerr != nil {
				return aerr
			}
			err = env.Do(a, func() error { return k.offsetsZero(ctx, env, spec.Topic, spec.Partitions) })
		case "canary":
			t := k.o.names()[0]
			if ta, aerr := steps.ArgsOf[topicArgs](a); aerr == nil && ta.Topic != "" {
				t = ta.Topic
			}
			err = env.Do(a, func() error {
				res, err := env.Kafka.Canary(ctx, t, 0, fmt.Sprintf("kremedy canary %s", env.RunID()))
				if err == nil {
					env.Logf("canary at %s-0 offset %d: acknowledged by every in-sync replica after %s, read back after %s more, then removed (%s)", t, res.Offset, res.Produce.Round(time.Millisecond), res.Read.Round(time.Millisecond), res.Removed)
				}
				return err
			})
		default:
			g, aerr := steps.ArgsOf[groupArgs](a)
			if aerr != nil {
				return aerr
			}
			err = env.Do(a, func() error { return env.Kafka.DeleteGroupOffsets(ctx, g.Group, cmp.Or(g.Topic, k.o.names()[0])) })
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// specOf is a create, served or empty action's spec, its topic filled in
// (an older run's plan names none: its one topic).
func (k *verifyTopic) specOf(a steps.Action) (recreateSpec, error) {
	spec, err := steps.ArgsOf[recreateSpec](a)
	if spec.Topic == "" {
		spec.Topic = k.o.names()[0]
	}
	return spec, err
}

// create creates the topic, unless an earlier attempt of this run did.
func (k *verifyTopic) create(ctx context.Context, env *steps.Env, a steps.Action) error {
	spec, err := k.specOf(a)
	if err != nil {
		return err
	}
	t := spec.Topic
	present, err := exists(ctx, env, kafkazk.TopicPath(t))
	if err != nil {
		return err
	}
	return env.Do(a, func() error {
		if present {
			env.Logf("%q already exists (created by an earlier attempt of this run); checking it", t)
			return nil
		}
		id, err := env.Kafka.CreateTopic(ctx, t, nil, spec.Partitions, spec.RF, spec.Configs)
		if err != nil {
			return err
		}
		env.Logf("created %q with topic id %s", t, id)
		return env.Save(k.createdKeyOf(t), created{Topic: t, ID: id})
	})
}

// waitServed waits until every broker serves the topic with a leader for
// every partition.
func (k *verifyTopic) waitServed(ctx context.Context, env *steps.Env, t string, parts int32) error {
	wctx, cancel := context.WithTimeout(ctx, k.o.Served)
	defer cancel()
	var last string
	for {
		all := true
		for _, id := range brokers.HostIDs(env.Target) {
			v, err := env.Kafka.BrokerView(wctx, id, t)
			tv := v.Topics[t]
			if err != nil || !tv.Present() || int32(len(tv.Partitions)) != parts {
				all, last = false, fmt.Sprintf("broker %d: %v %s", id, err, cmp.Or(tv.Unsure(), viewErr(tv)))
				break
			}
			for _, pv := range tv.Partitions {
				if pv.Leader < 0 {
					all, last = false, fmt.Sprintf("broker %d: %s-%d has no leader", id, t, pv.Partition)
				}
			}
		}
		if all {
			return nil
		}
		if env.Sleep(wctx, 50*time.Millisecond) != nil {
			return fmt.Errorf("%w: %q is not served by every broker after %s: %s", steps.ErrCheckFailed, t, k.o.Served, last)
		}
	}
}

// viewErr is a view's Kafka error name, "" for none.
func viewErr(tv ports.TopicView) string {
	if tv.Present() {
		return ""
	}
	return tv.Err.String()
}

// canaryBefore reports whether an earlier attempt of this step began its
// canary on partition target ("topic-p").
func canaryBefore(env *steps.Env, target string) bool {
	for _, a := range env.History().Actions(env.Step().ID) {
		if actKind(a.Action.ID) == "canary" && a.Action.Target == target {
			return true
		}
	}
	return false
}

// offsetsZero proves a new topic adopted nothing: earliest = latest = 0.
func (k *verifyTopic) offsetsZero(ctx context.Context, env *steps.Env, t string, parts int32) error {
	var bad []string
	offs := partitionOffsets(ctx, env, t, parts)
	for p := int32(0); p < parts; p++ {
		o := offs[p]
		if o.err != nil {
			return fmt.Errorf("offsets of %s-%d: %w", t, p, o.err)
		}
		e, l := o.earliest, o.latest
		ok := e == 0 && l == 0
		detail := fmt.Sprintf("earliest %d, latest %d on leader %d", e, l, o.leader)
		if !ok && e < l {
			// An earlier attempt of this run may have left its canary.
			if only, err := env.Kafka.OnlyCanaries(ctx, t, p, e, l); err == nil && only {
				ok, detail = true, detail+": only kremedy canaries of an interrupted attempt"
			}
		}
		if !ok && e == l && e > 0 && canaryBefore(env, fmt.Sprintf("%s-%d", t, p)) {
			// ... or written it and removed it (DeleteRecords moves the log
			// start past it): nothing is left to read.
			ok, detail = true, detail+": an earlier attempt of this run wrote its canary here and removed it"
		}
		env.Check(steps.Check{Name: fmt.Sprintf("%s-%d starts empty at offset 0", t, p), OK: ok, Detail: detail})
		if !ok {
			bad = append(bad, fmt.Sprintf("%s-%d earliest %d latest %d", t, p, e, l))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: the recreated topic is not empty — old segments were adopted (or a client already wrote to it): %s", steps.ErrCheckFailed, strings.Join(bad, ", "))
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
func partitionOffsets(ctx context.Context, env *steps.Env, t string, parts int32) map[int32]partOffsets {
	ids := brokers.HostIDs(env.Target)
	leaders := map[int32]int32{}
	for _, id := range ids {
		if v, err := env.Kafka.BrokerView(ctx, id, t); err == nil && v.Topics[t].Present() {
			for p, pv := range v.Topics[t].Partitions {
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
	got := par.Each(ps, func(p int32) partOffsets {
		leader, ok := leaders[p]
		if !ok {
			leader = ids[0]
		}
		e, l, err := env.Kafka.Offsets(ctx, leader, t, p)
		return partOffsets{leader: leader, earliest: e, latest: l, err: err}
	})
	out := make(map[int32]partOffsets, parts)
	for p, o := range got {
		out[int32(p)] = o
	}
	return out
}

func (k *verifyTopic) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	f, err := facts(env)
	if err != nil {
		return nil, err
	}
	var checks []steps.Check
	for _, t := range k.o.names() {
		var c []steps.Check
		if !k.o.Recreate {
			c, err = k.verifyAbsent(ctx, env, f, t)
		} else {
			c, err = k.verifyRecreated(ctx, env, f, t)
		}
		if err != nil {
			return nil, err
		}
		checks = append(checks, c...)
	}
	if !env.Rechecking() {
		k.findingsAfter(ctx, env)
	}
	return checks, nil
}

// findingsAfter diagnoses the topic once more, for the report: what the
// cleanup left (nothing, on a good run), beside what preflight found.
func (k *verifyTopic) findingsAfter(ctx context.Context, env *steps.Env) {
	lines := []string{}
	for _, t := range k.o.names() {
		d, err := diagnose.Run(ctx, env.Cluster, diagnose.Options{Topic: t, Disk: true})
		switch {
		case err != nil:
			lines = append(lines, fmt.Sprintf("the diagnosis of %s after the cleanup failed: %v", t, err))
		case d.Healthy:
			lines = append(lines, fmt.Sprintf("diagnose --topic %s: no findings", t))
		default:
			for _, fd := range d.Findings {
				lines = append(lines, fmt.Sprintf("finding [%s] %s: %s", fd.Severity, fd.Kind, fd.Summary))
			}
		}
	}
	_ = env.Save(steps.ReportKey+"Findings after the run (diagnose, read-only)", lines)
}

// verifyAbsent: the topic is gone from ZooKeeper, every broker and every
// disk.
func (k *verifyTopic) verifyAbsent(ctx context.Context, env *steps.Env, f *Facts, t string) ([]steps.Check, error) {
	var checks []steps.Check
	for _, p := range []string{kafkazk.TopicPath(t), kafkazk.ConfigTopicPath(t), kafkazk.DeleteTopicPath(t)} {
		ok, err := exists(ctx, env, p)
		if err != nil {
			return nil, err
		}
		checks = append(checks, steps.Check{Name: env.ZK.Chroot() + p + " absent", OK: !ok})
	}
	for _, id := range brokers.HostIDs(env.Target) {
		v, err := env.Kafka.BrokerView(ctx, id, t)
		name := fmt.Sprintf("broker %d does not know %q", id, t)
		if err != nil {
			checks = append(checks, steps.Check{Name: name, OK: false, Detail: err.Error()})
			continue
		}
		// Only UNKNOWN_TOPIC_OR_PARTITION says the broker does not know
		// it; TOPIC_AUTHORIZATION_FAILED says nothing either way.
		tv := v.Topics[t]
		checks = append(checks, steps.Check{Name: name, OK: tv.Gone(), Detail: cmp.Or(tv.Unsure(), text.OrDash(viewErr(tv)))})
	}
	left, err := topicDirs(ctx, env, f, []string{t})
	if err != nil {
		return nil, err
	}
	return append(checks, steps.Check{Name: fmt.Sprintf("no log dir holds a directory of %q", t), OK: len(left) == 0, Detail: text.Summarize(left)}), nil
}

// verifyRecreated: the topic is new, empty and served alike everywhere.
func (k *verifyTopic) verifyRecreated(ctx context.Context, env *steps.Env, f *Facts, t string) ([]steps.Check, error) {
	b, _, err := env.ZK.Get(ctx, kafkazk.TopicPath(t))
	if err != nil {
		return []steps.Check{{Name: fmt.Sprintf("%q exists in ZooKeeper", t), OK: false, Detail: err.Error()}}, nil
	}
	var z kafkazk.TopicZNode
	if err := kafkazk.DecodeZNode(kafkazk.TopicPath(t), b, &z); err != nil {
		return nil, err
	}
	assign, _ := z.Assignment()
	checks := []steps.Check{{Name: fmt.Sprintf("%q exists in ZooKeeper", t), OK: true, Detail: fmt.Sprintf("%d partitions, topic_id %s", len(assign), text.OrDash(z.TopicID))}}
	idDiff, urp := servedAlike(ctx, env, t, z.TopicID, len(assign))
	pre := "" // a several-topic run's checks name their topic first
	if k.o.several() {
		pre = strconv.Quote(t) + ": "
	}
	checks = append(checks,
		steps.Check{Name: pre + "every broker serves it with the znode's topic ID", OK: len(idDiff) == 0, Detail: text.Summarize(idDiff)},
		steps.Check{Name: pre + "ISR equals replicas on every partition", OK: len(urp) == 0, Detail: text.Summarize(urp)})
	earliest := notEmpty(ctx, env, t, assign)
	idCheck, err := diskIDCheck(ctx, env, f, t, z.TopicID, pre)
	if err != nil {
		return nil, err
	}
	return append(checks,
		steps.Check{Name: pre + "every partition is empty (nothing adopted; the canary removed)", OK: len(earliest) == 0, Detail: text.Summarize(earliest)},
		idCheck), nil
}

// servedAlike asks every broker for its view of topic t: idDiff names each
// broker that does not serve it with topicID and parts partitions (or did
// not answer), urp each partition a broker sees with its ISR short of its
// replicas.
func servedAlike(ctx context.Context, env *steps.Env, t, topicID string, parts int) (idDiff, urp []string) {
	for _, id := range brokers.HostIDs(env.Target) {
		v, err := env.Kafka.BrokerView(ctx, id, t)
		if err != nil {
			idDiff = append(idDiff, fmt.Sprintf("broker %d: %v", id, err))
			continue
		}
		tv := v.Topics[t]
		if !tv.Present() || tv.ID != topicID || len(tv.Partitions) != parts {
			idDiff = append(idDiff, fmt.Sprintf("broker %d: %s id %s, %d partitions", id, cmp.Or(tv.Unsure(), text.OrDash(viewErr(tv))), text.OrDash(tv.ID), len(tv.Partitions)))
		}
		for _, pv := range tv.Partitions {
			if !sameIDs(pv.ISR, pv.Replicas) {
				urp = append(urp, fmt.Sprintf("broker %d sees %s-%d isr %s replicas %s", id, t, pv.Partition, fmt.Sprint(pv.ISR), fmt.Sprint(pv.Replicas)))
			}
		}
	}
	return idDiff, urp
}

// notEmpty names each partition of topic t (assign, from its znode) that
// holds records other than kremedy's canary, with its offsets.
func notEmpty(ctx context.Context, env *steps.Env, t string, assign map[int32][]int32) []string {
	var earliest []string
	offs := partitionOffsets(ctx, env, t, int32(len(assign)))
	for part := range assign {
		o := offs[part]
		e, l, err := o.earliest, o.latest, o.err
		// Empty: nothing adopted. Partition 0 starts past kremedy's canary
		// once DeleteRecords removed it; on a compact-only topic it holds
		// the canary and its tombstone.
		ok := err == nil && e == l && (e == 0 || part == 0)
		if err == nil && !ok && part == 0 && e < l {
			ok, err = env.Kafka.OnlyCanaries(ctx, t, part, e, l)
		}
		if !ok {
			earliest = append(earliest, fmt.Sprintf("%s-%d earliest %d latest %d %v", t, part, e, l, err))
		}
	}
	return earliest
}

// diskIDCheck lists every broker's log dirs and checks that each directory
// of topic t is live and carries topicID (pre starts the check's name).
// Kafka 2.8's directories without partition.metadata yet are accepted, and
// the check says so.
func diskIDCheck(ctx context.Context, env *steps.Env, f *Facts, t, topicID, pre string) (steps.Check, error) {
	l := brokers.List(ctx, env.Hosts, env.Target, f.LogDirs)
	if err := l.Err(env.Target); err != nil {
		return steps.Check{}, err
	}
	// Kafka 2.8 writes partition.metadata only at a partition's second
	// LeaderAndIsr: a directory without one is what a correct 2.8 cluster
	// shows after a create, and is accepted there (saying so); one naming
	// another ID never is.
	lateIDs := f.Releases.TopicIDs() && !f.Releases.WritesIDAtCreation()
	var foreign, unwritten []string
	for _, h := range env.Target.Hosts {
		for _, dir := range f.LogDirs[h.ID] {
			entries := l.Entries[h.ID][dir]
			ms, _ := segments.Select(entries, t, nil)
			for _, m := range ms {
				id := idOf(entries, m.Dir.Name)
				switch {
				case m.Dir.Kind == segments.Live && id == "" && topicID != "" && lateIDs:
					unwritten = append(unwritten, fmt.Sprintf("broker %d %s/%s", h.ID, dir, m.Dir.Name))
				case m.Dir.Kind != segments.Live || (topicID != "" && id != topicID):
					foreign = append(foreign, fmt.Sprintf("broker %d %s/%s (%s, id %s)", h.ID, dir, m.Dir.Name, m.Dir.Kind, text.OrDash(id)))
				}
			}
		}
	}
	idCheck := steps.Check{Name: pre + "every directory of the topic on disk carries its current topic ID", OK: len(foreign) == 0, Detail: text.Summarize(foreign)}
	if len(unwritten) > 0 {
		idCheck.Name = pre + "no directory of the topic on disk carries another topic ID"
		idCheck.Detail = fmt.Sprintf("another ID: %s; no partition.metadata yet, as Kafka 2.8 leaves a new partition until its next LeaderAndIsr (accepted): %s", text.Summarize(foreign), text.Summarize(unwritten))
	}
	return idCheck, nil
}

// ownsTopic: the topic exists although this run deleted it. That is fine
// only when this run's verify step created it (an earlier attempt, then
// interrupted). Anything else is someone else's topic — most often a client
// still attached with auto-create on, right after the restart — and kremedy
// neither adopts nor deletes it.
func (k *verifyTopic) ownsTopic(ctx context.Context, env *steps.Env, f *Facts, t string) error {
	b, _, err := env.ZK.Get(ctx, kafkazk.TopicPath(t))
	if err != nil {
		if env.ZK.IsNoNode(err) {
			return nil
		}
		return err
	}
	var z kafkazk.TopicZNode
	if err := kafkazk.DecodeZNode(env.ZK.Chroot()+kafkazk.TopicPath(t), b, &z); err != nil {
		return err
	}
	var mine created
	if _, err := env.Load(k.createdKeyOf(t), &mine); err != nil {
		return err
	}
	if mine.Topic == t && mine.ID != "" && mine.ID == z.TopicID {
		return nil
	}
	// An attempt that stopped while its create request was out (started,
	// and not ended with a clean failure) may have created it: the create
	// is idempotent on the topic's name, so it is taken as this run's.
	if mine.ID == "" {
		for _, a := range env.History().Actions(env.Step().ID) {
			if a.Action.ID == k.actID("create", t) && (!a.Ended || a.Outcome != "" || a.OK) {
				env.Logf("%q exists; an earlier attempt of this run was creating it when it stopped, so it is taken as this run's (topic id %s) and checked", t, text.OrDash(z.TopicID))
				return nil
			}
		}
	}
	var auto []int32
	for id, on := range f.AutoCreate {
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
		steps.ErrRefused, t, text.OrDash(z.TopicID), len(z.Partitions), why, t)
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []int32) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
