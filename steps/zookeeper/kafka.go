package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"github.com/kremedy/kremedy/steps"
	"sort"
	"strconv"
)

// Kafka's ZooKeeper layout and znode shapes live in package steps; these
// aliases keep this adapter's callers short.
const (
	BrokerIDsPath    = steps.BrokerIDsPath
	TopicsPath       = steps.TopicsPath
	DeleteTopicsPath = steps.DeleteTopicsPath
	ConfigTopicsPath = steps.ConfigTopicsPath
	ReassignPath     = steps.ReassignPath
	ControllerPath   = steps.ControllerPath
	ClusterIDPath    = steps.ClusterIDPath
	MigrationPath    = steps.MigrationPath
)

type (
	TopicZNode         = steps.TopicZNode
	PartitionState     = steps.PartitionState
	BrokerRegistration = steps.BrokerRegistration
	ControllerZNode    = steps.ControllerZNode
)

// ErrCorrupt marks znode data that does not decode as Kafka wrote it.
var ErrCorrupt = steps.ErrCorrupt

// TopicPath is /brokers/topics/<t>.
func TopicPath(t string) string { return steps.TopicPath(t) }

// PartitionStatePath is /brokers/topics/<t>/partitions/<p>/state.
func PartitionStatePath(t string, p int32) string { return steps.PartitionStatePath(t, p) }

func decode(p string, b []byte, v any) error { return steps.DecodeZNode(p, b, v) }

// Topic reads /brokers/topics/<t>.
func (c *Conn) Topic(ctx context.Context, t string) (TopicZNode, Stat, error) {
	var z TopicZNode
	b, st, err := c.Get(ctx, TopicPath(t))
	if err != nil {
		return z, st, err
	}
	return z, st, decode(c.Full(TopicPath(t)), b, &z)
}

// PartitionStateOf reads one partition's state znode.
func (c *Conn) PartitionStateOf(ctx context.Context, t string, p int32) (PartitionState, Stat, error) {
	var s PartitionState
	b, st, err := c.Get(ctx, PartitionStatePath(t, p))
	if err != nil {
		return s, st, err
	}
	return s, st, decode(c.Full(PartitionStatePath(t, p)), b, &s)
}

// BrokerIDs lists the registered broker ids, sorted.
func (c *Conn) BrokerIDs(ctx context.Context) ([]int32, error) {
	kids, err := c.Children(ctx, BrokerIDsPath)
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
			return nil, fmt.Errorf("%s/%s: %w: not a broker id", BrokerIDsPath, k, ErrCorrupt)
		}
		ids = append(ids, int32(n))
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// Controller returns the active controller's broker id, or -1 when none.
func (c *Conn) Controller(ctx context.Context) (int32, error) {
	b, _, err := c.Get(ctx, ControllerPath)
	if errors.Is(err, ErrNoNode) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	var z ControllerZNode
	if err := decode(c.Full(ControllerPath), b, &z); err != nil {
		return -1, err
	}
	return z.BrokerID, nil
}

// WaitBrokers blocks until the set of registered broker ids satisfies cond,
// driven by a child watch on /brokers/ids.
func (c *Conn) WaitBrokers(ctx context.Context, cond func([]int32) bool) ([]int32, error) {
	var last []int32
	_, err := c.WaitChildren(ctx, BrokerIDsPath, func(kids []string) bool {
		ids, err := parseIDs(kids)
		if err != nil {
			return false
		}
		last = ids
		return cond(ids)
	})
	return last, err
}
