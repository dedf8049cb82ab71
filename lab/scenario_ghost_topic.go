package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

func init() {
	register(20, "ghost-topic", withEnv((*env).ghostTopic),
		"after stuck-delete: T's znodes deleted by hand, the down broker returns with its old segments, T recreated: on 3.x INCONSISTENT_TOPIC_ID, NotLeaderOrFollower, under-replicated partitions; on 2.7–2.8 silent adoption; on 2.4–2.6 no leaders at all")
}

// recreate creates the topic again under the same name and assignment. The
// create must reach a controller whose cache no longer has it; an attempt
// whose answer was an error (a timeout waiting for the metadata to
// propagate, on 2.4) may still have written the znode: a later
// TOPIC_ALREADY_EXISTS is then our own create, taken once the znode holds
// our assignment.
func (e *env) recreate(ctx context.Context) (string, error) {
	t := e.t
	var newID string
	var createErr error
	tried := false
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := waitFor(cctx, 500*time.Millisecond, func() bool {
		actx, acancel := context.WithTimeout(cctx, 10*time.Second)
		newID, createErr = e.kc.CreateTopic(actx, t, e.rep.Assign, 0, 0, nil)
		acancel()
		if errors.Is(createErr, kerr.TopicAlreadyExists) && tried {
			z, _, zerr := e.zk.Topic(cctx, t)
			if as, aerr := z.Assignment(); zerr == nil && aerr == nil && len(as) == len(e.rep.Assign) {
				newID, createErr = z.TopicID, nil
			}
		}
		tried = true
		return createErr == nil
	})
	if err != nil {
		return "", fmt.Errorf("recreate %q: %w (last answer: %v)", t, err, createErr)
	}
	return newID, nil
}

// ghostTopic is the engineer's fix from report 000: stuck deletion, znodes
// deleted by hand while brokers run, the down broker back with its old
// segments, the topic recreated under the same name. reused-segments is the
// same sequence; what the recreated topic then does depends on the lab's
// release (stuckSymptoms, ghostSymptoms, reuseSymptoms).
func (e *env) ghostTopic() error {
	ctx, t := e.ctx, e.t
	pending, _, err := e.zk.Exists(ctx, kafkazk.DeleteTopicsPath+"/"+t)
	if err != nil {
		return err
	}
	if pending {
		return fmt.Errorf("%w: %q is already pending deletion from an earlier run; start from a clean topic name", ErrWrongLab, t)
	}
	fmt.Fprintf(e.out, "  first, the stuck deletion (stuck-delete):\n")
	ids, err := e.ready()
	if err == nil {
		err = e.stuckDelete(ids)
	}
	if err != nil {
		return fmt.Errorf("stuck-delete stage: %w", err)
	}
	e.rep.Observed = nil // stuck-delete's symptoms are now history
	v := e.rep.Victim

	for _, p := range []string{kafkazk.TopicPath(t), kafkazk.ConfigTopicsPath + "/" + t, kafkazk.DeleteTopicsPath + "/" + t} {
		if err := e.zk.DeleteRecursive(ctx, p); err != nil {
			return err
		}
	}
	e.did("deleted %s%s (with its partition states), %s%s/%s and %s%s/%s by hand while brokers ran — the engineer's fix in the report",
		e.zk.Chroot(), kafkazk.TopicPath(t), e.zk.Chroot(), kafkazk.ConfigTopicsPath, t, e.zk.Chroot(), kafkazk.DeleteTopicsPath, t)
	if err := e.brokerCmd(v, "start"); err != nil {
		return err
	}
	e.did("started broker %d over SSH; it came back with %d old partition directories of %q", v, len(e.partitionDirs(v, t)), t)
	e.l.State.Scenarios[len(e.l.State.Scenarios)-1].DownBroker = 0
	if err := e.l.Save(); err != nil {
		return err
	}
	newID, err := e.recreate(ctx)
	if err != nil {
		return err
	}
	e.rep.NewID = newID
	e.did("recreated %q under the same name and assignment %v (new topic ID %s); creation consulted ZooKeeper only, never broker %d's disk", t, e.rep.Assign, orNone(newID), v)
	if err := e.record(Applied{}); err != nil {
		return err
	}

	// Partitions the returning broker leads, and those it follows.
	var led, followed []int32
	for p, reps := range e.rep.Assign {
		if reps[0] == v {
			led = append(led, int32(p))
		} else if slices.Contains(reps, v) {
			followed = append(followed, int32(p))
		}
	}
	if e.l.State.StuckRecreate() {
		e.stuckSymptoms(led)
		e.rep.Next = fmt.Sprintf("run kremedy's topic-cleanup runbook on %s: the full restart gives the controller a fresh state, and the wipe removes the old segments broker %d brought back", e.l.InventoryPath(), v)
	} else if e.l.State.RefusesStaleLog() {
		e.ghostSymptoms(v, led, followed)
		e.rep.Next = fmt.Sprintf("run kremedy's topic-cleanup runbook on %s: detach clients, delete %q's znodes, stop every broker, wipe %q's segments, restart, verify", e.l.InventoryPath(), t, t)
	} else {
		e.reuseSymptoms(v, led)
		e.rep.Next = fmt.Sprintf("the new %q serves the old topic's data. Repair with kremedy's topic-cleanup runbook (wipe the segments while every broker is stopped)", t)
	}
	return e.verdict()
}

func (e *env) ghostSymptoms(v int32, led, followed []int32) {
	t := e.t
	e.observe(fmt.Sprintf("broker %d's directories of %q carry the OLD topic ID, ZooKeeper the new one (INCONSISTENT_TOPIC_ID)", v, t), 10*time.Second, false, func() (bool, string) {
		z, _, err := e.zk.Topic(e.ctx, t)
		if err != nil {
			return false, err.Error()
		}
		var ev []string
		ok := len(e.partitionDirs(v, t)) > 0
		for _, d := range e.partitionDirs(v, t) {
			id := diskTopicID(d)
			ev = append(ev, fmt.Sprintf("%s/partition.metadata topic_id=%s", d, id))
			ok = ok && id != "" && id != z.TopicID
		}
		ev = append(ev, fmt.Sprintf("%s%s topic_id=%s", e.zk.Chroot(), kafkazk.TopicPath(t), z.TopicID))
		return ok, strings.Join(ev, "\n")
	})
	for _, p := range led {
		// Up to 90 s: a broker just restarted beside thousands of
		// partitions (the scale lab, a loaded CI machine once missed 20 s)
		// may not yet have handled the recreated topic's LeaderAndIsr. The
		// wait ends at the first read that shows the symptom.
		e.observe(fmt.Sprintf("broker %d is leader of %s-%d in ZooKeeper yet answers NOT_LEADER_OR_FOLLOWER", v, t, p), 90*time.Second, false, func() (bool, string) {
			st, _, err := e.zk.PartitionStateOf(e.ctx, t, p)
			if err != nil {
				return false, err.Error()
			}
			_, lerr := e.kc.ListOffsetsAt(e.ctx, v, t, p, -1)
			ev := fmt.Sprintf("state znode leader=%d isr=%v; ListOffsets on broker %d: %v", st.Leader, st.ISR, v, lerr)
			return st.Leader == v && errors.Is(lerr, kerr.NotLeaderForPartition), ev
		})
		e.observe(fmt.Sprintf("producing to %s-%d fails", t, p), 0, false, func() (bool, string) {
			pr, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 6*time.Second, e.l.KafkaOpts()...)
			if err != nil {
				return false, err.Error()
			}
			defer pr.Close()
			perr := pr.Produce(e.ctx, t, p, "new message")
			return perr != nil, fmt.Sprintf("acks=all produce: %v", perr)
		})
	}
	// A customer's write (acks=1: the leader alone) moves the leader's log
	// end past what broker v has: only then can the leader see v fall
	// behind, as it does on a cluster that is written to. Without it a
	// partition nobody writes to may keep v in its ISR.
	if len(followed) > 0 {
		if pr, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 6*time.Second, append(e.l.KafkaOpts(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())...); err == nil {
			for _, p := range followed {
				_ = pr.Produce(e.ctx, t, p, "a customer's write")
			}
			pr.Close()
		}
	}
	for _, p := range followed {
		e.observe(fmt.Sprintf("%s-%d is under-replicated: broker %d never fetches and left the ISR", t, p, v), 45*time.Second, false, func() (bool, string) {
			st, _, err := e.zk.PartitionStateOf(e.ctx, t, p)
			if err != nil {
				return false, err.Error()
			}
			view, err := e.kc.BrokerView(e.ctx, st.Leader, t)
			if err != nil {
				return false, err.Error()
			}
			pv := view.Topics[t].Partitions[p]
			return !slices.Contains(pv.ISR, v) && len(pv.ISR) < len(pv.Replicas),
				fmt.Sprintf("leader %d reports replicas=%v isr=%v", st.Leader, pv.Replicas, pv.ISR)
		})
	}
	e.observe(fmt.Sprintf("broker %d's state-change.log names the topic ID mismatch", v), 5*time.Second, true, func() (bool, string) {
		s := grepFile(filepath.Join(e.l.BrokerDir(int(v)), "logs", "state-change.log"), "Topic ID in memory")
		return s != "", s
	})
}

// stuckSymptoms: before 2.7 the controller still queues the topic for
// deletion, so the recreated topic's replicas never become NewReplica and
// no broker serves it.
func (e *env) stuckSymptoms(led []int32) {
	t := e.t
	ids, _ := e.zk.BrokerIDs(e.ctx)
	e.observe(fmt.Sprintf("ZooKeeper has the recreated %q, yet no broker serves it (UNKNOWN_TOPIC_OR_PARTITION): the controller still queues the old topic for deletion (Kafka < 2.7)", t), 20*time.Second, false, func() (bool, string) {
		ok, ev := e.viewsOf(ids, func(_ int32, present bool) bool { return !present })
		exists, _, err := e.zk.Exists(e.ctx, kafkazk.TopicPath(t))
		return ok && exists && err == nil, fmt.Sprintf("%s%s exists=%v; %s", e.zk.Chroot(), kafkazk.TopicPath(t), exists, ev)
	})
	e.observe(fmt.Sprintf("producing to %s-0 fails", t), 0, false, func() (bool, string) {
		pr, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 6*time.Second, e.l.KafkaOpts()...)
		if err != nil {
			return false, err.Error()
		}
		defer pr.Close()
		perr := pr.Produce(e.ctx, t, 0, "new message")
		return perr != nil, fmt.Sprintf("acks=all produce: %v", perr)
	})
	e.observe("the controller's state-change.log refuses the new replicas", 5*time.Second, true, func() (bool, string) {
		s := e.controllerStateChange("to NewReplica failed")
		return s != "", s
	})
}
