package kafkazk

import (
	"context"
	"errors"
	"sort"
)

// ErrMissing marks a znode a topic should have and does not: no topic
// znode for a name listed under /config/topics or /admin/delete_topics, no
// state znode for an assigned partition, or a znode deleted while it was
// being read.
var ErrMissing = errors.New("znode missing")

// TopicState is everything ZooKeeper holds about one topic.
type TopicState struct {
	Name string
	// Exists: /brokers/topics/<t> was read (even if it does not decode).
	Exists bool
	Znode  TopicZNode // decoded /brokers/topics/<t>; zero when missing or not JSON
	Stat   ZStat      // of /brokers/topics/<t>
	// States holds the decoded …/partitions/<p>/state of every partition
	// the topic znode assigns; a missing or corrupt one is absent here and
	// named in Errs. Never nil.
	States map[int32]PartitionState
	// MissingStates are the assigned partitions that have no state znode
	// (sorted); also in Errs.
	MissingStates []int32
	// Config is the "config" of /config/topics/<t>: nil if the znode is
	// absent or corrupt, empty (not nil) if it holds no overrides.
	Config        map[string]string
	PendingDelete bool // /admin/delete_topics/<t> exists
	// Errs are per-znode problems, each wrapping ErrCorrupt, ErrMissing or
	// ErrInvalidTopic, sorted by message. They never abort a read.
	Errs []error
}

// HasZnode reports whether /brokers/topics/<t> exists and decoded.
func (t *TopicState) HasZnode() bool { return t.Znode.Partitions != nil }

// ClusterState is the Kafka topic state of a chroot, read in one pass. The
// reads are not one ZooKeeper transaction: a cluster that changes while it is
// read may show a topic half-way through the change.
type ClusterState struct {
	Brokers    []int32 // registered broker ids, sorted
	Controller int32   // active controller, -1 when none
	// Topics holds every name under /brokers/topics, /config/topics or
	// /admin/delete_topics (or only the names asked for). A name without a
	// topic znode has Exists false and says so in Errs.
	Topics map[string]*TopicState
	Reads  int // znode reads issued
	// Errs are problems outside any topic (a corrupt /controller, a broker
	// id that is not a number), sorted by message.
	Errs []error
}

// NewTopicState is an empty state for topic name.
func NewTopicState(name string) *TopicState {
	return &TopicState{Name: name, States: map[int32]PartitionState{}}
}

// Sorted returns the topic names in order.
func (s *ClusterState) Sorted() []string {
	names := make([]string, 0, len(s.Topics))
	for n := range s.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SortErrs orders errs by message, the order ClusterState keeps them in.
func SortErrs(errs []error) {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
}

// StateReader reads a cluster's topic state: every topic, or only the ones
// named. The ZooKeeper adapter implements it with a pipelined scan, the fake
// one znode at a time; steptest's StateConformance holds both to the same
// answers.
type StateReader interface {
	ReadState(ctx context.Context, topics ...string) (*ClusterState, error)
}
