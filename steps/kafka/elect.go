package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Reorder sets partitions' replica lists to the orders given
// (AlterPartitionReassignments, KIP-455). With the same set of replicas in
// another order it moves no data: the controller only records the new
// order (KafkaController.onPartitionReassignment: nothing to add or remove),
// so that the first live replica is the one an unclean election picks.
// Per partition, the error Kafka answered (nil: accepted).
func (c *Client) Reorder(ctx context.Context, topic string, replicas map[int32][]int32) (map[int32]error, error) {
	var req kadm.AlterPartitionAssignmentsReq
	for p, r := range replicas {
		req.Assign(topic, p, r)
	}
	res, err := c.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("reorder the replicas of %s: %w", topic, err)
	}
	out := map[int32]error{}
	for p := range replicas {
		r, ok := res[topic][p]
		switch {
		case !ok:
			out[p] = fmt.Errorf("%s-%d: no answer", topic, p)
		case r.Err != nil:
			out[p] = fmt.Errorf("%s-%d: %w %s", topic, p, r.Err, r.ErrMessage)
		default:
			out[p] = nil
		}
	}
	return out, nil
}

// Reassigning lists the topic's partitions with a reassignment in flight
// (ListPartitionReassignments), with their adding replicas.
func (c *Client) Reassigning(ctx context.Context, topic string, partitions []int32) (map[int32][]int32, error) {
	res, err := c.adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: setOf(partitions)})
	if err != nil {
		return nil, fmt.Errorf("list reassignments of %s: %w", topic, err)
	}
	out := map[int32][]int32{}
	for p, r := range res[topic] {
		out[p] = r.AddingReplicas
	}
	return out, nil
}

// ElectUnclean asks for an unclean leader election of exactly the
// partitions given (ElectLeaders, election type UNCLEAN, KIP-460): the
// controller elects the first live replica of each one's replica list,
// in sync or not. Per partition, the error Kafka answered (nil: elected;
// ELECTION_NOT_NEEDED when it already had a leader).
func (c *Client) ElectUnclean(ctx context.Context, topic string, partitions []int32) (map[int32]error, error) {
	res, err := c.adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{topic: setOf(partitions)})
	if err != nil {
		return nil, fmt.Errorf("unclean election on %s: %w", topic, err)
	}
	out := map[int32]error{}
	for _, p := range partitions {
		r, ok := res[topic][p]
		switch {
		case !ok:
			out[p] = fmt.Errorf("%s-%d: no answer", topic, p)
		case r.Err != nil:
			out[p] = fmt.Errorf("%s-%d: %w %s", topic, p, r.Err, r.ErrMessage)
		default:
			out[p] = nil
		}
	}
	return out, nil
}

func setOf(ps []int32) map[int32]struct{} {
	m := map[int32]struct{}{}
	for _, p := range ps {
		m[p] = struct{}{}
	}
	return m
}
