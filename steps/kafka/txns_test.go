package kafka_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionsOnKfake: a transactional producer's open transaction is
// seen by DescribeProducers (its start offset, epoch) and by its
// coordinator (Ongoing, the partition in it); once committed, the
// coordinator no longer has it ongoing and the partition has no open transaction; a
// producer id no transactional id uses is absent.
func TestTransactionsOnKfake(t *testing.T) {
	c, kc := kfakeClient(t, kfake.SeedTopics(1, "pay"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("billing-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := pr.ProduceSync(ctx, &kgo.Record{Topic: "pay", Partition: 0, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prods, err := kc.Producers(ctx, "pay", []int32{0}, nil)
	if err != nil || len(prods) != 1 || prods[0].TxnStart != 0 {
		t.Fatalf("DescribeProducers: %+v, %v", prods, err)
	}
	pid := prods[0].ProducerID
	got, err := kc.Transactions(ctx, []int64{pid, pid + 1000})
	if err != nil {
		t.Fatal(err)
	}
	st, ok := got[pid]
	if len(got) != 1 || !ok || st.TxnID != "billing-txn" || st.State != "Ongoing" || !slices.Equal(st.Partitions["pay"], []int32{0}) || st.ProducerEpoch != prods[0].Epoch {
		t.Fatalf("the coordinator's answer for producer %d (epoch %d): %+v", pid, prods[0].Epoch, got)
	}
	if err := pr.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	got, err = kc.Transactions(ctx, []int64{pid})
	// Kafka says CompleteCommit, kfake Empty: either way not Ongoing, and
	// no partition waits for its marker.
	if st := got[pid]; err != nil || st.State == "Ongoing" || st.State == "" || len(st.Partitions["pay"]) != 0 {
		t.Fatalf("after the commit: %+v, %v", got, err)
	}
	if none, err := kc.Transactions(ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("no producer asked: %+v, %v", none, err)
	}
}
