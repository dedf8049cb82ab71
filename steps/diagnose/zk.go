package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// reassignFix is how to move a topic's replicas off brokers that are gone,
// as a plan to review before executing it.
const reassignFix = "move its replicas to registered brokers with a reassignment you review first: write {\"version\":1,\"topics\":[{\"topic\":\"%s\"}]} to topics.json, run `kafka-reassign-partitions --bootstrap-server B --topics-to-move-json-file topics.json --broker-list %s --generate`, check the proposed assignment, then --execute it and --verify"

// partitionsUnknown lists a topic's partitions that ZooKeper assigns but no
// broker that serves the topic knows (toBrokers), and the partitions some
// broker serves that ZooKeeper does not assign, with those brokers (toZK).
// A topic no broker serves is stale-metadata's, not this.
func partitionsUnknown(name string, ts *kafkazk.TopicState, views map[int32]ports.BrokerView) (toBrokers []int32, toZK map[int32][]int32) {
	if !ts.HasZnode() || ts.PendingDelete {
		return nil, nil
	}
	assign, err := ts.Znode.Assignment()
	if err != nil {
		return nil, nil
	}
	serving := servingBrokers(name, views)
	if len(serving) == 0 {
		return nil, nil
	}
	known := map[int32]bool{}
	for _, id := range serving {
		for p := range views[id].Topics[name].Partitions {
			known[p] = true
			if _, ok := assign[p]; !ok {
				if toZK == nil {
					toZK = map[int32][]int32{}
				}
				toZK[p] = append(toZK[p], id)
			}
		}
	}
	for p := range assign {
		if !known[p] {
			toBrokers = append(toBrokers, p)
		}
	}
	slices.Sort(toBrokers)
	return toBrokers, toZK
}

// zkFindings are what ZooKeeper's own znodes of one topic say is wrong, and
// the partitions ZooKeeper and the brokers do not share.
func (g *diagnosis) zkFindings(name string, ts *kafkazk.TopicState, assign map[int32][]int32) {
	g.unregistered(name, ts, assign)
	g.stateOutsideAssignment(name, ts, assign)
	if len(ts.MissingStates) > 0 {
		var ev []string
		for _, p := range ts.MissingStates {
			ev = append(ev, fmt.Sprintf("%s%s has no state znode (replicas %s)", g.c.ZK.Chroot(), kafkazk.PartitionStatePath(name, p), fmt.Sprint(assign[p])))
		}
		g.add(Finding{Kind: FindMissingPartitionState, Severity: Critical, Topic: name, Partitions: ts.MissingStates,
			Summary:  fmt.Sprintf("%d partitions of %q have no state znode: ZooKeeper holds no leader or ISR for them", len(ts.MissingStates), name),
			Evidence: ev,
			Fix:      "check that every broker of the cluster runs and diagnose again; if the state is still missing, the controller never initialised the partition: a restart of the brokers that hold it (kremedy's rolling-restart runbook) makes the controller send its state again. The ZooKeeper → KRaft migration would take ISR = all replicas and leader = the first replica for it",
			DoNot:    "do not write a state znode by hand: a wrong leader epoch or ISR makes the controller and the brokers disagree", Runbook: "rolling-restart"})
	}
	if (g.o.Migration || g.ibp != "" && ibpAtLeast(g.ibp, 2, 8)) && ts.Znode.TopicID == "" && ts.Exists {
		ev := []string{fmt.Sprintf("%s%s has no topic_id; the brokers' inter.broker.protocol.version is %s (topic IDs from 2.8)", g.c.ZK.Chroot(), kafkazk.TopicPath(name), g.ibp)}
		for _, id := range servingBrokers(name, g.views) {
			if tv := g.views[id].Topics[name]; tv.ID != "" {
				ev = append(ev, fmt.Sprintf("broker %d serves it with topic id %s", id, tv.ID))
			}
		}
		g.add(Finding{Kind: FindMissingTopicID, Severity: Critical, Topic: name,
			Summary:  fmt.Sprintf("the znode of %q has no topic_id although the cluster uses topic IDs: something rewrote it (an old --zookeeper admin tool, a hand edit)", name),
			Evidence: ev,
			Fix:      "put the topic_id the brokers serve (evidence) back into the znode, keeping every other field: the controller mints a new one otherwise, and brokers whose partition.metadata carries the old one refuse the topic (INCONSISTENT_TOPIC_ID). The ZooKeeper → KRaft migration fails on a topic without topic_id",
			DoNot:    "do not use kafka-topics --zookeeper (removed in 3.0) or a pre-2.8 admin tool on this cluster: they rewrite the znode without topic_id"})
	}
	toBrokers, toZK := partitionsUnknown(name, ts, g.views)
	if len(toBrokers) > 0 {
		var ev []string
		for _, p := range toBrokers {
			state := "no state znode"
			if zs, ok := ts.States[p]; ok {
				state = fmt.Sprintf("state leader %d epoch %d isr %s", zs.Leader, zs.LeaderEpoch, fmt.Sprint(zs.ISR))
			}
			ev = append(ev, fmt.Sprintf("%s-%d: ZooKeeper assigns replicas %s (%s); brokers %s serve %q without it", name, p, fmt.Sprint(assign[p]), state, fmt.Sprint(servingBrokers(name, g.views)), name))
		}
		g.add(Finding{Kind: FindUnknownToBrokers, Severity: Critical, Topic: name, Partitions: toBrokers,
			Summary:  fmt.Sprintf("%d partitions of %q are in ZooKeeper but no broker serves them: clients that use them get UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER", len(toBrokers), name),
			Evidence: ev,
			Fix:      "the controller never made a broker host them (a partition increase written to ZooKeeper that the controller did not carry out): a restart of every broker, one at a time (kremedy's rolling-restart runbook), makes the controller send every partition to every broker again; diagnose again after it",
			DoNot:    "do not produce to those partitions or raise the partition count again: a second change on a topic the brokers disagree about makes it worse", Runbook: "rolling-restart"})
	}
	if len(toZK) > 0 {
		var parts, bs []int32
		var ev []string
		for _, p := range slices.Sorted(mapsKeys(toZK)) {
			parts = append(parts, p)
			ids := toZK[p]
			slices.Sort(ids)
			bs = append(bs, ids...)
			ev = append(ev, fmt.Sprintf("%s-%d: brokers %s serve it; ZooKeeper assigns partitions %s only", name, p, fmt.Sprint(ids), fmt.Sprint(slices.Sorted(mapsKeys(assign)))))
		}
		g.add(Finding{Kind: FindUnknownToZooKeeper, Severity: Critical, Topic: name, Partitions: parts, Brokers: bs,
			Summary:  fmt.Sprintf("brokers serve %d partitions of %q that ZooKeeper does not assign: their metadata is stale", len(parts), name),
			Evidence: ev,
			Fix:      "only a restart clears a broker's stale partitions; if the topic was rewritten by hand, " + fmt.Sprintf(cleanupFix, name),
			DoNot:    "do not write those partitions back into the znode by hand", Runbook: "topic-cleanup"})
	}
}

// unregistered reports the brokers a topic's assignment (or a reassignment
// in progress) names that are not registered: not in the inventory (likely
// decommissioned: a reassignment fixes it) or in it but down (start it).
func (g *diagnosis) unregistered(name string, ts *kafkazk.TopicState, assign map[int32][]int32) {
	parts := map[int32][]int32{} // missing broker -> partitions
	for p, reps := range assign {
		key := strconv.Itoa(int(p))
		for _, r := range slices.Concat(reps, ts.Znode.AddingReplicas[key], ts.Znode.RemovingReplicas[key]) {
			if !slices.Contains(g.st.Brokers, r) && !slices.Contains(parts[r], p) {
				parts[r] = append(parts[r], p)
			}
		}
	}
	for _, id := range slices.Sorted(mapsKeys(parts)) {
		ps := parts[id]
		slices.Sort(ps)
		var ev []string
		for _, p := range ps {
			e := fmt.Sprintf("%s-%d: replicas %s", name, p, fmt.Sprint(assign[p]))
			key := strconv.Itoa(int(p))
			if a, r := ts.Znode.AddingReplicas[key], ts.Znode.RemovingReplicas[key]; len(a)+len(r) > 0 {
				e += fmt.Sprintf(", a reassignment in progress (adding %s, removing %s)", fmt.Sprint(a), fmt.Sprint(r))
			}
			ev = append(ev, e)
		}
		ev = append(ev, fmt.Sprintf("registered brokers %s", fmt.Sprint(g.st.Brokers)))
		f := Finding{Kind: FindUnregisteredReplica, Topic: name, Brokers: []int32{id}, Partitions: ps, Evidence: ev}
		if _, inInventory := g.c.Target.Host(id); inInventory {
			f.Severity = Warning
			f.Summary = fmt.Sprintf("broker %d holds replicas of %d partitions of %q and is in the inventory, but it is down (not registered)", id, len(ps), name)
			f.Fix = fmt.Sprintf("start broker %d again (its start command); its replicas catch up by themselves", id)
			f.DoNot = "do not reassign or clean up the topic because a broker is down"
		} else {
			f.Severity = Critical
			f.Summary = fmt.Sprintf("the assignment of %q names broker %d, which is neither registered nor in the inventory (likely decommissioned): those partitions have fewer copies than they claim", name, id)
			f.Fix = fmt.Sprintf(reassignFix, name, strings.Trim(strings.ReplaceAll(fmt.Sprint(g.st.Brokers), " ", ","), "[]")) +
				". A reassignment, a controller failover and the ZooKeeper → KRaft migration (which waits forever for every assigned broker to register) all stall on it"
			f.DoNot = "do not edit /brokers/topics/" + name + " by hand: a znode written without its topic_id gets a new one (INCONSISTENT_TOPIC_ID)"
		}
		g.add(f)
	}
}

// stateOutsideAssignment reports a state znode whose leader or ISR names a
// broker the partition's assignment does not.
func (g *diagnosis) stateOutsideAssignment(name string, ts *kafkazk.TopicState, assign map[int32][]int32) {
	var ps, bs []int32
	var ev []string
	for p, reps := range assign {
		zs, ok := ts.States[p]
		if !ok {
			continue
		}
		adding := ts.Znode.AddingReplicas[strconv.Itoa(int(p))]
		var out []int32
		for _, r := range append(slices.Clone(zs.ISR), zs.Leader) {
			if r >= 0 && !slices.Contains(reps, r) && !slices.Contains(adding, r) && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
		if len(out) > 0 {
			slices.Sort(out)
			ps, bs = append(ps, p), append(bs, out...)
			ev = append(ev, fmt.Sprintf("%s-%d: state leader %d isr %s, but the assignment is %s (brokers %s are not in it)", name, p, zs.Leader, fmt.Sprint(zs.ISR), fmt.Sprint(reps), fmt.Sprint(out)))
		}
	}
	if len(ps) == 0 {
		return
	}
	sort.Strings(ev)
	g.add(Finding{Kind: FindStateNotInAssignment, Severity: Warning, Topic: name, Partitions: ps, Brokers: bs,
		Summary:  fmt.Sprintf("%d partitions of %q have a leader or ISR outside their own assignment: the assignment was changed without a reassignment", len(ps), name),
		Evidence: ev,
		Fix:      "find who rewrote the assignment (a hand edit, an old tool); then either restore the assignment the ISR describes or move the partition with a reviewed reassignment (kafka-reassign-partitions), which makes the controller rewrite leader and ISR",
		DoNot:    "do not edit the state znode by hand"})
}

// ibpAtLeast reads an inter.broker.protocol.version ("2.8", "3.9-IV0",
// "2.8-IV1") and compares its major.minor.
func ibpAtLeast(v string, major, minor int) bool {
	v, _, _ = strings.Cut(v, "-")
	a, b, _ := strings.Cut(v, ".")
	ma, err1 := strconv.Atoi(a)
	mi, err2 := strconv.Atoi(strings.SplitN(b, ".", 2)[0])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func mapsKeys[V any](m map[int32]V) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
