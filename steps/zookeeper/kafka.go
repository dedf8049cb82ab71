package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

var decode = kafkazk.DecodeZNode

// Topic reads /brokers/topics/<t>.
func (c *Conn) Topic(ctx context.Context, t string) (kafkazk.TopicZNode, kafkazk.ZStat, error) {
	var z kafkazk.TopicZNode
	b, st, err := c.Get(ctx, kafkazk.TopicPath(t))
	if err != nil {
		return z, st, err
	}
	return z, st, decode(c.Full(kafkazk.TopicPath(t)), b, &z)
}

// PartitionStateOf reads one partition's state znode.
func (c *Conn) PartitionStateOf(ctx context.Context, t string, p int32) (kafkazk.PartitionState, kafkazk.ZStat, error) {
	var s kafkazk.PartitionState
	b, st, err := c.Get(ctx, kafkazk.PartitionStatePath(t, p))
	if err != nil {
		return s, st, err
	}
	return s, st, decode(c.Full(kafkazk.PartitionStatePath(t, p)), b, &s)
}

// BrokerIDs lists the registered broker ids, sorted.
func (c *Conn) BrokerIDs(ctx context.Context) ([]int32, error) {
	kids, err := c.Children(ctx, kafkazk.BrokerIDsPath)
	if err != nil {
		return nil, err
	}
	return parseIDs(kids)
}

func parseIDs(kids []string) ([]int32, error) {
	ids := make([]int32, 0, len(kids))
	for _, k := range kids {
		n, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w: not a broker id", kafkazk.BrokerIDsPath, k, kafkazk.ErrCorrupt)
		}
		ids = append(ids, int32(n))
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// Controller returns the active controller's broker id, or -1 when none.
func (c *Conn) Controller(ctx context.Context) (int32, error) {
	b, _, err := c.Get(ctx, kafkazk.ControllerPath)
	if errors.Is(err, ErrNoNode) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	var z kafkazk.ControllerZNode
	if err := decode(c.Full(kafkazk.ControllerPath), b, &z); err != nil {
		return -1, err
	}
	return z.BrokerID, nil
}

// WaitBrokers blocks until the set of registered broker ids satisfies cond,
// reading /brokers/ids every 100 ms.
func (c *Conn) WaitBrokers(ctx context.Context, cond func([]int32) bool) ([]int32, error) {
	var last []int32
	_, err := c.WaitChildren(ctx, kafkazk.BrokerIDsPath, func(kids []string) bool {
		ids, err := parseIDs(kids)
		if err != nil {
			return false
		}
		last = ids
		return cond(ids)
	})
	return last, err
}
