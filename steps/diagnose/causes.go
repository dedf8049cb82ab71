package diagnose

import (
	"fmt"
	"slices"
	"strings"
)

// topicRoots are, in order of precedence, the findings that are the cause
// of a topic's other findings: the ghost itself (a deletion that never
// finished, another topic's segments, a cache of a topic ZooKeeper lost…).
var topicRoots = []string{
	FindStuckDeletion, FindForeignSegments, FindAdoptedSegments, FindStaleMetadata,
	FindUnknownToZooKeeper, FindUnknownToBrokers, FindMissingPartitionState,
	FindOrphanedSegments, FindMissingTopicID, FindCorruptZnode,
}

// noControllerExplains are the kinds a missing controller explains (when
// no broker that is down does): nothing elects leaders or propagates
// metadata.
var noControllerExplains = []string{FindOffline, FindDisagreement, FindLeaderNotInISR, FindUnknownToBrokers, FindUnderReplicated, FindUnderMinISR}

// quorumLostExplains are the kinds a lost KRaft quorum explains: the
// brokers' metadata stopped wherever each was when the quorum died (one
// may know a topic the others do not), and no broker can register or be
// unfenced. Their own fixes (restart the broker that lags) would make it
// worse: a broker restarted without a quorum cannot register.
var quorumLostExplains = []string{FindDisagreement, FindBrokerFenced, FindUnknownToBrokers}

// downExplains are the kinds a broker that is simply down explains when
// every broker they name is down.
var downExplains = []string{FindUnderReplicated, FindUnregisteredReplica, FindUnderMinISR, FindOffline}

// linkCauses gives every finding an ID and links each one a root cause
// explains to that cause (Cause = the cause's ID): a broker that is down
// explains the under-replicated, under-min-ISR, offline partitions and
// unregistered replicas whose missing brokers are all down; a missing
// controller explains offline partitions, disagreements and replication
// findings no down broker explains; a ghost topic's root (stuck deletion,
// foreign or adopted segments, stale metadata…) explains that topic's
// other findings. Causes come first.
func linkCauses(fs []Finding) []Finding {
	nameFindings(fs)
	down := linkDown(fs)
	linkOffline(fs, down)
	for _, q := range fs {
		if q.Kind == FindQuorumLost {
			explain(fs, q.ID, quorumLostExplains)
		}
	}
	for _, f := range fs {
		if f.Kind == FindNoController {
			explain(fs, f.ID, noControllerExplains)
		}
	}
	linkTopicRoots(fs)
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return boolRank(a.Cause != "") - boolRank(b.Cause != "")
	})
	return fs
}

// nameFindings gives each finding its ID: kind/topic, or kind/brokers,
// with #N on a repeat.
func nameFindings(fs []Finding) {
	seen := map[string]int{}
	for i := range fs {
		id := fs[i].Kind + "/"
		if fs[i].Topic != "" {
			id += fs[i].Topic
		} else {
			id += strings.Trim(strings.ReplaceAll(fmt.Sprint(fs[i].Brokers), " ", ","), "[]")
		}
		if seen[id]++; seen[id] > 1 {
			id += fmt.Sprintf("#%d", seen[id])
		}
		fs[i].ID = id
	}
}

// linkDown: a full log dir explains its broker being down; a down (or
// fenced) broker explains the findings whose brokers are all down. It
// returns the down brokers' findings.
func linkDown(fs []Finding) map[int32]string {
	full := map[int32]string{}
	for _, f := range fs {
		if f.Kind == FindLogDirFull {
			full[f.Brokers[0]] = f.ID
		}
	}
	down := map[int32]string{}
	for i, f := range fs {
		if f.Kind == FindBrokerDown && len(f.Brokers) == 1 && full[f.Brokers[0]] != "" {
			fs[i].Cause = full[f.Brokers[0]] // a full dir stopped it
		}
		if f.Kind == FindBrokerDown || f.Kind == FindBrokerFenced {
			for _, b := range f.Brokers {
				down[b] = f.ID
			}
		}
	}
	for i, f := range fs {
		if !slices.Contains(downExplains, f.Kind) || len(f.Brokers) == 0 {
			continue
		}
		all := true
		for _, b := range f.Brokers {
			_, d := down[b]
			all = all && d
		}
		if all {
			fs[i].Cause = down[f.Brokers[0]]
		}
	}
	return down
}

// linkOffline: offline partitions get their group's cause, with the log
// ends; their under-replicated twins too (no replica lags a leader there
// is not).
func linkOffline(fs []Finding, down map[int32]string) {
	for i, f := range fs {
		if f.Kind != FindOffline {
			continue
		}
		var dead []int32 // KRaft names every replica out of the (empty) ISR
		for _, b := range f.Brokers {
			if _, d := down[b]; d {
				dead = append(dead, b)
			}
		}
		for _, c := range fs {
			if c.Kind == FindOfflineLogEnds && (sameSet(c.Brokers, f.Brokers) || sameSet(c.Brokers, dead)) {
				fs[i].Cause = c.ID
			}
		}
	}
	for i, f := range fs {
		if f.Kind != FindUnderReplicated || f.Cause != "" && !strings.HasPrefix(f.Cause, FindBrokerDown+"/") {
			continue
		}
		for _, o := range fs {
			if o.Kind == FindOffline && o.Topic == f.Topic && strings.HasPrefix(o.Cause, FindOfflineLogEnds+"/") && subset(f.Partitions, o.Partitions) {
				fs[i].Cause = o.Cause
			}
		}
	}
}

// explain makes cause the cause of every finding of kinds without one.
func explain(fs []Finding, cause string, kinds []string) {
	for i, f := range fs {
		if f.Cause == "" && slices.Contains(kinds, f.Kind) {
			fs[i].Cause = cause
		}
	}
}

// linkTopicRoots: a topic's root finding (its first of topicRoots)
// explains the topic's other findings.
func linkTopicRoots(fs []Finding) {
	roots := map[string]string{} // topic -> its root finding's ID
	for _, kind := range topicRoots {
		for _, f := range fs {
			if f.Kind == kind && f.Topic != "" && f.Cause == "" && roots[f.Topic] == "" {
				roots[f.Topic] = f.ID
			}
		}
	}
	for i, f := range fs {
		if r := roots[f.Topic]; r != "" && f.Cause == "" && f.ID != r {
			fs[i].Cause = r
		}
	}
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Causes are the findings no other finding explains, in order.
func (d *Diagnosis) Causes() []Finding {
	var out []Finding
	for _, f := range d.Findings {
		if f.Cause == "" {
			out = append(out, f)
		}
	}
	return out
}

// Explained are the findings cause explains.
func (d *Diagnosis) Explained(cause string) []Finding {
	var out []Finding
	for _, f := range d.Findings {
		if f.Cause == cause {
			out = append(out, f)
		}
	}
	return out
}

// Shared is a cause several topics share: ghosts of one deletion (a job
// that deleted and recreated many topics at once), which one run of one
// runbook repairs with one stop and one start of every broker.
type Shared struct {
	Runbook string   `json:"runbook"`
	Topics  []string `json:"topics"`
	// Kinds are the topics' root findings, "kind: n topics".
	Kinds   []string `json:"kinds"`
	Summary string   `json:"summary"`
	Fix     string   `json:"fix"`
}

// sharedCauses groups the topics whose root cause topic-cleanup repairs:
// those whose fix recreates the topic and those whose fix does not, each
// group of two topics or more one Shared with the one command for all.
func sharedCauses(fs []Finding) []Shared {
	type group struct {
		topics []string
		kinds  map[string]int
		order  []string
	}
	groups := map[bool]*group{}
	for _, f := range fs {
		if f.Cause != "" || f.Runbook != "topic-cleanup" || f.Topic == "" {
			continue
		}
		recreate := strings.Contains(f.Fix, "recreate=true")
		g := groups[recreate]
		if g == nil {
			g = &group{kinds: map[string]int{}}
			groups[recreate] = g
		}
		if slices.Contains(g.topics, f.Topic) {
			continue
		}
		g.topics = append(g.topics, f.Topic)
		if g.kinds[f.Kind]++; g.kinds[f.Kind] == 1 {
			g.order = append(g.order, f.Kind)
		}
	}
	var out []Shared
	for _, recreate := range []bool{false, true} {
		g := groups[recreate]
		if g == nil || len(g.topics) < 2 {
			continue
		}
		slices.Sort(g.topics)
		var kinds []string
		for _, k := range g.order {
			kinds = append(kinds, fmt.Sprintf("%s: %d", k, g.kinds[k]))
		}
		cmd := "kremedy run topic-cleanup --inventory " + InventoryMark + " --set topics=" + strings.Join(g.topics, ",")
		what := "deletes their znodes with one backup, stops every broker once, quarantines every topic's segments, restarts everything and verifies each"
		if recreate {
			cmd += " --set recreate=true"
			what = "deletes their znodes with one backup, stops every broker once, quarantines every topic's segments, restarts everything, recreates each empty and verifies it"
		}
		out = append(out, Shared{Runbook: "topic-cleanup", Topics: g.topics, Kinds: kinds,
			Summary: fmt.Sprintf("%d topics share one cause — ghosts of a deletion that did not complete, most often one job that deleted and recreated them together (%s)", len(g.topics), strings.Join(kinds, ", ")),
			Fix:     fmt.Sprintf("repair all of them in one run, with one stop and one start of every broker instead of one per topic: `%s` (it detaches clients, %s)", cmd, what)})
	}
	return out
}

// sameSet reports whether a and b hold the same brokers, repeats aside.
func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// subset reports whether every partition of a is in b.
func subset(a, b []int32) bool {
	for _, p := range a {
		if !slices.Contains(b, p) {
			return false
		}
	}
	return len(a) > 0
}
