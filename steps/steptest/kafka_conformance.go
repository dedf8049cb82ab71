package steptest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
)

// KafkaConformanceConfigs are the broker configs every broker of a
// KafkaConformance subject runs with. auto.create.topics.enable=true makes
// "asking about an unknown topic does not create it" prove the request's
// AllowAutoTopicCreation=false, not the brokers' setting.
var KafkaConformanceConfigs = map[string]string{
	"auto.create.topics.enable":     "true",
	"min.insync.replicas":           "2",
	"inter.broker.protocol.version": "3.9-IV0",
}

// KafkaSubject is one ports.Kafka under KafkaConformance: a fresh cluster of
// at least three running brokers and no topic, each broker started with
// KafkaConformanceConfigs, and the few hooks the suite needs that the port
// does not have.
type KafkaSubject struct {
	Kafka ports.Kafka
	// Addrs are the running brokers' listeners (host:port) by broker id.
	Addrs map[int32]string
	// Closed is an address (host:port) nothing listens at.
	Closed string
	// Produce writes plain records (no canary) to a partition.
	Produce func(ctx context.Context, topic string, partition int32, values ...string) error
	// DenyDescribe takes Describe on topic away from the principal Kafka
	// uses (a DENY ACL); topic need not exist.
	DenyDescribe func(ctx context.Context, topic string) error
	// Limits are the subtests (by their name under the suite, as "create
	// with an assignment/replicas as assigned") the cluster under this
	// subject cannot model, each with the reason, naming the limitation.
	// They are skipped for this subject only; the fake may have none. A
	// whole case may be named too ("a topic kremedy may not describe").
	Limits map[string]string

	// Prefix starts every topic and group name the suite makes or asks
	// about, and the suite reads a list of all topics as the ones with it:
	// a shared cluster (the lab) keeps its other topics, and each subtest
	// its own names. The subject removes what it made (t.Cleanup).
	Prefix string
	// Configs are the broker configs the suite checks (nil:
	// KafkaConformanceConfigs); a key left out is one the brokers do not
	// have (inter.broker.protocol.version from Kafka 4.0).
	Configs map[string]string
	// Settle, when set, is how long a created topic may take to reach every
	// broker with a leader and its whole ISR (a real cluster propagates
	// metadata asynchronously); the suite polls until then. Zero: at once.
	Settle time.Duration

	// The lab-only cases: what kfake cannot do, that the stop rule and
	// diagnose read. A case whose hook is nil is skipped, naming it.

	// StopBroker stops a running broker (its process, as the inventory's
	// stop does); StartBroker starts it again.
	StopBroker, StartBroker func(ctx context.Context, id int32) error
	// Controllers are the KRaft controllers' addresses (host:port) with
	// their node ids: Quorum must describe them. Nil: no KRaft quorum.
	Controllers map[int32]string
	// IdempotentProducer writes one record to a partition with an
	// idempotent producer and keeps it open until the returned close.
	IdempotentProducer func(ctx context.Context, topic string, partition int32) (close func(), err error)
	// CommitOffsets commits a consumer group's offsets on a topic (a group
	// with no member, as a stopped consumer's).
	CommitOffsets func(ctx context.Context, group, topic string, offsets map[int32]int64) error
	// LogDirs are each running broker's log directories (DescribeLogDirs).
	LogDirs map[int32][]string
	// ForgetTopic deletes a topic's metadata behind Kafka's back (ZooKeeper
	// mode: its znodes by hand, as `lab break stale-metadata` does), so
	// that every broker keeps it in a stale cache; restore puts it back as
	// it was, and the cluster is whole again. Nil: the subject cannot (a
	// KRaft cluster has no metadata to delete behind the controller).
	ForgetTopic func(ctx context.Context, topic string) (restore func(ctx context.Context) error, err error)
}

// KafkaConformance holds a ports.Kafka to the answers the step kinds and
// diagnose rely on, on a consistent cluster. steptest.Kafka passes it, and
// so must the franz-go adapter (steps/kafka) on franz-go's kfake: the unit
// tests' Kafka answers as Kafka does. Every subtest gets a fresh subject.
//
// It covers: one broker's metadata view of a topic created through the
// port (by partitions and replication factor, and by an assignment) —
// partitions, leader, replicas, ISR, topic ID, the brokers and the
// controller, alike on every broker; a topic no broker knows (Gone, and
// asking does not create it although the brokers would auto-create);
// the list of all topics; a topic the principal may not Describe
// (TOPIC_AUTHORIZATION_FAILED, existing or not, left out of the list);
// refused creations; a broker id nobody has; broker configs; Offsets and
// EndOffsets of an empty topic, after records, of a follower and of an
// unknown topic; OnlyCanaries over plain records; Listening; Releases of
// running brokers and of an unknown one; Quorum when no controller answers;
// DescribeCluster (the running brokers in order, unfenced, with host and
// port; a controller among them; a cluster id); a topic's own config
// override (and none for a topic that inherits); Features answered by every
// running broker, a broker nobody runs in its errors; eligible leader
// replicas (DescribeTopicPartitions) of a healthy topic: none.
//
// Its lab-only cases (labCases: the lab's real Kafka and the fake, skipped
// on kfake, which has no hook for them) cover a broker stopped (ISR,
// leader, offline replicas, under-replication, back in every ISR after its
// start), log dirs, an idempotent producer's state, a consumer group's
// committed offsets, a stale cache (a topic's znodes deleted behind
// Kafka's back, then written back: ZooKeeper mode) and the KRaft quorum;
// cmd/kremedy's labConformance
// runs them on Kafka 3.9.2 in ZooKeeper mode and on the KRaft lab.
//
// It does not cover, because one side cannot honestly do it:
//   - partitions offline or leaderless, leader epochs of partitions the
//     stopped broker did not lead, one broker's cache stale while the
//     others are not: real Kafka makes these only by faults, not on demand
//     on a shared lab; the fake models them from ZooKeeper's znodes and
//     Stale. kfake keeps ISR equal to the replicas.
//   - an assignment's exact brokers on kfake, which keeps only its
//     partition count and replication factor (its subject's Limits).
//   - which release a broker runs (Releases' Guess is only required to be
//     there): franz-go's kversion reads kfake's API table as "between v1.0
//     and v1.1"; the fake says what its Release field says.
//   - Quorum answered on kfake, which has no DescribeQuorum (a broker
//     answers it "too old"); the lab case holds the fake's KRaft field.
//   - Canary, FirstRecordTime, DeleteGroupOffsets, transactional
//     producers and groups with members: the fake counts canaries without
//     writing them, keeps no timestamps and answers GroupsOn and
//     ProducerOn as a test sets them; kfake lists only transactional
//     producers.
//   - TLS, SASL and which principal the adapter is: the subject's set-up.
func KafkaConformance(t *testing.T, subject func(t *testing.T) KafkaSubject) {
	known := map[string]bool{}
	run := func(name string, fn func(t *testing.T, c *conformant)) {
		t.Run(name, func(t *testing.T) {
			s := subject(t)
			for k := range s.Limits {
				if _, ok := known[k]; !ok {
					known[k] = false // true once a subtest skips it
				}
			}
			if why, ok := s.Limits[name]; ok {
				known[name] = true
				t.Skip(why)
			}
			if s.Configs == nil {
				s.Configs = KafkaConformanceConfigs
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+2*s.Settle)
			defer cancel()
			c := &conformant{KafkaSubject: s, ctx: ctx, brokers: slices.Sorted(maps.Keys(s.Addrs)), path: name, used: known}
			if len(c.brokers) < 3 {
				t.Fatalf("the subject runs brokers %v; the suite needs at least 3", c.brokers)
			}
			fn(t, c)
		})
	}
	for _, k := range kafkaCases {
		run(k.name, k.fn)
	}
	for _, k := range labCases {
		run(k.name, k.fn)
	}
	for k, used := range known {
		if !used {
			t.Errorf("the subject limits %q, which is no subtest of the suite", k)
		}
	}
}

// kafkaCases are the suite's cases, each run on a fresh subject.
var kafkaCases = []struct {
	name string
	fn   func(t *testing.T, c *conformant)
}{
	{"view of a created topic", func(t *testing.T, c *conformant) {
		id := c.create(t, c.n("orders"), nil, 3, 2)
		if raw, err := base64.RawURLEncoding.DecodeString(id); err != nil || len(raw) != 16 {
			t.Errorf("CreateTopic's topic id %q is not Kafka's 16 bytes in base64url (%v)", id, err)
		}
		var first *ports.BrokerView
		for _, b := range c.brokers {
			v := c.view(t, b, c.n("orders"))
			tv := v.Topics[c.n("orders")]
			if v.Broker != b || !slices.Equal(v.Brokers, c.brokers) || !slices.Contains(c.brokers, v.Controller) {
				t.Errorf("broker %d's view: broker %d, brokers %v, controller %d; want %d, %v, one of them", b, v.Broker, v.Brokers, v.Controller, b, c.brokers)
			}
			if !tv.Present() || tv.Gone() || tv.Unsure() != "" || tv.ID != id || tv.Name != c.n("orders") {
				t.Fatalf("broker %d: %+v; want orders present with id %s", b, tv, id)
			}
			c.partitions(t, b, tv, 3, 2)
			if first == nil {
				first = &v
			} else if d := sameTopics(*first, v, c.Controllers == nil); d != "" {
				t.Errorf("brokers %d and %d disagree on a consistent cluster: %s", first.Broker, b, d)
			}
		}
	}},
	{"create with an assignment", func(t *testing.T, c *conformant) {
		b := c.brokers
		assign := [][]int32{{b[0], b[1]}, {b[1], b[2]}, {b[2], b[0]}}
		c.create(t, c.n("placed"), assign, 0, 0)
		tv := c.view(t, b[1], c.n("placed")).Topics[c.n("placed")]
		if !tv.Present() {
			t.Fatalf("placed: %+v", tv)
		}
		c.partitions(t, b[1], tv, 3, 2)
		c.sub(t, "replicas as assigned", func(t *testing.T) {
			for p, reps := range assign {
				if got := tv.Partitions[int32(p)]; !slices.Equal(got.Replicas, reps) || got.Leader != reps[0] {
					t.Errorf("placed-%d: replicas %v leader %d; assigned %v (leader its first)", p, got.Replicas, got.Leader, reps)
				}
			}
		})
	}},
	{"refused creations", func(t *testing.T, c *conformant) {
		c.create(t, c.n("orders"), nil, 1, 1)
		if _, err := c.Kafka.CreateTopic(c.ctx, c.n("orders"), nil, 1, 1, nil); err == nil {
			t.Error("creating an existing topic succeeded; Kafka answers TOPIC_ALREADY_EXISTS")
		}
		if _, err := c.Kafka.CreateTopic(c.ctx, c.n("toobig"), nil, 1, int16(len(c.brokers)+1), nil); err == nil {
			t.Errorf("replication factor %d on %d brokers succeeded; Kafka answers INVALID_REPLICATION_FACTOR", len(c.brokers)+1, len(c.brokers))
		}
		if tv, ok := c.view(t, c.brokers[0]).Topics[c.n("toobig")]; ok {
			t.Errorf("a refused creation left a topic: %+v", tv)
		}
	}},
	{"unknown topic: gone, and not created by asking", func(t *testing.T, c *conformant) {
		for _, b := range c.brokers {
			if v, err := c.Kafka.BrokerConfig(c.ctx, b, "auto.create.topics.enable"); err != nil || v != c.Configs["auto.create.topics.enable"] {
				t.Fatalf("broker %d auto.create.topics.enable = %q %v; the subject must run KafkaConformanceConfigs", b, v, err)
			}
			tv, ok := c.view(t, b, c.n("nope")).Topics[c.n("nope")]
			if !ok || tv.Name != c.n("nope") || tv.Err != ports.KafkaUnknownTopicOrPartition || !tv.Gone() || tv.Present() || tv.Unsure() != "" || tv.ID != "" || len(tv.Partitions) != 0 {
				t.Errorf("broker %d about an unknown topic: %+v (in the answer: %v); want UNKNOWN_TOPIC_OR_PARTITION, gone", b, tv, ok)
			}
		}
		for _, b := range c.brokers {
			if tv, ok := c.view(t, b).Topics[c.n("nope")]; ok {
				t.Errorf("asking broker %d about an unknown topic created it: %+v", b, tv)
			}
		}
	}},
	{"all topics", func(t *testing.T, c *conformant) {
		ids := map[string]string{c.n("a"): c.create(t, c.n("a"), nil, 1, 3), c.n("b"): c.create(t, c.n("b"), nil, 2, 1)}
		for _, b := range c.brokers {
			v := c.view(t, b)
			if got := c.ours(v); !slices.Equal(got, []string{c.n("a"), c.n("b")}) {
				t.Errorf("broker %d lists %v, want [a b]", b, got)
			}
			for _, name := range c.ours(v) {
				tv := v.Topics[name]
				if !tv.Present() || tv.Name != name || tv.ID != ids[name] || len(tv.Partitions) == 0 {
					t.Errorf("broker %d lists %s as %+v", b, name, tv)
				}
			}
		}
	}},
	{"a topic kremedy may not describe", func(t *testing.T, c *conformant) {
		c.create(t, c.n("secret"), nil, 1, 1)
		c.create(t, c.n("open"), nil, 1, 1)
		for _, topic := range []string{c.n("secret"), c.n("hidden")} {
			if err := c.DenyDescribe(c.ctx, topic); err != nil {
				t.Fatalf("deny Describe on %s: %v", topic, err)
			}
		}
		for _, b := range c.brokers {
			v := c.view(t, b, c.n("secret"), c.n("hidden"), c.n("open"))
			for _, topic := range []string{c.n("secret"), c.n("hidden")} { // existing or not: Kafka does not say
				tv := v.Topics[topic]
				if tv.Err != ports.KafkaTopicAuthorizationFailed || tv.Present() || tv.Gone() || tv.ID != "" || len(tv.Partitions) != 0 ||
					!strings.Contains(tv.Unsure(), "Describe") {
					t.Errorf("broker %d about %s: %+v (%s); want TOPIC_AUTHORIZATION_FAILED, neither present nor gone", b, topic, tv, tv.Unsure())
				}
			}
			if !v.Topics[c.n("open")].Present() {
				t.Errorf("broker %d about open: %+v", b, v.Topics[c.n("open")])
			}
			if got := c.ours(c.view(t, b)); !slices.Equal(got, []string{c.n("open")}) {
				t.Errorf("broker %d lists %v; want [open]: Kafka leaves out what the principal may not Describe", b, got)
			}
		}
	}},
	{"a broker id nobody has", func(t *testing.T, c *conformant) {
		if v, err := c.Kafka.BrokerView(c.ctx, c.brokers[len(c.brokers)-1]+100, c.n("orders")); err == nil {
			t.Errorf("a view from a broker nobody runs: %+v", v)
		}
	}},
	{"broker configs", func(t *testing.T, c *conformant) {
		for _, b := range c.brokers {
			for _, key := range []string{"min.insync.replicas", "inter.broker.protocol.version"} {
				want, ok := c.Configs[key]
				if !ok {
					continue // not a config of this release
				}
				if v, err := c.Kafka.BrokerConfig(c.ctx, b, key); err != nil || v != want {
					t.Errorf("broker %d %s = %q %v, want %q", b, key, v, err, want)
				}
			}
			if v, err := c.Kafka.BrokerConfig(c.ctx, b, "kremedy.no.such.config"); !errors.Is(err, ports.ErrNoConfig) {
				t.Errorf("broker %d has kremedy.no.such.config = %q (%v), want an error wrapping ports.ErrNoConfig", b, v, err)
			}
		}
	}},
	{"offsets", func(t *testing.T, c *conformant) {
		c.create(t, c.n("log"), nil, 2, 2)
		tv := c.view(t, c.brokers[0], c.n("log")).Topics[c.n("log")]
		leader := map[int32]int32{}
		for p, pv := range tv.Partitions {
			leader[p] = pv.Leader
			if e, l, err := c.Kafka.Offsets(c.ctx, pv.Leader, c.n("log"), p); err != nil || e != 0 || l != 0 {
				t.Errorf("log-%d at its leader %d: %d %d %v, want 0 0 (empty)", p, pv.Leader, e, l, err)
			}
			for _, r := range pv.Replicas {
				if r == pv.Leader {
					continue
				}
				if e, l, err := c.Kafka.Offsets(c.ctx, r, c.n("log"), p); err == nil {
					t.Errorf("log-%d at follower %d: %d %d; Kafka answers NOT_LEADER_OR_FOLLOWER", p, r, e, l)
				}
			}
		}
		if _, _, err := c.Kafka.Offsets(c.ctx, leader[0], c.n("nope"), 0); err == nil {
			t.Error("offsets of an unknown topic: no error; Kafka answers UNKNOWN_TOPIC_OR_PARTITION")
		}
		if ends, err := c.Kafka.EndOffsets(c.ctx, c.n("log")); err != nil || !maps.Equal(ends, map[int32]int64{0: 0, 1: 0}) {
			t.Errorf("end offsets of an empty topic: %v %v, want every partition at 0", ends, err)
		}
		if only, err := c.Kafka.OnlyCanaries(c.ctx, c.n("log"), 1, 0, 0); err != nil || !only {
			t.Errorf("an empty range holds only canaries: %v %v", only, err)
		}
		if err := c.Produce(c.ctx, c.n("log"), 0, "a", "b"); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if e, l, err := c.Kafka.Offsets(c.ctx, leader[0], c.n("log"), 0); err != nil || e != 0 || l != 2 {
			t.Errorf("log-0 after 2 records: %d %d %v, want 0 2", e, l, err)
		}
		if ends, err := c.Kafka.EndOffsets(c.ctx, c.n("log")); err != nil || !maps.Equal(ends, map[int32]int64{0: 2, 1: 0}) {
			t.Errorf("end offsets after 2 records on log-0: %v %v", ends, err)
		}
		if only, err := c.Kafka.OnlyCanaries(c.ctx, c.n("log"), 0, 0, 2); err != nil || only {
			t.Errorf("plain records taken for canaries: %v %v", only, err)
		}
		if ends, err := c.Kafka.EndOffsets(c.ctx, c.n("nope")); !errors.Is(err, ports.ErrUnhosted) {
			t.Errorf("end offsets of an unknown topic: %v %v, want ports.ErrUnhosted", ends, err)
		}
	}},
	{"listening", func(t *testing.T, c *conformant) {
		for _, b := range c.brokers {
			if !c.Kafka.Listening(c.ctx, c.Addrs[b]) {
				t.Errorf("broker %d's listener %s: not listening", b, c.Addrs[b])
			}
		}
		if c.Kafka.Listening(c.ctx, c.Closed) {
			t.Errorf("%s: listening, but nothing listens there", c.Closed)
		}
	}},
	{"releases", func(t *testing.T, c *conformant) {
		unknown := c.brokers[len(c.brokers)-1] + 100
		ask := append(slices.Clone(c.brokers), unknown)
		got := c.Kafka.Releases(c.ctx, ask)
		if len(got) != len(ask) {
			t.Fatalf("%d answers for %d brokers: %+v", len(got), len(ask), got)
		}
		for i, r := range got {
			switch {
			case r.Broker != ask[i]:
				t.Errorf("answer %d is broker %d's, want %d's (in the order asked)", i, r.Broker, ask[i])
			case r.Broker == unknown && r.Err == "":
				t.Errorf("broker %d, which nobody runs, answered: %+v", unknown, r)
			case r.Broker != unknown && (r.Err != "" || r.Guess == "" || r.IBP != c.Configs["inter.broker.protocol.version"] || !r.DescribeProducers || !r.MetadataIDs || !r.Release30):
				t.Errorf("broker %d: %+v; want a 3.x or later release with every API, IBP %q", r.Broker, r, c.Configs["inter.broker.protocol.version"])
			}
		}
	}},
	{"quorum nobody answers", func(t *testing.T, c *conformant) {
		if q, err := c.Kafka.Quorum(c.ctx, []string{c.Closed}); err == nil {
			t.Errorf("a quorum from %s, where nothing listens: %+v", c.Closed, q)
		}
		if q, err := c.Kafka.Quorum(c.ctx, nil); err == nil {
			t.Errorf("a quorum from no controller: %+v", q)
		}
	}},
	{"describe cluster", func(t *testing.T, c *conformant) {
		v, err := c.Kafka.DescribeCluster(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for _, b := range v.Brokers {
			ids = append(ids, b.ID)
			if b.Fenced || b.Host == "" || b.Port <= 0 {
				t.Errorf("broker %+v: a running broker, unfenced, with its host and port", b)
			}
		}
		if !slices.Equal(ids, c.brokers) || !slices.Contains(c.brokers, v.Controller) || v.ClusterID == "" {
			t.Errorf("DescribeCluster %+v; want brokers %v in order, one of them controller, a cluster id", v, c.brokers)
		}
	}},
	{"topic overrides", func(t *testing.T, c *conformant) {
		if _, err := c.Kafka.CreateTopic(c.ctx, c.n("strict"), nil, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
			t.Fatal(err)
		}
		c.settle(t, c.n("strict"), func(pv ports.PartitionView) bool { return pv.Leader >= 0 })
		c.create(t, c.n("loose"), nil, 1, 3)
		got, err := c.Kafka.TopicOverrides(c.ctx, "min.insync.replicas", []string{c.n("strict"), c.n("loose")})
		if err != nil || len(got) != 1 || got[c.n("strict")] != "2" {
			t.Fatalf("overrides %v %v; want only strict's min.insync.replicas=2 (loose inherits the default)", got, err)
		}
		if got, err := c.Kafka.TopicOverrides(c.ctx, "min.insync.replicas", nil); err != nil || len(got) != 0 {
			t.Fatalf("no topics asked: %v %v", got, err)
		}
	}},
	{"eligible leaders", func(t *testing.T, c *conformant) {
		c.create(t, c.n("elr"), nil, 2, 3)
		got, err := c.Kafka.EligibleLeaders(c.ctx, []string{c.n("elr"), c.n("kremedy-no-such-topic")})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || len(got[c.n("elr")]) != 2 {
			t.Fatalf("ELRs %+v: want both partitions of elr, nothing of a topic that does not exist", got)
		}
		for p, e := range got[c.n("elr")] {
			if len(e.Eligible) != 0 {
				t.Errorf("elr-%d: ELR %v on a healthy partition (its ISR is whole)", p, e.Eligible)
			}
		}
	}},
	{"features", func(t *testing.T, c *conformant) {
		unknown := slices.Max(c.brokers) + 100
		f, err := c.Kafka.Features(c.ctx, append(slices.Clone(c.brokers), unknown))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range c.brokers {
			if _, ok := f.Supported[b]; !ok {
				t.Errorf("broker %d's supported features missing: %+v", b, f)
			}
		}
		if _, ok := f.Errs[unknown]; !ok {
			t.Errorf("broker %d, which nobody runs, is not in Errs: %+v", unknown, f)
		}
		if _, err := c.Kafka.Features(c.ctx, []int32{unknown}); err == nil {
			t.Error("features from no broker answering: no error")
		}
	}},
}

// conformant is one subtest's subject.
type conformant struct {
	KafkaSubject
	ctx     context.Context
	brokers []int32
	path    string
	used    map[string]bool
}

// sub runs a nested subtest, unless the subject names it in Limits.
func (c *conformant) sub(t *testing.T, name string, fn func(t *testing.T)) {
	t.Run(name, func(t *testing.T) {
		key := c.path + "/" + name
		if why, ok := c.Limits[key]; ok {
			c.used[key] = true
			t.Skip(why)
		}
		fn(t)
	})
}

func (c *conformant) create(t *testing.T, topic string, assignment [][]int32, partitions int32, rf int16) string {
	t.Helper()
	id, err := c.Kafka.CreateTopic(c.ctx, topic, assignment, partitions, rf, nil)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	c.settle(t, topic, func(pv ports.PartitionView) bool { return pv.Leader >= 0 && len(pv.ISR) == len(pv.Replicas) })
	return id
}

// n is a name of the suite's own on this subject.
func (c *conformant) n(name string) string { return c.Prefix + name }

// ours are the topics of a view the suite made on this subject, sorted.
func (c *conformant) ours(v ports.BrokerView) []string {
	var out []string
	for name := range v.Topics {
		if strings.HasPrefix(name, c.Prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// settle waits, up to the subject's Settle, until every running broker
// sees topic with each partition as ok says; it fails the test, saying
// what the brokers saw last, when they do not. Polling, not a sleep: it
// returns as soon as they do (at once on the fake and kfake).
func (c *conformant) settle(t *testing.T, topic string, ok func(ports.PartitionView) bool) {
	t.Helper()
	deadline := time.Now().Add(c.Settle)
	for {
		last := ""
		for _, b := range c.brokers {
			v, err := c.Kafka.BrokerView(c.ctx, b, topic)
			tv := v.Topics[topic]
			switch {
			case err != nil:
				last = fmt.Sprintf("broker %d: %v", b, err)
			case !tv.Present() || len(tv.Partitions) == 0:
				last = fmt.Sprintf("broker %d: %s is %+v", b, topic, tv)
			default:
				for _, pv := range tv.Partitions {
					if !ok(pv) {
						last = fmt.Sprintf("broker %d: %s-%d is %+v", b, topic, pv.Partition, pv)
						break
					}
				}
			}
			if last != "" {
				break
			}
		}
		if last == "" {
			return
		}
		if !time.Now().Before(deadline) || c.ctx.Err() != nil {
			t.Fatalf("%s did not settle in %v: %s", topic, c.Settle, last)
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *conformant) view(t *testing.T, broker int32, topics ...string) ports.BrokerView {
	t.Helper()
	v, err := c.Kafka.BrokerView(c.ctx, broker, topics...)
	if err != nil {
		t.Fatalf("broker %d's view of %v: %v", broker, topics, err)
	}
	return v
}

// partitions checks a healthy topic's partitions 0..n-1, rf replicas each.
func (c *conformant) partitions(t *testing.T, broker int32, tv ports.TopicView, n int, rf int) {
	t.Helper()
	if len(tv.Partitions) != n {
		t.Fatalf("broker %d: %s has %d partitions, want %d", broker, tv.Name, len(tv.Partitions), n)
	}
	for p := int32(0); p < int32(n); p++ {
		pv, ok := tv.Partitions[p]
		reps := slices.Sorted(slices.Values(pv.Replicas))
		isr := slices.Sorted(slices.Values(pv.ISR))
		if !ok || pv.Partition != p || pv.Err != ports.KafkaNone || len(pv.Replicas) != rf || len(slices.Compact(slices.Clone(reps))) != rf ||
			!slices.Contains(pv.Replicas, pv.Leader) || !slices.Equal(reps, isr) || len(pv.Offline) != 0 || pv.LeaderEpoch < 0 ||
			pv.IsOffline() || pv.UnderReplicated() {
			t.Errorf("broker %d: %s-%d is %+v; want %d distinct replicas, the leader among them, all in sync, none offline", broker, tv.Name, p, pv, rf)
		}
		for _, r := range pv.Replicas {
			if !slices.Contains(c.brokers, r) {
				t.Errorf("broker %d: %s-%d has replica %d, which is not one of the brokers %v", broker, tv.Name, p, r, c.brokers)
			}
		}
	}
}

// sameTopics says how two brokers' views of the topics differ, "" if not.
// A KRaft broker names a live broker picked at random as the controller in
// every Metadata answer (clients never reach the controllers): controller
// compares it only in ZooKeeper mode.
func sameTopics(a, b ports.BrokerView, controller bool) string {
	var d []string
	if (controller && a.Controller != b.Controller) || !slices.Equal(a.Brokers, b.Brokers) {
		d = append(d, "controller or brokers")
	}
	for name, ta := range a.Topics {
		tb := b.Topics[name]
		if ta.Err != tb.Err || ta.ID != tb.ID || len(ta.Partitions) != len(tb.Partitions) {
			d = append(d, name)
			continue
		}
		for p, pa := range ta.Partitions {
			pb := tb.Partitions[p]
			if pa.Leader != pb.Leader || pa.LeaderEpoch != pb.LeaderEpoch || !slices.Equal(pa.Replicas, pb.Replicas) || !slices.Equal(pa.ISR, pb.ISR) {
				d = append(d, fmt.Sprintf("%s-%d", name, p))
			}
		}
	}
	slices.Sort(d)
	return strings.Join(d, ", ")
}
