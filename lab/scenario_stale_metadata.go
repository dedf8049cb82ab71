package lab

import (
	"fmt"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

func init() {
	register(40, "stale-metadata", onReady((*env).staleMetadata),
		"T's znodes deleted by hand while brokers run: brokers still list T; after one broker restarts, brokers disagree about T")
}

// staleMetadata deletes T's znodes by hand while every broker runs, then
// restarts one broker.
func (e *env) staleMetadata(ids []int32) error {
	t := e.t
	var err error
	if err := e.ensureBystander(ids); err != nil {
		return err
	}
	e.rep.Assign = assignment(ids)
	for p, reps := range e.rep.Assign {
		e.rep.Leaders[int32(p)] = reps[0]
		e.rep.Messages[int32(p)] = MessagesPerPartition
	}
	if e.rep.OldID, err = e.createAndFill(t, e.rep.Assign, "old"); err != nil {
		return err
	}
	e.did("created %q (replicas %v, topic ID %s) with %d messages per partition", t, e.rep.Assign, orNone(e.rep.OldID), MessagesPerPartition)
	for _, p := range []string{kafkazk.TopicPath(t), kafkazk.ConfigTopicsPath + "/" + t} {
		if err := e.zk.DeleteRecursive(e.ctx, p); err != nil {
			return err
		}
	}
	e.did("deleted %s%s and %s%s/%s by hand while every broker ran (no deletion marker, so the controller sends no StopReplica and no metadata update)",
		e.zk.Chroot(), kafkazk.TopicPath(t), e.zk.Chroot(), kafkazk.ConfigTopicsPath, t)
	if err := e.record(Applied{}); err != nil {
		return err
	}
	e.observe(fmt.Sprintf("ZooKeeper no longer has %q", t), 0, false, func() (bool, string) {
		ok, _, err := e.zk.Exists(e.ctx, kafkazk.TopicPath(t))
		if err != nil {
			return false, err.Error()
		}
		return !ok, fmt.Sprintf("%s%s exists=%v", e.zk.Chroot(), kafkazk.TopicPath(t), ok)
	})
	time.Sleep(2 * time.Second)
	e.observe(fmt.Sprintf("yet every broker still lists %q from its cached metadata", t), 5*time.Second, false, func() (bool, string) {
		return e.viewsOf(ids, func(id int32, present bool) bool { return present })
	})
	r, err := e.victim(ids)
	if err != nil {
		return err
	}
	e.rep.Victim = r
	if err := e.brokerCmd(r, "stop"); err != nil {
		return err
	}
	if err := e.brokerCmd(r, "start"); err != nil {
		return err
	}
	e.did("restarted broker %d over SSH (stop, then start); it loaded fresh metadata from the controller", r)
	e.observe(fmt.Sprintf("brokers now disagree: broker %d answers UNKNOWN_TOPIC_OR_PARTITION for %q, the others still list it", r, t), 30*time.Second, false, func() (bool, string) {
		return e.viewsOf(ids, func(id int32, present bool) bool { return present == (id != r) })
	})
	e.observe(fmt.Sprintf("broker %d loaded %q's old directories as orphans (on disk, unknown to ZooKeeper)", r, t), 0, false, func() (bool, string) {
		dirs := e.partitionDirs(r, t)
		return len(dirs) > 0, strings.Join(dirs, "\n")
	})
	e.rep.Next = fmt.Sprintf("only a restart of every broker clears the stale caches; kremedy's topic-cleanup runbook does it safely for %q", t)
	return e.verdict()
}
