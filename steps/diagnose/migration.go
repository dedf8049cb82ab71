package diagnose

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/internal/kafkaver"
	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/segments"
)

// Readiness is the verdict of a ZooKeeper → KRaft migration readiness
// check (KIP-866, Kafka 3.9): ready only when nothing below would stall
// or corrupt it.
type Readiness struct {
	Ready bool `json:"ready"`
	// Blockers are the IDs of the findings that must be fixed first, each
	// with why the migration cares (Why, by the finding's ID).
	Blockers []string          `json:"blockers"`
	Why      map[string]string `json:"why"`
	// Advice are findings worth reading first that do not block it.
	Advice []string `json:"advice,omitempty"`
	// InProgress: /migration exists with a KRaft controller's state.
	InProgress string `json:"in_progress,omitempty"`
}

// whyBlocks says, per finding kind, what the migration does with it
// (apache/kafka@3.9; docs/research/field-2026.md B3, B5).
var whyBlocks = map[string]string{
	FindUnregisteredReplica:   "the migration driver waits for every broker id of every topic's assignment to register with KRaft: it waits forever (\"Still waiting for ZK brokers … found in metadata to register with KRaft\")",
	FindStuckDeletion:         "topics pending under /admin/delete_topics are not migrated; their logs become -stray directories that no one deletes (KAFKA-15605)",
	FindMissingTopicID:        "the topic scan reads topic_id from every topic znode; a topic without one throws and the migration stops",
	FindMissingPartitionState: "a partition without a state znode is migrated with ISR = all replicas and leader = the first replica: a stale replica can become leader",
	FindMigrationNoMetadata:   "a hybrid broker fails the KRaft controller's full LeaderAndIsr on a log without a topic ID (\"does not have a topic ID, which is not allowed when running in KRaft mode\", KAFKA-21022)",
	FindBrokerDown:            "every broker must register with the KRaft controller; a broker that is down stalls the migration",
	FindStaleMetadata:         "brokers whose metadata disagrees with ZooKeeper bring the disagreement into KRaft (stray logs, partitions no one serves)",
	FindDisagreement:          "brokers whose metadata disagrees with ZooKeeper bring the disagreement into KRaft",
	FindForeignSegments:       "stale segments under a topic's name become -stray directories on a hybrid broker and are never deleted",
	FindAdoptedSegments:       "adopted segments are migrated as the topic's data: consumers would read the old records",
	FindOrphanedSegments:      "directories of topics that no longer exist become -stray directories that no one deletes",
	FindSettling:              "a topic that is still being created, reassigned or electing leaders must settle first: diagnose again in a few seconds",
	FindMigrationUnavailable:  "the migration restarts every broker, one at a time, twice (into migration mode, then into KRaft); the roll refuses a broker whose stop takes these partitions out of service, so it would stop half-way — the controllers started, a broker in migration mode",
}

// advisory findings do not stop a migration.
var advisory = map[string]bool{FindMigrationControlPlane: true, FindUnsafeAutoCreate: true, FindDeleteDisabled: true, FindMigrationAccepted: true,
	// The migration's own run takes the lease, and is refused while another holds it.
	FindLeaseHeld: true}

// migration adds the checks only a migration needs.
func (g *diagnosis) migration(ctx context.Context, disks *diskListing) {
	g.migrationRelease(ctx)
	g.migrationRolls()
	if disks != nil {
		g.migrationDisks(*disks)
	}
	zk := g.c.ZK
	if ok, _, err := zk.Exists(ctx, kafkazk.ReassignPath); err == nil && ok {
		g.add(Finding{Kind: FindMigrationReassignment, Severity: Critical,
			Summary:  "a partition reassignment is in flight (" + zk.Chroot() + kafkazk.ReassignPath + ")",
			Evidence: []string{zk.Chroot() + kafkazk.ReassignPath + " exists"},
			Fix:      "let the reassignment finish (kafka-reassign-partitions --verify) before the migration: a reassignment during it leaves stray logs (KAFKA-16120)"})
	}
	// Two configs per broker, the brokers asked at once.
	type configs struct {
		max          int
		controlPlane string
	}
	got := par.Each(g.st.Brokers, func(id int32) configs {
		c := configs{max: 1000}
		if v, err := g.c.Kafka.BrokerConfig(ctx, id, "reserved.broker.max.id"); err == nil {
			if n, err := strconv.Atoi(v); err == nil {
				c.max = n
			}
		}
		c.controlPlane, _ = g.c.Kafka.BrokerConfig(ctx, id, "control.plane.listener.name")
		return c
	})
	for i, id := range g.st.Brokers {
		max, v := got[i].max, got[i].controlPlane
		if int(id) > max {
			g.add(Finding{Kind: FindMigrationGeneratedID, Severity: Critical, Brokers: []int32{id},
				Summary:  fmt.Sprintf("broker %d has a generated id (above reserved.broker.max.id %d)", id, max),
				Evidence: []string{fmt.Sprintf("/brokers/ids/%d", id)},
				Fix:      "give the broker a fixed broker.id (≤ reserved.broker.max.id) before the migration: generated ids cannot migrate (KAFKA-17042)"})
		}
		if v != "" {
			g.add(Finding{Kind: FindMigrationControlPlane, Severity: Warning, Brokers: []int32{id},
				Summary:  fmt.Sprintf("broker %d has a control-plane listener %q", id, v),
				Evidence: []string{"control.plane.listener.name=" + v},
				Fix:      "the controller listener you add for the migration (controller.listener.names) must not be this listener: Kafka refuses the broker's config otherwise"})
		}
	}
	b, _, err := zk.Get(ctx, kafkazk.MigrationPath)
	switch {
	case err == nil && strings.TrimSpace(string(b)) == "" || err == nil && strings.TrimSpace(string(b)) == "null":
		g.add(Finding{Kind: FindMigrationZnode, Severity: Critical,
			Summary:  zk.Chroot() + kafkazk.MigrationPath + " exists with no value (left by zookeeper-security-migration without --enable.path.check)",
			Evidence: []string{zk.Chroot() + kafkazk.MigrationPath + " is empty"},
			Fix:      "delete " + zk.Chroot() + kafkazk.MigrationPath + " before the migration: with it the migration stalls (KAFKA-19480)"})
	case err == nil:
		g.migrating = fmt.Sprintf("%s%s holds %s: a migration has started (a KRaft controller took over)", zk.Chroot(), kafkazk.MigrationPath, strings.TrimSpace(string(b)))
	}
}

// migrationRolls judges every broker of the migration's rolls before the
// first change, by the one stop-safety rule: the partitions no restart can
// keep available (brokers.Unavailables) that the operator has not accepted
// block it, with both ways out.
func (g *diagnosis) migrationRolls() {
	parts := brokers.PartitionsOfState(g.st)
	byTopic := map[string][]string{}
	keys := map[string][]string{}
	var on []int32
	for _, id := range g.st.Brokers {
		us := brokers.Unavailables(parts, []int32{id}, g.minISR)
		if len(us) > 0 {
			on = append(on, id)
		}
		for _, u := range us {
			byTopic[u.Topic] = append(byTopic[u.Topic], fmt.Sprintf("broker %d: %s", id, u))
			if !slices.Contains(keys[u.Topic], u.Key()) {
				keys[u.Topic] = append(keys[u.Topic], u.Key())
			}
		}
	}
	listed := slices.Sorted(maps.Keys(byTopic))
	stray := brokers.Accept(g.o.Accept).Unlisted(listed)
	if len(stray) > 0 {
		g.add(Finding{Kind: FindMigrationUnavailable, Severity: Critical,
			Summary:  fmt.Sprintf("%s=%s names %s, but no partition of it is one the migration's rolls cannot keep available (those topics: %s): a typo must not accept nothing", brokers.AcceptParam, strings.Join(g.o.Accept, ","), strings.Join(stray, ", "), text.OrDash(strings.Join(listed, ", "))),
			Evidence: []string{"accepted: " + strings.Join(g.o.Accept, ",")},
			Fix:      "correct the topic names (or leave them out)"})
	}
	var ev, open, accepted, sample []string
	for _, t := range listed {
		ev = append(ev, byTopic[t]...)
		if brokers.Accept(g.o.Accept).Covers(t) {
			accepted = append(accepted, t)
		} else {
			open = append(open, t)
			sample = append(sample, keys[t]...)
		}
	}
	if len(open) > 0 {
		g.add(Finding{Kind: FindMigrationUnavailable, Severity: Critical, Brokers: on,
			Summary:  fmt.Sprintf("the migration's rolls cannot keep %s available: stopping brokers %s takes partitions offline or below min.insync.replicas whatever the order (%s)", text.Count(len(open), "topic"), fmt.Sprint(on), text.Summarize(sample)),
			Evidence: ev,
			Fix:      brokers.WayOut(open) + " — on zk-to-kraft, and on this check with --accept-unavailable"})
	}
	if len(accepted) > 0 {
		g.add(Finding{Kind: FindMigrationAccepted, Severity: Info, Brokers: on,
			Summary:  fmt.Sprintf("accepted (%s): the migration's rolls take partitions of %s out of service while each of their brokers restarts", brokers.AcceptParam, strings.Join(accepted, ", ")),
			Evidence: ev,
			Fix:      "expect those partitions offline or refusing acks=all writes during each broker's restart (twice: into migration mode, then into KRaft); tell their producers first"})
	}
}

// migrationRelease: every broker must run 3.9.x with IBP 3.9.
func (g *diagnosis) migrationRelease(ctx context.Context) {
	var bad []string
	var ids []int32
	jbod := map[int32]int{}
	for _, h := range g.c.Target.Hosts {
		jbod[h.ID] = len(h.LogDirs)
	}
	for _, r := range g.d.Releases {
		ibp, _ := kafkaver.Parse(r.IBP)
		sw := !(strings.HasPrefix(r.Guess, "v3.9") || strings.Contains(r.Guess, "at least v3.9"))
		switch {
		case r.Err != "" || r.Guess == "":
			continue // the broker did not answer: broker-down says so
		case sw || r.IBP == "" || ibp.Major < 3 || ibp.Major == 3 && ibp.Minor < 9:
			ids = append(ids, r.Broker)
			bad = append(bad, fmt.Sprintf("broker %d: Kafka %s, inter.broker.protocol.version %s", r.Broker, r.Guess, orUnknown(r.IBP)))
		}
		if n := jbod[r.Broker]; n > 1 && (ibp.Major < 3 || ibp.Major == 3 && ibp.Minor < 7) {
			g.add(Finding{Kind: FindMigrationJBOD, Severity: Critical, Brokers: []int32{r.Broker},
				Summary:  fmt.Sprintf("broker %d has %d log dirs and inter.broker.protocol.version %s: a migrating broker with several log dirs needs 3.7-IV2", r.Broker, n, orUnknown(r.IBP)),
				Evidence: []string{fmt.Sprintf("broker %d: %d log dirs in the inventory", r.Broker, n)},
				Fix:      "raise inter.broker.protocol.version to 3.9 (every broker on 3.9.x, a rolling restart) before the migration"})
		}
	}
	if len(bad) > 0 {
		g.add(Finding{Kind: FindMigrationRelease, Severity: Critical, Brokers: ids,
			Summary:  fmt.Sprintf("%d brokers do not run Kafka 3.9 with inter.broker.protocol.version 3.9, which the migration requires", len(ids)),
			Evidence: bad,
			Fix:      "upgrade every broker to 3.9.x, then set inter.broker.protocol.version=3.9 in server.properties and restart them one at a time (`kremedy run rolling-restart`); do not change it during the migration",
			Runbook:  "rolling-restart"})
	}
}

// migrationDisks: every live partition directory must carry
// partition.metadata (a topic ID).
func (g *diagnosis) migrationDisks(l diskListing) {
	for _, h := range g.c.Target.Hosts {
		var bare []string
		for _, dir := range l.dirs[h.ID] {
			for _, e := range l.Entries[h.ID][dir] {
				if !e.IsDir || e.TopicID != "" || segments.IsLogDirFile(e.Name) {
					continue
				}
				if pd, err := segments.ParseDir(e.Name); err == nil && pd.Kind == segments.Live {
					bare = append(bare, dir+"/"+e.Name)
				}
			}
		}
		if len(bare) == 0 {
			continue
		}
		slices.Sort(bare)
		g.add(Finding{Kind: FindMigrationNoMetadata, Severity: Critical, Brokers: []int32{h.ID},
			Summary:  fmt.Sprintf("broker %d holds %d partition directories without partition.metadata (no topic ID)", h.ID, len(bare)),
			Evidence: bare[:min(len(bare), 5)],
			Fix:      "with inter.broker.protocol.version ≥ 2.8 a broker writes partition.metadata at its next LeaderAndIsr: restart it (`kremedy run rolling-restart`) and diagnose again; a directory of a topic that no longer exists is the topic-cleanup runbook's",
			Runbook:  "rolling-restart"})
	}
}

// readiness turns the findings into the verdict: every finding that is
// not only informational blocks.
func (g *diagnosis) readiness() {
	r := &Readiness{Why: map[string]string{}, InProgress: g.migrating}
	for _, f := range g.d.Findings {
		if f.Cause != "" {
			continue // an effect: its cause is the blocker
		}
		if advisory[f.Kind] {
			r.Advice = append(r.Advice, f.ID)
			continue
		}
		r.Blockers = append(r.Blockers, f.ID)
		why, ok := whyBlocks[f.Kind]
		if !ok {
			why = "the cluster must be healthy and its metadata consistent before the migration: fix this first"
		}
		r.Why[f.ID] = why
	}
	r.Ready = len(r.Blockers) == 0
	g.d.Migration = r
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
