package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/steptest"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// labConformance holds the franz-go adapter on the lab's real Kafka to
// steptest.KafkaConformance, as steps/kafka's TestConformance does on kfake
// and steptest's TestFakeKafkaConformance the fake, lab-only cases
// included: the fake cannot drift from Kafka unnoticed. It shares the
// running lab with the test's other subtests: each case's topics and
// groups carry a prefix of their own and are deleted after it, and the
// broker the ISR case stops is back in every ISR before it returns. configs
// are the broker configs the lab runs with; limits the cases it cannot
// hold, each with why.
func labConformance(t *testing.T, l *lab.Lab, configs, limits map[string]string) {
	t.Helper()
	cfg := l.State.Config
	opts := l.KafkaOpts()
	kc, err := kafka.New(cfg.Bootstrap(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	pr, err := kafka.NewProducer(cfg.Bootstrap(), 10*time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pr.Close)
	adm, err := kadm.NewOptClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Bootstrap()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	s := steptest.KafkaSubject{Kafka: kc, Addrs: map[int32]string{}, Closed: closed, Produce: pr.Produce,
		Configs: configs, Limits: limits, Settle: 2 * time.Minute, LogDirs: map[int32][]string{},
		StopBroker: func(ctx context.Context, id int32) error {
			return l.BrokerCommand(ctx, id, "stop", func(string) {})
		},
		StartBroker: func(ctx context.Context, id int32) error {
			return l.BrokerCommand(ctx, id, "start", func(string) {})
		},
		IdempotentProducer: func(ctx context.Context, topic string, p int32) (func(), error) {
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Bootstrap()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
			if err != nil {
				return func() {}, err
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("idempotent")}).FirstErr(); err != nil {
				cl.Close()
				return func() {}, err
			}
			return cl.Close, nil
		},
		CommitOffsets: func(ctx context.Context, group, topic string, offsets map[int32]int64) error {
			var os kadm.Offsets
			for p, at := range offsets {
				os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
			}
			rs, err := adm.CommitOffsets(ctx, group, os)
			if err != nil {
				return err
			}
			return rs.Error()
		},
	}
	for n := 1; n <= cfg.Brokers; n++ {
		s.Addrs[int32(n)] = fmt.Sprintf("%s:%d", cfg.BrokerHost(n), lab.KafkaPort)
		s.LogDirs[int32(n)] = l.LogDirs(n)
	}
	if !l.State.KRaft() {
		s.ForgetTopic = forgetTopicByHand(connectLab(t, l).zk)
	}
	if l.State.KRaft() {
		s.Controllers = map[int32]string{}
		for k := 1; k <= cfg.KRaftControllers; k++ {
			s.Controllers[lab.ControllerID(k)] = fmt.Sprintf("%s:%d", cfg.ControllerHost(k), lab.ControllerPort)
		}
	}
	var n atomic.Int32
	start := time.Now()
	steptest.KafkaConformance(t, func(t *testing.T) steptest.KafkaSubject {
		s := s
		s.Prefix = fmt.Sprintf("conformance%d-", n.Add(1))
		t.Cleanup(func() { forget(t, kc, adm, slices.Sorted(maps.Keys(s.Addrs)), s.Prefix) })
		return s
	})
	t.Logf("FIGURE KafkaConformance on the lab's real Kafka %s (%s) took %.1fs", l.State.Kafka, map[bool]string{true: "KRaft", false: "ZooKeeper mode"}[l.State.KRaft()], time.Since(start).Seconds())
}

// forget deletes the topics and groups a conformance case made (those
// named with prefix), so the lab's other subtests find it as before.
func forget(t *testing.T, kc *kafka.Client, adm *kadm.Client, brokers []int32, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if groups, err := adm.ListGroups(ctx); err == nil {
		for _, g := range groups.Groups() {
			if strings.HasPrefix(g, prefix) {
				rs, err := adm.DeleteGroups(ctx, g)
				errs = append(errs, err, rs.Error())
			}
		}
	} else {
		errs = append(errs, err)
	}
	// Every broker's own view, not kadm's ListTopics: franz-go answers that
	// from a metadata response up to MetadataMinAge old, which misses the
	// topics a case made a moment ago.
	listed := func() []string {
		var out []string
		for _, b := range brokers {
			v, err := kc.BrokerView(ctx, b)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for name := range v.Topics {
				if strings.HasPrefix(name, prefix) && !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	mine := listed()
	if len(mine) > 0 {
		rs, err := adm.DeleteTopics(ctx, mine...)
		errs = append(errs, err, rs.Error())
		// Deleted, not only asked to be: the next subtest's diagnose must
		// not find them half-gone.
		left := mine
		for len(left) > 0 && ctx.Err() == nil {
			left = listed()
			if len(left) > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
		}
		if len(left) > 0 {
			errs = append(errs, fmt.Errorf("still listed after a minute: %v", left))
		}
	}
	t.Logf("removed %d topics of %s* from the lab: %v", len(mine), prefix, mine)
	if err := errors.Join(errs...); err != nil {
		t.Errorf("removing the conformance case's topics and groups (%s*) from the lab: %v", prefix, err)
	}
}

// labConformanceConfigs are the broker configs a lab of release v runs
// with, as KafkaConformance checks them: the suite's own (the lab's
// brokerDefaults set auto.create.topics.enable=true and
// min.insync.replicas=2; the IBP is the release's default, 3.9-IV0 on
// 3.9.2), without inter.broker.protocol.version from 4.0, which has none.
//
// A 4.x KRaft lab's brokers report min.insync.replicas=1: with eligible
// leader replicas on (KIP-966, a new 4.1 cluster's default) the
// cluster-wide value comes from the controllers, whose
// controller.properties (lab/kraftlab.go) do not set it, and it outranks
// the brokers' server.properties. That is what the lab runs, and what
// kremedy's stop rule reads there, so the suite checks it.
func labConformanceConfigs(v string, kraft bool) map[string]string {
	c := maps.Clone(steptest.KafkaConformanceConfigs)
	if strings.HasPrefix(v, "4.") {
		delete(c, "inter.broker.protocol.version")
		if kraft {
			c["min.insync.replicas"] = "1"
		}
	}
	return c
}

// labNoAuthorizer is the limit of a lab without `--secure`: its brokers run
// no authorizer, so Kafka allows every principal everything and no ACL can
// deny kremedy Describe.
var labNoAuthorizer = map[string]string{
	"a topic kremedy may not describe": "the lab runs no authorizer (only `lab up --secure` does): every principal may Describe every topic",
}

// forgetTopicByHand deletes a topic's znodes by hand while every broker
// runs, as `lab break stale-metadata` does: the controller drops the topic
// from its context without telling the brokers, which keep it cached. Its
// restore moves the controller first, then writes the znodes back as they
// were (config first, as Kafka's AdminZkClient does). The move is what
// heals: Kafka 3.9's ControllerContext.removeTopic keeps the topic's
// partition and replica states, so the controller that saw the deletion
// refuses the topic's return (an illegal Online → New transition, logged
// and skipped) and a later DeleteTopics never completes, leaving every
// broker's cache stale for good. A new controller builds its context from
// ZooKeeper and takes the written-back topic for a new one with the same
// id and assignment; the brokers' caches agree with it again.
func forgetTopicByHand(zc *zookeeper.Conn) func(ctx context.Context, topic string) (func(context.Context) error, error) {
	return func(ctx context.Context, topic string) (func(context.Context) error, error) {
		tp, cp := kafkazk.TopicPath(topic), kafkazk.ConfigTopicPath(topic)
		td, _, err := zc.Get(ctx, tp)
		if err != nil {
			return nil, err
		}
		cd, _, err := zc.Get(ctx, cp)
		if err != nil {
			return nil, err
		}
		for _, p := range []string{tp, cp} {
			if err := zc.DeleteRecursive(ctx, p); err != nil {
				return nil, fmt.Errorf("delete %s: %w", p, err)
			}
		}
		return func(ctx context.Context) error {
			if err := moveController(ctx, zc); err != nil {
				return err
			}
			if err := zc.Create(ctx, cp, cd, nil); err != nil {
				return fmt.Errorf("create %s: %w", cp, err)
			}
			if err := zc.Create(ctx, tp, td, nil); err != nil {
				return fmt.Errorf("create %s: %w", tp, err)
			}
			return nil
		}, nil
	}
}

// moveController deletes /controller and waits until a controller of a
// later epoch (/controller_epoch) registered: a fresh context read from
// ZooKeeper, the same broker or another.
func moveController(ctx context.Context, zc *zookeeper.Conn) error {
	epoch := func() (int, error) {
		b, _, err := zc.Get(ctx, kafkazk.ControllerEpochPath)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(string(b)))
	}
	before, err := epoch()
	if err != nil {
		return fmt.Errorf("read %s: %w", kafkazk.ControllerEpochPath, err)
	}
	if err := zc.Delete(ctx, kafkazk.ControllerPath, -1); err != nil {
		return fmt.Errorf("delete %s: %w", kafkazk.ControllerPath, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		id, err := zc.Controller(ctx)
		now, eerr := epoch()
		if err == nil && eerr == nil && id >= 0 && now > before {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no controller of an epoch after %d within a minute of deleting %s (last: controller %d, %v, %v)", before, kafkazk.ControllerPath, id, err, eerr)
		case <-tick.C:
		}
	}
}
