package steptest

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
)

// labCases are what KafkaConformance's kfake leaves out and the stop rule
// and diagnose read: they run on the lab's real Kafka and on the fake,
// each needing a hook of the subject (a case whose hook is nil skips,
// naming it).
var labCases = []struct {
	name string
	fn   func(t *testing.T, c *conformant)
}{
	{"lab: ISR after a broker stops", func(t *testing.T, c *conformant) {
		if c.StopBroker == nil || c.StartBroker == nil {
			t.Skip("the subject cannot stop a broker (StopBroker, StartBroker)")
		}
		topic := c.n("isr")
		c.create(t, topic, nil, 3, 3)
		before := c.view(t, c.brokers[0], topic).Topics[topic]
		victim := before.Partitions[0].Leader
		var others []int32
		for _, b := range c.brokers {
			if b != victim {
				others = append(others, b)
			}
		}
		if err := c.StopBroker(c.ctx, victim); err != nil {
			t.Fatalf("stop broker %d: %v", victim, err)
		}
		started := false
		start := func() {
			if started {
				return
			}
			started = true
			if err := c.StartBroker(c.ctx, victim); err != nil {
				t.Fatalf("start broker %d: %v", victim, err)
			}
			// The broker is back in every partition's ISR before the case
			// returns: the next case finds the cluster whole.
			c.brokers = append(others, victim)
			slices.Sort(c.brokers)
			c.settle(t, topic, func(pv ports.PartitionView) bool { return pv.Leader >= 0 && len(pv.ISR) == len(pv.Replicas) })
		}
		defer start()
		c.brokers = others
		c.settle(t, topic, func(pv ports.PartitionView) bool {
			return pv.Leader >= 0 && pv.Leader != victim && !slices.Contains(pv.ISR, victim)
		})
		for _, b := range others {
			tv := c.view(t, b, topic).Topics[topic]
			for p, pv := range tv.Partitions {
				// Kafka names the stopped broker's replica in offline_replicas
				// (a replica on a broker not alive, not only on a failed log
				// dir) although a leader serves: under-replicated, not
				// offline (ports' IsOffline is about the leader).
				if !slices.Equal(pv.Replicas, before.Partitions[p].Replicas) || !pv.UnderReplicated() || pv.IsOffline() || pv.Leader < 0 || len(pv.ISR) != 2 ||
					!slices.Equal(pv.Offline, []int32{victim}) || pv.LeaderEpoch <= before.Partitions[p].LeaderEpoch && before.Partitions[p].Leader == victim {
					t.Errorf("broker %d: %s-%d is %+v with broker %d stopped (was %+v); want its replicas kept, ISR without %d, under-replicated, a leader, offline replicas [%d], a new leader epoch where %d led",
						b, topic, p, pv, victim, before.Partitions[p], victim, victim, victim)
				}
			}
		}
		if c.Kafka.Listening(c.ctx, c.Addrs[victim]) {
			t.Errorf("broker %d stopped, its listener %s still listens", victim, c.Addrs[victim])
		}
		if _, err := c.Kafka.BrokerView(c.ctx, victim, topic); err == nil {
			t.Errorf("a view from broker %d, which is stopped", victim)
		}
		start()
		for _, b := range c.brokers {
			c.partitions(t, b, c.view(t, b, topic).Topics[topic], 3, 3)
		}
	}},
	{"lab: log dirs", func(t *testing.T, c *conformant) {
		if c.LogDirs == nil {
			t.Skip("the subject does not say its brokers' log dirs (LogDirs)")
		}
		for _, b := range c.brokers {
			got, err := c.Kafka.LogDirs(c.ctx, b)
			if want := slices.Sorted(slices.Values(c.LogDirs[b])); err != nil || !slices.Equal(got, want) {
				t.Errorf("broker %d's log dirs: %v %v, want %v", b, got, err, want)
			}
		}
		if got, err := c.Kafka.LogDirs(c.ctx, slices.Max(c.brokers)+100); err == nil {
			t.Errorf("log dirs of a broker nobody runs: %v", got)
		}
	}},
	{"lab: producers", func(t *testing.T, c *conformant) {
		if c.IdempotentProducer == nil {
			t.Skip("the subject has no idempotent producer (IdempotentProducer)")
		}
		topic := c.n("produced")
		c.create(t, topic, nil, 2, 3)
		// A KRaft broker lists a new partition's leader in Metadata a
		// moment before its replica manager leads it: DescribeProducers
		// answers NOT_LEADER_OR_FOLLOWER everywhere meanwhile (seen on
		// 4.1.2: "no broker hosts it"). Asked again within Settle.
		got, err := c.Kafka.Producers(c.ctx, topic, []int32{0, 1}, c.brokers)
		for deadline := time.Now().Add(c.Settle); errors.Is(err, ports.ErrUnhosted) && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			got, err = c.Kafka.Producers(c.ctx, topic, []int32{0, 1}, c.brokers)
		}
		if err != nil || len(got) != 0 {
			t.Fatalf("producers of a topic nobody wrote to: %+v %v", got, err)
		}
		from := time.Now().Add(-time.Minute)
		closeProducer, err := c.IdempotentProducer(c.ctx, topic, 1)
		if err != nil {
			t.Fatalf("idempotent producer on %s-1: %v", topic, err)
		}
		defer closeProducer()
		got, err = c.Kafka.Producers(c.ctx, topic, []int32{0, 1}, c.brokers)
		if err != nil || len(got) != 1 {
			t.Fatalf("producers of %s after one idempotent producer wrote to partition 1: %+v %v; want exactly it", topic, got, err)
		}
		if p := got[0]; p.Partition != 1 || p.ProducerID < 0 || p.TxnStart != -1 || p.LastTimestamp.Before(from) || p.LastTimestamp.After(time.Now().Add(time.Minute)) {
			t.Errorf("producer %+v; want partition 1, a producer id, no open transaction (-1), its last write's time", p)
		}
		if got, err := c.Kafka.Producers(c.ctx, topic, []int32{0}, c.brokers); err != nil || len(got) != 0 {
			t.Errorf("producers of %s-0, which nobody wrote to: %+v %v", topic, got, err)
		}
	}},
	{"lab: consumer groups", func(t *testing.T, c *conformant) {
		if c.CommitOffsets == nil {
			t.Skip("the subject cannot commit a group's offsets (CommitOffsets)")
		}
		topic, other, group := c.n("consumed"), c.n("unread"), c.n("readers")
		c.create(t, topic, nil, 2, 3)
		c.create(t, other, nil, 1, 3)
		if err := c.Produce(c.ctx, topic, 0, "a", "b", "c"); err != nil {
			t.Fatal(err)
		}
		if err := c.CommitOffsets(c.ctx, group, topic, map[int32]int64{0: 2}); err != nil {
			t.Fatalf("commit %s's offsets: %v", group, err)
		}
		got, err := c.Kafka.Groups(c.ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var mine []ports.GroupUse
		for _, g := range got {
			if g.Group == group {
				mine = append(mine, g)
			}
		}
		if len(mine) != 1 || mine[0].State != "Empty" || len(mine[0].Members) != 0 || len(mine[0].Offsets) != 1 || mine[0].Offsets[0] != 2 {
			t.Errorf("groups on %s: %+v; want %s, Empty (no member), offset 2 on partition 0", topic, got, group)
		}
		got, err = c.Kafka.Groups(c.ctx, other)
		for _, g := range got {
			if g.Group == group {
				t.Errorf("groups on %s, which %s never read: %+v %v", other, group, got, err)
			}
		}
	}},
	{"lab: a stale cache", func(t *testing.T, c *conformant) {
		if c.ForgetTopic == nil {
			t.Skip("the subject cannot delete a topic's metadata behind Kafka's back (ForgetTopic): a KRaft cluster")
		}
		topic := c.n("stale")
		c.create(t, topic, nil, 3, 3)
		before := map[int32]ports.TopicView{}
		for _, b := range c.brokers {
			before[b] = c.view(t, b, topic).Topics[topic]
		}
		restore, err := c.ForgetTopic(c.ctx, topic)
		if err != nil {
			t.Fatalf("forget %s: %v", topic, err)
		}
		restored := false
		defer func() {
			if !restored {
				_ = restore(c.ctx)
			}
		}()
		// The brokers were told nothing: each keeps answering from its
		// cache, as it did, for as long as nothing changes the topic.
		for range 3 {
			for _, b := range c.brokers {
				got := c.view(t, b, topic).Topics[topic]
				if got.Err != ports.KafkaNone || got.ID != before[b].ID || !sameViews(got, before[b]) {
					t.Fatalf("broker %d's view of %s with its metadata deleted behind Kafka's back: %+v; want its cache as before: %+v", b, topic, got, before[b])
				}
			}
			time.Sleep(time.Second) // still the same a while later: a cache nobody refreshes
		}
		restored = true
		if err := restore(c.ctx); err != nil {
			t.Fatalf("restore %s: %v", topic, err)
		}
		c.settle(t, topic, func(pv ports.PartitionView) bool { return pv.Leader >= 0 && len(pv.ISR) == len(pv.Replicas) })
		for _, b := range c.brokers {
			if got := c.view(t, b, topic).Topics[topic]; got.ID != before[b].ID || len(got.Partitions) != 3 {
				t.Errorf("broker %d's view of %s after its metadata came back: %+v; want the topic as it was (id %s, 3 partitions)", b, topic, got, before[b].ID)
			}
		}
	}},
	{"lab: quorum", func(t *testing.T, c *conformant) {
		if c.Controllers == nil {
			t.Skip("the subject runs no KRaft quorum (Controllers)")
		}
		var addrs []string
		for _, id := range slices.Sorted(maps.Keys(c.Controllers)) {
			addrs = append(addrs, c.Controllers[id])
		}
		q, err := c.Kafka.Quorum(c.ctx, append([]string{c.Closed}, addrs...))
		if err != nil {
			t.Fatal(err)
		}
		var voters []int32
		for _, v := range q.Voters {
			voters = append(voters, v.ID)
			if v.LogEndOffset <= 0 {
				t.Errorf("voter %d: log end offset %d on a running quorum", v.ID, v.LogEndOffset)
			}
		}
		slices.Sort(voters)
		if !slices.Equal(voters, slices.Sorted(maps.Keys(c.Controllers))) || !slices.Contains(voters, q.Leader) || q.Epoch <= 0 || q.HighWatermark <= 0 || !slices.Contains(addrs, q.AskedAt) {
			t.Errorf("quorum %+v; want voters %v, one of them leader, an epoch and high watermark, asked at one of %v", q, slices.Sorted(maps.Keys(c.Controllers)), addrs)
		}
	}},
}

// sameViews: two views of a topic name the same partitions with the same
// leader, replicas and ISR.
func sameViews(a, b ports.TopicView) bool {
	if len(a.Partitions) != len(b.Partitions) {
		return false
	}
	for p, x := range a.Partitions {
		y, ok := b.Partitions[p]
		if !ok || x.Leader != y.Leader || !slices.Equal(x.Replicas, y.Replicas) || !slices.Equal(slices.Sorted(slices.Values(x.ISR)), slices.Sorted(slices.Values(y.ISR))) {
			return false
		}
	}
	return true
}
