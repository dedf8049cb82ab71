package lab

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

func init() {
	register(60, "ghost-assignment", onReady((*env).ghostAssignment),
		"T's assignment rewritten by hand to name a broker that does not exist: ZooKeeper and every broker disagree about T's replicas")
}

// ghostAssignment rewrites a topic's assignment by hand so that it names
// a broker that does not exist (a decommissioned broker, a hand edit gone
// wrong): ZooKeeper and every broker then disagree about the replicas.
func (e *env) ghostAssignment(ids []int32) error {
	t := e.t
	var err error
	e.rep.Assign = [][]int32{{ids[0], ids[1]}}
	e.rep.Messages[0] = MessagesPerPartition
	if e.rep.OldID, err = e.createAndFill(t, e.rep.Assign, "live"); err != nil {
		return err
	}
	e.did("created %q (1 partition, replicas %v, topic ID %s) with %d messages", t, e.rep.Assign[0], orNone(e.rep.OldID), MessagesPerPartition)
	ghost := slices.Max(ids) + 1
	for e.l.State.Config.Brokers >= int(ghost) {
		ghost++
	}
	e.rep.Victim = ghost
	if err := e.rewriteAssignment(t, func(a map[string][]int32) { a["0"] = []int32{ids[0], ghost} }); err != nil {
		return err
	}
	e.did("rewrote %s%s by hand (topic_id kept, version-checked) so that partition 0's replicas are [%d %d]: broker %d is in no inventory and not registered",
		e.zk.Chroot(), kafkazk.TopicPath(t), ids[0], ghost, ghost)
	if err := e.record(Applied{}); err != nil {
		return err
	}
	time.Sleep(3 * time.Second) // the controller had its chance to act on the change
	e.observe(fmt.Sprintf("ZooKeeper still assigns %s-0 to [%d %d] (the controller does not restore or apply an assignment changed by hand)", t, ids[0], ghost), 0, false, func() (bool, string) {
		z, _, err := e.zk.Topic(e.ctx, t)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(z.Partitions["0"], []int32{ids[0], ghost}) && z.TopicID == e.rep.OldID,
			fmt.Sprintf("%s%s: partitions %v, topic_id %s", e.zk.Chroot(), kafkazk.TopicPath(t), z.Partitions, orNone(z.TopicID))
	})
	e.observe(fmt.Sprintf("every broker still serves %s-0 with replicas %v", t, e.rep.Assign[0]), 5*time.Second, false, func() (bool, string) {
		return e.replicasOn(ids, t, 0, e.rep.Assign[0])
	})
	e.observe(fmt.Sprintf("broker %d is not registered", ghost), 0, false, func() (bool, string) {
		reg, err := e.zk.BrokerIDs(e.ctx)
		return err == nil && !slices.Contains(reg, ghost), fmt.Sprintf("registered %v", reg)
	})
	e.rep.Next = fmt.Sprintf("`kremedy diagnose --topic %s` names broker %d (not in the inventory: a reassignment fixes it) and ZooKeeper's and the brokers' replicas; a reassignment, a controller failover or the KRaft migration would stall on it", t, ghost)
	return e.verdict()
}

// replicasOn checks that every broker serves t-p with replicas want.
func (e *env) replicasOn(ids []int32, t string, p int32, want []int32) (bool, string) {
	ok := true
	var ev []string
	for _, id := range ids {
		v, err := e.kc.BrokerView(e.ctx, id, t)
		if err != nil {
			return false, err.Error()
		}
		pv, has := v.Topics[t].Partitions[p]
		ok = ok && has && slices.Equal(pv.Replicas, want)
		ev = append(ev, fmt.Sprintf("broker %d: %s-%d replicas %v", id, t, p, pv.Replicas))
	}
	return ok, strings.Join(ev, "\n")
}
