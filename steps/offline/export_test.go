package offline

import (
	"slices"
	"testing"

	"github.com/kremedy/kremedy/steps/ports"
)

// KafkaFake is the fake Kafka of offline_test.go, for run_test.go.
type KafkaFake = kafkaFake

// FakeCluster is offline_test.go's cluster.
func FakeCluster(t *testing.T, hostDown bool) ports.Cluster { return cluster(t, hostDown) }

// SetProducers sets what DescribeProducers answers.
func (k *kafkaFake) SetProducers(p []ports.ProducerUse) { k.producers = p }

// WithTxns is c whose Kafka port answers Transactions with txns; after
// the first such answer DescribeProducers answers later (when not nil).
func WithTxns(c ports.Cluster, txns map[int64]ports.TxnState, later []ports.ProducerUse) ports.Cluster {
	k := c.Kafka.(*kafkaFake)
	k.txns, k.producersLater = txns, later
	c.Kafka = txnFake{k}
	return c
}

// FailTxnsAfter makes coordinator reads after the first n fail.
func (k *kafkaFake) FailTxnsAfter(n int) { k.txnFailAfter = n }

// SetRun sets each broker's log end and how many elections fail first.
func (k *kafkaFake) SetRun(ends map[int32]int64, failElect int) {
	k.ends, k.failElect = ends, failElect
}

// Partition is pay-p as Kafka now holds it.
func (k *kafkaFake) Partition(p int32) ports.PartitionView { return k.parts[p] }

// Reorders counts the reorders asked.
func (k *kafkaFake) Reorders() int { return k.reorders }

// SetGroupsErr sets what Groups returns beside the groups.
func (k *kafkaFake) SetGroupsErr(err error) { k.groupsErr = err }

// Kill stops broker id and its host (neither answers any more).
func Kill(c ports.Cluster, id int32) {
	k := c.Kafka.(*kafkaFake)
	k.live = slices.DeleteFunc(k.live, func(b int32) bool { return b == id })
	h := c.Hosts.(*shHosts)
	h.down = append(h.down, id)
}

// Elections counts the UNCLEAN elections asked.
func (k *kafkaFake) Elections() int { return k.elections }

// LagViews makes the next n metadata reads after a reorder show the
// replica lists from before it.
func (k *kafkaFake) LagViews(n int) { k.lag = n }
