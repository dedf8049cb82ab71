package ports

import "context"

// Reassignment is one partition being moved between brokers, as the
// controller lists it (ListPartitionReassignments, KIP-455): Replicas
// is the whole set while it moves (the target set followed by the
// replicas being removed), Adding the target replicas not yet in the
// original set, Removing the original replicas not in the target.
type Reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Adding    []int32 `json:"adding,omitempty"`
	Removing  []int32 `json:"removing,omitempty"`
}

// Original is the assignment before the move: every replica but the ones
// being added (Kafka keeps the original replicas in the set until the
// move completes; ReplicaAssignment.originReplicas).
func (r Reassignment) Original() []int32 {
	var out []int32
	for _, b := range r.Replicas {
		if !has(r.Adding, b) {
			out = append(out, b)
		}
	}
	return out
}

// Target is the assignment the move goes to: every replica but the ones
// being removed (ReplicaAssignment.targetReplicas).
func (r Reassignment) Target() []int32 {
	var out []int32
	for _, b := range r.Replicas {
		if !has(r.Removing, b) {
			out = append(out, b)
		}
	}
	return out
}

func has(s []int32, b int32) bool {
	for _, x := range s {
		if x == b {
			return true
		}
	}
	return false
}

// ConfigEntry is one dynamic config override on a broker ("broker", its id
// as Name) or a topic ("topic", its name).
type ConfigEntry struct {
	Resource string `json:"resource"` // "broker" or "topic"
	Name     string `json:"name"`
	Key      string `json:"key"`
	Value    string `json:"value"`
}

// Resource kinds of a ConfigEntry.
const (
	ResourceBroker = "broker"
	ResourceTopic  = "topic"
)

// Reassigner is the optional ability of a Kafka port to list and change
// partition reassignments and the dynamic configs that throttle them
// (kafka-reassign-partitions' --throttle). The franz-go adapter and
// steptest's Reassigning have it; a kind type-asserts its Kafka port.
type Reassigner interface {
	// Reassignments lists every partition reassignment in flight.
	Reassignments(ctx context.Context) ([]Reassignment, error)
	// Reassign asks the controller to move one partition to replicas;
	// nil replicas cancels its reassignment in flight (the original
	// replicas stay, the added ones are removed).
	Reassign(ctx context.Context, topic string, partition int32, replicas []int32) error
	// Overrides are the dynamic overrides of keys (and nothing else) set
	// on the brokers and the topics named: per broker id, per topic.
	Overrides(ctx context.Context, keys []string, brokers []int32, topics []string) ([]ConfigEntry, error)
	// SetConfig sets (value non-nil) or deletes (nil) one dynamic config
	// of a broker or a topic (IncrementalAlterConfigs).
	SetConfig(ctx context.Context, resource, name, key string, value *string) error
	// ReplicaBytes is the size of every replica of the topics a broker
	// holds (DescribeLogDirs), per topic and partition.
	ReplicaBytes(ctx context.Context, broker int32, topics []string) (map[string]map[int32]int64, error)
}

// ControllerConfigs is the optional ability to change a broker's dynamic
// configs at the KRaft controllers (KIP-919: controllers answer admin
// requests, Kafka 3.7+): a KRaft broker alters and describes only its own
// configs, so one that is down loses a config only there.
type ControllerConfigs interface {
	// DeleteAtControllers deletes keys of broker's dynamic configs at the
	// active controller, asking addrs in turn (a key not set is left as is).
	DeleteAtControllers(ctx context.Context, addrs []string, broker int32, keys []string) error
}
