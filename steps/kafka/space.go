package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/steps/ports"
)

var _ ports.Records = (*Client)(nil)

// DescribeLogDirs asks broker for its log dirs, offline ones included.
func (c *Client) DescribeLogDirs(ctx context.Context, broker int32) ([]ports.LogDirState, error) {
	ds, err := c.adm.DescribeBrokerLogDirs(ctx, broker, kadm.TopicsSet{})
	if err != nil {
		return nil, fmt.Errorf("describe log dirs of broker %d: %w", broker, err)
	}
	var out []ports.LogDirState
	for dir, d := range ds {
		s := ports.LogDirState{Dir: dir, Total: d.TotalBytes, Usable: d.UsableBytes}
		if d.Err != nil {
			s.Err = d.Err.Error()
			var ke *kerr.Error
			if errors.As(d.Err, &ke) {
				s.Err = ke.Message
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

// DeleteRecords deletes the records of topic below each offset given, on
// each partition's leader, and returns the new log start offsets.
func (c *Client) DeleteRecords(ctx context.Context, topic string, before map[int32]int64) (map[int32]int64, error) {
	os := kadm.Offsets{}
	for p, o := range before {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	rs, err := c.adm.DeleteRecords(ctx, os)
	if err != nil {
		return nil, fmt.Errorf("delete records of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	var errs []error
	for p, r := range rs[topic] {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("delete records of %s-%d below %d: %w", topic, p, before[p], r.Err))
			continue
		}
		out[p] = r.LowWatermark
	}
	return out, errors.Join(errs...)
}

// StartOffsets are topic's log start offsets.
func (c *Client) StartOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	ls, err := c.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	var errs []error
	ls.Each(func(o kadm.ListedOffset) {
		if o.Topic != topic {
			return
		}
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("start offset of %s-%d: %w", topic, o.Partition, o.Err))
			return
		}
		out[o.Partition] = o.Offset
	})
	return out, errors.Join(errs...)
}

var _ ports.DirMover = (*Client)(nil)

// Replicas is every replica broker holds, per online log dir.
func (c *Client) Replicas(ctx context.Context, broker int32) ([]ports.ReplicaDir, error) {
	ds, err := c.adm.DescribeBrokerLogDirs(ctx, broker, nil)
	if err != nil {
		return nil, fmt.Errorf("describe log dirs of broker %d: %w", broker, err)
	}
	var out []ports.ReplicaDir
	ds.EachPartition(func(p kadm.DescribedLogDirPartition) {
		out = append(out, ports.ReplicaDir{Dir: p.Dir, Topic: p.Topic, Partition: p.Partition, Bytes: p.Size, Future: p.IsFuture, Lag: p.OffsetLag})
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Dir < b.Dir || a.Dir == b.Dir && (a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition)
	})
	return out, nil
}

// MoveReplicaDir sends AlterReplicaLogDirs for one replica to broker.
func (c *Client) MoveReplicaDir(ctx context.Context, broker int32, dir, topic string, partition int32) error {
	var req kadm.AlterReplicaLogDirsReq
	req.Add(dir, kadm.TopicsSet{topic: {partition: struct{}{}}})
	rs, err := c.adm.AlterBrokerReplicaLogDirs(ctx, broker, req)
	if err != nil {
		return fmt.Errorf("move %s-%d to %s on broker %d: %w", topic, partition, dir, broker, err)
	}
	var errs []error
	rs.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("move %s-%d to %s on broker %d: %w", r.Topic, r.Partition, r.Dir, broker, r.Err))
		}
	})
	return errors.Join(errs...)
}
