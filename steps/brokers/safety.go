package brokers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Partition is what the stop-safety rule reads of one partition, from
// whichever view the caller trusts in its mode: ZooKeeper's partition
// states (PartitionsOfState) or a broker's own Metadata answer
// (PartitionsOfView, the one view that holds in every phase of a ZooKeeper
// → KRaft migration).
type Partition struct {
	Topic     string
	Partition int32
	Replicas  []int32
	ISR       []int32
	Leader    int32 // -1: none
	// Unknown, when set, says why this partition's leader and ISR cannot
	// be read (a topic znode that does not decode, a missing state znode):
	// the rule cannot call any stop safe for it.
	Unknown string
}

// Key is the partition's name as Kafka's tools print it ("orders-0").
func (p Partition) Key() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// PartitionsOfState reads every partition of ZooKeeper's state for the
// rule, in topic and partition order. Topics pending deletion, and names
// without a topic znode, are left out: their partitions go offline by
// design. A topic whose znode does not decode is one Unknown entry.
func PartitionsOfState(st *kafkazk.ClusterState) []Partition {
	var out []Partition
	for _, name := range st.Sorted() {
		ts := st.Topics[name]
		if ts.PendingDelete || !ts.Exists {
			continue
		}
		if !ts.HasZnode() {
			out = append(out, Partition{Topic: name, Partition: -1, Leader: -1, Unknown: fmt.Sprintf("%s: its topic znode does not decode, so its partitions' in-sync replicas are unknown", name)})
			continue
		}
		assign, err := ts.Znode.Assignment()
		if err != nil {
			out = append(out, Partition{Topic: name, Partition: -1, Leader: -1, Unknown: fmt.Sprintf("%s: %v, so its partitions' in-sync replicas are unknown", name, err)})
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(assign)) {
			part := Partition{Topic: name, Partition: p, Replicas: assign[p], Leader: -1}
			if s, ok := ts.States[p]; ok {
				part.Leader, part.ISR = s.Leader, s.ISR
			} else {
				part.Unknown = fmt.Sprintf("%s has no state znode: its leader and ISR are unknown", part.Key())
			}
			out = append(out, part)
		}
	}
	return out
}

// PartitionsOfView reads every partition of one broker's Metadata answer
// for the rule, in topic and partition order. A replica Metadata calls
// offline (its broker fenced or down, its log dir failed) is out of the
// ISR already: the rule counts the ISR, and a partition is offline when it
// has no leader.
func PartitionsOfView(v ports.BrokerView) []Partition {
	var out []Partition
	for _, name := range slices.Sorted(maps.Keys(v.Topics)) {
		t := v.Topics[name]
		for _, p := range slices.Sorted(maps.Keys(t.Partitions)) {
			pv := t.Partitions[p]
			out = append(out, Partition{Topic: name, Partition: p, Replicas: pv.Replicas, ISR: pv.ISR, Leader: pv.Leader})
		}
	}
	return out
}

// MinISR is min.insync.replicas as the brokers apply it: a topic's own
// override, else the brokers' default. Every rule and finding that weighs
// in-sync replicas against it resolves it here (ReadMinISR).
type MinISR struct {
	Default int
	// Topics are the overrides that parse as numbers (an override that
	// does not is ignored by Kafka's config validation too: it cannot be
	// set through the admin API).
	Topics map[string]int
}

// Of is topic's min.insync.replicas.
func (m MinISR) Of(topic string) int {
	if n, ok := m.Topics[topic]; ok {
		return n
	}
	return m.Default
}

// ReadMinISR resolves min.insync.replicas: the default from the first
// broker of ask that reports its effective value (DescribeConfigs), the
// topics' overrides from overrides (topic → the override's text, from
// ZooKeeper's /config/topics: OverridesOf). No broker reporting it is an
// error (with the overrides read, and Default -1): kremedy does not guess
// what a stop would cost.
func ReadMinISR(ctx context.Context, k ports.Kafka, ask []int32, overrides map[string]string) (MinISR, error) {
	m := MinISR{Default: -1, Topics: map[string]int{}}
	var errs []string
	for _, b := range ask {
		v, err := k.BrokerConfig(ctx, b, "min.insync.replicas")
		if err == nil {
			if n, perr := strconv.Atoi(strings.TrimSpace(v)); perr == nil {
				m.Default = n
				break
			}
		}
		errs = append(errs, fmt.Sprintf("broker %d: %v %q", b, err, v))
	}
	for t, v := range overrides {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			m.Topics[t] = n
		}
	}
	if m.Default < 0 {
		return m, fmt.Errorf("%w: no broker reported its min.insync.replicas (%s), so kremedy cannot tell which stop is safe", ports.ErrRefused, strings.Join(errs, "; "))
	}
	return m, nil
}

// OverridesOf lists the topics' min.insync.replicas overrides in
// ZooKeeper's state (/config/topics).
func OverridesOf(st *kafkazk.ClusterState) map[string]string {
	out := map[string]string{}
	for name, ts := range st.Topics {
		if v, ok := ts.Config["min.insync.replicas"]; ok {
			out[name] = v
		}
	}
	return out
}

// StopRisks is the one stop-safety rule: it lists the partitions that
// stopping the brokers in stopping now would take offline or leave below
// min.insync.replicas (where acks=all producers fail), the way Strimzi's
// KafkaRoller (KafkaAvailability.canRoll) and Cruise Control decide whether
// a broker can roll: every partition's in-sync replicas without those
// brokers must still be at least its topic's min.insync.replicas and never
// none. Partitions already offline or already below, and partitions whose
// state is unknown, are listed too: stopping any broker of a cluster in that
// state is not safe. A partition no restart can keep available (Unavoidable)
// is not a risk of this stop but of its topic: Unavailables lists it, and
// the roll refuses it unless the operator accepts it (Accept). The
// min.insync.replicas judged is the topic's own, never capped at the
// replica count (a partition whose replicas are not above it is Unavoidable
// instead). The result is sorted.
func StopRisks(parts []Partition, stopping []int32, m MinISR) []string {
	var out []string
	name := func(ids []int32) string {
		if len(ids) == 1 {
			return fmt.Sprintf("broker %d", ids[0])
		}
		return "brokers " + fmt.Sprint(ids)
	}
	for _, p := range parts {
		if p.Unknown != "" {
			out = append(out, p.Unknown)
			continue
		}
		minISR := m.Of(p.Topic)
		if p.Leader >= 0 && Unavoidable(p, minISR) {
			continue // Unavailables lists it: no order of restarts helps
		}
		var hit, left []int32
		for _, r := range p.ISR {
			if slices.Contains(stopping, r) {
				hit = append(hit, r)
			} else {
				left = append(left, r)
			}
		}
		key := p.Key()
		switch {
		case p.Leader < 0:
			out = append(out, fmt.Sprintf("%s is already offline (no leader, isr %s)", key, fmt.Sprint(p.ISR)))
		case len(hit) > 0 && len(left) == 0 && len(hit) == 1:
			out = append(out, fmt.Sprintf("%s would go offline: broker %d is its only in-sync replica", key, hit[0]))
		case len(hit) > 0 && len(left) == 0:
			out = append(out, fmt.Sprintf("%s would go offline: %s are its only in-sync replicas", key, name(hit)))
		case len(hit) > 0 && len(left) < minISR:
			out = append(out, fmt.Sprintf("%s would fall below min.insync.replicas=%d: isr %s without %s", key, minISR, fmt.Sprint(p.ISR), name(hit)))
		case len(hit) == 0 && len(p.ISR) < minISR:
			out = append(out, fmt.Sprintf("%s is already below min.insync.replicas=%d (isr %s)", key, minISR, fmt.Sprint(p.ISR)))
		}
	}
	slices.Sort(out)
	return out
}

// Unavoidable reports whether no restart of a replica of p can keep it
// available: its replication factor is not above its min.insync.replicas
// (replication factor 1 included). While one of its in-sync replicas is down
// it is offline (none left) or refuses acks=all writes, whatever the order
// of the restarts. Strimzi's availability check does not let such a
// partition hold a roll back (KafkaAvailability: a partition whose replicas
// are not more than its min ISR); kremedy neither refuses it forever nor
// rolls it silently: the operator accepts it by topic (Accept).
func Unavoidable(p Partition, minISR int) bool {
	return p.Unknown == "" && len(p.Replicas) > 0 && len(p.Replicas) <= minISR
}

// Unavailable is a partition no restart can keep available, and what
// stopping the brokers of a stop does to it.
type Unavailable struct {
	Topic     string
	Partition int32
	Replicas  int
	MinISR    int
	// Offline: the stop leaves it no in-sync replica; otherwise it
	// refuses acks=all writes while the broker is down.
	Offline bool
}

// Key is the partition's name ("scratch-0").
func (u Unavailable) Key() string { return fmt.Sprintf("%s-%d", u.Topic, u.Partition) }

func (u Unavailable) String() string {
	what := "refuses acks=all writes"
	if u.Offline {
		what = "goes offline"
	}
	return fmt.Sprintf("%s %s while its broker is down (replication factor %d, min.insync.replicas %d)", u.Key(), what, u.Replicas, u.MinISR)
}

// Unavailables lists, in order, the partitions no restart can keep
// available (Unavoidable) that stopping the brokers in stopping takes out
// of service: one of their in-sync replicas stops. StopRisks leaves them
// out. A partition already offline is StopRisks' (it is a risk).
func Unavailables(parts []Partition, stopping []int32, m MinISR) []Unavailable {
	var out []Unavailable
	for _, p := range parts {
		minISR := m.Of(p.Topic)
		if p.Leader < 0 || !Unavoidable(p, minISR) {
			continue
		}
		left := 0
		hit := false
		for _, r := range p.ISR {
			if slices.Contains(stopping, r) {
				hit = true
			} else {
				left++
			}
		}
		if hit {
			out = append(out, Unavailable{Topic: p.Topic, Partition: p.Partition, Replicas: len(p.Replicas), MinISR: minISR, Offline: left == 0})
		}
	}
	return out
}

// Accept is the operator's acceptance of the partitions no restart can keep
// available, by topic: a runbook's accept_unavailable (topic names, or
// kafkazk.AllTopics for every topic the plan lists).
type Accept []string

// Covers reports whether the acceptance covers topic.
func (a Accept) Covers(topic string) bool {
	return slices.Contains(a, topic) || slices.Contains(a, kafkazk.AllTopics)
}

// All reports whether it covers every topic.
func (a Accept) All() bool { return slices.Contains(a, kafkazk.AllTopics) }

// Unlisted are the topics it names that listed does not hold: a typo, which
// must not silently accept nothing.
func (a Accept) Unlisted(listed []string) []string {
	var out []string
	for _, t := range a {
		if t != kafkazk.AllTopics && !slices.Contains(listed, t) {
			out = append(out, t)
		}
	}
	return out
}

// AcceptParam is the runbook parameter that accepts the partitions no
// restart can keep available (Accept).
const AcceptParam = "accept_unavailable"

// WayOut says how an operator gets past partitions no restart can keep
// available, of topics.
func WayOut(topics []string) string {
	return fmt.Sprintf("no order of restarts keeps a partition available whose replication factor is not above its min.insync.replicas: accept them for this run with --set %s=%s (or * for every such topic; the acceptance is part of the approved plan and the report), or first raise their replication factor with a reviewed reassignment (kafka-reassign-partitions), or lower the topic's min.insync.replicas (kafka-configs --alter --entity-type topics --entity-name TOPIC --add-config min.insync.replicas=N)", AcceptParam, strings.Join(topics, ","))
}

// Short lists the partitions that are offline or under-replicated (fewer
// in-sync replicas than replicas), sorted. A rolling restart starts only
// from a cluster with none.
func Short(parts []Partition) []string {
	var out []string
	for _, p := range parts {
		switch {
		case p.Unknown != "":
		case p.Leader < 0:
			out = append(out, fmt.Sprintf("%s offline (isr %s)", p.Key(), fmt.Sprint(p.ISR)))
		case len(p.ISR) < len(p.Replicas):
			out = append(out, fmt.Sprintf("%s under-replicated (replicas %s, isr %s)", p.Key(), fmt.Sprint(p.Replicas), fmt.Sprint(p.ISR)))
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

// Losses lists, by topic, the partitions whose ISR holds broker id: what
// its stop costs the cluster.
func Losses(parts []Partition, id int32, m MinISR) []Loss {
	var out []Loss
	var cur *Loss
	for _, p := range parts {
		if p.Unknown != "" || !slices.Contains(p.ISR, id) {
			continue
		}
		if cur == nil || cur.Topic != p.Topic {
			out = append(out, Loss{Topic: p.Topic, Keeps: -1, MinISR: m.Of(p.Topic)})
			cur = &out[len(out)-1]
		}
		cur.Partitions = append(cur.Partitions, p.Partition)
		if p.Leader == id {
			cur.Led++
		}
		if k := len(p.ISR) - 1; cur.Keeps < 0 || k < cur.Keeps {
			cur.Keeps = k
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
