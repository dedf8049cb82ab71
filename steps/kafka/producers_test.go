package kafka

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kremedy/kremedy/steps/ports"
)

// answer builds one broker's DescribeProducers answer: per partition an
// error code, or the producers (id → last timestamp in ms) it tracks.
func answer(broker int32, parts map[int32]any) producerAnswer {
	resp := kmsg.NewPtrDescribeProducersResponse()
	t := kmsg.NewDescribeProducersResponseTopic()
	t.Topic = "orders"
	for p, v := range parts {
		rp := kmsg.NewDescribeProducersResponseTopicPartition()
		rp.Partition = p
		switch v := v.(type) {
		case *kerr.Error:
			rp.ErrorCode = v.Code
		case map[int64]int64:
			for id, ts := range v {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.LastTimestamp, ap.CurrentTxnStartOffset = id, ts, -1
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
		}
		t.Partitions = append(t.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, t)
	return producerAnswer{broker: broker, resp: resp}
}

func TestMergeProducers(t *testing.T) {
	notHere := kerr.NotLeaderForPartition
	t.Run("leader and follower see the same producer: listed once, latest timestamp", func(t *testing.T) {
		got, err := mergeProducers("orders", []int32{0}, []producerAnswer{
			answer(1, map[int32]any{0: map[int64]int64{7: 1000}}),
			answer(2, map[int32]any{0: map[int64]int64{7: 2000}}),
			answer(3, map[int32]any{0: notHere}),
		})
		if err != nil || len(got) != 1 || got[0].ProducerID != 7 || !got[0].LastTimestamp.Equal(time.UnixMilli(2000)) {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("every broker hosts no replica: unhosted", func(t *testing.T) {
		_, err := mergeProducers("orders", []int32{2}, []producerAnswer{
			answer(1, map[int32]any{2: notHere}), answer(2, map[int32]any{2: kerr.UnknownTopicOrPartition}), answer(3, map[int32]any{2: notHere}),
		})
		if !errors.Is(err, ports.ErrUnhosted) {
			t.Fatalf("want ErrUnhosted, got %v", err)
		}
	})
	t.Run("a broker whose request failed may be the leader: no answer, even though a follower answered", func(t *testing.T) {
		got, err := mergeProducers("orders", []int32{0}, []producerAnswer{
			answer(1, map[int32]any{0: map[int64]int64{}}),
			{broker: 2, err: errors.New("i/o timeout")},
			answer(3, map[int32]any{0: notHere}),
		})
		if err == nil || errors.Is(err, ports.ErrUnhosted) || !strings.Contains(err.Error(), "orders-0: no answer (broker 2: i/o timeout") {
			t.Fatalf("want a no-answer error naming broker 2, got %+v, %v", got, err)
		}
	})
	t.Run("another partition error, or no entry: no answer", func(t *testing.T) {
		_, err := mergeProducers("orders", []int32{0, 1}, []producerAnswer{
			answer(1, map[int32]any{0: kerr.KafkaStorageError, 1: map[int64]int64{}}),
			answer(2, map[int32]any{0: map[int64]int64{}}),
		})
		if err == nil || !strings.Contains(err.Error(), "orders-0: no answer") || !strings.Contains(err.Error(), "orders-1: no answer (broker 2: no entry") {
			t.Fatalf("got %v", err)
		}
	})
}
