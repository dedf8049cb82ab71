package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Kafka's ZooKeeper layout (ZK mode, relative to the chroot). See
// shared/docs/research/kafka-internals.md §1 for the source of each shape.
const (
	BrokerIDsPath     = "/brokers/ids"
	TopicsPath        = "/brokers/topics"
	DeleteTopicsPath  = "/admin/delete_topics"
	ConfigTopicsPath  = "/config/topics"
	ReassignPath      = "/admin/reassign_partitions"
	ControllerPath    = "/controller"
	ClusterIDPath     = "/cluster/id"
	MigrationPath     = "/migration"
	ControllerEpochPa = "/controller_epoch"
)

// TopicPath is /brokers/topics/<t>.
func TopicPath(t string) string { return TopicsPath + "/" + t }

// PartitionStatePath is /brokers/topics/<t>/partitions/<p>/state.
func PartitionStatePath(t string, p int32) string {
	return fmt.Sprintf("%s/partitions/%d/state", TopicPath(t), p)
}

// TopicZNode is the data of /brokers/topics/<t> (versions 1–3).
type TopicZNode struct {
	Version    int                `json:"version"`
	Partitions map[string][]int32 `json:"partitions"`
	// TopicID is present only when the controller's IBP is >= 2.8.
	TopicID          string             `json:"topic_id,omitempty"`
	AddingReplicas   map[string][]int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas map[string][]int32 `json:"removing_replicas,omitempty"`
}

// Assignment returns partition -> replicas with numeric keys.
func (t TopicZNode) Assignment() (map[int32][]int32, error) {
	out := make(map[int32][]int32, len(t.Partitions))
	for k, v := range t.Partitions {
		n, err := strconv.ParseInt(k, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("partition key %q is not a partition number", k)
		}
		out[int32(n)] = v
	}
	return out, nil
}

// PartitionState is the data of …/partitions/<p>/state.
type PartitionState struct {
	ControllerEpoch int32   `json:"controller_epoch"`
	Leader          int32   `json:"leader"`
	Version         int     `json:"version"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
}

// BrokerRegistration is the data of the ephemeral /brokers/ids/<id>.
type BrokerRegistration struct {
	Version   int      `json:"version"`
	Host      string   `json:"host"`
	Port      int      `json:"port"`
	Endpoints []string `json:"endpoints"`
	Rack      string   `json:"rack,omitempty"`
	Timestamp string   `json:"timestamp"`
}

// ControllerZNode is the data of the ephemeral /controller.
type ControllerZNode struct {
	Version  int   `json:"version"`
	BrokerID int32 `json:"brokerid"`
}

// ErrCorrupt marks znode data that does not decode as Kafka wrote it.
var ErrCorrupt = errors.New("znode data does not decode")

func decode(p string, b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w: %v", p, ErrCorrupt, err)
	}
	return nil
}

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
