package brokers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// StopRisks lists the partitions that stopping broker id now would take
// offline or leave below min.insync.replicas (where acks=all producers
// fail), the way Strimzi's KafkaRoller and Cruise Control decide whether a
// broker can roll: for every partition ZooKeeper has, its in-sync replicas
// without id must still be at least the topic's min.insync.replicas (its
// /config/topics override, else defaultMinISR) and never none. Partitions
// already offline or already below are listed too: stopping any broker of
// a cluster in that state is not safe. Topics pending deletion are not
// counted (their partitions go offline by design). The result is sorted.
func StopRisks(st *kafkazk.ClusterState, id int32, defaultMinISR int) []string {
	var out []string
	for _, name := range st.Sorted() {
		ts := st.Topics[name]
		if ts.PendingDelete || !ts.Exists {
			continue
		}
		if !ts.HasZnode() {
			out = append(out, fmt.Sprintf("%s: its topic znode does not decode, so its partitions' in-sync replicas are unknown", name))
			continue
		}
		minISR := defaultMinISR
		if v, ok := ts.Config["min.insync.replicas"]; ok {
			if n, err := strconv.Atoi(v); err == nil {
				minISR = n
			}
		}
		assign, err := ts.Znode.Assignment()
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v, so its partitions' in-sync replicas are unknown", name, err))
			continue
		}
		parts := make([]int32, 0, len(assign))
		for p := range assign {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			s, ok := ts.States[p]
			key := fmt.Sprintf("%s-%d", name, p)
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s has no state znode: its leader and ISR are unknown", key))
			case s.Leader < 0:
				out = append(out, fmt.Sprintf("%s is already offline (no leader, isr %s)", key, I32s(s.ISR)))
			case slices.Contains(s.ISR, id) && len(s.ISR) == 1:
				out = append(out, fmt.Sprintf("%s would go offline: broker %d is its only in-sync replica", key, id))
			case slices.Contains(s.ISR, id) && len(s.ISR)-1 < minISR:
				out = append(out, fmt.Sprintf("%s would fall below min.insync.replicas=%d: isr %s without broker %d", key, minISR, I32s(s.ISR), id))
			case !slices.Contains(s.ISR, id) && len(s.ISR) < minISR:
				out = append(out, fmt.Sprintf("%s is already below min.insync.replicas=%d (isr %s)", key, minISR, I32s(s.ISR)))
			}
		}
	}
	return out
}

// Short lists the partitions ZooKeeper says are offline or under-replicated
// (fewer in-sync replicas than replicas), sorted; topics pending deletion
// are not counted. A rolling restart starts only from a cluster with none.
func Short(st *kafkazk.ClusterState) []string {
	var out []string
	for _, name := range st.Sorted() {
		ts := st.Topics[name]
		if !ts.HasZnode() || ts.PendingDelete {
			continue
		}
		assign, _ := ts.Znode.Assignment()
		for p, reps := range assign {
			s, ok := ts.States[p]
			switch {
			case !ok:
			case s.Leader < 0:
				out = append(out, fmt.Sprintf("%s-%d offline (isr %s)", name, p, I32s(s.ISR)))
			case len(s.ISR) < len(reps):
				out = append(out, fmt.Sprintf("%s-%d under-replicated (replicas %s, isr %s)", name, p, I32s(reps), I32s(s.ISR)))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Loss is what one broker's stop costs one topic: the partitions that
// lose an in-sync replica, those it leads (controlled shutdown moves their
// leadership first), and the fewest in-sync replicas any of them keeps
// against the topic's min.insync.replicas.
type Loss struct {
	Topic      string
	Partitions []int32
	Led        int
	Keeps      int // the smallest ISR left without the broker
	MinISR     int
}

func (l Loss) String() string {
	ps := make([]string, len(l.Partitions))
	for i, p := range l.Partitions {
		ps[i] = strconv.Itoa(int(p))
	}
	list := strings.Join(ps, ",")
	if len(ps) > 8 {
		list = strings.Join(ps[:8], ",") + fmt.Sprintf(",… (%d)", len(ps))
	}
	return fmt.Sprintf("%s [%s] leads %d, keeps isr ≥ %d (min.insync.replicas %d)", l.Topic, list, l.Led, l.Keeps, l.MinISR)
}

// Losses lists, by topic, the partitions (of topics not pending deletion)
// whose ISR holds broker id: what its stop costs the cluster.
func Losses(st *kafkazk.ClusterState, id int32, defaultMinISR int) []Loss {
	var out []Loss
	for _, name := range st.Sorted() {
		ts := st.Topics[name]
		if !ts.HasZnode() || ts.PendingDelete {
			continue
		}
		l := Loss{Topic: name, Keeps: -1, MinISR: defaultMinISR}
		if v, ok := ts.Config["min.insync.replicas"]; ok {
			if n, err := strconv.Atoi(v); err == nil {
				l.MinISR = n
			}
		}
		for p, s := range ts.States {
			if !slices.Contains(s.ISR, id) {
				continue
			}
			l.Partitions = append(l.Partitions, p)
			if s.Leader == id {
				l.Led++
			}
			if k := len(s.ISR) - 1; l.Keeps < 0 || k < l.Keeps {
				l.Keeps = k
			}
		}
		if len(l.Partitions) > 0 {
			slices.Sort(l.Partitions)
			out = append(out, l)
		}
	}
	return out
}

// aclProbe is the name of a znode that never exists: deleting it under a
// parent answers "no node" when the session may delete there and "not
// authenticated" when it may not — ZooKeeper checks the parent's ACL
// before the node's existence (PrepRequestProcessor, OpCode.delete), so
// the probe changes nothing either way.
const aclProbe = "kremedy-acl-probe-never-exists"

// MayDelete proves that this ZooKeeper session may delete children of
// each parent (with zookeeper.set.acl=true the brokers' znodes belong to
// their SASL identity): it returns the parents it may not delete under
// (full paths) and the first refusal.
func MayDelete(ctx context.Context, zk ports.ZooKeeper, parents []string) (denied []string, first, err error) {
	for _, parent := range parents {
		e := zk.Delete(ctx, parent+"/"+aclProbe, -1)
		switch {
		case e == nil || zk.IsNoNode(e):
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		default:
			denied = append(denied, zk.Chroot()+parent)
			if first == nil {
				first = e
			}
		}
	}
	return denied, first, nil
}
