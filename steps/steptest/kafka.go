package steptest

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Kafka fakes the cluster side. By default every running broker answers
// Metadata from the fake ZooKeeper (a consistent cluster); Stale overrides a
// broker's cached view of a topic, as a broker that missed updates has.
// KafkaConformance holds it, and the franz-go adapter on kfake, to the same
// answers.
type Kafka struct {
	t     testing.TB
	mu    sync.Mutex
	zk    *ZK
	hosts *Hosts
	// Stale[broker][topic] is what that broker caches instead of the truth.
	Stale map[int32]map[string]ports.TopicView
	// StaleReads, when positive, makes Stale last only that many Metadata
	// answers of each broker: a broker catching up, as after a leader move.
	StaleReads int
	answered   map[int32]int
	// Denied are topics kremedy's principal may not Describe (an ACL):
	// every broker answers TOPIC_AUTHORIZATION_FAILED for one asked by
	// name, whether it exists or not, leaves it out of the list of all
	// topics, and refuses to list its offsets, as Kafka does.
	Denied   []string
	GroupsOn []ports.GroupUse
	// GroupsErr is what Groups returns beside what it lists: groups it
	// could not read (ports.ErrGroupsIncomplete, a coordinator loading).
	GroupsErr  error
	ProducerOn []ports.ProducerUse
	// TieredUpTo[topic][partition] is a tiered topic's highest uploaded
	// offset (-1: none yet), as Tiered answers; a topic absent has no
	// tiered storage.
	TieredUpTo map[string]map[int32]int64
	// ProducersErr is what Producers returns beside ProducerOn: partitions
	// it could not ask about.
	ProducersErr error
	AutoCreate   string
	// Configs are every broker's other config values (min.insync.replicas,
	// delete.topic.enable); a key in neither is an error, as an unknown
	// config is.
	Configs map[string]string
	// KRaft is the metadata quorum Quorum describes (nil: none answers).
	KRaft *ports.Quorum
	// QuorumWedged: the quorum's leader appends nothing (a silent wedge);
	// otherwise each Quorum answer with a leader finds the log one record
	// further, as a live leader's no-ops make it.
	QuorumWedged bool
	// Fenced are brokers that run but are fenced (KRaft: registered with
	// the controllers, not serving); DescribeCluster says so.
	Fenced map[int32]bool
	// FeatureLevels are the cluster's finalized features, FeatureRange the
	// levels every running broker supports (Features).
	FeatureLevels map[string]int16
	FeatureRange  map[string][2]int16
	// ELRs are partitions' eligible leader replicas (EligibleLeaders);
	// NoELR makes the brokers a release without DescribeTopicPartitions.
	ELRs  map[string]map[int32]ports.ELR
	NoELR bool
	// Live, when set, is the brokers every Metadata answer lists instead
	// of ZooKeeper's registrations (KRaft brokers register with the
	// controllers, not in ZooKeeper).
	Live func() []int32
	// Created are the topics CreateTopic was asked for, refused ones too.
	Created  []string
	Canaries int
	Deleted  []string // group offsets deleted
	nextID   int
	// committed[topic][group] are offsets CommitOffsets committed;
	// idempotent[topic] the producers ProduceIdempotent started.
	committed  map[string]map[string]map[int32]int64
	idempotent map[string][]ports.ProducerUse
	nextPID    int64
	// logs[topic][partition] is each partition's [log start, log end),
	// moved by Produce.
	logs map[string]map[int32][2]int64
	// ZKDown are ZooKeeper servers (host:port of the connect string) that
	// refuse connections; the others accept them.
	ZKDown []string
	// Release is what every running broker says about its release; the
	// zero value is a 3.9 broker with every API.
	Release ports.BrokerRelease
	// Ends are partitions' log end offsets, of whichever topic is asked;
	// EndsFn, when set, is asked instead (a producer writing between two
	// reads). With neither, EndOffsets answers from the topic's
	// partitions and what Produce wrote.
	Ends   map[int32]int64
	EndsFn func() map[int32]int64
	// OfflineDirs[broker][dir] are log dirs DescribeLogDirs reports
	// offline; DeletedRecords the DeleteRecords requests, "t-p<offset"
	// (kafka_space.go).
	OfflineDirs    map[int32]map[string]bool
	DeletedRecords []string
	// DeleteRecordsTimeout: DeleteRecords moves the log starts, then
	// answers REQUEST_TIMED_OUT (kafka_space.go).
	DeleteRecordsTimeout bool
	// DirMoves are the AlterReplicaLogDirs requests,
	// "broker:topic-partition>dir" (kafka_space.go).
	DirMoves []string
}

// NewKafka fakes the cluster whose ZooKeeper and hosts are given.
func NewKafka(t testing.TB, zk *ZK, hosts *Hosts) *Kafka {
	return &Kafka{t: t, zk: zk, hosts: hosts, Stale: map[int32]map[string]ports.TopicView{}, AutoCreate: "false"}
}

func (k *Kafka) running(id int32) bool {
	k.hosts.mu.Lock()
	defer k.hosts.mu.Unlock()
	return k.hosts.Running[id]
}

// truth is topic t as ZooKeeper has it.
func (k *Kafka) truth(ctx context.Context, t string) ports.TopicView {
	b, _, err := k.zk.Get(ctx, kafkazk.TopicPath(t))
	if err != nil {
		return ports.TopicView{Name: t, Err: ports.KafkaUnknownTopicOrPartition}
	}
	var z kafkazk.TopicZNode
	_ = json.Unmarshal(b, &z)
	tv := ports.TopicView{Name: t, ID: z.TopicID, Partitions: map[int32]ports.PartitionView{}}
	as, _ := z.Assignment()
	for p, reps := range as {
		pv := ports.PartitionView{Partition: p, Leader: reps[0], Replicas: reps, ISR: reps}
		if b, _, err := k.zk.Get(ctx, kafkazk.PartitionStatePath(t, p)); err == nil {
			var st kafkazk.PartitionState
			if json.Unmarshal(b, &st) == nil {
				pv.Leader, pv.LeaderEpoch, pv.ISR = st.Leader, st.LeaderEpoch, st.ISR
			}
		}
		tv.Partitions[p] = pv
	}
	return tv
}

// BrokerView answers as broker id's metadata cache: ZooKeeper's truth, or
// what Stale makes it cache instead; a Denied topic is refused before
// either is looked at.
func (k *Kafka) BrokerView(ctx context.Context, id int32, topics ...string) (ports.BrokerView, error) {
	if !k.running(id) {
		return ports.BrokerView{}, fmt.Errorf("broker %d: connection refused", id)
	}
	var live []int32
	if k.Live != nil { // before k.mu: Live may look at the hosts
		live = k.Live()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	v := ports.BrokerView{Broker: id, Topics: map[string]ports.TopicView{}}
	v.Brokers, _ = registered(ctx, k.zk)
	if k.Live != nil {
		v.Brokers = live
	}
	if b, _, err := k.zk.Get(ctx, kafkazk.ControllerPath); err == nil {
		var c kafkazk.ControllerZNode
		_ = json.Unmarshal(b, &c)
		v.Controller = c.BrokerID
	}
	if k.answered == nil {
		k.answered = map[int32]int{}
	}
	k.answered[id]++
	stale := k.StaleReads <= 0 || k.answered[id] <= k.StaleReads
	all := len(topics) == 0
	if all {
		kids, _ := k.zk.Children(ctx, kafkazk.TopicsPath)
		topics = kids
		for t, tv := range k.Stale[id] {
			if stale && tv.Present() && !slices.Contains(topics, t) {
				topics = append(topics, t) // a topic only this broker's cache still has
			}
		}
	}
	for _, t := range topics {
		tv := k.view(ctx, id, t, stale)
		if _, cached := k.Stale[id][t]; !(cached && stale) {
			offline(tv, v.Brokers)
		}
		if all && !tv.Present() {
			continue // Kafka lists only the topics it knows and lets the principal see
		}
		v.Topics[t] = tv
	}
	return v, nil
}

// offline lists in each partition's Offline its replicas on brokers not
// live, as Kafka's Metadata does (offline_replicas: a stopped broker's
// replicas, not only a failed log dir's).
func offline(tv ports.TopicView, live []int32) {
	for p, pv := range tv.Partitions {
		pv.Offline = nil
		for _, r := range pv.Replicas {
			if !slices.Contains(live, r) {
				pv.Offline = append(pv.Offline, r)
			}
		}
		tv.Partitions[p] = pv
	}
}

// Deny takes Describe on the topics away from kremedy's principal (adds
// them to Denied), safely while a run asks the fake (from Hosts.OnStart).
func (k *Kafka) Deny(topics ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.Denied = append(k.Denied, topics...)
}

// Cache makes broker cache tv instead of the truth (Stale[broker][tv.Name]),
// safely while a run asks the fake (from Hosts.OnStart).
func (k *Kafka) Cache(broker int32, tv ports.TopicView) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.Stale[broker] == nil {
		k.Stale[broker] = map[string]ports.TopicView{}
	}
	k.Stale[broker][tv.Name] = tv
}

// Uncache ends broker's stale cache of topic (Cache): it answers the truth
// again.
func (k *Kafka) Uncache(broker int32, topic string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.Stale[broker], topic)
}

// view is broker id's answer about t; k.mu is held.
func (k *Kafka) view(ctx context.Context, id int32, t string, stale bool) ports.TopicView {
	if slices.Contains(k.Denied, t) {
		return ports.TopicView{Name: t, Err: ports.KafkaTopicAuthorizationFailed}
	}
	if s, ok := k.Stale[id][t]; ok && stale {
		return s
	}
	return k.truth(ctx, t)
}

func registered(ctx context.Context, zk *ZK) ([]int32, error) {
	kids, err := zk.Children(ctx, kafkazk.BrokerIDsPath)
	var ids []int32
	for _, c := range kids {
		var id int32
		fmt.Sscanf(c, "%d", &id)
		ids = append(ids, id)
	}
	return ids, err
}

// Groups answers GroupsOn, and the groups CommitOffsets committed on the
// topic (state Empty, no member), as Kafka lists a group with offsets.
func (k *Kafka) Groups(_ context.Context, topic string) ([]ports.GroupUse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := slices.Clone(k.GroupsOn)
	for _, g := range slices.Sorted(maps.Keys(k.committed[topic])) {
		out = append(out, ports.GroupUse{Group: g, State: "Empty", Offsets: maps.Clone(k.committed[topic][g])})
	}
	return out, k.GroupsErr
}

// CommitOffsets commits a group's offsets on a topic, as a consumer that
// then left does: Groups lists the group, Empty.
func (k *Kafka) CommitOffsets(_ context.Context, group, topic string, offsets map[int32]int64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.committed == nil {
		k.committed = map[string]map[string]map[int32]int64{}
	}
	if k.committed[topic] == nil {
		k.committed[topic] = map[string]map[int32]int64{}
	}
	if k.committed[topic][group] == nil {
		k.committed[topic][group] = map[int32]int64{}
	}
	maps.Copy(k.committed[topic][group], offsets)
	return nil
}

// Producers answers ProducerOn, and the producers ProduceIdempotent
// started on the partitions asked of the topic (as Kafka answers only
// for what it is asked).
func (k *Kafka) Producers(_ context.Context, topic string, partitions []int32, _ []int32) ([]ports.ProducerUse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := slices.Clone(k.ProducerOn)
	for _, p := range k.idempotent[topic] {
		if slices.Contains(partitions, p.Partition) {
			out = append(out, p)
		}
	}
	return out, k.ProducersErr
}

// ProduceIdempotent writes one record to a partition as an idempotent
// producer does: the partition's replicas then track the producer (a
// fresh producer id, its last write's time, no transaction) until it
// expires, which the fake never does.
func (k *Kafka) ProduceIdempotent(ctx context.Context, t string, p int32) error {
	if err := k.Produce(ctx, t, p, "idempotent"); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.idempotent == nil {
		k.idempotent = map[string][]ports.ProducerUse{}
	}
	k.nextPID++
	k.idempotent[t] = append(k.idempotent[t], ports.ProducerUse{Partition: p, ProducerID: 1000 + k.nextPID, LastTimestamp: time.Now(), TxnStart: -1})
	return nil
}

// StopBroker stops broker id and does what Kafka's controller does when a
// broker leaves: its registration goes, it leaves every ISR, and a
// partition it led gets the first of its in-sync replicas as leader with
// the leader epoch bumped (-1 with none left). Hosts' own stop only stops
// the process; tests that model the ISR by hand keep using it.
func (k *Kafka) StopBroker(ctx context.Context, id int32) error {
	k.hosts.mu.Lock()
	k.hosts.Running[id] = false
	k.hosts.mu.Unlock()
	k.zk.Remove(fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, id))
	return k.moveISR(ctx, func(st *kafkazk.PartitionState, _ []int32) {
		st.ISR = slices.DeleteFunc(st.ISR, func(r int32) bool { return r == id })
		if st.Leader == id {
			st.Leader = -1
			if len(st.ISR) > 0 {
				st.Leader = st.ISR[0]
			}
			st.LeaderEpoch++
		}
	})
}

// StartBroker starts broker id again: it registers and, caught up, joins
// the ISR of every partition it is a replica of (it does not take the
// leadership back: that is a preferred election's).
func (k *Kafka) StartBroker(ctx context.Context, id int32) error {
	b, ok := k.hosts.target.Host(id)
	if !ok {
		return fmt.Errorf("broker %d is not in the inventory", id)
	}
	k.hosts.mu.Lock()
	k.hosts.Running[id] = true
	k.hosts.register(b)
	k.hosts.mu.Unlock()
	return k.moveISR(ctx, func(st *kafkazk.PartitionState, replicas []int32) {
		if slices.Contains(replicas, id) && !slices.Contains(st.ISR, id) {
			st.ISR = append(st.ISR, id)
			if st.Leader < 0 {
				st.Leader = id
				st.LeaderEpoch++
			}
		}
	})
}

// moveISR rewrites every partition's state znode with change.
func (k *Kafka) moveISR(ctx context.Context, change func(st *kafkazk.PartitionState, replicas []int32)) error {
	topics, err := k.zk.Children(ctx, kafkazk.TopicsPath)
	if err != nil {
		return err
	}
	for _, t := range topics {
		for p, pv := range k.truth(ctx, t).Partitions {
			st := kafkazk.PartitionState{ControllerEpoch: 1, Leader: pv.Leader, LeaderEpoch: pv.LeaderEpoch, ISR: slices.Clone(pv.ISR), Version: 1}
			change(&st, pv.Replicas)
			b, err := json.Marshal(st)
			if err != nil {
				return err
			}
			k.zk.Put(kafkazk.PartitionStatePath(t, p), string(b))
		}
	}
	return nil
}

func (k *Kafka) BrokerConfig(_ context.Context, _ int32, key string) (string, error) {
	if key == "auto.create.topics.enable" {
		return k.AutoCreate, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if v, ok := k.Configs[key]; ok {
		return v, nil
	}
	return "", fmt.Errorf("unknown config %s: %w", key, ports.ErrNoConfig)
}

// CreateTopic writes the topic's znode and its partitions' state znodes
// like the controller would: the assignment given, else partitions
// partitions of rf replicas placed round-robin on the registered brokers;
// each partition led by its first live replica, every live replica in
// sync. It refuses what Kafka refuses: an invalid name, an existing topic,
// no partition, a replication factor above the brokers registered or below
// one (the fake has no broker defaults for -1), an assignment naming a
// broker twice in a partition or a partition with no replica.
func (k *Kafka) CreateTopic(ctx context.Context, t string, assignment [][]int32, partitions int32, rf int16, configs map[string]string) (string, error) {
	k.mu.Lock()
	k.Created = append(k.Created, t)
	k.mu.Unlock()
	refuse := func(code, why string) (string, error) {
		return "", fmt.Errorf("create topic %s: %s: %s", t, code, why)
	}
	if err := kafkazk.ValidateTopic(t); err != nil {
		return refuse("INVALID_TOPIC_EXCEPTION", err.Error())
	}
	if ok, _, _ := k.zk.Exists(ctx, kafkazk.TopicPath(t)); ok {
		return refuse("TOPIC_ALREADY_EXISTS", fmt.Sprintf("Topic '%s' already exists.", t))
	}
	ids, _ := registered(ctx, k.zk)
	as := assignment
	if len(as) == 0 {
		switch {
		case partitions < 1:
			return refuse("INVALID_PARTITIONS", fmt.Sprintf("Number of partitions must be larger than 0: %d", partitions))
		case rf < 1 || int(rf) > len(ids):
			return refuse("INVALID_REPLICATION_FACTOR", fmt.Sprintf("replication factor %d: the cluster has %d registered brokers", rf, len(ids)))
		}
		for p := 0; p < int(partitions); p++ {
			var reps []int32
			for i := 0; i < int(rf); i++ {
				reps = append(reps, ids[(p+i)%len(ids)])
			}
			as = append(as, reps)
		}
	}
	for p, reps := range as {
		if len(reps) == 0 || len(slices.Compact(slices.Sorted(slices.Values(reps)))) != len(reps) {
			return refuse("INVALID_REPLICA_ASSIGNMENT", fmt.Sprintf("partition %d: replicas %v", p, reps))
		}
	}
	k.mu.Lock()
	k.nextID++
	var raw [16]byte
	raw[0] = 0x6b // 'k': a fake's id, 16 bytes like Kafka's
	binary.BigEndian.PutUint64(raw[8:], uint64(k.nextID))
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	k.mu.Unlock()
	parts := map[string][]int32{}
	for p, reps := range as {
		parts[fmt.Sprint(p)] = reps
	}
	b, _ := json.Marshal(kafkazk.TopicZNode{Version: 3, Partitions: parts, TopicID: id})
	k.zk.Put(kafkazk.TopicPath(t), string(b))
	if len(configs) > 0 {
		cb, _ := json.Marshal(struct {
			Version int               `json:"version"`
			Config  map[string]string `json:"config"`
		}{1, configs})
		k.zk.Put(kafkazk.ConfigTopicPath(t), string(cb))
	}
	for p, reps := range as {
		st := kafkazk.PartitionState{Leader: -1, Version: 1, ISR: []int32{}}
		for _, r := range reps {
			if slices.Contains(ids, r) {
				if st.Leader < 0 {
					st.Leader = r
				}
				st.ISR = append(st.ISR, r)
			}
		}
		sb, _ := json.Marshal(st)
		k.zk.Put(kafkazk.PartitionStatePath(t, int32(p)), string(sb))
	}
	return id, nil
}

// Offsets answers as the partition's leader does, from ZooKeeper's truth
// and what Produce wrote: an unknown topic or partition is
// UNKNOWN_TOPIC_OR_PARTITION, a broker that does not lead it answers
// NOT_LEADER_OR_FOLLOWER, a Denied topic TOPIC_AUTHORIZATION_FAILED.
func (k *Kafka) Offsets(ctx context.Context, id int32, t string, p int32) (int64, int64, error) {
	if !k.running(id) {
		return -1, -1, fmt.Errorf("list offsets %s-%d on broker %d: connection refused", t, p, id)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	fail := func(e ports.KafkaErr) (int64, int64, error) {
		return -1, -1, fmt.Errorf("list offsets %s-%d on broker %d: %s", t, p, id, e)
	}
	if slices.Contains(k.Denied, t) {
		return fail(ports.KafkaTopicAuthorizationFailed)
	}
	tv := k.truth(ctx, t)
	pv, ok := tv.Partitions[p]
	switch {
	case !tv.Present() || !ok:
		return fail(ports.KafkaUnknownTopicOrPartition)
	case pv.Leader != id:
		return fail(ports.KafkaNotLeaderOrFollower)
	}
	span := k.logs[t][p]
	return span[0], span[1], nil
}

// Produce appends records to a partition of an existing topic. The fake
// keeps only how many: Offsets and EndOffsets answer with it.
func (k *Kafka) Produce(ctx context.Context, t string, p int32, values ...string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.truth(ctx, t).Partitions[p]; !ok {
		return fmt.Errorf("produce to %s-%d: %s", t, p, ports.KafkaUnknownTopicOrPartition)
	}
	if k.logs == nil {
		k.logs = map[string]map[int32][2]int64{}
	}
	if k.logs[t] == nil {
		k.logs[t] = map[int32][2]int64{}
	}
	span := k.logs[t][p]
	span[1] += int64(len(values))
	k.logs[t][p] = span
	return nil
}

func (k *Kafka) Canary(context.Context, string, int32, string) (ports.CanaryResult, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.Canaries++
	return ports.CanaryResult{}, nil
}

// OnlyCanaries: an empty range holds only canaries; the fake's canaries
// leave no record, so any record is another (one Produce wrote).
func (k *Kafka) OnlyCanaries(_ context.Context, _ string, _ int32, from, to int64) (bool, error) {
	return from >= to, nil
}

func (k *Kafka) DeleteGroupOffsets(_ context.Context, group, topic string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.Deleted = append(k.Deleted, group+"/"+topic)
	return nil
}

// LogDirs answers a running broker's log dirs as the inventory lists them
// (DescribeLogDirs), sorted; a broker that does not run does not answer.
func (k *Kafka) LogDirs(_ context.Context, id int32) ([]string, error) {
	h, ok := k.hosts.target.Host(id)
	if !ok || !k.running(id) {
		return nil, fmt.Errorf("log dirs of broker %d: connection refused", id)
	}
	return slices.Sorted(slices.Values(h.LogDirs)), nil
}

func (k *Kafka) FirstRecordTime(context.Context, string, int32) (time.Time, bool, error) {
	return time.Time{}, false, nil
}

// Listening is true for a running broker's address (host:9092).
func (k *Kafka) Listening(_ context.Context, addr string) bool {
	if servers, _, err := kafkazk.ParseConnect(k.hosts.target.ZKConnect); err == nil && slices.Contains(servers, addr) {
		return !slices.Contains(k.ZKDown, addr)
	}
	for _, h := range k.hosts.target.Hosts {
		if strings.HasPrefix(addr, h.Host+":") {
			return k.running(h.ID)
		}
	}
	for _, c := range k.hosts.target.Controllers {
		if addr == c.Addr {
			return k.running(c.ID)
		}
	}
	return false
}

var _ ports.Kafka = (*Kafka)(nil)

// Quorum answers with k.KRaft from the first of addrs whose controller
// runs, or fails as a quorum no controller of which listens.
func (k *Kafka) Quorum(ctx context.Context, addrs []string) (ports.Quorum, error) {
	asked := ""
	for _, a := range addrs {
		if k.Listening(ctx, a) {
			asked = a
			break
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.KRaft == nil || asked == "" {
		return ports.Quorum{}, fmt.Errorf("no KRaft controller answered at %v", addrs)
	}
	q := *k.KRaft
	q.Voters = slices.Clone(q.Voters)
	q.AskedAt = asked
	if q.Leader >= 0 && !k.QuorumWedged {
		// A live leader appends (a no-op at least every 500 ms): the
		// next answer's high watermark is further, and so are the
		// voters that were caught up.
		k.KRaft.HighWatermark++
		k.KRaft.Voters = slices.Clone(k.KRaft.Voters)
		for i, v := range k.KRaft.Voters {
			if v.LogEndOffset == q.HighWatermark {
				k.KRaft.Voters[i].LogEndOffset++
			}
		}
	}
	return q, nil
}

// AddVoter adds v to the quorum as a voter when the controller at addr
// runs and leads, as Kafka's leader does once v has caught up as an
// observer (it keeps v's log end): NOT_LEADER_OR_FOLLOWER otherwise.
func (k *Kafka) AddVoter(ctx context.Context, addr string, v ports.NewVoter) error {
	running := k.Listening(ctx, addr)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.KRaft == nil || !running || k.KRaft.Leader < 0 {
		return fmt.Errorf("AddRaftVoter %d at %s: NOT_LEADER_OR_FOLLOWER", v.ID, addr)
	}
	end := int64(-1)
	var observers []ports.Voter
	for _, o := range k.KRaft.Observers {
		if o.ID == v.ID {
			end = o.LogEndOffset
			continue
		}
		observers = append(observers, o)
	}
	if end < 0 {
		return fmt.Errorf("AddRaftVoter %d at %s: REQUEST_TIMED_OUT: not an observer of the leader", v.ID, addr)
	}
	k.KRaft.Observers = observers
	k.KRaft.Voters = append(slices.Clone(k.KRaft.Voters), ports.Voter{ID: v.ID, DirID: v.DirID, LogEndOffset: end})
	return nil
}

// RemoveVoter removes voter id (of directory dirID) when the controller
// at addr runs and leads; it becomes an observer while it fetches.
func (k *Kafka) RemoveVoter(ctx context.Context, addr string, id int32, dirID string) error {
	running := k.Listening(ctx, addr)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.KRaft == nil || !running || k.KRaft.Leader < 0 {
		return fmt.Errorf("RemoveRaftVoter %d at %s: NOT_LEADER_OR_FOLLOWER", id, addr)
	}
	i := slices.IndexFunc(k.KRaft.Voters, func(v ports.Voter) bool { return v.ID == id && v.DirID == dirID })
	if i < 0 {
		return fmt.Errorf("RemoveRaftVoter %d at %s: VOTER_NOT_FOUND", id, addr)
	}
	v := k.KRaft.Voters[i]
	k.KRaft.Voters = slices.Delete(slices.Clone(k.KRaft.Voters), i, i+1)
	k.KRaft.Observers = append(slices.Clone(k.KRaft.Observers), v)
	return nil
}

// UpgradeFeature raises k.FeatureLevels[feature] to level when the
// controller at addr runs and the quorum has a leader.
func (k *Kafka) UpgradeFeature(ctx context.Context, addr, feature string, level int16) error {
	running := k.Listening(ctx, addr)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.KRaft == nil || !running || k.KRaft.Leader < 0 {
		return fmt.Errorf("UpdateFeatures %s=%d at %s: NOT_CONTROLLER", feature, level, addr)
	}
	if k.FeatureLevels == nil {
		k.FeatureLevels = map[string]int16{}
	}
	if k.FeatureLevels[feature] > level {
		return fmt.Errorf("UpdateFeatures %s=%d at %s: INVALID_UPDATE_VERSION: a downgrade", feature, level, addr)
	}
	k.FeatureLevels[feature] = level
	return nil
}

// SetQuorum changes the metadata quorum Quorum describes (nil: none).
func (k *Kafka) SetQuorum(q *ports.Quorum) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.KRaft = q
}

// Releases answers for every running broker with k.Release (a 3.9 broker
// with every API when it is the zero value).
func (k *Kafka) Releases(_ context.Context, ids []int32) []ports.BrokerRelease {
	var out []ports.BrokerRelease
	for _, id := range ids {
		r := k.Release
		if r == (ports.BrokerRelease{}) {
			r = ports.BrokerRelease{Guess: "v3.9", IBP: "3.9-IV0", DescribeProducers: true, MetadataIDs: true, Release30: true}
		}
		r.Broker = id
		if !k.running(id) {
			r = ports.BrokerRelease{Broker: id, Err: "ApiVersions: connection refused"}
		}
		out = append(out, r)
	}
	return out
}

// EndOffsets returns EndsFn's answer, or Ends; with neither, every
// partition's log end from its leader, as Kafka does: a topic no broker
// knows wraps ports.ErrUnhosted, a partition whose leader does not run is
// absent (LEADER_NOT_AVAILABLE), a Denied topic is refused.
func (k *Kafka) EndOffsets(ctx context.Context, t string) (map[int32]int64, error) {
	k.mu.Lock()
	if k.EndsFn != nil {
		defer k.mu.Unlock()
		return k.EndsFn(), nil
	}
	if k.Ends != nil {
		defer k.mu.Unlock()
		return maps.Clone(k.Ends), nil
	}
	denied := slices.Contains(k.Denied, t)
	tv := k.truth(ctx, t)
	ends := maps.Clone(k.logs[t])
	k.mu.Unlock()
	switch {
	case denied:
		return nil, fmt.Errorf("end offsets of %s: %s", t, ports.KafkaTopicAuthorizationFailed)
	case !tv.Present():
		return nil, fmt.Errorf("%s: %w (no broker's metadata has it)", t, ports.ErrUnhosted)
	}
	out := map[int32]int64{}
	var errs []error
	for p, pv := range tv.Partitions {
		if pv.Leader < 0 || !k.running(pv.Leader) {
			errs = append(errs, fmt.Errorf("%s-%d: %s", t, p, ports.KafkaLeaderNotAvailable))
			continue
		}
		out[p] = ends[p][1]
	}
	return out, errors.Join(errs...)
}

// DescribeCluster answers from the fake ZooKeeper's /cluster/id and
// /controller and the running brokers (Live, else the registered ones),
// fenced ones marked.
func (k *Kafka) DescribeCluster(ctx context.Context) (ports.ClusterView, error) {
	var live []int32
	if k.Live != nil {
		live = k.Live()
	} else {
		live, _ = registered(ctx, k.zk)
	}
	if len(live) == 0 {
		return ports.ClusterView{}, fmt.Errorf("describe cluster: no broker answered")
	}
	v := ports.ClusterView{Controller: -1, FencedKnown: true}
	if b, _, err := k.zk.Get(ctx, kafkazk.ClusterIDPath); err == nil {
		v.ClusterID = kafkazk.ClusterID(b)
	}
	if b, _, err := k.zk.Get(ctx, kafkazk.ControllerPath); err == nil {
		var c kafkazk.ControllerZNode
		if json.Unmarshal(b, &c) == nil {
			v.Controller = c.BrokerID
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range slices.Sorted(slices.Values(live)) {
		h, _ := k.hosts.target.Host(id)
		v.Brokers = append(v.Brokers, ports.BrokerNode{ID: id, Host: h.Host, Port: 9092, Fenced: k.Fenced[id]})
	}
	return v, nil
}

// Features answers FeatureLevels and, for every running broker of ids,
// FeatureRange; a broker that does not run is in Errs.
func (k *Kafka) Features(_ context.Context, ids []int32) (ports.Features, error) {
	f := ports.Features{Finalized: map[string]int16{}, Supported: map[int32]map[string][2]int16{}, Errs: map[int32]string{}}
	for _, id := range ids {
		if !k.running(id) {
			f.Errs[id] = "connection refused"
			continue
		}
		k.mu.Lock()
		f.Supported[id] = maps.Clone(k.FeatureRange)
		if f.Supported[id] == nil {
			f.Supported[id] = map[string][2]int16{}
		}
		k.mu.Unlock()
	}
	k.mu.Lock()
	maps.Copy(f.Finalized, k.FeatureLevels)
	k.mu.Unlock()
	if len(f.Supported) == 0 && len(ids) > 0 {
		return f, fmt.Errorf("no broker answered ApiVersions: %v", f.Errs)
	}
	return f, nil
}

// TopicOverrides reads the topics' /config/topics znodes.
func (k *Kafka) TopicOverrides(ctx context.Context, key string, topics []string) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range topics {
		b, _, err := k.zk.Get(ctx, kafkazk.ConfigTopicPath(t))
		if err != nil {
			continue
		}
		var c struct {
			Config map[string]string `json:"config"`
		}
		if json.Unmarshal(b, &c) == nil {
			if v, ok := c.Config[key]; ok {
				out[t] = v
			}
		}
	}
	return out, nil
}

// EligibleLeaders answers ELRs for the topics that exist, every partition
// (empty when the test set none); NoELR is a release without it.
func (k *Kafka) EligibleLeaders(ctx context.Context, topics []string) (map[string]map[int32]ports.ELR, error) {
	if k.NoELR {
		return nil, fmt.Errorf("DescribeTopicPartitions: %w", ports.ErrUnsupported)
	}
	out := map[string]map[int32]ports.ELR{}
	for _, t := range topics {
		tv := k.truth(ctx, t)
		if !tv.Present() {
			continue
		}
		m := map[int32]ports.ELR{}
		k.mu.Lock()
		for p := range tv.Partitions {
			m[p] = k.ELRs[t][p]
		}
		k.mu.Unlock()
		out[t] = m
	}
	return out, nil
}

var _ ports.Tiered = (*Kafka)(nil)

// Tiered answers TieredUpTo for the topics asked.
func (k *Kafka) Tiered(_ context.Context, topics []string) (map[string]map[int32]int64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]map[int32]int64{}
	for _, t := range topics {
		if ps, ok := k.TieredUpTo[t]; ok {
			out[t] = maps.Clone(ps)
		}
	}
	return out, nil
}
