package lab

import (
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
)

// CrashPartitions is the partition count of broker-crash's topic, as in
// field report 001 (`test`: 10 partitions).
const CrashPartitions = 10

func init() {
	register(70, "broker-crash", onReady((*env).brokerCrash),
		"(report 001) T with 10 partitions replicated on every broker (up to 4), then broker 1 killed with SIGKILL: new leaders, broker 1 out of every ISR, messages still flow; the cause is one broker down, nothing to clean up")
}

// brokerCrash is field report 001: a topic replicated on every broker
// (up to 4, the report's replication factor), then broker 1 killed with
// SIGKILL. The controller moves leadership and shrinks every ISR while
// messages still flow; nothing needs cleaning up.
func (e *env) brokerCrash(ids []int32) error {
	t := e.t
	ctrl, err := e.zk.Controller(e.ctx)
	if err != nil {
		return err
	}
	const victim = int32(1)
	rf := min(4, len(ids))
	var assign [][]int32
	for p := 0; p < CrashPartitions; p++ {
		var reps []int32
		for i := 0; i < rf; i++ {
			reps = append(reps, ids[(p+i)%len(ids)])
		}
		assign = append(assign, reps)
	}
	e.rep.Assign, e.rep.Victim = assign, victim
	for p, reps := range assign {
		e.rep.Leaders[int32(p)] = reps[0]
		e.rep.Messages[int32(p)] = MessagesPerPartition
	}
	id, err := e.createAndFill(t, assign, "old")
	if err != nil {
		return err
	}
	e.rep.OldID = id
	e.did("created %q (%d partitions, replication factor %d, every broker a replica; topic ID %s) and wrote %d messages per partition with acks=all", t, CrashPartitions, rf, orNone(id), MessagesPerPartition)
	pid := e.l.BrokerPID(int(victim))
	if pid <= 0 {
		return fmt.Errorf("%w: broker %d has no process", ErrWrongLab, victim)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL broker %d (pid %d): %w", victim, pid, err)
	}
	note := ""
	if victim == ctrl {
		note = " — it was the controller, so a controller election follows too"
	}
	e.did("killed broker %d with SIGKILL (pid %d; no controlled shutdown)%s", victim, pid, note)
	if err := e.record(Applied{DownBroker: victim}); err != nil {
		return err
	}
	e.crashSymptoms(victim, ids[len(ids)-1], assign)
	e.rep.Next = fmt.Sprintf("`kremedy diagnose` names broker %d as the cause (broker-down) and the under-replicated partitions as its effect: start it again (`kremedy lab up --dir %s`); no cleanup is needed", victim, e.l.Dir)
	return e.verdict()
}

// crashSymptoms are report 001's observations after the crash: the broker
// deregistered, new leaders and ISRs without it, messages still flowing.
func (e *env) crashSymptoms(victim, survivor int32, assign [][]int32) {
	t := e.t
	e.observe(fmt.Sprintf("broker %d leaves /brokers/ids when its ZooKeeper session expires", victim), 30*time.Second, false, func() (bool, string) {
		reg, err := e.zk.BrokerIDs(e.ctx)
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(reg, victim), fmt.Sprintf("registered brokers %v", reg)
	})
	e.observe(fmt.Sprintf("every partition of %q has a new leader other than broker %d, and broker %d is out of every ISR", t, victim, victim), 30*time.Second, false, func() (bool, string) {
		v, err := e.kc.BrokerView(e.ctx, survivor, t)
		if err != nil {
			return false, err.Error()
		}
		ok, moved := true, 0
		for p, pv := range v.Topics[t].Partitions {
			if pv.Leader == victim || pv.Leader < 0 || slices.Contains(pv.ISR, victim) {
				ok = false
			}
			if assign[p][0] == victim && pv.Leader != victim && pv.Leader >= 0 {
				moved++
			}
		}
		return ok, fmt.Sprintf("broker %d's metadata: %d partitions that broker %d led have new leaders; %s", survivor, moved, victim, isrSummary(v.Topics[t].Partitions))
	})
	e.observe(fmt.Sprintf("messages still flow: an acks=all producer writes to every partition of %q", t), 20*time.Second, false, func() (bool, string) {
		pr, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 10*time.Second, e.l.KafkaOpts()...)
		if err != nil {
			return false, err.Error()
		}
		defer pr.Close()
		for p := range assign {
			if err := pr.Produce(e.ctx, t, int32(p), "after the crash"); err != nil {
				return false, fmt.Sprintf("%s-%d: %v", t, p, err)
			}
		}
		return true, fmt.Sprintf("one record acknowledged on each of the %d partitions", len(assign))
	})
}

func isrSummary(parts map[int32]ports.PartitionView) string {
	var s []string
	for p := int32(0); p < int32(len(parts)); p++ {
		pv := parts[p]
		s = append(s, fmt.Sprintf("%d: leader %d isr %v", p, pv.Leader, pv.ISR))
	}
	return fmt.Sprint(s)
}
