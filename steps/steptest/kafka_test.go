package steptest

import (
	"context"
	"fmt"
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
		hosts := NewHosts(t, zk, target)
		hosts.Running[4] = false
		zk.Remove(fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, 4))
		k := NewKafka(t, zk, hosts)
		k.AutoCreate = KafkaConformanceConfigs["auto.create.topics.enable"]
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
		}
	})
}
