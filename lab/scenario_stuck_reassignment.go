package lab

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// StuckThrottle is the replication throttle stuck-reassignment sets, in
// bytes/s: kafka-reassign-partitions --throttle 1024.
const StuckThrottle = 1024

func init() {
	register(75, "stuck-reassignment", onReady((*env).stuckReassignment),
		"T (2 partitions, ~4 MiB each) reassigned onto a third broker throttled at 1 KB/s, which is then stopped: the moves never finish and the throttles stay (field-2026c §3)")
}

// stuckReassignment is the stuck move of field-2026c §3: a topic with
// data, a reassignment onto a broker at a 1 KB/s replication throttle
// (set as kafka-reassign-partitions --throttle sets it: both rates on
// every broker, the topic's leader replicas and follower replicas
// listed), then the target broker stopped. ListPartitionReassignments
// lists the moves for ever, and the throttles stay.
func (e *env) stuckReassignment(ids []int32) error {
	target, err := e.victim(ids)
	if err != nil {
		return err
	}
	return e.stuckMove(ids, target, "reassignment-unstick")
}

// stuckMove is stuck-reassignment's body on either mode's lab: T on the
// two brokers other than target, moved onto target at 1 KB/s, target
// stopped; runbook is the one the report's next step names.
func (e *env) stuckMove(ids []int32, target int32, runbook string) error {
	var others []int32
	for _, id := range ids {
		if id != target {
			others = append(others, id)
		}
	}
	a, b := others[0], others[1]
	var err error
	e.rep.Assign, e.rep.Victim = [][]int32{{a, b}, {b, a}}, target
	if e.rep.OldID, err = e.createAndFill(e.t, e.rep.Assign, "old"); err != nil {
		return err
	}
	// More than one fetch takes: a throttled follower's first fetch is
	// not held (the quota counts bytes already fetched) and may carry
	// replica.fetch.max.bytes (1 MiB) of a partition.
	if err := e.fillBytes(2, 1024, 4096); err != nil {
		return err
	}
	e.did("created %q with 2 partitions (replicas %v) and about 4 MiB per partition", e.t, e.rep.Assign)
	if err := e.throttle(ids, target, a, b); err != nil {
		return err
	}
	moves := map[int32][]int32{0: {a, target}, 1: {b, target}}
	for p, reps := range moves {
		if err := e.kc.Reassign(e.ctx, e.t, p, reps); err != nil {
			return err
		}
	}
	e.did("reassigned %s-0 to %v and %s-1 to %v (AlterPartitionReassignments): broker %d must copy both at 1 KB/s", e.t, moves[0], e.t, moves[1], target)
	if err := e.brokerCmd(target, "stop"); err != nil {
		return err
	}
	e.did("stopped broker %d, the target of both moves", target)
	if err := e.record(Applied{DownBroker: target}); err != nil {
		return err
	}
	e.stuckMoveSymptoms(target)
	e.rep.Next = fmt.Sprintf("`kremedy diagnose` names the stuck reassignment of %s-0 and %s-1 (target broker %d down); `kremedy run %s` cancels or retargets them and removes every throttle", e.t, e.t, target, runbook)
	return e.verdict()
}

// fillBytes writes n records of size random bytes (the producer
// compresses: a repeated byte would take no room) to each of parts
// partitions.
func (e *env) fillBytes(parts int32, n, size int) error {
	cl := e.kc.Kgo()
	for p := range parts {
		for i := 0; i < n; i++ {
			val := make([]byte, size)
			_, _ = rand.Read(val)
			cl.Produce(e.ctx, &kgo.Record{Topic: e.t, Partition: p, Value: val}, nil)
		}
	}
	if err := cl.Flush(e.ctx); err != nil {
		return fmt.Errorf("write %d records of %d bytes to %s: %w", n, size, e.t, err)
	}
	return nil
}

// throttle sets the throttles kafka-reassign-partitions --throttle sets:
// both rates on every broker, and on the topic the leader replicas (the
// current ones) and the follower replicas (the ones the move adds).
func (e *env) throttle(ids []int32, target, a, b int32) error {
	rate := strconv.Itoa(StuckThrottle)
	for _, id := range ids {
		for _, k := range brokers.BrokerThrottleKeys {
			if err := e.kc.SetConfig(e.ctx, ports.ResourceBroker, strconv.Itoa(int(id)), k, &rate); err != nil {
				return err
			}
		}
	}
	leaders := fmt.Sprintf("0:%d,0:%d,1:%d,1:%d", a, b, b, a)
	followers := fmt.Sprintf("0:%d,1:%d", target, target)
	for k, v := range map[string]string{brokers.LeaderReplicas: leaders, brokers.FollowerReplicas: followers} {
		if err := e.kc.SetConfig(e.ctx, ports.ResourceTopic, e.t, k, &v); err != nil {
			return err
		}
	}
	e.did("throttled replication to %d bytes/s on brokers %v (leader and follower rates) and on %q (leader replicas %s, follower replicas %s)", StuckThrottle, ids, e.t, leaders, followers)
	// Every broker applies its throttle when its metadata has it; a move
	// started before would run unthrottled.
	keys := append(slices.Clone(brokers.BrokerThrottleKeys), brokers.TopicThrottleKeys...)
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	return waitFor(ctx, 200*time.Millisecond, func() bool {
		es, err := e.kc.Overrides(ctx, keys, ids, []string{e.t})
		return err == nil && len(es) == 2*len(ids)+2
	})
}

func (e *env) stuckMoveSymptoms(target int32) {
	e.observe(fmt.Sprintf("broker %d leaves the live brokers (/brokers/ids; KRaft: the unfenced ones)", target), 30*time.Second, false, func() (bool, string) {
		live, err := e.liveBrokers()
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(live, target), fmt.Sprintf("live: %v", live)
	})
	e.observe(fmt.Sprintf("ListPartitionReassignments lists both moves of %q, adding broker %d", e.t, target), 10*time.Second, false, func() (bool, string) {
		ms, err := e.kc.Reassignments(e.ctx)
		if err != nil {
			return false, err.Error()
		}
		n := 0
		var ev []string
		for _, m := range ms {
			if m.Topic == e.t && slices.Contains(m.Adding, target) {
				n++
			}
			ev = append(ev, fmt.Sprintf("%s-%d replicas %v adding %v removing %v", m.Topic, m.Partition, m.Replicas, m.Adding, m.Removing))
		}
		return n == 2, strings.Join(ev, "\n")
	})
	e.observe(fmt.Sprintf("broker %d is in no ISR of %q", target, e.t), 10*time.Second, false, func() (bool, string) {
		v, err := e.kc.BrokerView(e.ctx, e.rep.Assign[0][0], e.t)
		if err != nil {
			return false, err.Error()
		}
		ok := len(v.Topics[e.t].Partitions) == 2
		var ev []string
		for p, pv := range v.Topics[e.t].Partitions {
			ok = ok && !slices.Contains(pv.ISR, target)
			ev = append(ev, fmt.Sprintf("%s-%d: leader %d, ISR %v", e.t, p, pv.Leader, pv.ISR))
		}
		return ok, strings.Join(ev, "\n")
	})
	e.observe("the throttles stay on the live brokers and the topic (DescribeConfigs)", 5*time.Second, false, func() (bool, string) {
		live := slices.DeleteFunc(slices.Clone(e.rep.Assign[0]), func(id int32) bool { return id == target })
		es, err := e.kc.Overrides(e.ctx, append(slices.Clone(brokers.BrokerThrottleKeys), brokers.TopicThrottleKeys...), live, []string{e.t})
		if err != nil {
			return false, err.Error()
		}
		var ev []string
		for _, c := range es {
			ev = append(ev, fmt.Sprintf("%s %s %s=%s", c.Resource, c.Name, c.Key, c.Value))
		}
		return len(es) == 2*len(live)+2, strings.Join(ev, "\n")
	})
}
