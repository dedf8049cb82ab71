package lab

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

func init() {
	register(10, "stuck-delete", onReady((*env).stuckDelete),
		"T (replicated, with messages) is deleted while one replica's broker is down: T vanishes from listings, its znodes stay pending deletion, creating T again is refused")
}

// stuckDelete deletes T while the victim, which holds a replica of every
// partition, is stopped; ghost-topic and reused-segments start with it.
func (e *env) stuckDelete(ids []int32) error {
	var err error
	if err := e.ensureBystander(ids); err != nil {
		return err
	}
	e.rep.Assign = assignment(ids)
	for p, reps := range e.rep.Assign {
		e.rep.Leaders[int32(p)] = reps[0]
		e.rep.Messages[int32(p)] = MessagesPerPartition
	}
	if e.rep.OldID, err = e.createAndFill(e.t, e.rep.Assign, "old"); err != nil {
		return err
	}
	e.did("created %q (%d partitions, replicas %v, topic ID %s) and wrote %d messages per partition with acks=all",
		e.t, len(e.rep.Assign), e.rep.Assign, orNone(e.rep.OldID), MessagesPerPartition)
	v, err := e.victim(ids)
	if err != nil {
		return err
	}
	e.rep.Victim = v
	if err := e.brokerCmd(v, "stop"); err != nil {
		return err
	}
	e.did("stopped broker %d over SSH (it holds a replica of every partition of %q)", v, e.t)
	if err := e.kc.DeleteTopic(e.ctx, e.t); err != nil {
		return err
	}
	e.did("deleted %q with the Admin API (what `kafka-topics --delete` does); the call reported success", e.t)
	if err := e.record(Applied{DownBroker: v}); err != nil {
		return err
	}

	e.observe(fmt.Sprintf("%q is gone from `kafka-topics --list` (brokers dropped it from their caches)", e.t), 15*time.Second, false, func() (bool, string) {
		names, err := e.kc.ListTopics(e.ctx)
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(names, e.t), fmt.Sprintf("topics listed: %v", names)
	})
	// Give the controller time to finish, were it able to: it is not.
	time.Sleep(3 * time.Second)
	e.observe(fmt.Sprintf("its znodes stay: %s and %s are still in ZooKeeper", kafkazk.DeleteTopicsPath+"/"+e.t, kafkazk.TopicPath(e.t)), 0, false, func() (bool, string) {
		a, _, err1 := e.zk.Exists(e.ctx, kafkazk.DeleteTopicsPath+"/"+e.t)
		b, st, err2 := e.zk.Exists(e.ctx, kafkazk.TopicPath(e.t))
		if err := errors.Join(err1, err2); err != nil {
			return false, err.Error()
		}
		return a && b, fmt.Sprintf("%s%s/%s exists=%v; %s%s exists=%v (version %d)", e.zk.Chroot(), kafkazk.DeleteTopicsPath, e.t, a, e.zk.Chroot(), kafkazk.TopicPath(e.t), b, st.Version)
	})
	e.observe(fmt.Sprintf("creating %q again is refused", e.t), 0, false, func() (bool, string) {
		_, err := e.kc.CreateTopic(e.ctx, e.t, e.rep.Assign, 0, 0, nil)
		var ce *kafka.CreateError
		if errors.As(err, &ce) {
			return errors.Is(err, kerr.TopicAlreadyExists), err.Error()
		}
		if err == nil {
			return false, "the create succeeded"
		}
		return false, err.Error()
	})
	e.observe(fmt.Sprintf("broker %d still holds %q's segments on disk", v, e.t), 0, false, func() (bool, string) {
		dirs := e.partitionDirs(v, e.t)
		return len(dirs) > 0, strings.Join(dirs, "\n")
	})
	e.observe("the controller halted the deletion because a replica is offline", 10*time.Second, true, func() (bool, string) {
		s := e.controllerLogLine("Halted deletion of topics " + e.t)
		return s != "", s
	})
	e.rep.Next = fmt.Sprintf("broker %d stays stopped (starting it would let the deletion finish). Continue the story with `kremedy lab break ghost-topic --topic %s`, or diagnose/repair it with kremedy.", v, e.t)
	return e.verdict()
}
