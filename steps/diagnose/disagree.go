package diagnose

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// disagrees reports whether any broker's view differs from ZooKeeper's
// state: about the controller and live brokers, or about a topic's id,
// partitions, leaders, epochs or ISR.
func disagrees(st *kafkazk.ClusterState, views map[int32]ports.BrokerView) bool {
	for _, v := range views {
		if !agreesOnCluster(v, st) {
			return true
		}
	}
	for _, v := range views {
		for name, tv := range v.Topics {
			if ts := st.Topics[name]; tv.Present() && (ts == nil || !ts.Exists) {
				return true // a broker serves a topic ZooKeeper does not have
			}
		}
	}
	for name, ts := range st.Topics {
		if ts.HasZnode() && !ts.PendingDelete {
			for _, v := range views {
				if tv, ok := v.Topics[name]; !ok || tv.Gone() {
					return true // ZooKeeper has it, a broker does not serve it
				}
			}
		}
		if dis, _, _ := topicDisagreement(name, ts, views); len(dis) > 0 {
			return true
		}
		if toBrokers, toZK := partitionsUnknown(name, ts, views); len(toBrokers)+len(toZK) > 0 {
			return true
		}
	}
	return false
}

// agreesOnCluster: the broker names ZooKeeper's controller and exactly the
// registered brokers as live.
func agreesOnCluster(v ports.BrokerView, st *kafkazk.ClusterState) bool {
	return v.Controller == st.Controller && slices.Equal(v.Brokers, st.Brokers)
}

// topicDisagreement compares, partition by partition, what ZooKeeper
// says of a topic — its id, each partition's replicas, and the state
// znode's leader, leader epoch and ISR — with what each broker that serves
// the topic says, not only brokers with each other. Each difference is one
// line naming the field, ZooKeeper's value, and each value the brokers hold
// with the brokers that hold it. A partition some brokers know and others
// do not is a difference; one no broker knows, or only brokers know, is
// partitionsUnknown's. Nothing to compare while the topic has no znode or
// is being deleted (stale-metadata and stuck-deletion cover those).
func topicDisagreement(name string, ts *kafkazk.TopicState, views map[int32]ports.BrokerView) (dis []string, disB, disP []int32) {
	if !ts.HasZnode() || ts.PendingDelete {
		return nil, nil, nil
	}
	assign, err := ts.Znode.Assignment()
	if err != nil {
		return nil, nil, nil
	}
	serving := servingBrokers(name, views)
	var d differences
	// known: some serving broker knows partition p.
	known := func(p int32) bool {
		for _, id := range serving {
			if _, ok := views[id].Topics[name].Partitions[p]; ok {
				return true
			}
		}
		return false
	}
	for _, id := range serving {
		tv := views[id].Topics[name]
		if ts.Znode.TopicID != "" && tv.ID != "" && tv.ID != ts.Znode.TopicID {
			d.note(diffKey{-1, "topic id"}, ts.Znode.TopicID, tv.ID, id)
		}
		for p, reps := range assign {
			pv, ok := tv.Partitions[p]
			if !ok {
				if known(p) {
					d.note(diffKey{p, "partition"}, "assigns it", "do not know it", id)
				}
				continue
			}
			if !slices.Equal(pv.Replicas, reps) {
				d.note(diffKey{p, "replicas"}, fmt.Sprint(reps), fmt.Sprint(pv.Replicas), id)
			}
			zs, ok := ts.States[p]
			if !ok {
				continue
			}
			if pv.Leader != zs.Leader {
				d.note(diffKey{p, "leader"}, fmt.Sprint(zs.Leader), fmt.Sprint(pv.Leader), id)
			}
			if pv.LeaderEpoch != zs.LeaderEpoch {
				d.note(diffKey{p, "leader epoch"}, fmt.Sprint(zs.LeaderEpoch), fmt.Sprint(pv.LeaderEpoch), id)
			}
			if !sameIDs(pv.ISR, zs.ISR) {
				d.note(diffKey{p, "isr"}, fmt.Sprint(zs.ISR), fmt.Sprint(pv.ISR), id)
			}
		}
	}
	return d.lines(name), d.brokers, d.partitions
}

// diffKey is one field that differs: a partition's, or the topic's.
type diffKey struct {
	part  int32 // -1: the topic
	field string
}

// differences are what the brokers that serve a topic hold against
// ZooKeeper, field by field (topicDisagreement). Its maps are made on the
// first difference: a healthy topic allocates nothing (diagnose compares
// every partition of every broker, twice).
type differences struct {
	zk         map[diffKey]string
	held       map[diffKey]map[string][]int32 // value -> the brokers holding it
	brokers    []int32
	partitions []int32
}

// note records that broker id holds brokerVal where ZooKeeper holds zkVal.
func (d *differences) note(k diffKey, zkVal, brokerVal string, id int32) {
	if d.held == nil {
		d.zk, d.held = map[diffKey]string{}, map[diffKey]map[string][]int32{}
	}
	if d.held[k] == nil {
		d.held[k] = map[string][]int32{}
	}
	d.zk[k] = zkVal
	d.held[k][brokerVal] = append(d.held[k][brokerVal], id)
	d.brokers = append(d.brokers, id)
	if k.part >= 0 {
		d.partitions = append(d.partitions, k.part)
	}
}

// lines says each difference of topic name in one line, sorted: the field,
// ZooKeeper's value, and each value the brokers hold with the brokers that
// hold it.
func (d *differences) lines(name string) []string {
	var dis []string
	for k, vals := range d.held {
		what := name
		if k.part >= 0 {
			what = fmt.Sprintf("%s-%d", name, k.part)
		}
		var parts []string
		for _, v := range slices.Sorted(maps.Keys(vals)) {
			ids := vals[v]
			slices.Sort(ids)
			parts = append(parts, fmt.Sprintf("brokers %s %s", fmt.Sprint(ids), v))
		}
		dis = append(dis, fmt.Sprintf("%s %s: ZooKeeper %s; %s", what, k.field, d.zk[k], strings.Join(parts, "; ")))
	}
	sort.Strings(dis)
	return dis
}

// servingBrokers lists the brokers whose view has the topic, sorted.
func servingBrokers(name string, views map[int32]ports.BrokerView) []int32 {
	var out []int32
	for _, id := range sortedIDs(views) {
		if tv, ok := views[id].Topics[name]; ok && tv.Present() {
			out = append(out, id)
		}
	}
	return out
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) > 16 {
		return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
	}
	// Replica sets are small: sorted copies on the stack (called for every
	// partition and broker: at 10,000 partitions the allocations showed).
	var x, y [16]int32
	copy(x[:], a)
	copy(y[:], b)
	slices.Sort(x[:len(a)])
	slices.Sort(y[:len(b)])
	return x == y
}
