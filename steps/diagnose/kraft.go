package diagnose

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/segments"
)

// defaultFetchTimeout is controller.quorum.fetch.timeout.ms's default
// (brokers.FetchTimeout).
const defaultFetchTimeout = brokers.FetchTimeout

// kraftDiag is one diagnosis of a KRaft cluster being made.
type kraftDiag struct {
	diagnoser
	cv ports.ClusterView
	// noMajority: fewer than a majority of the voters are caught up, so
	// the quorum commits nothing (the wedge check does not judge it).
	noMajority bool
}

// runKRaft diagnoses a KRaft cluster over Kafka alone (no ZooKeeper): the
// metadata quorum, the brokers registered and unfenced against the
// inventory, every broker's own metadata, the partitions' replication and,
// with Disk, every broker's log dirs (stray logs, logs Kafka will set aside,
// logs without partition.metadata), the finalized features, and what a
// migration from ZooKeeper left behind in the nodes' configs.
func runKRaft(ctx context.Context, c ports.Cluster, o Options) (*Diagnosis, error) {
	start := time.Now()
	g := &kraftDiag{diagnoser: diagnoser{c: c, o: o, d: &Diagnosis{Version: 1, Cluster: c.Target.Name, Topic: o.Topic, Mode: "kraft", Controller: -1}}}
	cv, err := c.Kafka.DescribeCluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("describe the cluster over Kafka (%s): %w", strings.Join(c.Target.Bootstrap, ","), err)
	}
	g.cv = cv
	live := g.unfenced()
	g.d.Brokers = live
	disks := startDisks(ctx, c, o, live)
	defer disks.wait()
	g.quorum(ctx)
	wedge := g.startWedge(ctx)
	defer wedge.wait()
	g.d.Releases = brokers.Probe(ctx, c.Kafka, live)
	g.d.Methods = g.d.Releases.Methods()
	g.brokers(ctx)
	var topics []string
	if o.Topic != "" {
		topics = []string{o.Topic}
	}
	g.readViews(ctx, live, topics)
	names := g.topicNames(nil)
	g.d.Topics = len(names)
	g.readMinISR(ctx, live, names)
	for _, name := range names {
		g.partitions(name)
	}
	if f := g.fewer.finding(g.minISR); f != nil {
		g.add(*f)
	}
	g.eligibleLeaders(ctx)
	g.offlineLogEnds(ctx, live, topics)
	g.features(ctx, live)
	g.logDirsFull(ctx, live)
	if l := disks.wait(); l != nil {
		g.d.Disk = true
		g.disks(ctx, *l)
		g.leftovers(ctx)
	}
	wedge.judge(g)
	if m := lease(ctx, c, o, g.add); m != "" {
		g.d.Methods = append(g.d.Methods, m)
	}
	if slices.ContainsFunc(g.d.Findings, func(f Finding) bool { return f.Kind == FindQuorumLost }) {
		// ListPartitionReassignments is answered by the active controller:
		// without one it waits out the client's whole timeout (40 s seen on
		// the lab) to learn nothing.
		g.d.Methods = append(g.d.Methods, "reassignments not read: the quorum has no active controller to answer ListPartitionReassignments (quorum-lost)")
	} else {
		g.reassignments(ctx)
	}
	sortFindings(g.d.Findings)
	g.d.Findings = linkCauses(g.d.Findings)
	g.d.Healthy = healthy(g.d.Findings)
	g.d.Took = time.Since(start).Round(time.Millisecond).String()
	return g.d, nil
}

// unfenced are the brokers DescribeCluster lists as serving.
func (g *kraftDiag) unfenced() []int32 {
	var out []int32
	for _, b := range g.cv.Brokers {
		if !b.Fenced {
			out = append(out, b.ID)
		}
	}
	return out
}

func (g *kraftDiag) controllerAddrs() []string {
	var out []string
	for _, c := range g.c.Target.Controllers {
		if c.Addr != "" {
			out = append(out, c.Addr)
		}
	}
	return out
}

// readQuorum asks the controllers (KIP-919), else the brokers (which
// forward DescribeQuorum to the active controller).
func (g *kraftDiag) readQuorum(ctx context.Context) (ports.Quorum, error) {
	q, err := g.c.Kafka.Quorum(ctx, g.controllerAddrs())
	if err == nil {
		return q, nil
	}
	// A controller that answered (NOT_LEADER: no leader it knows of) was
	// reached: a broker, which forwards DescribeQuorum to the active
	// controller, cannot know more, and it would wait out its whole
	// request timeout for a leader that is not there (15 s seen on the
	// lab). The brokers are asked only when no controller answered at all,
	// and for a few seconds.
	if strings.Contains(err.Error(), "NOT_LEADER") {
		return q, err
	}
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if q2, err2 := g.c.Kafka.Quorum(bctx, g.c.Target.Bootstrap); err2 == nil {
		return q2, nil
	}
	return q, err
}

// lagging are the voters not caught up with the leader (brokers.Lagging,
// the rule the controller roll applies).
func lagging(q ports.Quorum, timeout time.Duration) map[int32]string {
	return brokers.Lagging(q, timeout)
}

// quorum: a leader, every inventory controller a voter, and the voters
// caught up. A voter seen lagging is read again a second later before it
// counts (a voter between two fetches is not a voter down).
func (g *kraftDiag) quorum(ctx context.Context) {
	q, err := g.readQuorum(ctx)
	if err != nil && g.quorumLost(ctx, "DescribeQuorum: "+err.Error(), nil) {
		return
	}
	if err != nil {
		g.add(Finding{Kind: FindQuorumUnreachable, Severity: Critical,
			Summary:  "the metadata quorum does not answer: no controller and no broker answered DescribeQuorum",
			Evidence: []string{err.Error()},
			Fix:      "check the controllers' processes and their controller listener (kafka-metadata-quorum describe --status); with a majority of voters gone the metadata stops: no topic, ISR or config change happens until a majority is back",
			DoNot:    "do not reformat a controller's metadata log to bring it back: a quorum-loss recovery is a procedure of its own"})
		return
	}
	bad := lagging(q, defaultFetchTimeout)
	if len(bad) > 0 && sleep(ctx, time.Second) {
		if q2, err := g.readQuorum(ctx); err == nil {
			q, bad = q2, lagging(q2, defaultFetchTimeout)
		}
	}
	g.d.Quorum = &q
	g.d.Controller = q.Leader
	if q.Leader < 0 && g.quorumLost(ctx, fmt.Sprintf("DescribeQuorum at %s: no leader (epoch %d)", q.AskedAt, q.Epoch), voterIDList(q.Voters)) {
		return
	}
	if q.Leader < 0 {
		g.add(Finding{Kind: FindQuorumNoLeader, Severity: Critical,
			Summary:  fmt.Sprintf("the metadata quorum has no leader (epoch %d): no metadata change happens until one is elected", q.Epoch),
			Evidence: []string{fmt.Sprintf("DescribeQuorum at %s: leader -1, voters %s", q.AskedAt, voterIDs(q))},
			Fix:      "find why no voter wins the election: the controllers' server logs (network between them, a majority stopped)"})
		return
	}
	voters := voterIDList(q.Voters)
	g.notVoters(q, voters)
	down := map[int32]string{}
	for id, why := range bad {
		down[id] = why
	}
	for _, c := range g.c.Target.Controllers {
		if slices.Contains(voters, c.ID) && c.Addr != "" && !g.c.Kafka.Listening(ctx, c.Addr) {
			down[c.ID] = fmt.Sprintf("its controller listener %s accepts no connection", c.Addr)
		}
	}
	if len(down) == 0 {
		return
	}
	m := brokers.MarginOf(q, down)
	n, majority, caughtUp := m.Voters, m.Majority, m.CaughtUp
	margin := caughtUp - majority
	if margin < 0 {
		// Nothing commits: what the wedge check would see is this.
		g.noMajority = true
		if g.quorumLost(ctx, fmt.Sprintf("DescribeQuorum at %s: leader %d, epoch %d, high watermark %d; %d of %d voters caught up, a majority is %d: the leader keeps its title but commits nothing", q.AskedAt, q.Leader, q.Epoch, q.HighWatermark, caughtUp, n, majority), voterIDList(q.Voters)) {
			return
		}
	}
	sev := Warning
	if margin <= 0 {
		sev = Critical
	}
	var ids []int32
	var ev []string
	for _, id := range slices.Sorted(maps.Keys(down)) {
		ids = append(ids, id)
		ev = append(ev, fmt.Sprintf("controller %d: %s", id, down[id]))
	}
	ev = append(ev, fmt.Sprintf("leader %d, epoch %d, high watermark %d; %d of %d voters caught up, a majority is %d", q.Leader, q.Epoch, q.HighWatermark, caughtUp, n, majority))
	summary := fmt.Sprintf("controllers %s of the metadata quorum are down or lagging: %d of %d voters caught up; the quorum tolerates %d more lost", fmt.Sprint(ids), caughtUp, n, max(margin, 0))
	if margin < 0 {
		summary = fmt.Sprintf("controllers %s of the metadata quorum are down or lagging: %d of %d voters caught up, fewer than a majority (%d): metadata changes may stall", fmt.Sprint(ids), caughtUp, n, majority)
	}
	g.add(Finding{Kind: FindQuorumMargin, Severity: sev, Brokers: ids, Summary: summary, Evidence: ev,
		Fix:   "start those controllers again (their start command; their server log says why they stopped) and wait until each is caught up (kafka-metadata-quorum describe --replication: Lag 0)",
		DoNot: "do not restart or stop another controller until they are back: one more lost stops the metadata"})
}

// notVoters: an inventory controller that is not a voter of the quorum.
func (g *kraftDiag) notVoters(q ports.Quorum, voters []int32) {
	for _, c := range g.c.Target.Controllers {
		if !slices.Contains(voters, c.ID) {
			g.add(Finding{Kind: FindControllerNotVoter, Severity: Warning, Brokers: []int32{c.ID},
				Summary:  fmt.Sprintf("controller %d is in the inventory but not a voter of the metadata quorum (voters %s)", c.ID, fmt.Sprint(voters)),
				Evidence: []string{fmt.Sprintf("DescribeQuorum at %s: voters %s, observers %s", q.AskedAt, fmt.Sprint(voters), voterIDsOf(q.Observers))},
				Fix:      "check the inventory's kraft_controllers against controller.quorum.voters (static) or the quorum's voter set (kafka-metadata-quorum describe --replication)"})
		}
	}
}

func voterIDs(q ports.Quorum) string { return voterIDsOf(q.Voters) }

func voterIDsOf(vs []ports.Voter) string {
	ids := make([]int32, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	return fmt.Sprint(ids)
}

// brokers: every inventory broker registered with the controllers and
// unfenced; a broker missing or fenced is the cause of what it explains.
func (g *kraftDiag) brokers(ctx context.Context) {
	listed := map[int32]ports.BrokerNode{}
	for _, b := range g.cv.Brokers {
		listed[b.ID] = b
	}
	for _, h := range g.c.Target.Hosts {
		b, ok := listed[h.ID]
		switch {
		case !ok:
			ev := fmt.Sprintf("DescribeCluster lists brokers %s", fmt.Sprint(clusterIDs(g.cv)))
			if !g.cv.FencedKnown {
				ev += " (unfenced only: the cluster is older than 4.0, so a fenced broker is not told apart from one that is down)"
			}
			g.add(Finding{Kind: FindBrokerDown, Severity: Critical, Brokers: []int32{h.ID},
				Summary:  fmt.Sprintf("broker %d is down: it is in the inventory but not registered with the controllers", h.ID),
				Evidence: []string{fmt.Sprintf("broker %d (host %s in the inventory)", h.ID, h.Host), ev},
				Fix:      fmt.Sprintf("start broker %d again (its start command; its server log says why it stopped). Its partitions catch up by themselves once it is back", h.ID),
				DoNot:    "do not reassign partitions or clean up logs because a broker is down"})
		case b.Fenced && !g.c.Kafka.Listening(ctx, fmt.Sprintf("%s:%d", b.Host, b.Port)):
			// Stopped: its registration outlives the process, fenced.
			g.add(Finding{Kind: FindBrokerDown, Severity: Critical, Brokers: []int32{h.ID},
				Summary:  fmt.Sprintf("broker %d is down: its registration with the controllers is fenced and nothing accepts connections at %s:%d", h.ID, b.Host, b.Port),
				Evidence: []string{fmt.Sprintf("DescribeCluster: broker %d (%s:%d) fenced; its listener refuses connections", b.ID, b.Host, b.Port)},
				Fix:      fmt.Sprintf("start broker %d again (its start command; its server log says why it stopped). Its partitions catch up by themselves once it is back", h.ID),
				DoNot:    "do not reassign partitions or clean up logs because a broker is down"})
		case b.Fenced:
			g.add(Finding{Kind: FindBrokerFenced, Severity: Critical, Brokers: []int32{h.ID},
				Summary:  fmt.Sprintf("broker %d is registered with the controllers but fenced: it serves no partition", h.ID),
				Evidence: []string{fmt.Sprintf("DescribeCluster: broker %d (%s:%d) fenced", b.ID, b.Host, b.Port)},
				Fix:      fmt.Sprintf("read broker %d's server log: a broker stays fenced while it catches up with the metadata log, or when it cannot heartbeat the active controller (network, controller listener, a log dir offline)", h.ID)})
		}
	}
}

func clusterIDs(cv ports.ClusterView) []int32 {
	ids := make([]int32, len(cv.Brokers))
	for i, b := range cv.Brokers {
		ids[i] = b.ID
	}
	return ids
}

// readViews asks every unfenced broker for its own metadata; views that
// disagree are read again, up to 3 times 1 s apart, before they count (a
// broker learns of a leader or ISR change a moment after the others). In
// KRaft mode a broker names a random live broker as "controller": that is
// not compared.
func (g *kraftDiag) readViews(ctx context.Context, live []int32, topics []string) {
	var since time.Time
	for attempt := 0; ; attempt++ {
		at := time.Now()
		views, unreachable := brokerViews(ctx, g.c.Kafka, live, topics)
		g.views = views
		diffs := viewDiffs(views)
		if len(diffs) == 0 || attempt == 2 || ctx.Err() != nil {
			for _, id := range live {
				if err, ok := unreachable[id]; ok {
					g.add(Finding{Kind: FindBrokerUnreachable, Severity: Critical, Brokers: []int32{id},
						Summary:  fmt.Sprintf("broker %d is registered and unfenced but does not answer Metadata", id),
						Evidence: []string{err.Error()},
						Fix:      "check the broker's process and network; a broker that is registered but not serving is a zombie or overloaded"})
				}
			}
			if len(diffs) > 0 {
				g.add(Finding{Kind: FindDisagreement, Severity: Warning, Brokers: sortedIDs(views),
					Summary:  fmt.Sprintf("the brokers' metadata disagree (lasted at least %s: seen in %d reads)", time.Since(since).Round(100*time.Millisecond), attempt+1),
					Evidence: diffs,
					Fix:      "usually a broker catching up with the metadata log; if it lasts, restart the broker that lags so it reloads the metadata image"})
			}
			return
		}
		if since.IsZero() {
			since = at
		}
		sleep(ctx, time.Second)
	}
}

// viewDiffs compares every broker's view with the first's, controllers
// aside.
func viewDiffs(views map[int32]ports.BrokerView) []string {
	var out []string
	var ref *ports.BrokerView
	for _, id := range sortedIDs(views) {
		v := views[id]
		v.Controller = -1
		if ref == nil {
			ref = &v
			continue
		}
		if d := brokers.ViewDiff(*ref, v); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// readMinISR resolves min.insync.replicas over Kafka: the brokers' default
// and the topics' own overrides (DescribeConfigs).
func (g *kraftDiag) readMinISR(ctx context.Context, live []int32, names []string) {
	over, err := g.c.Kafka.TopicOverrides(ctx, "min.insync.replicas", names)
	if err != nil {
		g.d.Methods = append(g.d.Methods, "min.insync.replicas: the topics' overrides could not all be read ("+err.Error()+"); those topics are judged against the brokers' default")
	}
	m, err := brokers.ReadMinISR(ctx, g.c.Kafka, live, over)
	if err != nil {
		m.Default = 1
		g.d.Methods = append(g.d.Methods, "min.insync.replicas: no broker reported its default (DescribeConfigs); partitions are judged against their topics' own overrides, else 1 (offline only)")
	}
	g.minISR = m
}

// view is one unfenced broker's view of topic, the lowest id's.
func (g *kraftDiag) view(name string) (ports.TopicView, bool) {
	for _, id := range sortedIDs(g.views) {
		if t, ok := g.views[id].Topics[name]; ok && t.Present() {
			return t, true
		}
	}
	return ports.TopicView{}, false
}

// partitions: a topic's offline, under-replicated and under-min-ISR
// partitions, as the brokers see them.
func (g *kraftDiag) partitions(name string) {
	t, ok := g.view(name)
	if !ok {
		return
	}
	minISR := g.minISR.Of(name)
	var offline, urp, underMin []int32
	var offEv, urpEv, minEv []string
	var offB, urpB, minB []int32
	for _, p := range slices.Sorted(maps.Keys(t.Partitions)) {
		pv := t.Partitions[p]
		missing := without(pv.Replicas, pv.ISR)
		// Offline is no leader: a KRaft broker lists the replicas of fenced
		// brokers as offline replicas while the partition still has one.
		off := ""
		if len(pv.Offline) > 0 {
			off = ", offline replicas " + fmt.Sprint(pv.Offline)
		}
		switch {
		case pv.Leader < 0:
			offline = append(offline, p)
			offEv = append(offEv, fmt.Sprintf("%s-%d: no leader, replicas %s, isr %s%s", name, p, fmt.Sprint(pv.Replicas), fmt.Sprint(pv.ISR), off))
			// The brokers it waits for: the offline replicas the brokers
			// name (3.9 keeps the last ISR member, dead, in the ISR; 4.1
			// with ELR empties the ISR), else those out of the ISR.
			if len(pv.Offline) > 0 {
				offB = append(offB, pv.Offline...)
			} else {
				offB = append(offB, missing...)
			}
		case len(pv.ISR) < len(pv.Replicas):
			urp = append(urp, p)
			urpEv = append(urpEv, fmt.Sprintf("%s-%d: leader %d, replicas %s, isr %s%s", name, p, pv.Leader, fmt.Sprint(pv.Replicas), fmt.Sprint(pv.ISR), off))
			urpB = append(urpB, missing...)
		}
		if pv.Leader >= 0 && len(pv.ISR) < minISR && !g.fewer.below(name, len(pv.Replicas), g.minISR) {
			underMin = append(underMin, p)
			minEv = append(minEv, fmt.Sprintf("%s-%d: isr %s < min.insync.replicas %d", name, p, fmt.Sprint(pv.ISR), minISR))
			minB = append(minB, missing...)
		}
	}
	if len(offline) > 0 {
		g.add(Finding{Kind: FindOffline, Severity: Critical, Topic: name, Brokers: uniq(offB), Partitions: offline,
			Summary:  fmt.Sprintf("%d partitions of %q are offline: no leader, neither produce nor consume works", len(offline), name),
			Evidence: offEv,
			Fix:      "bring their replicas' brokers back; if every replica is gone, an unclean election (kafka-leader-election --election-type unclean) loses data: weigh it first"})
	}
	if len(urp) > 0 {
		g.add(Finding{Kind: FindUnderReplicated, Severity: Warning, Topic: name, Brokers: urpB, Partitions: urp,
			Summary:  fmt.Sprintf("%d partitions of %q are under-replicated (brokers %s out of the ISR)", len(urp), name, fmt.Sprint(uniq(urpB))),
			Evidence: urpEv,
			Fix:      "bring the lagging brokers back; if they run but never catch up, read their server logs"})
	}
	if len(underMin) > 0 {
		g.add(Finding{Kind: FindUnderMinISR, Severity: Critical, Topic: name, Brokers: minB, Partitions: underMin,
			Summary:  fmt.Sprintf("%d partitions of %q are below min.insync.replicas: acks=all producers fail", len(underMin), name),
			Evidence: minEv,
			Fix:      "restore the missing replicas (bring their brokers back)"})
	}
}

// eligibleLeaders adds, to every offline or under-min-ISR partition's
// finding, its eligible leader replicas (KIP-966: replicas that left the
// ISR while it was below min.insync.replicas, which a clean election may
// still pick), where the brokers' release answers DescribeTopicPartitions.
func (g *kraftDiag) eligibleLeaders(ctx context.Context) {
	var topics []string
	for _, f := range g.d.Findings {
		if (f.Kind == FindOffline || f.Kind == FindUnderMinISR) && !slices.Contains(topics, f.Topic) {
			topics = append(topics, f.Topic)
		}
	}
	if len(topics) == 0 {
		return
	}
	elr, err := g.c.Kafka.EligibleLeaders(ctx, topics)
	if err != nil {
		g.d.Methods = append(g.d.Methods, "eligible leader replicas: not read ("+err.Error()+")")
		return
	}
	for i, f := range g.d.Findings {
		if f.Kind != FindOffline && f.Kind != FindUnderMinISR {
			continue
		}
		for _, p := range f.Partitions {
			e := elr[f.Topic][p]
			switch {
			case len(e.Eligible) > 0:
				g.d.Findings[i].Evidence = append(g.d.Findings[i].Evidence, fmt.Sprintf("%s-%d: eligible leader replicas %s: a clean election may pick them (KIP-966)", f.Topic, p, fmt.Sprint(e.Eligible)))
			case len(e.LastKnown) > 0:
				g.d.Findings[i].Evidence = append(g.d.Findings[i].Evidence, fmt.Sprintf("%s-%d: no eligible leader replica; last known %s", f.Topic, p, fmt.Sprint(e.LastKnown)))
			}
		}
	}
}

func without(all, some []int32) []int32 {
	var out []int32
	for _, x := range all {
		if !slices.Contains(some, x) {
			out = append(out, x)
		}
	}
	return out
}

func uniq(ids []int32) []int32 { return slices.Compact(slices.Sorted(slices.Values(ids))) }

// features: the finalized metadata.version and kraft.version against what
// every broker's release supports. A lower metadata.version is no fault (an
// upgrade not finalized yet): info, with how to raise it safely.
func (g *kraftDiag) features(ctx context.Context, live []int32) {
	f, err := g.c.Kafka.Features(ctx, live)
	if err != nil {
		g.d.Methods = append(g.d.Methods, "features: "+err.Error())
		return
	}
	g.d.Features = &f
	mv, ok := f.Finalized["metadata.version"]
	if !ok {
		return
	}
	top := int16(-1)
	for _, sup := range f.Supported {
		if r, ok := sup["metadata.version"]; ok && (top < 0 || r[1] < top) {
			top = r[1]
		}
	}
	if top > mv {
		kv := "unknown"
		if v, ok := f.Finalized["kraft.version"]; ok {
			kv = strconv.Itoa(int(v))
		}
		g.add(Finding{Kind: FindFeatureLevel, Severity: Info,
			Summary:  fmt.Sprintf("metadata.version is finalized at level %d; every broker runs a release that supports level %d", mv, top),
			Evidence: []string{fmt.Sprintf("finalized: metadata.version %d, kraft.version %s; supported by every broker up to metadata.version %d", mv, kv, top)},
			Fix:      fmt.Sprintf("when the whole cluster runs the new release for good, raise it feature by feature: `kafka-features upgrade --feature metadata.version=%d` — not `--release-version`, which also raises kraft.version (a static quorum then becomes dynamic and cannot go back: KAFKA-21426)", top),
			DoNot:    "do not finalize while a broker may still roll back to the older release"})
	}
}

// disks: every broker's log dirs over SSH — the stray logs Kafka set aside
// (DescribeLogDirs does not list them), the logs it will set aside at the
// broker's next start (topic ID not in the metadata, or the partition no
// longer assigned to that broker), and partition directories without
// partition.metadata. Kafka's own metadata log is never a candidate.
func (g *kraftDiag) disks(ctx context.Context, l diskListing) {
	for _, h := range g.c.Target.Hosts {
		if err := l.Errs[h.ID]; err != nil {
			g.add(unlistedFinding(h.ID, err, ""))
		}
	}
	var strays []stray
	would := map[string][]string{} // topic -> evidence
	wouldB := map[string][]int32{}
	noMeta := map[int32][]string{}
	for _, h := range g.c.Target.Hosts {
		for _, dir := range l.dirs[h.ID] {
			for _, e := range l.Entries[h.ID][dir] {
				if !e.IsDir {
					continue
				}
				d, err := segments.ParseDir(e.Name)
				if err != nil || d.Topic == "__cluster_metadata" {
					continue
				}
				path := dir + "/" + e.Name
				switch d.Kind {
				case segments.Stray:
					strays = append(strays, stray{h.ID, path, d, e.TopicID})
				case segments.Live:
					if e.TopicID == "" {
						noMeta[h.ID] = append(noMeta[h.ID], path)
						continue
					}
					if why := g.wouldStray(h.ID, d, e.TopicID); why != "" {
						would[d.Topic] = append(would[d.Topic], fmt.Sprintf("broker %d %s: %s", h.ID, path, why))
						wouldB[d.Topic] = append(wouldB[d.Topic], h.ID)
					}
				}
			}
		}
	}
	if len(strays) > 0 {
		g.add(g.strayFinding(ctx, strays))
	}
	for _, topic := range slices.Sorted(maps.Keys(would)) {
		g.add(Finding{Kind: FindWouldBeStray, Severity: Warning, Topic: topic, Brokers: wouldB[topic],
			Summary:  fmt.Sprintf("%d log directories of %q will become stray at their broker's next start", len(would[topic]), topic),
			Evidence: would[topic],
			Fix:      "nothing is lost yet: at the broker's next start Kafka renames them -stray and fetches the live partition from its leader; clean the strays up afterwards"})
	}
	for _, id := range slices.Sorted(maps.Keys(noMeta)) {
		g.add(Finding{Kind: FindNoPartitionMetadata, Severity: Warning, Brokers: []int32{id},
			Summary:  fmt.Sprintf("broker %d holds %d partition directories without partition.metadata: Kafka 3.7.1+ sets them aside as stray at its next start (3.7.0 refuses to start, KAFKA-16814)", id, len(noMeta[id])),
			Evidence: noMeta[id],
			Fix:      "find what wrote them (a copy, a restore from backup, a pre-2.8 broker's data) before the broker restarts"})
	}
}

// stray is one -stray directory on a broker's disk.
type stray struct {
	broker int32
	path   string
	d      segments.Dir
	id     string // the topic id in its partition.metadata
}

// strayFinding is one finding for every -stray directory: where, what it
// was, how big and old, and whether the live partition is in sync there.
func (g *kraftDiag) strayFinding(ctx context.Context, strays []stray) Finding {
	sizes := g.sizes(ctx, strays)
	byBroker := map[int32][]string{}
	var ev []string
	var ids []int32
	for _, s := range strays {
		insync := "no live partition of that name on this broker"
		if t, ok := g.view(s.d.Topic); ok {
			if pv, ok := t.Partitions[s.d.Partition]; ok && slices.Contains(pv.Replicas, s.broker) {
				insync = fmt.Sprintf("the live %s-%d (topic id %s) is %s on it", s.d.Topic, s.d.Partition, t.ID, map[bool]string{true: "in sync", false: "NOT in sync"}[slices.Contains(pv.ISR, s.broker)])
			}
		}
		old := s.id
		if old == "" {
			old = "none (no partition.metadata)"
		}
		ev = append(ev, fmt.Sprintf("broker %d %s: %s-%d, old topic id %s, %s; %s", s.broker, s.path, s.d.Topic, s.d.Partition, old, sizes[s.path], insync))
		byBroker[s.broker] = append(byBroker[s.broker], s.path)
		ids = append(ids, s.broker)
	}
	var per []string
	for _, id := range slices.Sorted(maps.Keys(byBroker)) {
		per = append(per, fmt.Sprintf("broker %d: %d", id, len(byBroker[id])))
	}
	return Finding{Kind: FindStrayLogs, Severity: Warning, Brokers: ids,
		Summary:  fmt.Sprintf("%d stray log directories (-stray) on the brokers' disks (%s): logs Kafka set aside and will never delete", len(strays), strings.Join(per, ", ")),
		Evidence: ev,
		Fix:      "once the live partition on that broker is in sync, move them off the log dirs, keeping a copy until you are sure: `kremedy run stray-cleanup --inventory " + InventoryMark + "` proves each one stale and quarantines it while the brokers run (`kremedy segments restore` undoes it); Kafka only renamed them and they use disk until removed",
		DoNot:    "do not rename a -stray directory back: its topic ID is gone from the metadata, and the broker would set it aside again or refuse it"}
}

// wouldStray says why Kafka will set a live log directory aside at its
// broker's next start, "" when it will not: its topic is not in the
// metadata, its topic ID differs, or the partition is no longer assigned to
// that broker (KAFKA-14616, LogManager).
func (g *kraftDiag) wouldStray(broker int32, d segments.Dir, id string) string {
	if g.o.Topic != "" && d.Topic != g.o.Topic {
		return ""
	}
	t, ok := g.view(d.Topic)
	switch {
	case !ok:
		return fmt.Sprintf("topic id %s, and the metadata has no topic %q", id, d.Topic)
	case t.ID != "" && t.ID != id:
		return fmt.Sprintf("topic id %s, the live topic's is %s", id, t.ID)
	}
	if pv, ok := t.Partitions[d.Partition]; !ok || !slices.Contains(pv.Replicas, broker) {
		return fmt.Sprintf("partition %d is no longer assigned to broker %d", d.Partition, broker)
	}
	return ""
}

// sizes says each stray directory's size and age, one command per host
// (du and stat: strays are few).
func (g *kraftDiag) sizes(ctx context.Context, strays []stray) map[string]string {
	by := map[int32][]string{}
	for _, s := range strays {
		by[s.broker] = append(by[s.broker], s.path)
	}
	return brokers.SizesText(ctx, g.c.Hosts, by, time.Now())
}

// leftovers: what a migration from ZooKeeper left in the nodes' configs (the
// inventory's config files, read over SSH) — a broker still naming
// zookeeper.connect or the migration flag, a controller still in migration
// mode.
func (g *kraftDiag) leftovers(ctx context.Context) {
	type node struct {
		h          ports.Host
		controller bool
	}
	var nodes []node
	for _, h := range g.c.Target.Hosts {
		if h.Config != "" {
			nodes = append(nodes, node{h, false})
		}
	}
	for _, h := range g.c.Target.Controllers {
		if h.Config != "" {
			nodes = append(nodes, node{h, true})
		}
	}
	type got struct {
		keys []string
		err  error
	}
	res := make([]got, len(nodes))
	for i, r := range par.Each(idsOf(nodes, func(n node) int32 { return n.h.ID }), func(id int32) got {
		var n node
		for _, x := range nodes {
			if x.h.ID == id {
				n = x
			}
		}
		b, err := brokers.ReadFile(ctx, g.c.Hosts, id, n.h.Config)
		if err != nil {
			return got{err: err}
		}
		p, err := javaprops.Parse(b)
		if err != nil {
			return got{err: fmt.Errorf("%s: %w", n.h.Config, err)}
		}
		var keys []string
		if v, ok := p.Get("zookeeper.metadata.migration.enable"); ok && strings.EqualFold(strings.TrimSpace(v), "true") {
			keys = append(keys, "zookeeper.metadata.migration.enable=true")
		}
		if v, ok := p.Get("zookeeper.connect"); ok && !n.controller {
			keys = append(keys, "zookeeper.connect="+v)
		}
		return got{keys: keys}
	}) {
		res[i] = r
	}
	for i, n := range nodes {
		r := res[i]
		what := map[bool]string{true: "controller", false: "broker"}[n.controller]
		switch {
		case r.err != nil:
			g.d.Methods = append(g.d.Methods, fmt.Sprintf("%s %d's config not read: %v", what, n.h.ID, r.err))
		case len(r.keys) > 0:
			fix := "remove them (the migration's finalize does; a config edited by hand may have brought them back) and restart the node when convenient: a KRaft node does not use them"
			if n.controller {
				fix = "finalize the migration for this controller (kremedy run zk-to-kraft resumes there), or, if it was finalized, remove the migration flag and zookeeper.* and restart it"
			}
			g.add(Finding{Kind: FindMigrationLeftover, Severity: Warning, Brokers: []int32{n.h.ID},
				Summary:  fmt.Sprintf("%s %d's config (%s) still has ZooKeeper-era settings: %s", what, n.h.ID, n.h.Config, strings.Join(r.keys, ", ")),
				Evidence: []string{fmt.Sprintf("%s on %s", n.h.Config, n.h.Host)},
				Fix:      fix})
		}
	}
}

func idsOf[T any](xs []T, id func(T) int32) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	return out
}
