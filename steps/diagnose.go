package steps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/steps/segments"
)

// Severity of a finding.
type Severity string

const (
	Critical Severity = "critical"
	Warning  Severity = "warning"
	Notice   Severity = "info"
)

// Finding kinds; the JSON form of a diagnosis uses these names.
const (
	FindStuckDeletion     = "stuck-deletion"
	FindStaleMetadata     = "stale-metadata"
	FindDisagreement      = "metadata-disagreement"
	FindOrphanedSegments  = "orphaned-segments"
	FindForeignSegments   = "foreign-segments"
	FindAdoptedSegments   = "adopted-segments"
	FindStrayDirectory    = "stray-directory"
	FindUnderReplicated   = "under-replicated"
	FindOffline           = "offline-partitions"
	FindUnderMinISR       = "under-min-isr"
	FindLeaderNotInISR    = "leader-not-in-isr"
	FindLeaderNotServing  = "leader-not-serving"
	FindUnsafeAutoCreate  = "unsafe-auto-create"
	FindDeleteDisabled    = "delete-disabled"
	FindBrokerUnreachable = "broker-unreachable"
	FindDiskUnlisted      = "disk-unlisted"
	FindCorruptZnode      = "corrupt-znode"
)

// Finding is one problem, with its evidence and what repairs it.
type Finding struct {
	Kind       string   `json:"kind"`
	Severity   Severity `json:"severity"`
	Topic      string   `json:"topic,omitempty"`
	Brokers    []int32  `json:"brokers,omitempty"`
	Partitions []int32  `json:"partitions,omitempty"`
	Summary    string   `json:"summary"`
	Evidence   []string `json:"evidence"`
	Fix        string   `json:"fix"`
	DoNot      string   `json:"do_not,omitempty"`
	Runbook    string   `json:"runbook,omitempty"`
}

// Diagnosis is what `kremedy diagnose` reports. Its JSON form is stable:
// fields are only ever added.
type Diagnosis struct {
	Version    int       `json:"version"` // 1
	Cluster    string    `json:"cluster"`
	Topic      string    `json:"topic,omitempty"` // "" for the whole cluster
	Healthy    bool      `json:"healthy"`
	Brokers    []int32   `json:"brokers"` // registered in ZooKeeper
	Controller int32     `json:"controller"`
	Topics     int       `json:"topics_scanned"`
	Disk       bool      `json:"disk_checked"` // log dirs listed over SSH
	Findings   []Finding `json:"findings"`
	Took       string    `json:"took"`
}

// DiagnoseOptions narrow or widen a diagnosis.
type DiagnoseOptions struct {
	Topic string // "" for the whole cluster
	// Disk lists every broker's log dirs over SSH (Remote must be set).
	Disk bool
}

const cleanupFix = "run the topic-cleanup runbook: `kremedy run topic-cleanup --inventory INV --set topic=%s` (it detaches clients, deletes the znodes with a backup, stops every broker, quarantines the segments, restarts everything and verifies)"

// Diagnose reads ZooKeeper, every broker's own metadata and, with Disk,
// every broker's log dirs, and reports what disagrees. It never changes
// anything: Metadata requests never auto-create topics.
func Diagnose(ctx context.Context, t Target, zk Coordinator, kc Cluster, rem Remote, o DiagnoseOptions) (*Diagnosis, error) {
	start := time.Now()
	var topics []string
	if o.Topic != "" {
		topics = []string{o.Topic}
	}
	st, err := ReadState(ctx, zk, topics...)
	if err != nil {
		return nil, fmt.Errorf("read ZooKeeper %s: %w", t.ZKConnect, err)
	}
	// The disks are listed over SSH (~0.1 s on the lab, most of it the SSH
	// handshakes) while the brokers are asked.
	var disks chan diskListing
	if o.Disk && rem != nil {
		disks = make(chan diskListing, 1)
		registered := st.Brokers // st is read again below while the disks are listed
		go func() { disks <- listDisks(ctx, t, registered, rem, kc) }()
		defer func() {
			if disks != nil {
				<-disks // an early return still waits for the SSH listings
			}
		}()
	}
	d := &Diagnosis{Version: 1, Cluster: t.Name, Topic: o.Topic, Brokers: st.Brokers, Controller: st.Controller}
	add := func(f Finding) {
		slices.Sort(f.Brokers)
		f.Brokers = slices.Compact(f.Brokers)
		slices.Sort(f.Partitions)
		f.Partitions = slices.Compact(f.Partitions)
		d.Findings = append(d.Findings, f)
	}

	// Each registered broker's own view, asked in parallel. Brokers learn
	// about each other, the controller and every leader or ISR change a
	// moment after ZooKeeper does, and ZooKeeper and the brokers cannot be
	// read at one instant: a disagreement (about the cluster or a topic) is
	// read again, ZooKeeper and brokers, up to 3 times 1 s apart, before it
	// counts.
	var views map[int32]BrokerView
	var unreachable map[int32]error
	for attempt := 0; ; attempt++ {
		views, unreachable = brokerViews(ctx, kc, st.Brokers, topics)
		if !disagrees(st, views) || attempt == 2 || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		if st, err = ReadState(ctx, zk, topics...); err != nil {
			return nil, fmt.Errorf("read ZooKeeper %s: %w", t.ZKConnect, err)
		}
		d.Brokers, d.Controller = st.Brokers, st.Controller
	}
	for _, id := range st.Brokers {
		if err, ok := unreachable[id]; ok {
			add(Finding{Kind: FindBrokerUnreachable, Severity: Critical, Brokers: []int32{id},
				Summary: fmt.Sprintf("broker %d is registered in ZooKeeper but does not answer Metadata", id), Evidence: []string{err.Error()},
				Fix: "check the broker's process and network; a broker that is registered but not serving is a zombie or overloaded"})
		}
	}
	inv := map[int32]bool{}
	for _, h := range t.Hosts {
		inv[h.ID] = true
	}

	// Cluster-level agreement: controller and live brokers.
	for _, id := range sortedIDs(views) {
		v := views[id]
		if !agreesOnCluster(v, st) {
			add(Finding{Kind: FindDisagreement, Severity: Warning, Brokers: []int32{id},
				Summary:  fmt.Sprintf("broker %d's metadata disagrees with ZooKeeper about the cluster", id),
				Evidence: []string{fmt.Sprintf("broker %d: controller %d, live brokers %s; ZooKeeper: controller %d, registered %s", id, v.Controller, i32s(v.Brokers), st.Controller, i32s(st.Brokers))},
				Fix:      "usually transient during a controller change; if it lasts, restart that broker so it reloads metadata"})
		}
	}

	// Topics: ZooKeeper's, and any a broker still serves.
	names := map[string]bool{}
	for n := range st.Topics {
		names[n] = true
	}
	for _, v := range views {
		for n, tv := range v.Topics {
			if tv.Present() {
				names[n] = true
			}
		}
	}
	if o.Topic != "" {
		names = map[string]bool{o.Topic: true}
	}
	var deleteDisabled []int32
	if len(views) > 0 {
		for _, id := range sortedIDs(views) {
			if v, err := kc.BrokerConfig(ctx, id, "delete.topic.enable"); err == nil && v == "false" {
				deleteDisabled = append(deleteDisabled, id)
			}
		}
	}
	if len(deleteDisabled) > 0 {
		add(Finding{Kind: FindDeleteDisabled, Severity: Warning, Brokers: deleteDisabled,
			Summary:  "topic deletion is disabled (delete.topic.enable=false)",
			Evidence: []string{fmt.Sprintf("brokers %s report delete.topic.enable=false", i32s(deleteDisabled))},
			Fix:      "enable delete.topic.enable on every broker (rolling restart) before deleting topics; the controller silently drops deletion requests while it is off",
			DoNot:    "do not delete a topic's znodes by hand to work around it"})
	}
	minISRDefault := 1
	for _, id := range sortedIDs(views) {
		if v, err := kc.BrokerConfig(ctx, id, "min.insync.replicas"); err == nil {
			minISRDefault, _ = strconv.Atoi(v)
			break
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, name := range sorted {
		ts := st.Topics[name]
		if ts == nil {
			ts = &TopicState{Name: name}
		}
		diagnoseTopic(ctx, d, add, name, ts, st, views, kc, o.Topic != "", minISRDefault, deleteDisabled)
	}
	d.Topics = len(sorted)

	if disks != nil {
		d.Disk = true
		l := <-disks
		disks = nil // received: the deferred wait has nothing to wait for
		diagnoseDisks(add, t, st, l, o.Topic)
	}
	sort.SliceStable(d.Findings, func(i, j int) bool {
		a, b := d.Findings[i], d.Findings[j]
		if a.Severity != b.Severity {
			return rank(a.Severity) < rank(b.Severity)
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Kind < b.Kind
	})
	d.Healthy = len(d.Findings) == 0
	d.Took = time.Since(start).Round(time.Millisecond).String()
	return d, nil
}

// brokerViews asks every broker for its own metadata, in parallel.
func brokerViews(ctx context.Context, kc Cluster, ids []int32, topics []string) (map[int32]BrokerView, map[int32]error) {
	views, errs := map[int32]BrokerView{}, map[int32]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := kc.BrokerView(ctx, id, topics...)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[id] = err
				return
			}
			views[id] = v
		}()
	}
	wg.Wait()
	return views, errs
}

func rank(s Severity) int {
	switch s {
	case Critical:
		return 0
	case Warning:
		return 1
	}
	return 2
}

func sortedIDs(m map[int32]BrokerView) []int32 {
	var out []int32
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func diagnoseTopic(ctx context.Context, d *Diagnosis, add func(Finding), name string, ts *TopicState, st *ClusterState,
	views map[int32]BrokerView, kc Cluster, deep bool, minISRDefault int, deleteDisabled []int32) {
	assign, _ := ts.Znode.Assignment()
	for _, e := range ts.Errs {
		if strings.Contains(e, "does not decode") {
			add(Finding{Kind: FindCorruptZnode, Severity: Critical, Topic: name, Summary: fmt.Sprintf("a znode of %q does not decode as Kafka writes it", name),
				Evidence: []string{e}, Fix: "restore the znode from a backup, or repair the topic with " + fmt.Sprintf(cleanupFix, name), Runbook: "topic-cleanup",
				DoNot: "do not rewrite /brokers/topics/<t> without its topic_id: the controller would mint a new one (INCONSISTENT_TOPIC_ID)"})
		}
	}
	// 1. Stuck deletion.
	if ts.PendingDelete {
		var missing []int32
		for _, reps := range assign {
			for _, r := range reps {
				if !slices.Contains(st.Brokers, r) {
					missing = append(missing, r)
				}
			}
		}
		ev := []string{fmt.Sprintf("%s%s exists", "", DeleteTopicPath(name))}
		var why []string
		if len(missing) > 0 {
			slices.Sort(missing)
			missing = slices.Compact(missing)
			why = append(why, fmt.Sprintf("replica brokers %s are not registered in %s", i32s(missing), BrokerIDsPath))
		}
		if len(ts.Znode.AddingReplicas)+len(ts.Znode.RemovingReplicas) > 0 {
			why = append(why, "a reassignment is in progress (adding/removing replicas in the topic znode)")
		}
		if len(deleteDisabled) > 0 {
			why = append(why, "deletion is disabled on some brokers")
		}
		if !ts.HasZnode() {
			why = append(why, "the topic znode is already gone (a leftover marker the controller removes at its next failover)")
		}
		if len(why) == 0 {
			why = append(why, "no blocking reason found: the deletion may still be in progress")
		}
		ev = append(ev, why...)
		fix := "start the missing broker(s) " + i32s(missing) + " again: the controller resumes the deletion by itself when a replica's broker returns"
		if len(missing) == 0 {
			fix = "wait for the controller, or force a controller failover; if it does not complete, " + fmt.Sprintf(cleanupFix, name)
		}
		add(Finding{Kind: FindStuckDeletion, Severity: Critical, Topic: name, Brokers: missing,
			Summary:  fmt.Sprintf("%q is marked for deletion but the deletion has not completed: %s", name, strings.Join(why, "; ")),
			Evidence: ev, Fix: fix + ". If a broker id never returns, " + fmt.Sprintf(cleanupFix, name),
			DoNot:   "do not delete the topic's znodes by hand while brokers run, and do not recreate it yet: brokers keep the old topic in their caches and on disk (the ghost topic)",
			Runbook: "topic-cleanup"})
	}
	// 2. Ghost / stale metadata.
	var lists, missing []int32
	for _, id := range sortedIDs(views) {
		tv, ok := views[id].Topics[name]
		if ok && tv.Present() {
			lists = append(lists, id)
		} else {
			missing = append(missing, id)
		}
	}
	switch {
	case !ts.Exists && len(lists) > 0:
		add(Finding{Kind: FindStaleMetadata, Severity: Critical, Topic: name, Brokers: lists,
			Summary:  fmt.Sprintf("brokers %s still serve %q, which ZooKeeper no longer has", i32s(lists), name),
			Evidence: viewEvidence(views, name, lists, missing),
			Fix:      fmt.Sprintf(cleanupFix, name) + "; only a restart of every broker clears their caches",
			DoNot:    "do not restart one broker at a time: the restarted one forgets the topic while the others still serve it, and clients get UNKNOWN_TOPIC_OR_PARTITION",
			Runbook:  "topic-cleanup"})
	case ts.HasZnode() && !ts.PendingDelete && len(missing) > 0 && len(views) > 0:
		add(Finding{Kind: FindStaleMetadata, Severity: Critical, Topic: name, Brokers: missing,
			Summary:  fmt.Sprintf("ZooKeeper has %q but brokers %s do not serve it", name, i32s(missing)),
			Evidence: viewEvidence(views, name, lists, missing),
			Fix:      "restart the brokers that do not know the topic so they reload metadata; if the topic was recreated by hand, " + fmt.Sprintf(cleanupFix, name),
			Runbook:  "topic-cleanup"})
	}
	if dis, disB, disP := topicDisagreement(name, ts, views); len(dis) > 0 {
		add(Finding{Kind: FindDisagreement, Severity: Warning, Topic: name, Brokers: disB, Partitions: disP,
			Summary:  fmt.Sprintf("brokers' metadata about %q differs from ZooKeeper", name),
			Evidence: dis, Fix: "transient during leader changes; if it persists, the brokers missed updates: restart them, or " + fmt.Sprintf(cleanupFix, name),
			Runbook: "topic-cleanup"})
	}
	if !ts.HasZnode() || ts.PendingDelete {
		// A topic being deleted has offline, shrinking partitions by design:
		// the stuck deletion above is the finding.
		return
	}
	// 4. Replication, from ZooKeeper's partition states.
	minISR := minISRDefault
	if v, ok := ts.Config["min.insync.replicas"]; ok {
		minISR, _ = strconv.Atoi(v)
	}
	var urp, offline, underMin, notInISR []int32
	var urpEv, offEv, minEv, nisEv []string
	var urpB []int32
	for p, reps := range assign {
		zs, ok := ts.States[p]
		if !ok {
			continue
		}
		switch {
		case zs.Leader < 0:
			offline = append(offline, p)
			offEv = append(offEv, fmt.Sprintf("%s-%d: no leader (replicas %s, isr %s)", name, p, i32s(reps), i32s(zs.ISR)))
		case !slices.Contains(zs.ISR, zs.Leader):
			notInISR = append(notInISR, p)
			nisEv = append(nisEv, fmt.Sprintf("%s-%d: leader %d not in isr %s", name, p, zs.Leader, i32s(zs.ISR)))
		}
		if len(zs.ISR) < len(reps) {
			urp = append(urp, p)
			for _, r := range reps {
				if !slices.Contains(zs.ISR, r) {
					urpB = append(urpB, r)
				}
			}
			urpEv = append(urpEv, fmt.Sprintf("%s-%d: replicas %s, isr %s", name, p, i32s(reps), i32s(zs.ISR)))
		}
		if zs.Leader >= 0 && len(zs.ISR) < minISR {
			underMin = append(underMin, p)
			minEv = append(minEv, fmt.Sprintf("%s-%d: isr %s < min.insync.replicas %d", name, p, i32s(zs.ISR), minISR))
		}
	}
	if len(offline) > 0 {
		sort.Strings(offEv)
		add(Finding{Kind: FindOffline, Severity: Critical, Topic: name, Partitions: offline, Summary: fmt.Sprintf("%d partitions of %q have no leader", len(offline), name),
			Evidence: offEv, Fix: "bring back the brokers that hold their replicas", DoNot: "do not enable unclean leader election unless you accept losing data"})
	}
	if len(urp) > 0 {
		sort.Strings(urpEv)
		slices.Sort(urpB)
		urpB = slices.Compact(urpB)
		add(Finding{Kind: FindUnderReplicated, Severity: Warning, Topic: name, Partitions: urp, Brokers: urpB,
			Summary:  fmt.Sprintf("%d partitions of %q are under-replicated (brokers %s out of the ISR)", len(urp), name, i32s(urpB)),
			Evidence: urpEv, Fix: "bring the lagging brokers back; if they run but never catch up, check their logs for INCONSISTENT_TOPIC_ID (stale segments) and " + fmt.Sprintf(cleanupFix, name)})
	}
	if len(underMin) > 0 {
		sort.Strings(minEv)
		add(Finding{Kind: FindUnderMinISR, Severity: Critical, Topic: name, Partitions: underMin,
			Summary: fmt.Sprintf("%d partitions of %q are below min.insync.replicas: acks=all producers fail", len(underMin), name), Evidence: minEv,
			Fix: "restore the missing replicas"})
	}
	if len(notInISR) > 0 {
		sort.Strings(nisEv)
		add(Finding{Kind: FindLeaderNotInISR, Severity: Warning, Topic: name, Partitions: notInISR,
			Summary: fmt.Sprintf("%d partitions of %q have a leader outside their own ISR", len(notInISR), name), Evidence: nisEv,
			Fix: "a controller inconsistency: force a controller failover, or restart the brokers involved"})
	}
	if !deep {
		return
	}
	// Ask each partition's leader to serve it (one topic only: it costs a
	// request per partition): a leader with an inconsistent replica
	// answers NOT_LEADER_OR_FOLLOWER while everything names it leader.
	var notServing []int32
	var nsB []int32
	var nsEv []string
	for p := range assign {
		zs, ok := ts.States[p]
		if !ok || zs.Leader < 0 || !slices.Contains(d.Brokers, zs.Leader) {
			continue
		}
		if _, _, err := kc.Offsets(ctx, zs.Leader, name, p); err != nil {
			notServing, nsB = append(notServing, p), append(nsB, zs.Leader)
			nsEv = append(nsEv, fmt.Sprintf("%s-%d: ZooKeeper names broker %d leader; it answers %v", name, p, zs.Leader, err))
		}
	}
	if len(notServing) > 0 {
		sort.Strings(nsEv)
		add(Finding{Kind: FindLeaderNotServing, Severity: Critical, Topic: name, Partitions: notServing, Brokers: nsB,
			Summary:  fmt.Sprintf("leaders of %d partitions of %q refuse to serve them (NotLeaderOrFollower risk)", len(notServing), name),
			Evidence: nsEv, Fix: "the leader holds a stale replica (look for INCONSISTENT_TOPIC_ID in its state-change.log); " + fmt.Sprintf(cleanupFix, name),
			DoNot: "do not restart only that broker and recreate the topic again", Runbook: "topic-cleanup"})
	}
	// Old records in a "new" topic: adopted segments.
	var adopted []int32
	var adEv []string
	for p := range assign {
		ts0, has, err := kc.FirstRecordTime(ctx, name, p)
		if err == nil && has && ts0.Before(ts.Stat.Ctime.Add(-time.Second)) {
			adopted = append(adopted, p)
			adEv = append(adEv, fmt.Sprintf("%s-%d: first record written %s, topic created %s", name, p, ts0.UTC().Format(time.RFC3339), ts.Stat.Ctime.UTC().Format(time.RFC3339)))
		}
	}
	if len(adopted) > 0 {
		sort.Strings(adEv)
		add(Finding{Kind: FindAdoptedSegments, Severity: Critical, Topic: name, Partitions: adopted,
			Summary:  fmt.Sprintf("%q serves records older than the topic itself: a recreated topic adopted old segments", name),
			Evidence: append(adEv, "record timestamps are the producers' (CreateTime): a topic filled by MirrorMaker or with old event times looks the same — check the segment files' dates on the brokers before acting"),
			Fix:      fmt.Sprintf(cleanupFix, name) + " with recreate=true",
			DoNot:    "do not let consumers read it: they would process the deleted topic's data", Runbook: "topic-cleanup"})
	}
	// 5. Auto-create with clients attached.
	if groups, err := kc.Groups(ctx, name); err == nil {
		var attached []string
		for _, g := range groups {
			if len(g.Members) > 0 {
				attached = append(attached, g.Group)
			}
		}
		if len(attached) > 0 {
			var auto []int32
			for _, id := range d.Brokers {
				if v, err := kc.BrokerConfig(ctx, id, "auto.create.topics.enable"); err == nil && v == "true" {
					auto = append(auto, id)
				}
			}
			if len(auto) > 0 {
				add(Finding{Kind: FindUnsafeAutoCreate, Severity: Warning, Topic: name, Brokers: auto,
					Summary:  fmt.Sprintf("auto.create.topics.enable=true while groups %v consume %q", attached, name),
					Evidence: []string{fmt.Sprintf("brokers %s have auto.create.topics.enable=true", i32s(auto))},
					Fix:      "detach the clients before any cleanup (topic-cleanup's detach step waits for it)", DoNot: "do not delete the topic while clients are attached: they would recreate it with default settings"})
			}
		}
	}
}

func viewEvidence(views map[int32]BrokerView, name string, lists, missing []int32) []string {
	var ev []string
	for _, id := range lists {
		tv := views[id].Topics[name]
		ev = append(ev, fmt.Sprintf("broker %d lists %q (%d partitions, topic id %s)", id, name, len(tv.Partitions), orDash(tv.ID)))
	}
	for _, id := range missing {
		e := "UNKNOWN_TOPIC_OR_PARTITION"
		if tv, ok := views[id].Topics[name]; ok && tv.Err != "" {
			e = tv.Err
		}
		ev = append(ev, fmt.Sprintf("broker %d: %s", id, e))
	}
	return ev
}

// diagnoseDisks lists every broker's log dirs over SSH.
// diskListing is every host's log dirs as listed over SSH.
type diskListing struct {
	dirs map[int32][]string
	all  map[int32]map[string][]segments.Entry
	errs map[int32]error
}

// listDisks finds each broker's log dirs (the inventory's, else the
// broker's own answer) and lists them on every host at once. One host that
// cannot be reached is recorded, not the end of the diagnosis: the other
// hosts' disks are still worth reading at 3 a.m.
func listDisks(ctx context.Context, t Target, registered []int32, rem Remote, kc Cluster) diskListing {
	r := &Run{Target: t, Remote: rem, Kafka: kc, Facts: Facts{LogDirs: map[int32][]string{}}}
	var ask []int32
	for _, h := range t.Hosts {
		r.Facts.LogDirs[h.ID] = h.LogDirs
		if len(h.LogDirs) == 0 && slices.Contains(registered, h.ID) {
			ask = append(ask, h.ID)
		}
	}
	for i, dirs := range eachID(ask, func(id int32) []string { d, _ := kc.LogDirs(ctx, id); return d }) {
		r.Facts.LogDirs[ask[i]] = dirs
	}
	all, errs := r.listEach(ctx)
	return diskListing{dirs: r.Facts.LogDirs, all: all, errs: errs}
}

func diagnoseDisks(add func(Finding), t Target, st *ClusterState, l diskListing, only string) {
	all, errs := l.all, l.errs
	for _, h := range t.Hosts {
		if err := errs[h.ID]; err != nil {
			add(Finding{Kind: FindDiskUnlisted, Severity: Critical, Brokers: []int32{h.ID},
				Summary:  fmt.Sprintf("broker %d's log dirs could not be listed over SSH: its disk was not examined", h.ID),
				Evidence: []string{err.Error()},
				Fix:      "fix SSH to the host (reachability, user, key, known_hosts) and diagnose again; a cleanup refuses to start until every host answers"})
		}
	}
	type key struct{ kind, topic string }
	groups := map[key]*Finding{}
	for _, h := range t.Hosts {
		for _, dir := range l.dirs[h.ID] {
			for _, e := range all[h.ID][dir] {
				if !e.IsDir || segments.IsLogDirFile(e.Name) {
					continue
				}
				pd, err := segments.ParseDir(e.Name)
				if err != nil {
					if errors.Is(err, segments.ErrBlocksStartup) && (only == "" || strings.HasPrefix(e.Name, only)) {
						add(Finding{Kind: FindStrayDirectory, Severity: Critical, Brokers: []int32{h.ID},
							Summary:  fmt.Sprintf("broker %d's log dir holds %s, which Kafka cannot parse: the broker will refuse to start", h.ID, e.Name),
							Evidence: []string{fmt.Sprintf("%s/%s: %v", dir, e.Name, err)},
							Fix:      "move it out of every log dir (not just rename it inside one) before the broker restarts"})
					}
					continue
				}
				if only != "" && pd.Topic != only {
					continue
				}
				ts := st.Topics[pd.Topic]
				var k key
				var ev string
				switch {
				case ts == nil || !ts.HasZnode():
					if ts != nil && ts.PendingDelete || pd.Kind == segments.Delete {
						// covered by stuck-deletion, or Kafka's own asynchronous
						// delete (gone after file.delete.delay.ms)
						continue
					}
					k, ev = key{FindOrphanedSegments, pd.Topic}, fmt.Sprintf("broker %d %s/%s (%s)", h.ID, dir, e.Name, pd.Kind)
				case ts.Znode.TopicID != "" && e.TopicID != "" && e.TopicID != ts.Znode.TopicID && pd.Kind == segments.Live:
					k, ev = key{FindForeignSegments, pd.Topic}, fmt.Sprintf("broker %d %s/%s: partition.metadata topic_id %s, znode topic_id %s", h.ID, dir, e.Name, e.TopicID, ts.Znode.TopicID)
				default:
					continue
				}
				f, ok := groups[k]
				if !ok {
					f = &Finding{Kind: k.kind, Topic: k.topic, Runbook: "topic-cleanup"}
					groups[k] = f
				}
				f.Brokers = append(f.Brokers, h.ID)
				f.Partitions = append(f.Partitions, pd.Partition)
				f.Evidence = append(f.Evidence, ev)
			}
		}
	}
	for k, f := range groups {
		sort.Strings(f.Evidence)
		switch k.kind {
		case FindOrphanedSegments:
			f.Severity = Warning
			f.Summary = fmt.Sprintf("partition directories of %q remain on disk but ZooKeeper has no such topic", k.topic)
			f.Fix = fmt.Sprintf(cleanupFix, k.topic) + " — the segments are quarantined while every broker is stopped"
			f.DoNot = "do not recreate the topic under this name first: the brokers would adopt these segments (or reject it with INCONSISTENT_TOPIC_ID)"
		case FindForeignSegments:
			f.Severity = Critical
			f.Summary = fmt.Sprintf("directories of %q carry another topic ID than its znode (INCONSISTENT_TOPIC_ID): those brokers never serve or replicate it", k.topic)
			f.Fix = fmt.Sprintf(cleanupFix, k.topic) + " with recreate=true"
			f.DoNot = "do not delete the directories while the broker runs, and do not rewrite the znode's topic_id"
		}
		add(*f)
	}
}

// disagrees reports whether any broker's view differs from ZooKeeper's
// state: about the controller and live brokers, or about a topic's id,
// partitions, leaders, epochs or ISR.
func disagrees(st *ClusterState, views map[int32]BrokerView) bool {
	for _, v := range views {
		if !agreesOnCluster(v, st) {
			return true
		}
	}
	for name, ts := range st.Topics {
		if dis, _, _ := topicDisagreement(name, ts, views); len(dis) > 0 {
			return true
		}
	}
	return false
}

// agreesOnCluster: the broker names ZooKeeper's controller and exactly the
// registered brokers as live.
func agreesOnCluster(v BrokerView, st *ClusterState) bool {
	return v.Controller == st.Controller && slices.Equal(v.Brokers, st.Brokers)
}

// topicDisagreement compares the views of the brokers that serve a topic
// with its znodes; nothing to compare while it has no znode or fewer than
// two brokers serve it (stale-metadata covers those).
func topicDisagreement(name string, ts *TopicState, views map[int32]BrokerView) (dis []string, disB, disP []int32) {
	var lists []int32
	for _, id := range sortedIDs(views) {
		if tv, ok := views[id].Topics[name]; ok && tv.Present() {
			lists = append(lists, id)
		}
	}
	if !ts.HasZnode() || len(lists) < 2 {
		return nil, nil, nil
	}
	assign, _ := ts.Znode.Assignment()
	for _, id := range lists {
		tv := views[id].Topics[name]
		if ts.Znode.TopicID != "" && tv.ID != "" && tv.ID != ts.Znode.TopicID {
			dis = append(dis, fmt.Sprintf("broker %d: topic id %s, ZooKeeper %s", id, tv.ID, ts.Znode.TopicID))
			disB = append(disB, id)
		}
		if len(tv.Partitions) != len(assign) {
			dis = append(dis, fmt.Sprintf("broker %d: %d partitions, ZooKeeper %d", id, len(tv.Partitions), len(assign)))
			disB = append(disB, id)
		}
		for p, pv := range tv.Partitions {
			zs, ok := ts.States[p]
			if ok && (pv.Leader != zs.Leader || pv.LeaderEpoch != zs.LeaderEpoch || !sameSet(pv.ISR, zs.ISR)) {
				dis = append(dis, fmt.Sprintf("broker %d: %s-%d leader %d epoch %d isr %s; ZooKeeper leader %d epoch %d isr %s", id, name, p, pv.Leader, pv.LeaderEpoch, i32s(pv.ISR), zs.Leader, zs.LeaderEpoch, i32s(zs.ISR)))
				disB, disP = append(disB, id), append(disP, p)
			}
		}
	}
	sort.Strings(dis)
	return dis, disB, disP
}
