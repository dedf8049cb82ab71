package kafka_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestConformance holds the adapter to steptest.KafkaConformance on
// franz-go's kfake, as steptest's TestFakeKafkaConformance holds the fake:
// three brokers (node ids 0-2, controller 2) with ACLs on. The adapter
// talks as SASL/PLAIN user "kremedy", allowed everything on the cluster
// and every topic; the suite's DenyDescribe adds a DENY ACL for it as the
// superuser, so TOPIC_AUTHORIZATION_FAILED is Kafka's own answer, not a
// hand-made response.
func TestConformance(t *testing.T) {
	steptest.KafkaConformance(t, func(t *testing.T) steptest.KafkaSubject {
		allow := func(rt kmsg.ACLResourceType, name string) kfake.ACL {
			return kfake.ACL{Resource: rt, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
		}
		c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.AllowAutoTopicCreation(),
			kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
			kfake.User("PLAIN", "kremedy", "kremedy", allow(kmsg.ACLResourceTypeCluster, "kafka-cluster"), allow(kmsg.ACLResourceTypeTopic, "*")),
			kfake.BrokerConfigs(steptest.KafkaConformanceConfigs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		addrs := c.ListenAddrs() // broker i's, in node order
		kc, err := kafka.New(addrs, kgo.SASL(plain.Auth{User: "kremedy", Pass: "kremedy"}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(kc.Close)
		admin := kgo.SASL(scram.Auth{User: "admin", Pass: "admin"}.AsSha256Mechanism())
		adm, err := kadm.NewOptClient(kgo.SeedBrokers(addrs...), admin)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(adm.Close)
		pr, err := kafka.NewProducer(addrs, 10*time.Second, admin)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pr.Close)
		s := steptest.KafkaSubject{Kafka: kc, Addrs: map[int32]string{}, Closed: closedAddr(t), Produce: pr.Produce,
			DenyDescribe: func(ctx context.Context, topic string) error {
				rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics(topic).Deny("User:kremedy").Operations(kadm.OpDescribe))
				for _, r := range rs {
					err = errors.Join(err, r.Err)
				}
				return err
			},
			Limits: map[string]string{
				"create with an assignment/replicas as assigned": "kfake keeps an assignment's partition count and replication factor but not its brokers: " +
					"CreateTopics uses len(assignment) and len(assignment[0]) (19_create_topics.go), and Metadata places the replicas from the partition's leader on (03_metadata.go)",
			}}
		for i, a := range addrs {
			s.Addrs[int32(i)] = a
		}
		return s
	})
}

// closedAddr is a loopback address nothing listens at (a listener opened
// and closed again).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestReassignerConformance holds the adapter's reassigner ability to
// steptest.ReassignerConformance on kfake, as steptest holds the fake.
func TestReassignerConformance(t *testing.T) {
	steptest.ReassignerConformance(t, func(t *testing.T) steptest.ReassignerSubject {
		_, kc := kfakeClient(t)
		return steptest.ReassignerSubject{R: kc, Broker: 0, Create: func(ctx context.Context, topic string) error {
			_, err := kc.CreateTopic(ctx, topic, nil, 1, 2, nil)
			return err
		}}
	})
}

// kfakeClient starts a 3-broker kfake cluster with opts and the adapter on
// it, both closed at the test's end.
func kfakeClient(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, *kafka.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	kc, err := kafka.New(c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return c, kc
}
