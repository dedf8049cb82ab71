package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kremedy/kremedy/steps/ports"
)

var _ ports.Tiered = (*Client)(nil)

// latestTiered is ListOffsets' LATEST_TIERED_TIMESTAMP (KIP-1005,
// ListOffsets v9): the highest offset the remote store holds.
const latestTiered = -5

// Tiered reads which topics have remote.storage.enable=true (their own
// config: it has no broker default) and asks each partition's leader for
// its highest uploaded offset.
func (c *Client) Tiered(ctx context.Context, topics []string) (map[string]map[int32]int64, error) {
	// A topic whose config was not read is named in the error; the others
	// are still answered.
	on, cfgErr := c.TopicOverrides(ctx, "remote.storage.enable", topics)
	if on == nil {
		return nil, cfgErr
	}
	out := map[string]map[int32]int64{}
	var tiered []string
	for _, t := range slices.Sorted(maps.Keys(on)) {
		if strings.EqualFold(on[t], "true") {
			tiered = append(tiered, t)
		}
	}
	if len(tiered) == 0 {
		return out, cfgErr
	}
	// kgo sends the highest version both sides know: a broker before 3.9
	// (ListOffsets below v9) takes -5 for a timestamp and answers with its
	// earliest offset, which would read as "uploaded up to" it.
	if err := c.listOffsetsV9(ctx); err != nil {
		return nil, err
	}
	md, err := c.adm.Metadata(ctx, tiered...)
	if err != nil {
		return nil, fmt.Errorf("metadata of %v: %w", tiered, err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9 // the first to know LATEST_TIERED_TIMESTAMP
	for _, t := range tiered {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = t
		for _, p := range md.Topics[t].Partitions.Numbers() {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, latestTiered, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, fmt.Errorf("ListOffsets (latest tiered; Kafka 3.9+): %w", err)
	}
	var errs []string
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				errs = append(errs, fmt.Sprintf("%s-%d: %s", rt.Topic, rp.Partition, kerrName(err)))
				continue
			}
			if out[rt.Topic] == nil {
				out[rt.Topic] = map[int32]int64{}
			}
			out[rt.Topic][rp.Partition] = rp.Offset
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return out, fmt.Errorf("latest tiered offset not read: %s", strings.Join(errs, "; "))
	}
	return out, cfgErr
}

// listOffsetsV9 is an error unless every broker that answers knows
// ListOffsets v9 (Kafka 3.9+, KIP-1005: LATEST_TIERED_TIMESTAMP).
func (c *Client) listOffsetsV9(ctx context.Context) error {
	return c.needVersion(ctx, kmsg.ListOffsets.Int16(), 9, "answer ListOffsets below v9 (Kafka before 3.9): the highest uploaded offset of a tiered partition cannot be asked (kafka-log-dirs.sh and the remote store's own listing can tell)")
}

// needVersion is an error (ports.ErrUnsupported) naming the brokers that
// answered ApiVersions without key at version min, then what they lack.
func (c *Client) needVersion(ctx context.Context, key, min int16, lack string) error {
	old, err := c.brokersBelow(ctx, key, min)
	if err != nil {
		return err
	}
	if len(old) > 0 {
		return fmt.Errorf("%w: broker(s) %s %s", ports.ErrUnsupported, strings.Join(old, ", "), lack)
	}
	return nil
}

// brokersBelow names, in order, the brokers that answered ApiVersions
// without key at version min or later (a broker that did not answer is
// not counted: it is not one that does not support it).
func (c *Client) brokersBelow(ctx context.Context, key, min int16) ([]string, error) {
	vs, err := c.adm.ApiVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("api versions: %w", err)
	}
	var old []int32
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			return
		}
		if max, ok := v.KeyMaxVersion(key); !ok || max < min {
			old = append(old, v.NodeID)
		}
	})
	slices.Sort(old)
	var out []string
	for _, id := range old {
		out = append(out, fmt.Sprint(id))
	}
	return out, nil
}
