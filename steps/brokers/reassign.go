package brokers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
)

// The replication throttle's configs, as kafka-reassign-partitions
// --throttle sets them (ReassignPartitionsCommand, KIP-73): a rate in
// bytes/s on each broker of the move, and on the topic the replicas it
// applies to ("partition:broker,…" or "*").
const (
	LeaderRate       = "leader.replication.throttled.rate"
	FollowerRate     = "follower.replication.throttled.rate"
	LeaderReplicas   = "leader.replication.throttled.replicas"
	FollowerReplicas = "follower.replication.throttled.replicas"
)

// BrokerThrottleKeys and TopicThrottleKeys are every throttle config.
var (
	BrokerThrottleKeys = []string{LeaderRate, FollowerRate}
	TopicThrottleKeys  = []string{LeaderReplicas, FollowerReplicas}
)

// SlowMove is how long a throttled move may still need, at its rate, and
// not count as stuck: beyond it the throttle is too low for the bytes left.
const SlowMove = 10 * time.Minute

// Moving is one reassignment in flight with what decides how to unstick
// it: who is live and in sync, the bytes left and the throttle.
type Moving struct {
	ports.Reassignment
	Leader int32   `json:"leader"`
	ISR    []int32 `json:"isr"`
	// Dead are the partition's replicas on brokers that are not live.
	Dead []int32 `json:"dead,omitempty"`
	// Left is how many bytes the slowest live adding replica still has to
	// copy from the leader (-1: unknown); Rate the throttle in bytes/s
	// that applies to it (0: none).
	Left int64 `json:"bytes_left"`
	Rate int64 `json:"rate"`
	// Why it is stuck ("" when it is not: it is moving).
	Why string `json:"why,omitempty"`
}

// TargetDead are the adding replicas on brokers that are not live.
func (m Moving) TargetDead() []int32 {
	var out []int32
	for _, b := range m.Adding {
		if slices.Contains(m.Dead, b) {
			out = append(out, b)
		}
	}
	return out
}

// OriginalInSync: every original replica is live and in the ISR — when
// cancelling the move is safe (KAFKA-14424: a cancel makes the original
// replicas the assignment again whatever their state, and a partition
// whose original replicas are out of sync is left under-replicated or
// leaderless).
func (m Moving) OriginalInSync() (bool, []int32) {
	var bad []int32
	for _, b := range m.Original() {
		if slices.Contains(m.Dead, b) || !slices.Contains(m.ISR, b) {
			bad = append(bad, b)
		}
	}
	return len(bad) == 0, bad
}

// Reassigning is the cluster's reassignments and throttles, read at once.
type Reassigning struct {
	Live  []int32  `json:"live"`
	Moves []Moving `json:"moves,omitempty"`
	// Throttles are every throttle config set: on the live brokers and
	// the cluster-wide default (asked over Kafka), on the topics, and in
	// ZooKeeper mode on the brokers that are down (their
	// /config/brokers/<id>, ZKVersion set).
	Throttles []Throttle `json:"throttles,omitempty"`
	// Leaderless are partitions without a leader ("topic-p").
	Leaderless []string `json:"leaderless,omitempty"`
	// Unread are KRaft brokers of the inventory that are down: a KRaft
	// broker describes only its own configs, so theirs cannot be read
	// (they can be deleted at the controllers, ports.ControllerConfigs).
	Unread []int32 `json:"unread,omitempty"`
}

// Throttle is one throttle config set on a broker or a topic.
type Throttle struct {
	ports.ConfigEntry
	// ZKVersion is the version of /config/brokers/<id> it was read from,
	// for a broker that is down (nil: read over Kafka).
	ZKVersion *int32 `json:"zk_version,omitempty"`
}

// ErrNoReassigner: the Kafka port cannot list reassignments.
var ErrNoReassigner = errors.New("the Kafka client cannot list reassignments")

// Reassigner is c's Kafka port's ability to reassign.
func Reassigner(c ports.Cluster) (ports.Reassigner, error) {
	r, ok := c.Kafka.(ports.Reassigner)
	if !ok {
		return nil, fmt.Errorf("%w (%T)", ErrNoReassigner, c.Kafka)
	}
	return r, nil
}

// ReadReassigning reads every reassignment in flight with its replicas'
// liveness and ISR, the bytes left and the throttle, and every throttle
// config, through the ports only.
func ReadReassigning(ctx context.Context, c ports.Cluster) (*Reassigning, error) {
	ra, err := Reassigner(c)
	if err != nil {
		return nil, err
	}
	cv, err := c.Kafka.DescribeCluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("describe cluster: %w", err)
	}
	r := &Reassigning{}
	for _, b := range cv.Brokers {
		if !b.Fenced {
			r.Live = append(r.Live, b.ID)
		}
	}
	slices.Sort(r.Live)
	if len(r.Live) == 0 {
		return nil, fmt.Errorf("%w: no broker is live", ports.ErrCheckFailed)
	}
	moves, err := ra.Reassignments(ctx)
	if err != nil {
		return nil, err
	}
	asked := r.Live[0]
	if slices.Contains(r.Live, cv.Controller) {
		asked = cv.Controller
	}
	view, err := c.Kafka.BrokerView(ctx, asked)
	if err != nil {
		return nil, err
	}
	r.leaderless(view)
	if err := r.throttles(ctx, c, ra, view); err != nil {
		return nil, err
	}
	for _, m := range moves {
		r.Moves = append(r.Moves, r.moving(m, view))
	}
	if err := r.progress(ctx, ra); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reassigning) leaderless(view ports.BrokerView) {
	for name, tv := range view.Topics {
		for p, pv := range tv.Partitions {
			if pv.IsOffline() {
				r.Leaderless = append(r.Leaderless, name+"-"+strconv.Itoa(int(p)))
			}
		}
	}
	slices.Sort(r.Leaderless)
}

func (r *Reassigning) moving(m ports.Reassignment, view ports.BrokerView) Moving {
	mv := Moving{Reassignment: m, Leader: -1, Left: -1}
	if pv, ok := view.Topics[m.Topic].Partitions[m.Partition]; ok {
		mv.Leader, mv.ISR = pv.Leader, pv.ISR
	}
	for _, b := range m.Replicas {
		if !slices.Contains(r.Live, b) {
			mv.Dead = append(mv.Dead, b)
		}
	}
	return mv
}

// throttles reads every throttle config: the live brokers' and the
// topics' over Kafka, the dead brokers' from ZooKeeper (ZooKeeper mode).
func (r *Reassigning) throttles(ctx context.Context, c ports.Cluster, ra ports.Reassigner, view ports.BrokerView) error {
	var topics []string
	for name, tv := range view.Topics {
		if tv.Present() {
			topics = append(topics, name)
		}
	}
	slices.Sort(topics)
	keys := append(slices.Clone(BrokerThrottleKeys), TopicThrottleKeys...)
	es, err := ra.Overrides(ctx, keys, r.Live, topics)
	if err != nil {
		return err
	}
	for _, e := range es {
		r.Throttles = append(r.Throttles, Throttle{ConfigEntry: e})
	}
	for _, h := range c.Target.Hosts {
		if slices.Contains(r.Live, h.ID) {
			continue
		}
		if c.ZK == nil {
			r.Unread = append(r.Unread, h.ID)
			continue
		}
		ts, err := ZKBrokerThrottles(ctx, c.ZK, h.ID)
		if err != nil {
			return err
		}
		r.Throttles = append(r.Throttles, ts...)
	}
	return nil
}

// BrokerConfigPath is where ZooKeeper keeps a broker's dynamic configs.
func BrokerConfigPath(id int32) string { return "/config/brokers/" + strconv.Itoa(int(id)) }

// BrokerConfigZNode is /config/brokers/<id>'s content.
type BrokerConfigZNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

// ZKBrokerThrottles are the throttle configs ZooKeeper keeps for broker id
// (a broker that is down loads them when it starts).
func ZKBrokerThrottles(ctx context.Context, zk ports.ZooKeeper, id int32) ([]Throttle, error) {
	b, st, err := zk.Get(ctx, BrokerConfigPath(id))
	if zk.IsNoNode(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", BrokerConfigPath(id), err)
	}
	var z BrokerConfigZNode
	if err := json.Unmarshal(b, &z); err != nil {
		return nil, fmt.Errorf("read %s: %w", BrokerConfigPath(id), err)
	}
	var out []Throttle
	for _, k := range BrokerThrottleKeys {
		if v, ok := z.Config[k]; ok {
			ver := st.Version
			out = append(out, Throttle{ConfigEntry: ports.ConfigEntry{Resource: ports.ResourceBroker, Name: strconv.Itoa(int(id)), Key: k, Value: v}, ZKVersion: &ver})
		}
	}
	return out, nil
}

// progress fills each move's bytes left, the throttle on it and why it is
// stuck: an adding replica on a broker that is down, or a throttle that
// would take longer than SlowMove for the bytes left.
func (r *Reassigning) progress(ctx context.Context, ra ports.Reassigner) error {
	sizes := map[int32]map[string]map[int32]int64{}
	size := func(b int32, t string, p int32) (int64, error) {
		if _, ok := sizes[b]; !ok {
			s, err := ra.ReplicaBytes(ctx, b, nil)
			if err != nil {
				return 0, err
			}
			sizes[b] = s
		}
		return sizes[b][t][p], nil
	}
	for i := range r.Moves {
		m := &r.Moves[i]
		if dead := m.TargetDead(); len(dead) > 0 {
			m.Why = fmt.Sprintf("target broker %s down: it cannot copy the partition, so the move can never complete", joinIDs(dead))
			continue
		}
		if m.Leader < 0 || !slices.Contains(r.Live, m.Leader) {
			m.Why = "the partition has no leader: no replica can copy from it"
			continue
		}
		lead, err := size(m.Leader, m.Topic, m.Partition)
		if err != nil {
			return err
		}
		for _, b := range m.Adding {
			if slices.Contains(m.ISR, b) {
				continue
			}
			have, err := size(b, m.Topic, m.Partition)
			if err != nil {
				return err
			}
			m.Left = max(m.Left, lead-have, 0)
			if rate := r.rate(m.Topic, m.Partition, m.Leader, b); rate > 0 && (m.Rate == 0 || rate < m.Rate) {
				m.Rate = rate
			}
		}
		if m.Rate > 0 && m.Left > 0 {
			if eta := time.Duration(m.Left/m.Rate) * time.Second; eta > SlowMove {
				m.Why = fmt.Sprintf("throttle too low: %d bytes left at %d bytes/s is about %s, more than %s", m.Left, m.Rate, eta.Round(time.Second), SlowMove)
			}
		}
	}
	return nil
}

// rate is the throttle on copying topic-p from leader to follower: the
// lower of the leader's leader rate and the follower's follower rate that
// the topic's throttled replicas apply to (0: none).
func (r *Reassigning) rate(topic string, p, leader, follower int32) int64 {
	var out int64
	for _, side := range []struct {
		broker        int32
		rate, replica string
	}{{leader, LeaderRate, LeaderReplicas}, {follower, FollowerRate, FollowerReplicas}} {
		if !ThrottledReplica(r.value(ports.ResourceTopic, topic, side.replica), p, side.broker) {
			continue
		}
		v := r.value(ports.ResourceBroker, strconv.Itoa(int(side.broker)), side.rate)
		if v == "" {
			v = r.value(ports.ResourceBroker, "", side.rate)
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 && (out == 0 || n < out) {
			out = n
		}
	}
	return out
}

func (r *Reassigning) value(resource, name, key string) string {
	for _, t := range r.Throttles {
		if t.Resource == resource && t.Name == name && t.Key == key {
			return t.Value
		}
	}
	return ""
}

// ThrottledReplica says whether a topic's *.throttled.replicas list
// ("*", or "partition:broker,…") names partition p on broker b.
func ThrottledReplica(list string, p, b int32) bool {
	if list == "*" {
		return true
	}
	want := strconv.Itoa(int(p)) + ":" + strconv.Itoa(int(b))
	for _, e := range strings.Split(list, ",") {
		if strings.TrimSpace(e) == want {
			return true
		}
	}
	return false
}

func joinIDs(ids []int32) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += strconv.Itoa(int(id))
	}
	return s
}
