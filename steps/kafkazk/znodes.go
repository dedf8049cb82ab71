package kafkazk

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Kafka's ZooKeeper layout in ZK mode, relative to the chroot
// (Kafka 3.9, core/src/main/scala/kafka/zk/ZkData.scala).
const (
	BrokerIDsPath    = "/brokers/ids"
	TopicsPath       = "/brokers/topics"
	DeleteTopicsPath = "/admin/delete_topics"
	ConfigTopicsPath = "/config/topics"
	ReassignPath     = "/admin/reassign_partitions"
	ControllerPath   = "/controller"
	// ControllerEpochPath holds the controller epoch, a decimal integer
	// one higher at every election (ControllerEpochZNode).
	ControllerEpochPath = "/controller_epoch"
	ClusterIDPath       = "/cluster/id"
	MigrationPath       = "/migration"
)

// TopicPath is /brokers/topics/<t>.
func TopicPath(t string) string { return TopicsPath + "/" + t }

// ConfigTopicPath is /config/topics/<t>.
func ConfigTopicPath(t string) string { return ConfigTopicsPath + "/" + t }

// DeleteTopicPath is /admin/delete_topics/<t>.
func DeleteTopicPath(t string) string { return DeleteTopicsPath + "/" + t }

// PartitionStatePath is /brokers/topics/<t>/partitions/<p>/state.
func PartitionStatePath(t string, p int32) string {
	return fmt.Sprintf("%s/partitions/%d/state", TopicPath(t), p)
}

// ErrCorrupt marks znode data that does not decode as Kafka wrote it.
var ErrCorrupt = errors.New("znode data does not decode")

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
			return nil, fmt.Errorf("%w: partition key %q is not a partition number", ErrCorrupt, k)
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

// Addr is the broker's first listener as host:port.
func (b BrokerRegistration) Addr() string {
	for _, e := range b.Endpoints {
		if i := strings.Index(e, "://"); i >= 0 {
			return e[i+3:]
		}
	}
	if b.Host != "" {
		return fmt.Sprintf("%s:%d", b.Host, b.Port)
	}
	return ""
}

// ControllerZNode is the data of the ephemeral /controller.
type ControllerZNode struct {
	Version  int   `json:"version"`
	BrokerID int32 `json:"brokerid"`
	// KRaftControllerEpoch is written by a KRaft controller that holds
	// ZooKeeper's controller role in a migration (≥ 0); a ZooKeeper broker
	// writes -1 (3.4+) or nothing (ZkData.scala, ControllerZNode).
	KRaftControllerEpoch *int32 `json:"kraftControllerEpoch,omitempty"`
}

// KRaft reports whether a KRaft controller holds /controller.
func (z ControllerZNode) KRaft() bool {
	return z.KRaftControllerEpoch != nil && *z.KRaftControllerEpoch >= 0
}

// TopicConfigZNode is the data of /config/topics/<t>.
type TopicConfigZNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

// ReassignZNode is the legacy /admin/reassign_partitions.
type ReassignZNode struct {
	Version    int             `json:"version"`
	Partitions []ReassignEntry `json:"partitions"`
}

// ReassignEntry is one partition of a legacy reassignment.
type ReassignEntry struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// DecodeZNode decodes Kafka znode JSON, naming the path on failure.
func DecodeZNode(path string, b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	return nil
}

// ClusterID decodes /cluster/id ({"version":"1","id":"…"}); "" when it
// does not decode.
func ClusterID(b []byte) string {
	var z struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(b, &z) != nil {
		return ""
	}
	return z.ID
}
