package diagnose

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// diagnosis is one diagnosis of a ZooKeeper-mode cluster being made.
type diagnosis struct {
	diagnoser
	st     *kafkazk.ClusterState
	topics []string // asked for: o.Topic, or nil for every topic
	// the cluster's defaults, read once
	deleteDisabled []int32
	ibp            string // inter.broker.protocol.version, "" when no broker said
	migrating      string // /migration's content when a migration has started
	// how long the disagreements lasted: the first read that showed one,
	// and how many reads did
	since time.Time
	reads int
}

// Run reads ZooKeeper, every broker's own metadata and, with Disk, every
// broker's log dirs, and reports what disagrees. It never changes anything:
// Metadata requests never auto-create topics. A KRaft inventory (no
// ZooKeeper) is diagnosed over Kafka alone (runKRaft).
func Run(ctx context.Context, c ports.Cluster, o Options) (*Diagnosis, error) {
	if c.ZK == nil {
		if o.Migration {
			return nil, fmt.Errorf("%w: --migration checks a ZooKeeper-mode cluster's readiness; this inventory is a KRaft cluster's (mode: kraft): it has no migration ahead of it", ports.ErrRefused)
		}
		return runKRaft(ctx, c, o)
	}
	start := time.Now()
	g := &diagnosis{diagnoser: diagnoser{c: c, o: o, minISR: brokers.MinISR{Default: 1}}}
	if o.Topic != "" {
		g.topics = []string{o.Topic}
	}
	if kid, migrated, err := brokers.Migrated(ctx, c.ZK); err != nil {
		return nil, fmt.Errorf("read ZooKeeper %s: %w", c.Target.ZKConnect, err)
	} else if migrated {
		return migratedDiagnosis(c, o, kid, start), nil
	}
	// The registered brokers first (one read): the disks over SSH, every
	// broker's own metadata and what each runs are asked while ZooKeeper is
	// scanned — at 10,000 partitions the scan and the disk listings take
	// about half a second each, and nothing of one waits for the other.
	registered, err := brokers.Registered(ctx, c.ZK)
	if err != nil {
		return nil, fmt.Errorf("read ZooKeeper %s: %w", c.Target.ZKConnect, err)
	}
	disks := startDisks(ctx, c, o, registered)
	defer disks.wait() // an early return still waits for the SSH listings
	unreachable, err := g.read(ctx, registered)
	if err != nil {
		return nil, err
	}
	g.examine(ctx, unreachable)
	g.offlineLogEnds(ctx, g.st.Brokers, g.topics)
	g.logDirsFull(ctx, registered)
	if l := disks.wait(); l != nil {
		g.d.Disk = true
		diagnoseDisks(g.add, c.Target, g.st, *l, o.Topic, g.d.Releases.RefusesStaleLog())
	}
	if o.Migration {
		g.migration(ctx, disks.wait())
	}
	if m := lease(ctx, c, o, g.add); m != "" {
		g.d.Methods = append(g.d.Methods, m)
	}
	g.reassignments(ctx)
	g.conclude(ctx, start)
	return g.d, nil
}

// read is the first phase of Run: ZooKeeper's state, with every registered
// broker's own metadata and what each runs asked meanwhile, read again
// while they disagree (readAgreeing). It returns the brokers that did not
// answer.
func (g *diagnosis) read(ctx context.Context, registered []int32) (map[int32]error, error) {
	c := g.c
	early := make(chan firstRead, 1)
	ectx, ecancel := context.WithCancel(ctx)
	defer ecancel()
	go func() {
		var r firstRead
		r.ids = registered
		r.views, r.unreachable = brokerViews(ectx, c.Kafka, registered, g.topics)
		r.releases = brokers.Probe(ectx, c.Kafka, registered)
		early <- r
	}()
	var err error
	if g.st, err = c.ZK.ReadState(ctx, g.topics...); err != nil {
		ecancel() // the brokers' answers are not needed any more
		<-early
		return nil, fmt.Errorf("read ZooKeeper %s: %w", c.Target.ZKConnect, err)
	}
	first := <-early
	g.d = &Diagnosis{Version: 1, Cluster: c.Target.Name, Topic: g.o.Topic}
	unreachable, err := g.readAgreeing(ctx, &first)
	if err != nil {
		return nil, err
	}
	g.d.Brokers, g.d.Controller = g.st.Brokers, g.st.Controller
	if slices.Equal(first.ids, g.st.Brokers) {
		g.d.Releases = first.releases
	} else { // a broker came or went since: ask the ones registered now
		g.d.Releases = brokers.Probe(ctx, c.Kafka, g.st.Brokers)
	}
	g.d.Methods = g.d.Releases.Methods()
	return unreachable, nil
}

// examine is Run's second phase, on what read read: the cluster's
// findings, then every topic's, then the causes across topics.
func (g *diagnosis) examine(ctx context.Context, unreachable map[int32]error) {
	g.clusterFindings(unreachable)
	g.zkServers(ctx)
	g.readDefaults(ctx)
	names := g.topicNames(g.st.Topics)
	for _, name := range names {
		ts := g.st.Topics[name]
		if ts == nil {
			ts = kafkazk.NewTopicState(name)
		}
		g.topic(ctx, name, ts)
	}
	g.d.Topics = len(names)
	if f := g.fewer.finding(g.minISR); f != nil {
		g.add(*f)
	}
	g.brokersDown(names)
}

// conclude is Run's last phase: the findings sorted and linked to their
// causes, the settling ones folded, and the verdicts.
func (g *diagnosis) conclude(ctx context.Context, start time.Time) {
	sortFindings(g.d.Findings)
	g.d.Findings = linkCauses(g.d.Findings)
	// After the causes are linked: a finding a cause explains (a broker
	// down) is not settling, whatever the topic's age.
	if g.settle(ctx, start) {
		sortFindings(g.d.Findings)
		g.d.Findings = linkCauses(g.d.Findings)
	}
	g.d.Methods = append(g.d.Methods, g.settled())
	g.d.Healthy = healthy(g.d.Findings)
	g.d.Shared = sharedCauses(g.d.Findings)
	if g.o.Migration {
		g.readiness()
	}
	g.d.Took = time.Since(start).Round(time.Millisecond).String()
}

// migratedDiagnosis is the one finding a ZooKeeper-mode inventory of a
// cluster that migrated to KRaft gets: its brokers do not register in
// ZooKeeper because they are KRaft brokers, not because they are down, and
// its disks hold Kafka's own metadata log, not a ghost.
func migratedDiagnosis(c ports.Cluster, o Options, kraftController int32, start time.Time) *Diagnosis {
	d := &Diagnosis{Version: 1, Cluster: c.Target.Name, Topic: o.Topic, Controller: kraftController, Brokers: []int32{}}
	d.Findings = linkCauses([]Finding{{Kind: FindMigratedToKRaft, Severity: Warning,
		Summary: "this cluster runs in KRaft mode since its migration from ZooKeeper (dual-write or finalized): this ZooKeeper-mode inventory no longer describes it",
		Evidence: []string{fmt.Sprintf("%s%s is held by KRaft controller %d (kraftControllerEpoch set)", c.ZK.Chroot(), kafkazk.ControllerPath, kraftController),
			fmt.Sprintf("no broker registers under %s%s: KRaft brokers register with the controllers", c.ZK.Chroot(), kafkazk.BrokerIDsPath)},
		Fix:   brokers.MigratedHint + "; then `kremedy diagnose --inventory` that file",
		DoNot: "do not start the brokers in ZooKeeper mode or repair znodes: ZooKeeper is no longer where the cluster's metadata lives"}})
	d.Took = time.Since(start).Round(time.Millisecond).String()
	return d
}

// firstRead is what Run asks the brokers while ZooKeeper is scanned: each
// registered broker's own metadata and what it runs.
type firstRead struct {
	ids         []int32
	views       map[int32]ports.BrokerView
	unreachable map[int32]error
	releases    brokers.Releases
}

// readAgreeing asks each registered broker for its own view, in parallel
// (the first time, first's views when they are of the same brokers).
// Brokers learn about each other, the controller and every leader or ISR
// change a moment after ZooKeeper does, and ZooKeeper and the brokers cannot
// be read at one instant: a disagreement (about the cluster or a topic) is
// read again, ZooKeeper and brokers, up to 3 times 1 s apart, before it
// counts. It returns the brokers that did not answer.
func (g *diagnosis) readAgreeing(ctx context.Context, first *firstRead) (map[int32]error, error) {
	var unreachable map[int32]error
	for attempt := 0; ; attempt++ {
		at := time.Now()
		if first != nil && slices.Equal(first.ids, g.st.Brokers) {
			// Asked while ZooKeeper was scanned, of the brokers it lists.
			g.views, unreachable = first.views, first.unreachable
		} else {
			g.views, unreachable = brokerViews(ctx, g.c.Kafka, g.st.Brokers, g.topics)
		}
		first = nil
		if !disagrees(g.st, g.views) {
			return unreachable, nil
		}
		if g.since.IsZero() {
			g.since = at
		}
		// At least three reads, and until the disagreement has lasted the
		// settle window: a transient one is gone by then.
		if g.reads++; attempt >= 2 && time.Since(g.since) >= g.window() || ctx.Err() != nil {
			return unreachable, nil
		}
		sleep(ctx, time.Second)
		st, err := g.c.ZK.ReadState(ctx, g.topics...)
		if err != nil {
			return nil, fmt.Errorf("read ZooKeeper %s: %w", g.c.Target.ZKConnect, err)
		}
		g.st = st
	}
}

// zkServers reports the ensemble's servers (the inventory's connect
// string) that refuse connections: the session kremedy has proves a
// quorum, but each server lost takes the ensemble closer to losing it.
func (g *diagnosis) zkServers(ctx context.Context) {
	servers, _, err := kafkazk.ParseConnect(g.c.Target.ZKConnect)
	if err != nil || len(servers) < 2 {
		return
	}
	var down []string
	for _, s := range servers {
		if !g.c.Kafka.Listening(ctx, s) {
			down = append(down, s)
		}
	}
	if len(down) == 0 {
		return
	}
	left := len(servers) - len(down)
	tolerate := left - (len(servers)/2 + 1)
	sev := Warning
	if tolerate <= 0 {
		sev = Critical
	}
	g.add(Finding{Kind: FindZKServerDown, Severity: sev,
		Summary:  fmt.Sprintf("ZooKeeper servers %s do not accept connections: the ensemble runs on %d of %d, and tolerates %d more lost", strings.Join(down, ", "), left, len(servers), max(tolerate, 0)),
		Evidence: []string{fmt.Sprintf("TCP connect refused or timed out: %s (zookeeper.connect %s)", strings.Join(down, ", "), g.c.Target.ZKConnect)},
		Fix:      "restart those ZooKeeper servers (their logs say why they stopped); do no znode surgery while the ensemble has no margin",
		DoNot:    "do not restart another ZooKeeper server until these are back"})
}

// clusterFindings: brokers that do not answer, and brokers that disagree
// with ZooKeeper about the controller or the live brokers.
func (g *diagnosis) clusterFindings(unreachable map[int32]error) {
	if g.st.Controller < 0 && len(g.st.Brokers) > 0 {
		g.add(Finding{Kind: FindNoController, Severity: Critical, Brokers: g.st.Brokers,
			Summary:  "no controller is elected: /controller is absent, so no leader election, ISR change, topic creation or deletion happens until one is",
			Evidence: []string{fmt.Sprintf("%s/controller absent; registered brokers %s", g.c.ZK.Chroot(), fmt.Sprint(g.st.Brokers))},
			Fix:      "find why no registered broker wins the election: its server.log and controller.log (ZooKeeper session expiring, a broker stuck in start-up); restarting the broker that should be controller usually ends it",
			DoNot:    "do not delete znodes or restart every broker at once while no controller runs: nothing would carry the change out"})
	}
	for _, id := range g.st.Brokers {
		if err, ok := unreachable[id]; ok {
			g.add(Finding{Kind: FindBrokerUnreachable, Severity: Critical, Brokers: []int32{id},
				Summary: fmt.Sprintf("broker %d is registered in ZooKeeper but does not answer Metadata", id), Evidence: []string{err.Error()},
				Fix: "check the broker's process and network; a broker that is registered but not serving is a zombie or overloaded"})
		}
	}
	for _, id := range sortedIDs(g.views) {
		v := g.views[id]
		if !agreesOnCluster(v, g.st) {
			g.add(Finding{Kind: FindDisagreement, Severity: Warning, Brokers: []int32{id},
				Summary:  fmt.Sprintf("broker %d's metadata disagrees with ZooKeeper about the cluster", id),
				Evidence: []string{fmt.Sprintf("broker %d: controller %d, live brokers %s; ZooKeeper: controller %d, registered %s", id, v.Controller, fmt.Sprint(v.Brokers), g.st.Controller, fmt.Sprint(g.st.Brokers))},
				Fix:      "usually transient during a controller change; if it lasts, restart that broker so it reloads metadata"})
		}
	}
}

// brokersDown is one finding per inventory broker that is not registered:
// the cause of the under-replicated partitions and unregistered replicas
// the topics show, said once, with what it affects.
func (g *diagnosis) brokersDown(names []string) {
	for _, h := range g.c.Target.Hosts {
		if slices.Contains(g.st.Brokers, h.ID) {
			continue
		}
		var hit []string
		topics := map[string]bool{}
		for _, name := range names {
			ts := g.st.Topics[name]
			if ts == nil {
				continue
			}
			assign, _ := ts.Znode.Assignment()
			for p, reps := range assign {
				if slices.Contains(reps, h.ID) {
					hit = append(hit, fmt.Sprintf("%s-%d", name, p))
					topics[name] = true
				}
			}
		}
		slices.Sort(hit)
		ev := []string{fmt.Sprintf("broker %d (host %s in the inventory) is not registered under /brokers/ids; registered: %s", h.ID, h.Host, fmt.Sprint(g.st.Brokers))}
		if len(hit) > 0 {
			ev = append(ev, fmt.Sprintf("replica of %d partitions of %d topics: %s", len(hit), len(topics), text.Summarize(hit)))
		}
		g.add(Finding{Kind: FindBrokerDown, Severity: Critical, Brokers: []int32{h.ID}, Partitions: nil,
			Summary:  fmt.Sprintf("broker %d is down: it is in the inventory but not registered in ZooKeeper (%d partitions of %d topics lost a replica)", h.ID, len(hit), len(topics)),
			Evidence: ev,
			Fix:      fmt.Sprintf("start broker %d again (its start command; its server.log says why it stopped). Its partitions catch up by themselves once it is back: the under-replicated partitions it explains need no other repair", h.ID),
			DoNot:    "do not run topic-cleanup or reassign partitions because a broker is down"})
	}
}

// readDefaults reads the brokers' delete.topic.enable and default
// min.insync.replicas.
func (g *diagnosis) readDefaults(ctx context.Context) {
	for _, id := range sortedIDs(g.views) {
		if v, err := g.c.Kafka.BrokerConfig(ctx, id, "delete.topic.enable"); err == nil && v == "false" {
			g.deleteDisabled = append(g.deleteDisabled, id)
		}
	}
	if len(g.deleteDisabled) > 0 {
		g.add(Finding{Kind: FindDeleteDisabled, Severity: Warning, Brokers: g.deleteDisabled,
			Summary:  "topic deletion is disabled (delete.topic.enable=false)",
			Evidence: []string{fmt.Sprintf("brokers %s report delete.topic.enable=false", fmt.Sprint(g.deleteDisabled))},
			Fix:      "enable delete.topic.enable on every broker (rolling restart) before deleting topics; the controller silently drops deletion requests while it is off",
			DoNot:    "do not delete a topic's znodes by hand to work around it"})
	}
	m, err := brokers.ReadMinISR(ctx, g.c.Kafka, sortedIDs(g.views), brokers.OverridesOf(g.st))
	if err != nil {
		// A diagnosis goes on without it, and says how it judged.
		m.Default = 1
		g.d.Methods = append(g.d.Methods, "min.insync.replicas: no broker reported its default (DescribeConfigs); partitions are judged against their topics' own overrides, else 1 (offline only)")
	}
	g.minISR = m
	for _, id := range sortedIDs(g.views) {
		if v, err := g.c.Kafka.BrokerConfig(ctx, id, "inter.broker.protocol.version"); err == nil && v != "" {
			g.ibp = v
			break
		}
	}
}

// lasted says how long the disagreements lasted across the re-reads.
func (g *diagnosis) lasted() string {
	if g.reads <= 1 {
		return "seen in one read of ZooKeeper and the brokers"
	}
	return fmt.Sprintf("lasted at least %s: seen in %d reads of ZooKeeper and the brokers, 1 s apart", time.Since(g.since).Round(100*time.Millisecond), g.reads)
}

// topic diagnoses one topic, phase by phase.
func (g *diagnosis) topic(ctx context.Context, name string, ts *kafkazk.TopicState) {
	assign, _ := ts.Znode.Assignment()
	for _, e := range ts.Errs {
		if errors.Is(e, kafkazk.ErrCorrupt) {
			g.add(Finding{Kind: FindCorruptZnode, Severity: Critical, Topic: name, Summary: fmt.Sprintf("a znode of %q does not decode as Kafka writes it", name),
				Evidence: []string{e.Error()}, Fix: "restore the znode from a backup, or repair the topic with " + fmt.Sprintf(cleanupFix, name), Runbook: "topic-cleanup",
				DoNot: "do not rewrite /brokers/topics/<t> without its topic_id: the controller would mint a new one (INCONSISTENT_TOPIC_ID)"})
		}
	}
	if ts.PendingDelete {
		g.stuckDeletion(name, ts, assign)
	}
	g.staleMetadata(name, ts)
	if dis, disB, disP := topicDisagreement(name, ts, g.views); len(dis) > 0 {
		f := Finding{Kind: FindDisagreement, Severity: Warning, Topic: name, Brokers: disB, Partitions: disP,
			Summary:  fmt.Sprintf("brokers' metadata about %q differs from ZooKeeper", name),
			Evidence: append(dis, g.lasted()),
			Fix:      "if it lasts, the brokers missed the controller's updates: a restart of the brokers named, one at a time (kremedy's rolling-restart runbook), makes them reload it; if the topic's znodes were rewritten by hand, look at the other findings first",
			DoNot:    "do not rewrite the znodes to match the brokers", Runbook: "rolling-restart"}
		if slices.ContainsFunc(dis, func(l string) bool { return strings.Contains(l, " replicas: ZooKeeper ") }) {
			f.Fix = "ZooKeeper's assignment differs from the one the controller sent the brokers: it was rewritten without a reassignment. Restoring the assignment the brokers serve, or moving the partitions with a reviewed reassignment (kafka-reassign-partitions), repairs it; a broker restart does not (the controller keeps its own copy until it fails over, then acts on ZooKeeper's)"
			f.DoNot, f.Runbook = "do not restart the controller or delete /controller before the assignment is right: the next controller acts on ZooKeeper's assignment", ""
		}
		g.add(f)
	}
	if !ts.HasZnode() || ts.PendingDelete {
		// A topic being deleted has offline, shrinking partitions by design:
		// the stuck deletion above is the finding.
		return
	}
	g.zkFindings(name, ts, assign)
	g.replication(name, ts, assign)
	if g.o.Topic == "" {
		return
	}
	// One topic only: these cost a request per partition. A partition no
	// broker knows is not asked: partitions-unknown-to-brokers says why.
	unknown, _ := partitionsUnknown(name, ts, g.views)
	g.leadersServing(ctx, name, ts, assign, unknown)
	g.adoptedSegments(ctx, name, ts, assign)
	g.unsafeAutoCreate(ctx, name)
}

// stuckDeletion: the topic is marked for deletion and the deletion has not
// completed; say why.
func (g *diagnosis) stuckDeletion(name string, ts *kafkazk.TopicState, assign map[int32][]int32) {
	var missing []int32
	for _, reps := range assign {
		for _, r := range reps {
			if !slices.Contains(g.st.Brokers, r) {
				missing = append(missing, r)
			}
		}
	}
	ev := []string{fmt.Sprintf("%s exists", kafkazk.DeleteTopicPath(name))}
	var why []string
	if len(missing) > 0 {
		slices.Sort(missing)
		missing = slices.Compact(missing)
		why = append(why, fmt.Sprintf("replica brokers %s are not registered in %s", fmt.Sprint(missing), kafkazk.BrokerIDsPath))
	}
	if len(ts.Znode.AddingReplicas)+len(ts.Znode.RemovingReplicas) > 0 {
		why = append(why, "a reassignment is in progress (adding/removing replicas in the topic znode)")
	}
	if len(g.deleteDisabled) > 0 {
		why = append(why, "deletion is disabled on some brokers")
	}
	if !ts.HasZnode() {
		why = append(why, "the topic znode is already gone (a leftover marker the controller removes at its next failover)")
	}
	if len(why) == 0 {
		why = append(why, "no blocking reason found: the deletion may still be in progress")
	}
	ev = append(ev, why...)
	fix := "start the missing broker(s) " + fmt.Sprint(missing) + " again: the controller resumes the deletion by itself when a replica's broker returns"
	if len(missing) == 0 {
		fix = "wait for the controller, or force a controller failover; if it does not complete, " + fmt.Sprintf(cleanupFix, name)
	}
	g.add(Finding{Kind: FindStuckDeletion, Severity: Critical, Topic: name, Brokers: missing,
		Summary:  fmt.Sprintf("%q is marked for deletion but the deletion has not completed: %s", name, strings.Join(why, "; ")),
		Evidence: ev, Fix: fix + ". If a broker id never returns, " + fmt.Sprintf(cleanupFix, name),
		DoNot:   "do not delete the topic's znodes by hand while brokers run, and do not recreate it yet: brokers keep the old topic in their caches and on disk (the ghost topic)",
		Runbook: "topic-cleanup"})
}

// staleMetadata: brokers serve a topic ZooKeeper no longer has, or do not
// serve one it has.
func (g *diagnosis) staleMetadata(name string, ts *kafkazk.TopicState) {
	var lists, missing, unsure []int32
	for _, id := range sortedIDs(g.views) {
		switch tv, ok := g.views[id].Topics[name]; {
		case ok && tv.Present():
			lists = append(lists, id)
		case !ok || tv.Gone():
			missing = append(missing, id)
		default: // TOPIC_AUTHORIZATION_FAILED…: not evidence that it does not serve it
			unsure = append(unsure, id)
		}
	}
	switch {
	case !ts.Exists && len(lists) > 0:
		g.add(Finding{Kind: FindStaleMetadata, Severity: Critical, Topic: name, Brokers: lists,
			Summary:  fmt.Sprintf("brokers %s still serve %q, which ZooKeeper no longer has", fmt.Sprint(lists), name),
			Evidence: viewEvidence(g.views, name, lists, append(missing, unsure...)),
			Fix:      fmt.Sprintf(cleanupFix, name) + "; only a restart of every broker clears their caches",
			DoNot:    "do not restart one broker at a time: the restarted one forgets the topic while the others still serve it, and clients get UNKNOWN_TOPIC_OR_PARTITION",
			Runbook:  "topic-cleanup"})
	case ts.HasZnode() && !ts.PendingDelete && len(missing) > 0 && len(g.views) > 0:
		g.add(Finding{Kind: FindStaleMetadata, Severity: Critical, Topic: name, Brokers: missing,
			Summary:  fmt.Sprintf("ZooKeeper has %q but brokers %s do not serve it", name, fmt.Sprint(missing)),
			Evidence: viewEvidence(g.views, name, lists, append(missing, unsure...)),
			Fix:      "restart the brokers that do not know the topic so they reload metadata; if the topic was recreated by hand, " + fmt.Sprintf(cleanupFix, name),
			Runbook:  "topic-cleanup"})
	}
}

// replication reads ZooKeeper's partition states: offline, under-replicated,
// below min.insync.replicas, leader outside the ISR.
func (g *diagnosis) replication(name string, ts *kafkazk.TopicState, assign map[int32][]int32) {
	minISR := g.minISR.Of(name)
	var urp, offline, underMin, notInISR []int32
	var urpEv, offEv, minEv, nisEv []string
	var urpB, offB, minB []int32
	for p, reps := range assign {
		zs, ok := ts.States[p]
		if !ok {
			continue
		}
		switch {
		case zs.Leader < 0:
			offline = append(offline, p)
			for _, r := range reps {
				if !slices.Contains(g.st.Brokers, r) {
					offB = append(offB, r) // the replicas' brokers that are down
				}
			}
			offEv = append(offEv, fmt.Sprintf("%s-%d: no leader (replicas %s, isr %s)", name, p, fmt.Sprint(reps), fmt.Sprint(zs.ISR)))
		case !slices.Contains(zs.ISR, zs.Leader):
			notInISR = append(notInISR, p)
			nisEv = append(nisEv, fmt.Sprintf("%s-%d: leader %d not in isr %s", name, p, zs.Leader, fmt.Sprint(zs.ISR)))
		}
		if len(zs.ISR) < len(reps) {
			urp = append(urp, p)
			for _, r := range reps {
				if !slices.Contains(zs.ISR, r) {
					urpB = append(urpB, r)
				}
			}
			urpEv = append(urpEv, fmt.Sprintf("%s-%d: leader %d, replicas %s, isr %s", name, p, zs.Leader, fmt.Sprint(reps), fmt.Sprint(zs.ISR)))
		}
		if zs.Leader >= 0 && len(zs.ISR) < minISR && !g.fewer.below(name, len(reps), g.minISR) {
			underMin = append(underMin, p)
			for _, r := range reps {
				if !slices.Contains(zs.ISR, r) {
					minB = append(minB, r)
				}
			}
			minEv = append(minEv, fmt.Sprintf("%s-%d: isr %s < min.insync.replicas %d", name, p, fmt.Sprint(zs.ISR), minISR))
		}
	}
	if len(offline) > 0 {
		sort.Strings(offEv)
		g.add(Finding{Kind: FindOffline, Severity: Critical, Topic: name, Partitions: offline, Brokers: offB, Summary: fmt.Sprintf("%d partitions of %q have no leader", len(offline), name),
			Evidence: offEv, Fix: "bring back the brokers that hold their replicas", DoNot: "do not enable unclean leader election unless you accept losing data"})
	}
	if len(urp) > 0 {
		sort.Strings(urpEv)
		slices.Sort(urpB)
		urpB = slices.Compact(urpB)
		f := Finding{Kind: FindUnderReplicated, Severity: Warning, Topic: name, Partitions: urp, Brokers: urpB,
			Summary:  fmt.Sprintf("%d partitions of %q are under-replicated (brokers %s out of the ISR)", len(urp), name, fmt.Sprint(urpB)),
			Evidence: urpEv, Fix: "bring the lagging brokers back; if they run but never catch up, " + g.staleHint() + " and " + fmt.Sprintf(cleanupFix, name)}
		if !slices.ContainsFunc(urpB, func(b int32) bool { return slices.Contains(g.st.Brokers, b) }) {
			// Every broker out of the ISR is simply down: that is the cause
			// (broker-down), and no cleanup is needed.
			f.Fix = fmt.Sprintf("caused by broker %s being down (see broker-down): start it; these partitions catch up by themselves, no cleanup is needed", fmt.Sprint(urpB))
			f.DoNot = "do not run topic-cleanup for partitions whose only missing replicas are on a stopped broker"
		}
		g.add(f)
	}
	if len(underMin) > 0 {
		sort.Strings(minEv)
		g.add(Finding{Kind: FindUnderMinISR, Severity: Critical, Topic: name, Partitions: underMin, Brokers: minB,
			Summary: fmt.Sprintf("%d partitions of %q are below min.insync.replicas: acks=all producers fail", len(underMin), name), Evidence: minEv,
			Fix: "restore the missing replicas"})
	}
	if len(notInISR) > 0 {
		sort.Strings(nisEv)
		g.add(Finding{Kind: FindLeaderNotInISR, Severity: Warning, Topic: name, Partitions: notInISR,
			Summary: fmt.Sprintf("%d partitions of %q have a leader outside their own ISR", len(notInISR), name), Evidence: nisEv,
			Fix: "a controller inconsistency: force a controller failover, or restart the brokers involved"})
	}
}

// staleHint says where a stale replica shows, on this cluster's release:
// INCONSISTENT_TOPIC_ID exists only with topic IDs (2.8+, IBP 2.8+) and
// refuses a stale log only from 3.0.
func (g *diagnosis) staleHint() string {
	if g.d.Releases.RefusesStaleLog() {
		return "look for INCONSISTENT_TOPIC_ID in their state-change.log (stale segments)"
	}
	return "look in their state-change.log for refused state changes (this release has no INCONSISTENT_TOPIC_ID check on a stale log: stale segments are adopted silently, see adopted-segments)"
}

// leadersServing asks each partition's leader to serve it: a leader with an
// inconsistent replica answers NOT_LEADER_OR_FOLLOWER while everything names
// it leader.
func (g *diagnosis) leadersServing(ctx context.Context, name string, ts *kafkazk.TopicState, assign map[int32][]int32, skip []int32) {
	var notServing, nsB []int32
	var nsEv []string
	for p := range assign {
		zs, ok := ts.States[p]
		if !ok || zs.Leader < 0 || !slices.Contains(g.d.Brokers, zs.Leader) || slices.Contains(skip, p) {
			continue
		}
		if _, _, err := g.c.Kafka.Offsets(ctx, zs.Leader, name, p); err != nil {
			notServing, nsB = append(notServing, p), append(nsB, zs.Leader)
			nsEv = append(nsEv, fmt.Sprintf("%s-%d: ZooKeeper names broker %d leader; it answers %v", name, p, zs.Leader, err))
		}
	}
	if len(notServing) > 0 {
		sort.Strings(nsEv)
		g.add(Finding{Kind: FindLeaderNotServing, Severity: Critical, Topic: name, Partitions: notServing, Brokers: nsB,
			Summary:  fmt.Sprintf("leaders of %d partitions of %q refuse to serve them (NotLeaderOrFollower risk)", len(notServing), name),
			Evidence: nsEv, Fix: "the leader holds a stale replica or a state the controller never completed (" + g.staleHint() + "); " + fmt.Sprintf(cleanupFix, name),
			DoNot: "do not restart only that broker and recreate the topic again", Runbook: "topic-cleanup"})
	}
}

// adoptedSegments: records older than the topic itself.
func (g *diagnosis) adoptedSegments(ctx context.Context, name string, ts *kafkazk.TopicState, assign map[int32][]int32) {
	var adopted []int32
	var adEv []string
	for p := range assign {
		ts0, has, err := g.c.Kafka.FirstRecordTime(ctx, name, p)
		if err == nil && has && ts0.Before(ts.Stat.Ctime.Add(-time.Second)) {
			adopted = append(adopted, p)
			adEv = append(adEv, fmt.Sprintf("%s-%d: first record written %s, topic created %s", name, p, ts0.UTC().Format(time.RFC3339), ts.Stat.Ctime.UTC().Format(time.RFC3339)))
		}
	}
	if len(adopted) > 0 {
		sort.Strings(adEv)
		g.add(Finding{Kind: FindAdoptedSegments, Severity: Critical, Topic: name, Partitions: adopted,
			Summary:  fmt.Sprintf("%q serves records older than the topic itself: a recreated topic adopted old segments", name),
			Evidence: append(adEv, "record timestamps are the producers' (CreateTime): a topic filled by MirrorMaker or with old event times looks the same — check the segment files' dates on the brokers before acting"),
			Fix:      fmt.Sprintf(cleanupFixRecreate, name),
			DoNot:    "do not let consumers read it: they would process the deleted topic's data", Runbook: "topic-cleanup"})
	}
}

// unsafeAutoCreate: consumer groups attached while brokers create topics on
// first use.
func (g *diagnosis) unsafeAutoCreate(ctx context.Context, name string) {
	groups, err := g.c.Kafka.Groups(ctx, name)
	if err != nil && !errors.Is(err, ports.ErrGroupsIncomplete) { // the groups read still count
		return
	}
	var attached []string
	for _, gr := range groups {
		if len(gr.Members) > 0 {
			attached = append(attached, gr.Group)
		}
	}
	if len(attached) == 0 {
		return
	}
	var auto []int32
	for _, id := range g.d.Brokers {
		if v, err := g.c.Kafka.BrokerConfig(ctx, id, "auto.create.topics.enable"); err == nil && v == "true" {
			auto = append(auto, id)
		}
	}
	if len(auto) > 0 {
		g.add(Finding{Kind: FindUnsafeAutoCreate, Severity: Warning, Topic: name, Brokers: auto,
			Summary:  fmt.Sprintf("auto.create.topics.enable=true while groups %v consume %q", attached, name),
			Evidence: []string{fmt.Sprintf("brokers %s have auto.create.topics.enable=true", fmt.Sprint(auto))},
			Fix:      "detach the clients before any cleanup (topic-cleanup's detach step waits for it)", DoNot: "do not delete the topic while clients are attached: they would recreate it with default settings"})
	}
}

func viewEvidence(views map[int32]ports.BrokerView, name string, lists, missing []int32) []string {
	var ev []string
	for _, id := range lists {
		tv := views[id].Topics[name]
		ev = append(ev, fmt.Sprintf("broker %d lists %q (%d partitions, topic id %s)", id, name, len(tv.Partitions), text.OrDash(tv.ID)))
	}
	for _, id := range missing {
		e := ports.KafkaUnknownTopicOrPartition.String()
		if tv, ok := views[id].Topics[name]; ok && !tv.Present() {
			e = cmp.Or(tv.Unsure(), tv.Err.String())
		}
		ev = append(ev, fmt.Sprintf("broker %d: %s", id, e))
	}
	return ev
}
