package diagnose

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

// PreferredElectionPath is where kafka-leader-election (and the admin
// API on ZooKeeper-mode clusters) asks the controller for an election;
// the controller deletes it when the election is done (Kafka 3.9,
// ZkData.scala PreferredReplicaElectionZNode).
const PreferredElectionPath = "/admin/preferred_replica_election"

// DefaultSettle is how long a disagreement between ZooKeeper and the
// brokers must last, re-read every second, before it counts, and how young
// a topic is still settling. Measured on the lab (TestDiagnoseZooKeeperLab,
// 50 topics of 3 partitions created at once, three batches: every broker
// served all of them with their whole ISR 1.1, 1.7 and 2.0 s after
// CreateTopics returned, on a 2-core machine also running a second lab);
// five seconds leave a margin of more than two for a loaded controller.
const DefaultSettle = 5 * time.Second

// comparing are the findings that compare views (ZooKeeper and the
// brokers, broker and broker, ZooKeeper's state and its assignment) and so
// show while a topic is created, reassigned or elects leaders.
var comparing = []string{
	FindStaleMetadata, FindDisagreement, FindUnknownToBrokers, FindUnknownToZooKeeper,
	FindMissingPartitionState, FindStateNotInAssignment, FindLeaderNotServing,
	FindOffline, FindUnderReplicated, FindUnderMinISR, FindLeaderNotInISR,
}

// inFlight reads what makes views disagree by design: the topics being
// reassigned (/admin/reassign_partitions, and the topic znodes' adding and
// removing replicas) and the partitions of a preferred-leader election.
func (g *diagnosis) inFlight(ctx context.Context) (reassigning map[string]bool, electing map[string]bool) {
	reassigning, electing = map[string]bool{}, map[string]bool{}
	for name, ts := range g.st.Topics {
		if len(ts.Znode.AddingReplicas)+len(ts.Znode.RemovingReplicas) > 0 {
			reassigning[name] = true
		}
	}
	zk := g.c.ZK
	var doc struct {
		Partitions []struct {
			Topic string `json:"topic"`
		} `json:"partitions"`
	}
	for path, into := range map[string]map[string]bool{kafkazk.ReassignPath: reassigning, PreferredElectionPath: electing} {
		if b, _, err := zk.Get(ctx, path); err == nil && json.Unmarshal(b, &doc) == nil {
			for _, p := range doc.Partitions {
				into[p.Topic] = true
			}
			doc.Partitions = nil
		}
	}
	return reassigning, electing
}

// settle turns the comparing findings of topics that are settling, and
// that no other finding explains (a broker down is a cause, not a
// transient), into one settling finding per topic: created less than the
// settle window before this diagnosis began reading (the topic znode's
// ctime; ZooKeeper's clock, so a skew between it and this host shifts the
// window by as much), being reassigned, or in a preferred-leader election.
// It reports whether it changed anything.
func (g *diagnosis) settle(ctx context.Context, began time.Time) bool {
	window := g.window()
	reassigning, electing := g.inFlight(ctx)
	why := func(name string) string {
		ts := g.st.Topics[name]
		switch {
		// Young and as created: a topic znode written again since (a hand
		// edit of its assignment, a partition added) is not settling.
		case ts != nil && !ts.Stat.Ctime.IsZero() && ts.Stat.Version == 0 && began.Sub(ts.Stat.Ctime) < window:
			return fmt.Sprintf("created %s before this diagnosis (its topic znode's ctime), less than the settle window of %s: the controller and the brokers are still loading it", max(began.Sub(ts.Stat.Ctime), 0).Round(100*time.Millisecond), window)
		case reassigning[name]:
			return "a partition reassignment of it is in flight: replicas are added and removed, so ISRs and assignments differ until it ends"
		case electing[name]:
			return "a preferred-leader election of it is in flight (" + g.c.ZK.Chroot() + PreferredElectionPath + "): leaders move until it ends"
		}
		return ""
	}
	// A finding settles when it compares views of a settling topic and
	// nothing explains it but another finding that settles.
	settles := map[string]bool{}
	for _, f := range g.d.Findings {
		if f.Topic != "" && f.Cause == "" && slices.Contains(comparing, f.Kind) && why(f.Topic) != "" {
			settles[f.ID] = true
		}
	}
	var kept []Finding
	settling := map[string]int{}
	for _, f := range g.d.Findings {
		w := ""
		if f.Topic != "" && (f.Cause == "" || settles[f.Cause]) && slices.Contains(comparing, f.Kind) {
			w = why(f.Topic)
		}
		if w == "" {
			kept = append(kept, f)
			continue
		}
		i, ok := settling[f.Topic]
		if !ok {
			i = len(kept)
			settling[f.Topic] = i
			kept = append(kept, Finding{Kind: FindSettling, Severity: Info, Topic: f.Topic,
				Summary:  fmt.Sprintf("%q is settling: %s", f.Topic, w),
				Evidence: nil,
				Fix:      fmt.Sprintf("nothing to do yet: diagnose again in a few seconds; what it shows counts once it outlasts the settle window (%s)", window)})
		}
		s := &kept[i]
		s.Brokers = uniq(append(s.Brokers, f.Brokers...))
		s.Evidence = append(s.Evidence, fmt.Sprintf("would be %s [%s]: %s", f.Kind, f.Severity, f.Summary))
	}
	changed := len(settling) > 0
	if changed {
		// The findings these explained are explained by nothing now.
		for i := range kept {
			if kept[i].Cause != "" && !slices.ContainsFunc(kept, func(c Finding) bool { return c.ID == kept[i].Cause }) {
				kept[i].Cause = ""
			}
		}
	}
	g.d.Findings = kept
	return changed
}

func (g *diagnosis) window() time.Duration {
	if g.o.Settle > 0 {
		return g.o.Settle
	}
	return DefaultSettle
}

// settled says, for the methods, how disagreements were weighed.
func (g *diagnosis) settled() string {
	return fmt.Sprintf("settle window %s: a disagreement between ZooKeeper and the brokers counts only if it lasts that long, re-read every second; a topic younger than that, or being reassigned or electing leaders, is reported as settling (info)", g.window())
}
