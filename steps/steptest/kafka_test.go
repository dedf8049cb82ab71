package steptest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// TestFakeKafkaConformance holds the fake to KafkaConformance, as
// steps/kafka's TestConformance holds the adapter on kfake: brokers 1-3
// run, broker 4 of the inventory is stopped (its address is the closed
// one), controller 2.
func TestFakeKafkaConformance(t *testing.T) {
	KafkaConformance(t, func(t *testing.T) KafkaSubject {
		target := ports.Target{Name: "conformance", ZKConnect: "zk:2181/kafka", Bootstrap: []string{"b1:9092"}}
		for id := int32(1); id <= 4; id++ {
			target.Hosts = append(target.Hosts, ports.Host{ID: id, Host: fmt.Sprintf("b%d", id), LogDirs: []string{"/data"}})
		}
		zk := NewZK(t, "/kafka")
		zk.Put("/cluster/id", `{"version":"1","id":"x"}`).Put("/controller", `{"version":2,"brokerid":2}`).Put(kafkazk.TopicsPath, "")
		for id := int32(3001); id <= 3003; id++ {
			target.Controllers = append(target.Controllers, ports.Host{ID: id, Host: fmt.Sprintf("c%d", id-3000), Addr: fmt.Sprintf("c%d:9093", id-3000)})
		}
		hosts := NewHosts(t, zk, target)
		for _, c := range target.Controllers {
			hosts.Running[c.ID] = true
		}
		hosts.Running[4] = false
		zk.Remove(fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, 4))
		k := NewKafka(t, zk, hosts)
		k.AutoCreate = KafkaConformanceConfigs["auto.create.topics.enable"]
		k.KRaft = &ports.Quorum{Leader: 3002, Epoch: 4, HighWatermark: 120, Voters: []ports.Voter{{ID: 3001, LogEndOffset: 120}, {ID: 3002, LogEndOffset: 120}, {ID: 3003, LogEndOffset: 118}}}
		k.Configs = map[string]string{}
		for key, v := range KafkaConformanceConfigs {
			k.Configs[key] = v
		}
		return KafkaSubject{
			Kafka:   k,
			Addrs:   map[int32]string{1: "b1:9092", 2: "b2:9092", 3: "b3:9092"},
			Closed:  "b4:9092",
			Produce: k.Produce,
			DenyDescribe: func(_ context.Context, topic string) error {
				k.Deny(topic)
				return nil
			},
			StopBroker:  k.StopBroker,
			StartBroker: k.StartBroker,
			Controllers: map[int32]string{3001: "c1:9093", 3002: "c2:9093", 3003: "c3:9093"},
			IdempotentProducer: func(ctx context.Context, topic string, p int32) (func(), error) {
				return func() {}, k.ProduceIdempotent(ctx, topic, p)
			},
			CommitOffsets: k.CommitOffsets,
			LogDirs:       map[int32][]string{1: {"/data"}, 2: {"/data"}, 3: {"/data"}},
			ForgetTopic: func(ctx context.Context, topic string) (func(context.Context) error, error) {
				// Every running broker caches what it answered; the
				// topic's znodes go, to come back as they were.
				for _, b := range []int32{1, 2, 3} {
					v, err := k.BrokerView(ctx, b, topic)
					if err != nil {
						return nil, err
					}
					k.Cache(b, v.Topics[topic])
				}
				saved := map[string]string{}
				for _, p := range zk.Paths() {
					if p == kafkazk.TopicPath(topic) || strings.HasPrefix(p, kafkazk.TopicPath(topic)+"/") || p == kafkazk.ConfigTopicPath(topic) {
						b, _, _ := zk.Get(ctx, p)
						saved[p] = string(b)
					}
				}
				zk.Remove(kafkazk.TopicPath(topic))
				zk.Remove(kafkazk.ConfigTopicPath(topic))
				return func(context.Context) error {
					for _, p := range slices.Sorted(maps.Keys(saved)) {
						zk.Put(p, saved[p])
					}
					for _, b := range []int32{1, 2, 3} {
						k.Uncache(b, topic)
					}
					return nil
				}, nil
			},
		}
	})
}

func TestFakeReassignerConformance(t *testing.T) {
	ReassignerConformance(t, func(t *testing.T) ReassignerSubject {
		g := Ghost(t)
		r := NewReassigning(g.Kafka)
		return ReassignerSubject{R: r, Broker: 1, Create: func(ctx context.Context, topic string) error {
			_, err := r.CreateTopic(ctx, topic, [][]int32{{1, 2}}, 0, 0, nil)
			return err
		}}
	})
}
