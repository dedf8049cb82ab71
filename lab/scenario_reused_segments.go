package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

func init() {
	register(30, "reused-segments", reusedSegments,
		"(a lab whose brokers adopt a stale directory: Kafka < 3.0, or --ibp 2.7) the same sequence: the recreated T silently adopts the old segments and consumers read old messages")
}

// reusedSegments is ghost-topic's sequence, refused before it starts on a
// lab whose brokers refuse a stale directory.
func reusedSegments(name string) runFunc {
	run := withEnv((*env).ghostTopic)(name)
	return func(ctx context.Context, l *Lab, t string, out io.Writer) (*Report, error) {
		if l.State.RefusesStaleLog() {
			return nil, fmt.Errorf("%w: reused-segments needs a lab whose brokers adopt a stale directory (Kafka before 3.0, or IBP < 2.8): start one with `kremedy lab up --dir OTHER --ibp 2.7` or `--kafka-version 2.8.2`; on this lab (%s) the same sequence is `kremedy lab break ghost-topic`", ErrWrongLab, l.State.behaviour())
		}
		return run(ctx, l, t, out)
	}
}

// reuseSymptoms: a broker that adopts a stale directory (Kafka < 3.0, or
// IBP < 2.8) serves the deleted topic's messages as the recreated one's.
func (e *env) reuseSymptoms(v int32, led []int32) {
	t := e.t
	z, zst, _ := e.zk.Topic(e.ctx, t)
	for _, p := range led {
		e.observe(fmt.Sprintf("a consumer of the NEW %q reads the OLD messages from %s-%d (led by broker %d)", t, t, p, v), 30*time.Second, false, func() (bool, string) {
			rctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
			defer cancel()
			vals, err := kafka.ReadPartition(rctx, e.l.State.Config.Bootstrap(), t, p, e.l.KafkaOpts()...)
			if err != nil {
				return false, err.Error()
			}
			old := 0
			for _, s := range vals {
				if strings.HasPrefix(s, "old message") {
					old++
				}
			}
			ev := fmt.Sprintf("read %d records, %d of them written to the deleted topic", len(vals), old)
			if len(vals) > 0 {
				ev += fmt.Sprintf("; first: %q", vals[0])
			}
			return old == MessagesPerPartition, ev
		})
		e.observe(fmt.Sprintf("the brand-new %s-%d does not start at offset 0", t, p), 10*time.Second, false, func() (bool, string) {
			end, err := e.kc.ListOffsetsAt(e.ctx, v, t, p, -1)
			if err != nil {
				return false, err.Error()
			}
			return end > 0, fmt.Sprintf("latest offset %d on broker %d, though nothing was written to the new topic", end, v)
		})
		e.observe(fmt.Sprintf("the segment files under broker %d predate the new topic's znode (file dates prove adoption)", v), 0, false, func() (bool, string) {
			for _, d := range e.partitionDirs(v, t) {
				if !strings.HasSuffix(d, "-"+strconv.Itoa(int(p))) {
					continue
				}
				fi, err := os.Stat(filepath.Join(d, "00000000000000000000.log"))
				if err != nil {
					return false, err.Error()
				}
				return fi.ModTime().Before(zst.Ctime), fmt.Sprintf("%s modified %s; %s%s created %s",
					filepath.Join(d, "00000000000000000000.log"), fi.ModTime().Format(time.RFC3339Nano), e.zk.Chroot(), kafkazk.TopicPath(t), zst.Ctime.Format(time.RFC3339Nano))
			}
			return false, "no directory"
		})
	}
	if e.l.State.TopicIDs() {
		// 2.8: topic IDs exist, but the restarted broker attached its old
		// log to the new partition without comparing them.
		e.observe(fmt.Sprintf("broker %d's adopted directories still name the OLD topic ID in partition.metadata, ZooKeeper the new one (Kafka 2.8 does not compare them after a restart)", v), 10*time.Second, false, func() (bool, string) {
			var ev []string
			ok := len(led) > 0
			for _, d := range e.partitionDirs(v, t) {
				if !slices.ContainsFunc(led, func(p int32) bool { return strings.HasSuffix(d, fmt.Sprintf("/%s-%d", t, p)) }) {
					continue
				}
				id := diskTopicID(d)
				ev = append(ev, fmt.Sprintf("%s/partition.metadata topic_id=%s", d, text.OrDash(id)))
				ok = ok && id != "" && id == e.rep.OldID && id != z.TopicID
			}
			ev = append(ev, fmt.Sprintf("%s%s topic_id=%s", e.zk.Chroot(), kafkazk.TopicPath(t), z.TopicID))
			return ok, strings.Join(ev, "\n")
		})
	}
	e.observe(fmt.Sprintf("broker %d's log shows the leader-epoch truncation that marks adoption", v), 5*time.Second, true, func() (bool, string) {
		for _, f := range []string{"server.log", "state-change.log"} {
			if s := grepFile(filepath.Join(e.l.BrokerDir(int(v)), "logs", f), "caused truncation of conflicting entries"); s != "" {
				return true, f + ": " + s
			}
		}
		return false, ""
	})
}
