package cleanup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
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
	"github.com/kremedy/kremedy/steps/roll"
	"github.com/kremedy/kremedy/steps/segments"
)

// preflight looks before anything happens: it refuses clusters kremedy must
// not touch, proves every host is reachable with a verified key, finds the
// log dirs, and records the topic's state everywhere. It changes nothing.
type preflight struct {
	o      preflightOpts
	checks []steps.Check
}

type preflightOpts struct {
	topicOpts
	modeOpts
	// HealthGrace is start-brokers' grace, said in the note about other
	// topics already unhealthy.
	HealthGrace time.Duration `opt:"health_grace"`
}

func (k *preflight) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	p, checks, err := k.gather(ctx, env)
	k.checks = checks
	return p, err
}

func (k *preflight) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

func (k *preflight) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if k.checks != nil {
		c := k.checks
		k.checks = nil
		return c, nil
	}
	// Resume: facts are not trusted from the journal, they are re-read.
	_, checks, err := k.gather(ctx, env)
	return checks, err
}

// gathering is one preflight's reading of the cluster, phase by phase.
type gathering struct {
	env    *steps.Env
	o      topicOpts
	grace  time.Duration
	mode   string
	accept []string
	prior  *Facts // an earlier attempt's facts (resume), nil on a first run
	f      Facts
	p      *steps.Plan
	checks []steps.Check
	looks  []*topicLook // one per topic of the run, in order
}

// topicLook is what one topic looks like so far.
type topicLook struct {
	topic      string
	tf         TopicFacts
	zt         kafkazk.TopicZNode
	ctime      time.Time
	hasTopic   bool
	consistent bool
	ids        map[string]bool // topic ids seen anywhere
}

// topics are the run's topic names.
func (g *gathering) topics() []string { return g.o.names() }

func (g *gathering) ok(name, detail string) {
	g.checks = append(g.checks, steps.Check{Name: name, OK: true, Detail: detail})
}

func (g *gathering) fact(format string, a ...any) {
	g.p.Facts = append(g.p.Facts, fmt.Sprintf(format, a...))
}

func (g *gathering) refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s", steps.ErrRefused, fmt.Sprintf(format, a...))
}

// gather reads the cluster phase by phase, the diagnosis beside it, and
// saves the facts it found: the read-only plan and the checks of preflight.
func (k *preflight) gather(ctx context.Context, env *steps.Env) (*steps.Plan, []steps.Check, error) {
	g, err := k.newGathering(env)
	if err != nil {
		return g.p, nil, err
	}
	// The diagnosis reads the same cluster independently; it runs beside
	// the phases below (~0.1-0.2 s of round trips on the lab), and is
	// cancelled if preflight returns early.
	dctx, cancelDiag := context.WithCancel(ctx)
	diag := async(func() []diagnosed { return g.diagnoseTopics(dctx) })
	defer func() { cancelDiag(); diag.wait() }()

	if err := g.look(ctx); err != nil {
		return g.p, g.checks, err
	}
	if err := g.conclude(ctx, diag.wait()); err != nil {
		return g.p, g.checks, err
	}
	return g.p, g.checks, nil
}

// newGathering starts preflight's gathering: a look per topic, the
// read-only plan, and an earlier attempt's facts (a resume). On error its
// plan is still the one to return.
func (k *preflight) newGathering(env *steps.Env) (*gathering, error) {
	g := &gathering{env: env, o: k.o.topicOpts, grace: k.o.HealthGrace, mode: k.o.Mode, accept: k.o.Accept}
	for _, t := range g.topics() {
		// A broker being down is not an inconsistency of a topic: whether
		// the cleanup applies is decided from evidence about the topic only
		// (its znodes, the running brokers' views of it, every disk, the
		// down brokers' included).
		g.looks = append(g.looks, &topicLook{topic: t, consistent: true, ids: map[string]bool{}})
	}
	g.p = &steps.Plan{NoOp: true, Summary: fmt.Sprintf("read-only look at %s on cluster %s", g.o.quoted(), env.Target.Name)}
	var prior Facts
	if ok, err := env.Load(factsKey, &prior); err != nil {
		return g, err
	} else if ok {
		g.prior = &prior
	}
	return g, nil
}

// diagnosed is one topic's diagnosis, or why it could not be made.
type diagnosed struct {
	d   *diagnose.Diagnosis
	err error
}

// diagnoseTopics diagnoses each of the run's topics, in order, disks
// included.
func (g *gathering) diagnoseTopics(ctx context.Context) []diagnosed {
	var out []diagnosed
	for _, t := range g.topics() {
		d, err := diagnose.Run(ctx, g.env.Cluster, diagnose.Options{Topic: t, Disk: true})
		out = append(out, diagnosed{d, err})
	}
	return out
}

// look runs the reading phases in order, from refusing a foreign cluster
// to refusing a roll that would take partitions offline: each refusal
// ends it, with nothing changed.
func (g *gathering) look(ctx context.Context) error {
	if err := g.refuseForeignCluster(ctx); err != nil {
		return err
	}
	if err := g.brokerFacts(ctx); err != nil {
		return err
	}
	// The disks are listed over SSH, and other topics' health is read,
	// while the brokers are asked about the topic; an early return still
	// waits for both.
	listing := async(func() brokers.Listing { return brokers.List(ctx, g.env.Hosts, g.env.Target, g.f.LogDirs) })
	defer listing.wait()
	baseline := async(func() map[string]Unhealthy { return g.baseline(ctx) })
	defer baseline.wait()
	g.autoCreate(ctx)
	for _, tl := range g.looks {
		if err := g.topicInZK(ctx, tl); err != nil {
			return err
		}
	}
	if err := g.brokerViews(ctx); err != nil {
		return err
	}
	g.f.UnhealthyBefore, g.f.Baseline = baseline.wait(), true
	if u := g.f.UnhealthyBefore; len(u) > 0 {
		g.p.Notes = append(g.p.Notes, fmt.Sprintf("other topics' partitions are already offline or under-replicated, before anything is done: %s. A full restart will not repair them; the health gate after it waits for them during health_grace (%s), then names them and does not fail on them while they are no worse (the restart did not cause them), but fails on any other. Look at them first: `kremedy diagnose`", text.Summarize(slices.Collect(maps.Keys(u))), g.grace))
	}
	if err := g.disks(listing.wait()); err != nil {
		return err
	}
	for _, tl := range g.looks {
		g.oldRecords(ctx, tl)
	}
	if err := g.verdict(ctx); err != nil {
		return err
	}
	return g.rollable(ctx)
}

// conclude adds the releases and the diagnoses (ds, one per topic) to the
// plan, and saves the facts gathered for the steps after preflight.
func (g *gathering) conclude(ctx context.Context, ds []diagnosed) error {
	g.releases(ctx, ds[0].d)
	for _, d := range ds {
		g.diagnosis(d.d, d.err)
	}
	g.f.Topics = map[string]TopicFacts{}
	for _, tl := range g.looks {
		g.f.Topics[tl.topic] = tl.tf
	}
	return g.env.Save(factsKey, g.f)
}

// rollable refuses rolling mode, before anything is changed, on a cluster
// where restarting one broker at a time would take another topic's
// partitions offline or below min.insync.replicas: found later, it would
// stop the run with the znodes already deleted. Only a run's first
// preflight asks (a resume may find the roll half done, a broker stopped).
func (g *gathering) rollable(ctx context.Context) error {
	if g.mode != modeRolling || g.f.Clean || g.prior != nil {
		return nil
	}
	r := rollOf(0, 0, 0, 0)
	r.Accept = g.accept
	why, err := r.Rollable(ctx, g.env, g.topics()...)
	if err != nil {
		return fmt.Errorf("rolling mode: %w", err)
	}
	if why != "" {
		return g.refuse("rolling mode cannot keep the other topics available on this cluster now: %s. Nothing was changed. Fix that first, or run in full mode (the default: every broker stopped at once, report 000's procedure)", why)
	}
	g.ok("rolling mode: every broker can stop in turn", "no other partition would go offline or below min.insync.replicas")
	return nil
}

// refuseForeignCluster refuses a chroot that is not a Kafka cluster's, a
// cluster migrating to KRaft, and, on resume, another cluster than the one
// the run started on.
func (g *gathering) refuseForeignCluster(ctx context.Context) error {
	var prior string
	if g.prior != nil {
		prior = g.prior.ClusterID
	}
	id, check, err := roll.CheckCluster(ctx, g.env, prior, "manual znode surgery now would corrupt the migration")
	g.f.ClusterID = id
	if check.OK { // passed, even when the resume is refused after it
		g.checks = append(g.checks, check)
	}
	return err
}

// brokerFacts records the registered brokers, the controller, their
// listeners and log dirs, and refuses a registered broker the inventory
// does not know (kremedy could not stop it).
func (g *gathering) brokerFacts(ctx context.Context) error {
	env := g.env
	reg, err := brokers.Registered(ctx, env.ZK)
	if err != nil {
		return err
	}
	ctrl, err := brokers.Controller(ctx, env.ZK)
	if err != nil {
		return err
	}
	g.f.Controller, g.f.Registered = ctrl, reg
	g.f.LogDirs, g.f.AutoCreate, g.f.Addrs = map[int32][]string{}, map[int32]bool{}, map[int32]string{}
	for _, id := range reg {
		h, _ := env.Target.Host(id)
		g.f.Addrs[id] = brokers.Addr(ctx, env.ZK, id, h.Addr)
	}
	if g.prior != nil {
		for id, a := range g.prior.Addrs {
			if _, ok := g.f.Addrs[id]; !ok && a != "" {
				g.f.Addrs[id] = a
			}
		}
	}
	inv := brokers.HostIDs(env.Target)
	for _, id := range reg {
		if !slices.Contains(inv, id) {
			return g.refuse("broker %d is registered in ZooKeeper but not in the inventory: kremedy could not stop it, and a full restart with one broker left running would keep its stale state. Add it to the inventory; nothing was changed", id)
		}
	}
	g.fact("brokers registered %s of inventory %s; controller %d", fmt.Sprint(reg), fmt.Sprint(inv), ctrl)
	for _, id := range inv {
		if !slices.Contains(reg, id) {
			g.p.Notes = append(g.p.Notes, fmt.Sprintf("broker %d is in the inventory but not registered in ZooKeeper (stopped or crashed): its metadata cannot be asked, its disk is read over SSH; a broker that is down is not by itself a reason to clean up a topic", id))
		}
	}
	for _, h := range env.Target.Hosts {
		dirs := h.LogDirs
		if len(dirs) == 0 && !slices.Contains(reg, h.ID) && g.prior != nil {
			dirs = g.prior.LogDirs[h.ID] // found while it ran, in an earlier attempt
		}
		if len(dirs) == 0 {
			if !slices.Contains(reg, h.ID) {
				return g.refuse("broker %d is down and the inventory lists no log_dirs for it, so kremedy cannot find its segments; add log_dirs to the inventory", h.ID)
			}
			if dirs, err = env.Kafka.LogDirs(ctx, h.ID); err != nil {
				return fmt.Errorf("log dirs of broker %d: %w", h.ID, err)
			}
			if err := brokers.CheckLogDirs(h.ID, dirs, "its DescribeLogDirs answer"); err != nil {
				return err
			}
		}
		g.f.LogDirs[h.ID] = dirs
	}
	return nil
}

// releases is the capability probe: what each registered broker runs, and
// so which method each version-dependent step uses (the diagnosis's, when
// it asked the same brokers). A resume with every broker stopped keeps the
// first attempt's answer.
func (g *gathering) releases(ctx context.Context, d *diagnose.Diagnosis) {
	// The diagnosis beside preflight has asked the same brokers already.
	var r brokers.Releases
	if d != nil && slices.Equal(d.Brokers, g.f.Registered) {
		r = d.Releases
	} else {
		r = brokers.Probe(ctx, g.env.Kafka, g.f.Registered)
	}
	if len(g.f.Registered) == 0 && g.prior != nil {
		r = g.prior.Releases
	}
	g.f.Releases = r
	g.fact("releases: %s", r)
	for _, m := range r.Methods() {
		g.fact("method: %s", m)
	}
	g.env.Logf("releases: %s", r)
}

// autoCreate asks every broker whether it creates topics on first use.
func (g *gathering) autoCreate(ctx context.Context) {
	type answer struct {
		v   string
		err error
	}
	reg := g.f.Registered
	got := par.Each(reg, func(id int32) answer {
		v, err := g.env.Kafka.BrokerConfig(ctx, id, "auto.create.topics.enable")
		return answer{v, err}
	})
	for i, id := range reg {
		if err := got[i].err; err != nil {
			g.p.Notes = append(g.p.Notes, fmt.Sprintf("could not read auto.create.topics.enable on broker %d: %v", id, err))
			continue
		}
		g.f.AutoCreate[id] = got[i].v == "true"
		if got[i].v == "true" {
			g.p.Notes = append(g.p.Notes, fmt.Sprintf("broker %d has auto.create.topics.enable=true: any client still attached can silently recreate %s between steps; detach every client first", id, g.o.quoted()))
		}
	}
}

// topicInZK reads the topic's znodes: assignment, id, configs, deletion
// marker.
func (g *gathering) topicInZK(ctx context.Context, tl *topicLook) error {
	zk, t := g.env.ZK, tl.topic
	if b, st, err := zk.Get(ctx, kafkazk.TopicPath(t)); err == nil {
		if err := kafkazk.DecodeZNode(zk.Chroot()+kafkazk.TopicPath(t), b, &tl.zt); err != nil {
			return err
		}
		tl.hasTopic, tl.ctime = true, st.Ctime
		tl.tf.TopicID = tl.zt.TopicID
		if tl.tf.Partitions, err = tl.zt.Assignment(); err != nil {
			return err
		}
		if tl.zt.TopicID != "" {
			tl.ids[tl.zt.TopicID] = true
		}
		g.fact("%s%s: %d partitions, topic_id %s, created %s", zk.Chroot(), kafkazk.TopicPath(t), len(tl.zt.Partitions), text.OrDash(tl.zt.TopicID), tl.ctime.UTC().Format(time.RFC3339))
	} else if !zk.IsNoNode(err) {
		return err
	} else {
		g.fact("%s%s: absent", zk.Chroot(), kafkazk.TopicPath(t))
	}
	if b, _, err := zk.Get(ctx, kafkazk.ConfigTopicPath(t)); err == nil {
		var cz kafkazk.TopicConfigZNode
		if kafkazk.DecodeZNode("", b, &cz) == nil {
			tl.tf.Configs = cz.Config
		}
		g.fact("%s%s: present %v", zk.Chroot(), kafkazk.ConfigTopicPath(t), tl.tf.Configs)
	}
	pending, err := exists(ctx, g.env, kafkazk.DeleteTopicPath(t))
	if err != nil {
		return err
	}
	if pending {
		g.fact("%s%s: PRESENT — the topic is marked for deletion and the deletion has not completed", zk.Chroot(), kafkazk.DeleteTopicPath(t))
		tl.consistent = false
	}
	return g.mayDelete(ctx, tl)
}

// mayDelete proves, before anything is done, that this ZooKeeper session
// may delete under every parent the cleanup deletes in: with
// zookeeper.set.acl=true the brokers' znodes are ACL'd to their SASL
// identity, which kremedy's digest session is not.
func (g *gathering) mayDelete(ctx context.Context, tl *topicLook) error {
	zk, t := g.env.ZK, tl.topic
	parents := []string{kafkazk.TopicsPath, kafkazk.ConfigTopicsPath, kafkazk.DeleteTopicsPath}
	if tl.hasTopic {
		parents = append(parents, kafkazk.TopicPath(t), kafkazk.TopicPath(t)+"/partitions")
		for p := range tl.tf.Partitions {
			parents = append(parents, fmt.Sprintf("%s/partitions/%d", kafkazk.TopicPath(t), p))
		}
	}
	denied, first, err := brokers.MayDelete(ctx, zk, parents)
	if err != nil {
		return err
	}
	if len(denied) > 0 {
		return fmt.Errorf("%w: this ZooKeeper session may not delete under %s (%v). With zookeeper.set.acl=true the brokers' znodes belong to their SASL identity (sasl:…), which kremedy cannot take (go-zookeeper has no SASL). What works: a superDigest operator identity on the ZooKeeper servers (-Dzookeeper.DigestAuthenticationProvider.superDigest=USER:HASH) given as zookeeper.auth in the inventory; or check the digest user and password there (ZooKeeper accepts any digest and only refuses at the first write). Nothing was changed", steps.ErrRefused, strings.Join(denied, ", "), first)
	}
	g.ok(fmt.Sprintf("this ZooKeeper session may delete the znodes of %q", t), fmt.Sprintf("probed %d parents (no znode changed)", len(parents)))
	return nil
}

// brokerViews asks every registered broker, at once, what it serves of
// the topic. A broker whose answer cannot say whether it knows the topic
// (TOPIC_AUTHORIZATION_FAILED) refuses the run: whether the cleanup
// applies, and later whether it worked, rests on these answers.
func (g *gathering) brokerViews(ctx context.Context) error {
	reg := g.f.Registered
	type answer struct {
		v   ports.BrokerView
		err error
	}
	views := par.Each(reg, func(id int32) answer {
		v, err := g.env.Kafka.BrokerView(ctx, id, g.topics()...)
		return answer{v, err}
	})
	for _, tl := range g.looks {
		t := tl.topic
		for i, id := range reg {
			v, err := views[i].v, views[i].err
			if err != nil {
				g.fact("broker %d metadata: no answer (%v)", id, err)
				tl.consistent = false
				continue
			}
			tv := v.Topics[t]
			if why := tv.Unsure(); why != "" {
				return g.refuse("broker %d: %s. Nothing was changed", id, why)
			}
			if !tv.Present() {
				g.fact("broker %d metadata of %q: %s", id, t, tv.Err)
				tl.consistent = tl.consistent && !tl.hasTopic
				continue
			}
			urp := 0
			for _, pv := range tv.Partitions {
				if g.missingLive(pv) || pv.Err != ports.KafkaNone {
					urp++
				}
			}
			g.fact("broker %d metadata: lists %q, %d partitions, topic ID %s, %d partitions under-replicated or leaderless", id, t, len(tv.Partitions), text.OrDash(tv.ID), urp)
			if tv.ID != "" {
				tl.ids[tv.ID] = true
			}
			tl.consistent = tl.consistent && tl.hasTopic && tv.ID == tl.zt.TopicID && len(tv.Partitions) == len(tl.zt.Partitions) && urp == 0
		}
	}
	return nil
}

// missingLive reports whether a partition lacks a replica of a running
// broker in its ISR, or has no leader though a replica's broker runs, or
// names a broker that is neither registered nor in the inventory (an
// assignment to a broker gone for good is the topic's own inconsistency): a
// replica missing only because an inventory broker is down is that
// broker's problem, not the topic's.
func (g *gathering) missingLive(pv ports.PartitionView) bool {
	for _, r := range pv.Replicas {
		_, known := g.env.Target.Host(r)
		running := slices.Contains(g.f.Registered, r)
		if running && (pv.Leader < 0 || !slices.Contains(pv.ISR, r)) || !running && !known {
			return true
		}
	}
	return false
}

// disks reads the topic's partition directories on every broker's disk.
func (g *gathering) disks(l brokers.Listing) error {
	env := g.env
	for id, bad := range l.Unexpected {
		env.Logf("broker %d: unexpected lines while listing log dirs: %v", id, bad)
	}
	if err := l.Err(env.Target); err != nil {
		if !errors.Is(err, steps.ErrRefused) {
			return fmt.Errorf("%w: %v. kremedy must reach every broker over SSH before it changes anything; nothing was changed", steps.ErrRefused, err)
		}
		return err
	}
	if err := unwritable(l); err != nil {
		return err
	}
	for _, tl := range g.looks {
		g.topicDisks(l, tl)
	}
	g.ok("every broker host reachable over SSH with a verified host key", fmt.Sprintf("%d hosts, log dirs listed; the user commands run as may move directories out of each into the quarantine beside it", len(env.Target.Hosts)))
	return nil
}

// topicDisks reads one topic's partition directories on every disk.
func (g *gathering) topicDisks(l brokers.Listing, tl *topicLook) {
	t, env := tl.topic, g.env
	noted := len(g.looks) > 1 && tl != g.looks[0] // the strays are noted once
	for _, h := range env.Target.Hosts {
		for _, dir := range g.f.LogDirs[h.ID] {
			entries := l.Entries[h.ID][dir]
			for _, e := range entries {
				if d, err := segments.ParseDir(e.Name); err == nil && d.Topic == t && e.TopicID != "" {
					tl.ids[e.TopicID] = true // exactly this topic's, never orders-v2's
				}
			}
			matches, strays := segments.Select(entries, t, idList(tl.ids))
			for _, s := range strays {
				if !noted {
					g.p.Notes = append(g.p.Notes, fmt.Sprintf("broker %d %s/%s: %s — Kafka refuses to start with it inside a log dir; kremedy reports it and does not move it", h.ID, dir, s.Name, s.Why))
				}
			}
			for _, m := range matches {
				id := idOf(entries, m.Dir.Name)
				g.fact("broker %d %s/%s (%s, topic id %s)", h.ID, dir, m.Dir.Name, m.Dir.Kind, text.OrDash(id))
				assigned := slices.Contains(tl.tf.Partitions[m.Dir.Partition], h.ID)
				if m.Dir.Kind != segments.Live || !tl.hasTopic || !assigned || (tl.zt.TopicID != "" && id != tl.zt.TopicID) {
					tl.consistent = false
				}
			}
		}
	}
	for id := range tl.ids {
		if id != tl.zt.TopicID {
			tl.tf.OldIDs = append(tl.tf.OldIDs, id)
		}
	}
	slices.Sort(tl.tf.OldIDs)
}

// unwritable refuses when the user kremedy's commands run as may not move
// a partition directory out of a log dir into the quarantine beside it:
// the wipe would fail after the brokers were stopped.
func unwritable(l brokers.Listing) error {
	var bad []string
	for _, id := range slices.Sorted(maps.Keys(l.Unwritable)) {
		for _, dir := range slices.Sorted(maps.Keys(l.Unwritable[id])) {
			what := map[string]string{"dir": "the log dir " + dir, "parent": "the parent of " + dir + " (where the quarantine goes)",
				"quarantine": filepath.Join(filepath.Dir(dir), "kremedy-quarantine")}[l.Unwritable[id][dir]]
			bad = append(bad, fmt.Sprintf("broker %d: cannot write %s", id, what))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the user kremedy's commands run as on the broker hosts may not move the topic's directories into quarantine (%s): the wipe would fail with the brokers stopped. Set `become: sudo` in the inventory (ssh.become, or the broker's become) so that every command runs through sudo -n, or log in as the user that owns the log dirs; nothing was changed", steps.ErrRefused, strings.Join(bad, "; "))
}

// oldRecords looks for records older than a "new" topic: the adoption
// field report 000 proved by file dates.
func (g *gathering) oldRecords(ctx context.Context, tl *topicLook) {
	if !tl.hasTopic || !tl.consistent {
		return
	}
	for part := range tl.tf.Partitions {
		ts, has, err := g.env.Kafka.FirstRecordTime(ctx, tl.topic, part)
		if err != nil {
			g.fact("first record of %s-%d: %v", tl.topic, part, err)
			tl.consistent = false
			continue
		}
		if has && ts.Before(tl.ctime.Add(-time.Second)) {
			g.fact("%s-%d holds a record from %s, before the topic was created (%s): old segments were adopted", tl.topic, part, ts.UTC().Format(time.RFC3339), tl.ctime.UTC().Format(time.RFC3339))
			tl.consistent = false
		}
	}
}

// verdict says whether the cleanup applies. On a run's first preflight, a
// consistent topic ends the run (nothing to clean up), and a topic found
// nowhere is refused as a likely typo, before anything is touched.
func (g *gathering) verdict(ctx context.Context) error {
	// Once a run has found its topics inconsistent it is a cleanup run to
	// its end: a resume after this run's own znode deletion, restart or
	// recreation may well find everything consistent, and must still finish
	// (verify proves the recreated topic, removes a leftover canary).
	for _, tl := range g.looks {
		if tl.consistent && g.prior != nil && !g.prior.Clean {
			tl.consistent = false
			g.p.Notes = append(g.p.Notes, fmt.Sprintf("%q looks consistent now, but this run's first preflight found it inconsistent: the run continues to its end and verify proves the result", tl.topic))
		}
	}
	if len(g.looks) > 1 {
		return g.verdictOfSeveral(ctx)
	}
	tl := g.looks[0]
	t := tl.topic
	g.f.Clean = tl.consistent
	switch {
	case tl.consistent && tl.hasTopic:
		g.p.Summary = fmt.Sprintf("%q is consistent on ZooKeeper, every running broker and every disk, and holds no old records — nothing to clean up", t)
		g.p.EndsRun = g.prior == nil
	case tl.consistent:
		if g.prior == nil {
			return g.refuse("no topic of that name exists on this cluster: %q has no znode, is not pending deletion, no running broker serves it and no disk holds a directory of it. Nothing was touched.%s", t, g.closest(ctx, t))
		}
		g.p.Summary = fmt.Sprintf("%q is absent from ZooKeeper, from every broker's metadata and from every disk — nothing to clean", t)
	default:
		g.p.Summary = fmt.Sprintf("%q is inconsistent across ZooKeeper, broker caches and disks: the cleanup applies", t)
	}
	g.ok("topic state recorded", g.p.Summary)
	return nil
}

// verdictOfSeveral: a several-topic run cleans up every topic it names or
// none. A topic found healthy, or found nowhere (a typo), refuses the whole
// run before anything is changed, naming it and the run without it.
func (g *gathering) verdictOfSeveral(ctx context.Context) error {
	var ghosts, why []string
	for _, tl := range g.looks {
		switch {
		case !tl.consistent:
			ghosts = append(ghosts, tl.topic)
		case tl.hasTopic:
			why = append(why, fmt.Sprintf("%q is healthy (consistent on ZooKeeper, every running broker and every disk, no old records): kremedy does not touch a healthy topic", tl.topic))
		default:
			why = append(why, fmt.Sprintf("no topic %q exists on this cluster (no znode, not pending deletion, no running broker serves it, no disk holds a directory of it).%s", tl.topic, g.closest(ctx, tl.topic)))
		}
	}
	if len(why) > 0 {
		next := "none of them needs a cleanup"
		if len(ghosts) > 0 {
			next = fmt.Sprintf("run again with the ones that need it: --set topics=%s", strings.Join(ghosts, ","))
		}
		return g.refuse("%s. Nothing was touched: a run that names several topics cleans up every one or none; %s", strings.Join(why, "; "), next)
	}
	g.p.Summary = fmt.Sprintf("%s are inconsistent across ZooKeeper, broker caches and disks: the cleanup applies to all %d, with one stop and one start of every broker", g.o.quoted(), len(ghosts))
	g.ok("topic state recorded", g.p.Summary)
	return nil
}

// closest names the cluster's topics whose names are nearest the one asked
// for (a typo's likely intent), as a hint.
func (g *gathering) closest(ctx context.Context, topic string) string {
	names, err := g.env.ZK.Children(ctx, kafkazk.TopicsPath)
	if err != nil || len(names) == 0 {
		return ""
	}
	type near struct {
		name string
		d    int
	}
	var ns []near
	for _, n := range names {
		d := editDistance(strings.ToLower(topic), strings.ToLower(n))
		if d <= max(2, len(topic)/3) || strings.Contains(n, topic) || strings.Contains(topic, n) {
			ns = append(ns, near{n, d})
		}
	}
	slices.SortFunc(ns, func(a, b near) int { return cmp.Or(a.d-b.d, strings.Compare(a.name, b.name)) })
	var out []string
	for _, n := range ns[:min(3, len(ns))] {
		out = append(out, strconv.Quote(n.name))
	}
	if len(out) == 0 {
		return ""
	}
	return " Closest existing names: " + strings.Join(out, ", ") + "."
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// diagnosis adds the findings `kremedy diagnose --topic` reports, so that
// the first screen of a run shows them.
func (g *gathering) diagnosis(d *diagnose.Diagnosis, err error) {
	if err != nil {
		g.p.Notes = append(g.p.Notes, fmt.Sprintf("diagnosis incomplete: %v", err))
		return
	}
	for _, f := range d.Findings {
		g.p.Facts = append(g.p.Facts, fmt.Sprintf("finding [%s] %s: %s", f.Severity, f.Kind, f.Summary))
	}
	if d.Healthy {
		g.p.Facts = append(g.p.Facts, "diagnosis: no findings")
	}
}

func idList(m map[string]bool) []string {
	out := slices.Collect(maps.Keys(m))
	slices.Sort(out)
	return out
}

func idOf(entries []segments.Entry, name string) string {
	for _, e := range entries {
		if e.Name == name {
			return e.TopicID
		}
	}
	return ""
}

// baseline is what else is already unhealthy before anything is done: the
// health gate after the restart must not blame the run for it, and the
// operator must hear of it before the whole cluster is stopped. A resume
// keeps the first attempt's list, never one read after the restart.
func (g *gathering) baseline(ctx context.Context) map[string]Unhealthy {
	switch {
	case g.prior != nil && g.prior.Baseline:
		return g.prior.UnhealthyBefore
	case g.prior != nil:
		return nil // an earlier attempt recorded none: count nothing as pre-existing
	}
	return unhealthyNow(ctx, g.env, g.topics(), g.f.Registered)
}

// unhealthyNow lists other topics' partitions that every broker that
// answers reports offline or under-replicated right now, for a reason the
// restart will not remove: a replica out of sync on a broker that runs, or
// on a broker that is not in the inventory (kremedy does not start it). A
// partition short only of inventory brokers that are down now is not
// listed: the restart starts them, and the gate must see it heal. Every
// broker must agree, so that one broker's stale cache can neither add a
// healthy partition nor make it look better than it is (the ISR kept is the
// largest any broker reports; offline only if every broker says so).
func unhealthyNow(ctx context.Context, env *steps.Env, topics []string, reg []int32) map[string]Unhealthy {
	inv := brokers.HostIDs(env.Target)
	stays := func(id int32) bool { return slices.Contains(reg, id) || !slices.Contains(inv, id) }
	seen := map[string]int{}
	out := map[string]Unhealthy{}
	views := 0
	for _, v := range par.Each(reg, func(id int32) *ports.BrokerView {
		if v, err := env.Kafka.BrokerView(ctx, id); err == nil {
			return &v
		}
		return nil
	}) {
		if v == nil {
			continue
		}
		views++
		for name, tv := range v.Topics {
			if slices.Contains(topics, name) {
				continue
			}
			for _, pv := range tv.Partitions {
				off := pv.IsOffline()
				if !off && !pv.UnderReplicated() {
					continue
				}
				for _, rep := range pv.Replicas {
					if !slices.Contains(pv.ISR, rep) && stays(rep) {
						key := fmt.Sprintf("%s-%d", name, pv.Partition)
						u, ok := out[key]
						if !ok {
							u.Offline = true
						}
						u.Offline = u.Offline && off
						u.ISR = max(u.ISR, len(pv.ISR))
						out[key] = u
						seen[key]++
						break
					}
				}
			}
		}
	}
	for key := range out {
		if seen[key] < views {
			delete(out, key)
		}
	}
	return out
}
