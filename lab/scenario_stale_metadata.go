package lab

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

func runStaleMetadata(ctx context.Context, l *Lab, t string, out io.Writer) (*Report, error) {
	e, err := newEnv(ctx, l, "stale-metadata", t, out)
	if err != nil {
		return nil, err
	}
	defer e.close()
	ids, err := e.ready()
	if err != nil {
		return e.rep, err
	}
	if err := e.ensureBystander(ids); err != nil {
		return e.rep, err
	}
	e.rep.Assign = assignment(ids)
	for p, reps := range e.rep.Assign {
		e.rep.Leaders[int32(p)] = reps[0]
		e.rep.Messages[int32(p)] = MessagesPerPartition
	}
	if e.rep.OldID, err = e.createAndFill(t, e.rep.Assign, "old"); err != nil {
		return e.rep, err
	}
	e.did("created %q (replicas %v, topic ID %s) with %d messages per partition", t, e.rep.Assign, orNone(e.rep.OldID), MessagesPerPartition)
	for _, p := range []string{kafkazk.TopicPath(t), kafkazk.ConfigTopicsPath + "/" + t} {
		if err := e.zk.DeleteRecursive(ctx, p); err != nil {
			return e.rep, err
		}
	}
	e.did("deleted %s%s and %s%s/%s by hand while every broker ran (no deletion marker, so the controller sends no StopReplica and no metadata update)",
		e.zk.Chroot(), kafkazk.TopicPath(t), e.zk.Chroot(), kafkazk.ConfigTopicsPath, t)
	if err := e.record(Applied{}); err != nil {
		return e.rep, err
	}
	e.observe(fmt.Sprintf("ZooKeeper no longer has %q", t), 0, false, func() (bool, string) {
		ok, _, err := e.zk.Exists(ctx, kafkazk.TopicPath(t))
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
		return e.rep, err
	}
	e.rep.Victim = r
	if err := e.brokerCmd(r, "stop"); err != nil {
		return e.rep, err
	}
	if err := e.brokerCmd(r, "start"); err != nil {
		return e.rep, err
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
	return e.rep, e.verdict()
}
