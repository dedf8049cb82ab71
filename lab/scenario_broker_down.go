package lab

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/kafka"
)

func init() {
	registerKRaft(110, "broker-down", onKRaft((*env).brokerDown),
		"T with RF 3, then broker B stopped with its own stop command: B leaves the registered, unfenced brokers; T's partitions are under-replicated, messages still flow")
}

// brokerDown stops one broker the way an operator does (its stop command,
// a controlled shutdown). The controller fences it: DescribeCluster no
// longer lists it among the serving brokers (4.x lists it fenced), every
// ISR shrinks without it, and acks=all producers carry on while ISR ≥
// min.insync.replicas.
func (e *env) brokerDown(ids []int32) error {
	t := e.t
	assign, b, err := e.victimTopic(ids)
	if err != nil {
		return err
	}
	if err := e.brokerCmd(b, "stop"); err != nil {
		return err
	}
	e.did("stopped broker %d over SSH (its kafka-stop: a controlled shutdown)", b)
	if err := e.record(Applied{DownBroker: b}); err != nil {
		return err
	}
	e.observe(fmt.Sprintf("broker %d left the registered, unfenced brokers (DescribeCluster)", b), 30*time.Second, false, func() (bool, string) {
		st, err := kraftBrokers(e.ctx, e.kc)
		if err != nil {
			return false, err.Error()
		}
		ev := fmt.Sprintf("unfenced %v", st.Unfenced)
		if st.SeesFenced {
			ev += fmt.Sprintf(", fenced %v (DescribeCluster v2 lists fenced brokers)", st.Fenced)
		} else {
			ev += " (DescribeCluster before v2 leaves fenced brokers out)"
		}
		return !slices.Contains(st.Unfenced, b), ev
	})
	e.observe(fmt.Sprintf("every partition of %q is under-replicated: broker %d is out of every ISR and leads none", t, b), 30*time.Second, false, func() (bool, string) {
		v, err := e.kc.BrokerView(e.ctx, ids[0], t)
		if err != nil {
			return false, err.Error()
		}
		ok := len(v.Topics[t].Partitions) == len(assign)
		var under []string
		for p, pv := range v.Topics[t].Partitions {
			if pv.Leader == b || pv.Leader < 0 || slices.Contains(pv.ISR, b) || len(pv.ISR) >= len(pv.Replicas) {
				ok = false
			} else {
				under = append(under, fmt.Sprintf("%s-%d", t, p))
			}
		}
		slices.Sort(under)
		return ok, fmt.Sprintf("under-replicated: %s; %s", strings.Join(under, ", "), isrSummary(v.Topics[t].Partitions))
	})
	e.observe(fmt.Sprintf("messages still flow: an acks=all producer writes to every partition of %q (ISR 2 ≥ min.insync.replicas 2)", t), 20*time.Second, false, func() (bool, string) {
		pr, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 10*time.Second, e.l.KafkaOpts()...)
		if err != nil {
			return false, err.Error()
		}
		defer pr.Close()
		for p := range assign {
			if err := pr.Produce(e.ctx, t, int32(p), "while broker down"); err != nil {
				return false, fmt.Sprintf("%s-%d: %v", t, p, err)
			}
		}
		return true, fmt.Sprintf("one record acknowledged on each of the %d partitions", len(assign))
	})
	e.rep.Next = fmt.Sprintf("%s names broker %d as the cause of %q's under-replicated partitions; start it again with `kremedy lab broker start %d --dir %s` (or `kremedy lab up --dir %s`); nothing needs cleaning up",
		e.diagnoseNext(), b, t, b, e.l.Dir, e.l.Dir)
	return e.verdict()
}
