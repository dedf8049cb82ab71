package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/steps/kafka"
)

// FillTopicName is the name of filled topic i: fill-00000, fill-00001, …
func FillTopicName(i int) string { return fmt.Sprintf("fill-%05d", i) }

// fillBatch is how many topics one CreateTopics request creates: the
// controller writes each topic's znodes and sends one LeaderAndIsr per
// broker for the batch.
const fillBatch = 50

// Fill gives a running lab real partitions at scale (`kremedy lab fill`):
// topics fill-00000… of partitions partitions each at replication factor
// rf, created through Kafka (CreateTopics, in batches), as a cluster that
// grew to that size has them — znodes, logs on the brokers' disks, leaders
// and ISRs. It returns when every broker serves every partition with a
// leader. Topics that exist are left as they are (Fill is idempotent).
func Fill(ctx context.Context, l *Lab, topics, partitions, rf int, out io.Writer) error {
	c := l.State.Config
	switch {
	case topics < 1 || topics > 20000:
		return fmt.Errorf("fill: %d topics: want 1 to 20000; nothing was created", topics)
	case partitions < 1 || partitions > 1000:
		return fmt.Errorf("fill: %d partitions: want 1 to 1000; nothing was created", partitions)
	case rf < 1 || rf > c.Brokers:
		return fmt.Errorf("fill: replication factor %d: want 1 to the lab's %d brokers; nothing was created", rf, c.Brokers)
	}
	start := time.Now()
	kc, err := kafka.New(c.Bootstrap(), l.KafkaOpts()...)
	if err != nil {
		return err
	}
	defer kc.Close()
	adm := kc.Admin()
	have, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("fill: list the lab's topics: %w", err)
	}
	var todo []string
	for i := range topics {
		if !have.Has(FillTopicName(i)) {
			todo = append(todo, FillTopicName(i))
		}
	}
	for i := 0; i < len(todo); i += fillBatch {
		batch := todo[i:min(i+fillBatch, len(todo))]
		for {
			res, err := adm.CreateTopics(ctx, int32(partitions), int16(rf), nil, batch...)
			if err == nil {
				var left []string
				for _, r := range res.Sorted() {
					if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
						if !errors.Is(r.Err, kerr.RequestTimedOut) {
							return fmt.Errorf("fill: create %s: %w", r.Topic, r.Err)
						}
						left = append(left, r.Topic) // the controller is busy: again
					}
				}
				if batch = left; len(batch) == 0 {
					break
				}
			} else if ctx.Err() != nil {
				return fmt.Errorf("fill: %w", err)
			}
			time.Sleep(time.Second)
		}
		fmt.Fprintf(out, "  fill      %d of %d topics created (%d partitions each, replication factor %d)\n", min(i+fillBatch, len(todo)), len(todo), partitions, rf)
	}
	// Every broker serves every partition with a leader.
	want := topics * partitions
	for n := 1; n <= c.Brokers; n++ {
		for {
			served, err := servedPartitions(ctx, kc, int32(n))
			if err == nil && served >= want {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("fill: broker %d serves %d of the %d partitions with a leader (%v)", n, served, want, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	fmt.Fprintf(out, "lab filled in %.1fs: %d topics × %d partitions (replication factor %d), %d partitions served by every broker\n",
		time.Since(start).Seconds(), topics, partitions, rf, want)
	return nil
}

// servedPartitions counts the fill topics' partitions broker id's own
// metadata gives a leader.
func servedPartitions(ctx context.Context, kc *kafka.Client, id int32) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := kc.BrokerView(rctx, id)
	if err != nil {
		return 0, err
	}
	n := 0
	for name, tv := range v.Topics {
		if len(name) < 5 || name[:5] != "fill-" {
			continue
		}
		for _, p := range tv.Partitions {
			if p.Leader >= 0 {
				n++
			}
		}
	}
	return n, nil
}
