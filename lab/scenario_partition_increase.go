package lab

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

func init() {
	register(50, "partition-increase", onReady((*env).partitionIncrease),
		"T (2 partitions) raised to 3 by hand in ZooKeeper over a leftover state znode: ZooKeeper lists partition 2, no broker serves it (report 000, problem 4)")
}

// partitionIncrease raises a topic's partition count by hand in
// ZooKeeper, the way `kafka-topics --zookeeper --alter --partitions` did,
// racing a leftover state znode of the new partition (an earlier attempt's):
// the controller fails to create the partition, and ZooKeeper lists a
// partition no broker serves — field report 000's problem 4.
func (e *env) partitionIncrease(ids []int32) error {
	t := e.t
	var err error
	full := assignment(ids)
	e.rep.Assign = full[:2]
	for p := range e.rep.Assign {
		e.rep.Messages[int32(p)] = MessagesPerPartition
	}
	if e.rep.OldID, err = e.createAndFill(t, e.rep.Assign, "live"); err != nil {
		return err
	}
	e.did("created %q with 2 partitions (replicas %v, topic ID %s) and %d messages per partition", t, e.rep.Assign, orNone(e.rep.OldID), MessagesPerPartition)
	newP, reps := int32(2), full[2]
	epoch := int32(0)
	if b, _, err := e.zk.Get(e.ctx, kafkazk.ControllerEpochPath); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			epoch = int32(n)
		}
	}
	state, _ := json.Marshal(kafkazk.PartitionState{ControllerEpoch: epoch, Leader: reps[0], Version: 1, LeaderEpoch: 0, ISR: reps})
	parent := fmt.Sprintf("%s/partitions/%d", kafkazk.TopicPath(t), newP)
	if err := e.zk.Create(e.ctx, parent, nil, nil); err != nil {
		return err
	}
	if err := e.zk.Create(e.ctx, kafkazk.PartitionStatePath(t, newP), state, nil); err != nil {
		return err
	}
	e.did("created %s%s by hand (leader %d, isr %v), as a failed earlier attempt leaves it", e.zk.Chroot(), kafkazk.PartitionStatePath(t, newP), reps[0], reps)
	if err := e.rewriteAssignment(t, func(a map[string][]int32) { a[strconv.Itoa(int(newP))] = reps }); err != nil {
		return err
	}
	e.did("raised %q to 3 partitions by writing partition %d (replicas %v) into %s%s, topic_id kept — what `kafka-topics --zookeeper --alter --partitions 3` did", t, newP, reps, e.zk.Chroot(), kafkazk.TopicPath(t))
	if err := e.record(Applied{}); err != nil {
		return err
	}
	time.Sleep(3 * time.Second) // the controller had its chance to create the partition
	e.observe(fmt.Sprintf("ZooKeeper assigns 3 partitions of %q", t), 0, false, func() (bool, string) {
		z, _, err := e.zk.Topic(e.ctx, t)
		if err != nil {
			return false, err.Error()
		}
		return len(z.Partitions) == 3, fmt.Sprintf("%s%s: partitions %v", e.zk.Chroot(), kafkazk.TopicPath(t), z.Partitions)
	})
	e.observe(fmt.Sprintf("no broker serves %s-%d: every broker's metadata still lists 2 partitions", t, newP), 5*time.Second, false, func() (bool, string) {
		ok := true
		var ev []string
		for _, id := range ids {
			v, err := e.kc.BrokerView(e.ctx, id, t)
			if err != nil {
				return false, err.Error()
			}
			tv := v.Topics[t]
			_, has := tv.Partitions[newP]
			ok = ok && tv.Present() && !has && len(tv.Partitions) == 2
			ev = append(ev, fmt.Sprintf("broker %d: %d partitions", id, len(tv.Partitions)))
		}
		return ok, strings.Join(ev, "\n")
	})
	e.observe(fmt.Sprintf("broker %d, which ZooKeeper names leader of %s-%d, does not serve it", reps[0], t, newP), 5*time.Second, false, func() (bool, string) {
		_, err := e.kc.ListOffsetsAt(e.ctx, reps[0], t, newP, -1)
		return err != nil, fmt.Sprintf("ListOffsets %s-%d on broker %d: %v", t, newP, reps[0], err)
	})
	needle := fmt.Sprintf("failed to change state for partition %s-%d from NewPartition to OnlinePartition", t, newP)
	e.observe("the controller's state-change log says it could not bring the partition online", 5*time.Second, false, func() (bool, string) {
		for n := 1; n <= e.l.State.Config.Brokers; n++ {
			if s := grepFile(filepath.Join(e.l.BrokerDir(n), "logs", "state-change.log"), needle); s != "" {
				return true, fmt.Sprintf("broker %d state-change.log: %s", n, s)
			}
		}
		return false, "no line with " + strconv.Quote(needle)
	})
	e.rep.Next = fmt.Sprintf("`kremedy diagnose --topic %s` names the partition ZooKeeper has and no broker serves; a restart of every broker, one at a time (`kremedy run rolling-restart`), makes the controller send it again", t)
	return e.verdict()
}
