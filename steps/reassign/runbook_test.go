package reassign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/reassign"
	"github.com/kremedy/kremedy/steps/steptest"
)

// stuck is a fake cluster of brokers 1–3 running and broker 4 in the
// inventory but stopped: "moving" (partition 0 on [1,2]) being moved to
// [1,4], throttled as kafka-reassign-partitions --throttle leaves it on
// brokers 1, 2 and, in its znode, 4.
type stuck struct {
	*steptest.Cluster
	r       *steptest.Reassigning
	runbook string
}

func newStuck(t *testing.T) *stuck {
	t.Helper()
	g := steptest.Ghost(t)
	g.ZK.Remove(kafkazk.DeleteTopicPath("orders"))
	g.Ports.Target.Hosts = append(g.Ports.Target.Hosts, ports.Host{ID: 4, Host: "b4", Stop: "stop", Start: "start"})
	g.ZK.Put(kafkazk.TopicPath("moving"), `{"version":3,"partitions":{"0":[1,2]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}`)
	g.ZK.Put(kafkazk.PartitionStatePath("moving", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`)
	g.ZK.Put(brokers.BrokerConfigPath(4), `{"version":1,"config":{"leader.replication.throttled.rate":"1024","follower.replication.throttled.rate":"1024","log.cleaner.threads":"2"}}`)
	r := steptest.NewReassigning(g.Kafka)
	r.Moves = []ports.Reassignment{{Topic: "moving", Partition: 0, Replicas: []int32{1, 4, 2}, Adding: []int32{4}, Removing: []int32{2}}}
	for _, b := range []string{"1", "2"} {
		for _, k := range brokers.BrokerThrottleKeys {
			r.Configs = append(r.Configs, ports.ConfigEntry{Resource: ports.ResourceBroker, Name: b, Key: k, Value: "1024"})
		}
	}
	r.Configs = append(r.Configs,
		ports.ConfigEntry{Resource: ports.ResourceTopic, Name: "moving", Key: brokers.LeaderReplicas, Value: "0:1,0:2"},
		ports.ConfigEntry{Resource: ports.ResourceTopic, Name: "moving", Key: brokers.FollowerReplicas, Value: "0:4"},
		ports.ConfigEntry{Resource: ports.ResourceTopic, Name: "moving", Key: "retention.ms", Value: "1000"})
	g.Ports.Kafka = r
	return &stuck{Cluster: g, r: r, runbook: "reassignment-unstick"}
}

type approver func(steps.Info, *steps.Plan) steps.Approval

func (a approver) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	return a(info, p), nil
}

// run runs the real reassignment-unstick runbook on s, every plan
// approved, and returns its outcome, run directory and plans by step.
func (s *stuck) run(t *testing.T, params map[string]string) (steps.Outcome, string, map[string]*steps.Plan) {
	t.Helper()
	rb, err := runbooks.Get(s.runbook)
	if err != nil {
		t.Fatal(err)
	}
	bound, err := rb.Bind(params, s.Ports.Target.Name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sess, err := steps.Create(dir, bound, steps.Meta{ID: "u1", Runbook: rb.Name, Params: bound.Params, Cluster: s.Ports.Target.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	plans := map[string]*steps.Plan{}
	out := sess.Run(context.Background(), s.Ports, approver(func(info steps.Info, p *steps.Plan) steps.Approval {
		plans[info.ID] = p
		return steps.Approval{Decision: steps.Approve, Typed: "test", By: "test", Digest: p.Digest()}
	}), nil)
	return out, dir, plans
}

func TestUnstickCancelsThenSweeps(t *testing.T) {
	s := newStuck(t)
	out, dir, plans := s.run(t, nil)
	if out.Err != nil || out.Failed != "" {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{"cancel moving-0",
		"delete broker 1 leader.replication.throttled.rate", "delete broker 1 follower.replication.throttled.rate",
		"delete broker 2 leader.replication.throttled.rate", "delete broker 2 follower.replication.throttled.rate",
		"delete topic moving leader.replication.throttled.replicas", "delete topic moving follower.replication.throttled.replicas"}
	if !slices.Equal(s.r.Done, want) {
		t.Fatalf("done\n%s\nwant\n%s", strings.Join(s.r.Done, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(strings.Join(plans["unstick"].Notes, "\n"), "moving-0: cancel (target broker 4 down") {
		t.Errorf("the plan does not say why it cancels: %v", plans["unstick"].Notes)
	}
	// The stopped broker's znode loses its throttles, keeps the rest.
	b, _, err := s.ZK.Get(context.Background(), brokers.BrokerConfigPath(4))
	if err != nil || strings.Contains(string(b), "throttled") || !strings.Contains(string(b), `"log.cleaner.threads":"2"`) {
		t.Errorf("broker 4's znode: %s %v", b, err)
	}
	if s.r.Configs[0].Key != "retention.ms" || len(s.r.Configs) != 1 {
		t.Errorf("configs left %v, want only the topic's retention.ms", s.r.Configs)
	}
	var rb reassign.RollbackFile
	raw, err := os.ReadFile(filepath.Join(dir, "reassignment-rollback.json"))
	if err != nil || json.Unmarshal(raw, &rb) != nil || len(rb.Partitions) != 1 || !slices.Equal(rb.Partitions[0].Replicas, []int32{1, 2}) {
		t.Errorf("rollback %s %v: want moving-0 on its original [1,2]", raw, err)
	}
}

func TestUnstickCancelRefusedThenRetarget(t *testing.T) {
	s := newStuck(t)
	if err := s.Kafka.StopBroker(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	out, _, _ := s.run(t, map[string]string{"action": "cancel"})
	if out.Failed != "unstick" || !errors.Is(out.Err, ports.ErrRefused) || !strings.Contains(out.Err.Error(), "KAFKA-14424") {
		t.Fatalf("outcome %+v, want unstick refused naming KAFKA-14424", out)
	}
	if len(s.r.Done) != 0 || len(s.r.Moves) != 1 {
		t.Fatalf("a refused plan changed %v (moves %v)", s.r.Done, s.r.Moves)
	}
	// Broker 3 runs and is outside the set: the retarget puts it in 4's place.
	out, _, _ = s.run(t, map[string]string{"action": "retarget"})
	if out.Err != nil || s.r.Done[0] != "reassign moving-0 [1 3]" {
		t.Fatalf("outcome %+v, done %v: want moving-0 retargeted to [1 3]", out, s.r.Done)
	}
}

func TestSweepWaitsForMovesAndKeepsThrottles(t *testing.T) {
	s := newStuck(t)
	out, _, _ := s.run(t, map[string]string{"action": "retarget", "wait": "3s"})
	if out.Err != nil {
		t.Fatalf("retarget: %+v", out)
	}
	// A move onto live brokers that never ends: the sweep must not remove
	// the throttles under it.
	s.r.Moves = []ports.Reassignment{{Topic: "moving", Partition: 0, Replicas: []int32{1, 3, 2}, Adding: []int32{3}, Removing: []int32{2}}}
	s.r.Done = nil
	for _, b := range []string{"1", "3"} {
		s.r.Configs = append(s.r.Configs, ports.ConfigEntry{Resource: ports.ResourceBroker, Name: b, Key: brokers.LeaderRate, Value: "1024"})
	}
	out, _, _ = s.run(t, map[string]string{"wait": "3s"})
	if out.Failed != "sweep" || !errors.Is(out.Err, ports.ErrCheckFailed) || !strings.Contains(out.Err.Error(), "no throttle was removed") {
		t.Fatalf("outcome %+v, want the sweep to stop with the move still in flight", out)
	}
	if len(s.r.Done) != 0 {
		t.Fatalf("changed %v while a move was in flight", s.r.Done)
	}
}

// TestKRaftSweepDeletesADownBrokersRatesAtTheControllers: on KRaft a
// stopped broker describes no configs, so its rates are deleted at the
// controllers, and the move onto it is cancelled as on ZooKeeper mode.
func TestKRaftSweepDeletesADownBrokersRatesAtTheControllers(t *testing.T) {
	g := steptest.KRaft(t)
	g.ZK.Put(kafkazk.TopicPath("moving"), `{"version":3,"partitions":{"0":[1,2]}}`)
	g.ZK.Put(kafkazk.PartitionStatePath("moving", 0), `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`)
	if err := g.Kafka.StopBroker(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	r := steptest.NewReassigning(g.Kafka)
	r.Moves = []ports.Reassignment{{Topic: "moving", Partition: 0, Replicas: []int32{1, 3, 2}, Adding: []int32{3}, Removing: []int32{2}}}
	for _, b := range []string{"1", "3"} {
		r.Configs = append(r.Configs, ports.ConfigEntry{Resource: ports.ResourceBroker, Name: b, Key: brokers.FollowerRate, Value: "1024"})
	}
	g.Ports.Kafka = r
	s := &stuck{Cluster: g, r: r, runbook: "kraft-reassignment-unstick"}
	out, _, plans := s.run(t, nil)
	if out.Err != nil || out.Failed != "" {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{"cancel moving-0", "delete broker 1 follower.replication.throttled.rate",
		"delete at the controllers broker 3 [leader.replication.throttled.rate follower.replication.throttled.rate]"}
	if !slices.Equal(r.Done, want) || len(r.Configs) != 0 {
		t.Fatalf("done %q, configs left %v; want %q and none", r.Done, r.Configs, want)
	}
	if !strings.Contains(fmt.Sprint(plans["sweep"].Actions), "broker 3 is down, and a KRaft broker describes only its own configs") {
		t.Errorf("the sweep's plan does not say why it asks the controllers: %v", plans["sweep"].Actions)
	}
}

// TestResumeAfterTheSweepTimedOut: a move that outlasts the sweep's wait
// stops the run with every throttle in place; once it ends, a resume
// does not cancel again, keeps the first attempt's rollback and sweeps.
func TestResumeAfterTheSweepTimedOut(t *testing.T) {
	s := newStuck(t)
	s.r.Moves = append(s.r.Moves, ports.Reassignment{Topic: "orders", Partition: 0, Replicas: []int32{1, 2, 3}, Removing: []int32{3}})
	rb, err := runbooks.Get(s.runbook)
	if err != nil {
		t.Fatal(err)
	}
	bound, err := rb.Bind(map[string]string{"wait": "1s"}, s.Ports.Target.Name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sess, err := steps.Create(dir, bound, steps.Meta{ID: "u1", Runbook: rb.Name, Params: bound.Params, Cluster: s.Ports.Target.Name})
	if err != nil {
		t.Fatal(err)
	}
	approve := approver(func(_ steps.Info, p *steps.Plan) steps.Approval {
		return steps.Approval{Decision: steps.Approve, Typed: "test", By: "test", Digest: p.Digest()}
	})
	if out := sess.Run(context.Background(), s.Ports, approve, nil); out.Failed != "sweep" {
		t.Fatalf("first attempt: %+v, want the sweep to stop", out)
	}
	sess.Close()
	if !slices.Equal(s.r.Done, []string{"cancel moving-0"}) {
		t.Fatalf("first attempt did %v", s.r.Done)
	}
	rollback, err := os.ReadFile(filepath.Join(dir, "reassignment-rollback.json"))
	if err != nil {
		t.Fatal(err)
	}
	s.r.Moves = nil // the move ended
	resumed, err := steps.Open(dir, func(steps.Meta) (*steps.Runbook, error) { return bound, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if out := resumed.Run(context.Background(), s.Ports, approve, nil); out.Err != nil || out.Failed != "" {
		t.Fatalf("resume: %+v", out)
	}
	if slices.Contains(s.r.Done[1:], "cancel moving-0") || len(s.r.Done) != 7 {
		t.Errorf("resume did %v, want the six removals only", s.r.Done[1:])
	}
	if after, err := os.ReadFile(filepath.Join(dir, "reassignment-rollback.json")); err != nil || string(after) != string(rollback) {
		t.Errorf("rollback rewritten on resume: %s (was %s) %v", after, rollback, err)
	}
	if !strings.Contains(string(rollback), `"topic": "moving"`) && !strings.Contains(string(rollback), `"topic":"moving"`) {
		t.Errorf("rollback %s does not hold moving-0", rollback)
	}
}

// TestCancelReplansWhenAnOriginalReplicaLeftTheISRAfterTheConfirmation:
// broker 2, an original replica, stops while the cancel waits for its
// approval: the cancel is not sent (KAFKA-14424); the step plans again
// and the move is retargeted instead, after a second confirmation.
func TestCancelReplansWhenAnOriginalReplicaLeftTheISRAfterTheConfirmation(t *testing.T) {
	s := newStuck(t)
	rb, err := runbooks.Get(s.runbook)
	if err != nil {
		t.Fatal(err)
	}
	bound, err := rb.Bind(nil, s.Ports.Target.Name)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := steps.Create(t.TempDir(), bound, steps.Meta{ID: "u2", Runbook: rb.Name, Params: bound.Params, Cluster: s.Ports.Target.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var unstick []*steps.Plan
	out := sess.Run(context.Background(), s.Ports, approver(func(info steps.Info, p *steps.Plan) steps.Approval {
		if info.ID == "unstick" {
			if unstick = append(unstick, p); len(unstick) == 1 {
				if err := s.Kafka.StopBroker(context.Background(), 2); err != nil {
					t.Fatal(err)
				}
			}
		}
		return steps.Approval{Decision: steps.Approve, Typed: "test", By: "test", Digest: p.Digest()}
	}), nil)
	if out.Failed == "unstick" {
		t.Fatalf("unstick failed: %v", out.Err)
	}
	if slices.Contains(s.r.Done, "cancel moving-0") {
		t.Fatalf("the cancel was sent with original replica 2 down: %v", s.r.Done)
	}
	if len(unstick) != 2 || len(s.r.Done) == 0 || s.r.Done[0] != "reassign moving-0 [1 3]" {
		t.Fatalf("%d unstick plans confirmed, done %v: want a second plan retargeting moving-0 to [1 3]", len(unstick), s.r.Done)
	}
}

// moveAfterFirstRemoval is a move that starts (onto live brokers) right
// after the sweep's first throttle removal.
type moveAfterFirstRemoval struct {
	*steptest.Reassigning
	removals int
}

func (m *moveAfterFirstRemoval) SetConfig(ctx context.Context, resource, name, key string, value *string) error {
	err := m.Reassigning.SetConfig(ctx, resource, name, key, value)
	if m.removals++; m.removals == 1 {
		m.Moves = append(m.Moves, ports.Reassignment{Topic: "moving", Partition: 0, Replicas: []int32{1, 3, 2}, Adding: []int32{3}, Removing: []int32{2}})
	}
	return err
}

// TestSweepStopsRemovingWhenAMoveStarts: no move in flight when the sweep
// is planned, so nothing waits for one in the old plan; the wait is
// planned anyway, and a move that starts after the first removal stops
// the removals (listed again before each): the sweep plans again, waits
// for it and leaves every other throttle in place.
func TestSweepStopsRemovingWhenAMoveStarts(t *testing.T) {
	s := newStuck(t)
	s.r.Moves = nil
	m := &moveAfterFirstRemoval{Reassigning: s.r}
	s.Ports.Kafka = m
	out, _, plans := s.run(t, map[string]string{"wait": "1s"})
	if len(plans["sweep"].Actions) == 0 || plans["sweep"].Actions[0].ID != "wait-moves" {
		t.Errorf("the sweep's plan with no move in flight does not wait first: %v", plans["sweep"].Actions)
	}
	if out.Failed != "sweep" || !errors.Is(out.Err, ports.ErrCheckFailed) || !strings.Contains(out.Err.Error(), "no throttle was removed") {
		t.Fatalf("outcome %+v, want the sweep to stop waiting for the move that started", out)
	}
	if len(s.r.Done) != 1 {
		t.Fatalf("removed %v: want only the first removal, before the move started", s.r.Done)
	}
}
