package steps

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
)

// TopicState is everything ZooKeeper holds about one topic.
type TopicState struct {
	Name          string
	Exists        bool       // /brokers/topics/<t> exists (even if it does not decode)
	Znode         TopicZNode // zero when the topic znode is missing or corrupt
	Stat          ZStat
	States        map[int32]PartitionState
	Config        map[string]string // nil when /config/topics/<t> is absent
	PendingDelete bool
	Errs          []string
}

// HasZnode reports whether /brokers/topics/<t> exists and decoded.
func (t *TopicState) HasZnode() bool { return t.Znode.Partitions != nil }

// ClusterState is the Kafka topic state of a chroot.
type ClusterState struct {
	Brokers    []int32
	Controller int32
	Topics     map[string]*TopicState
	Reads      int
	Errs       []string
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

// StateReader is an optional Coordinator capability: reading the whole
// topic state at once, pipelined (the ZooKeeper adapter's Scan).
type StateReader interface {
	ReadState(ctx context.Context, topics ...string) (*ClusterState, error)
}

// ReadState reads the cluster's topic state through the coordinator's fast
// path when it has one, else one znode at a time.
func ReadState(ctx context.Context, zk Coordinator, topics ...string) (*ClusterState, error) {
	if sr, ok := zk.(StateReader); ok {
		return sr.ReadState(ctx, topics...)
	}
	st := &ClusterState{Controller: -1, Topics: map[string]*TopicState{}}
	kids, err := zk.Children(ctx, BrokerIDsPath)
	if err != nil && !zk.IsNoNode(err) {
		return nil, err
	}
	for _, k := range kids {
		var id int32
		if _, err := fmt.Sscanf(k, "%d", &id); err == nil {
			st.Brokers = append(st.Brokers, id)
		}
	}
	slices.Sort(st.Brokers)
	if b, _, err := zk.Get(ctx, ControllerPath); err == nil {
		var c ControllerZNode
		if DecodeZNode(ControllerPath, b, &c) == nil {
			st.Controller = c.BrokerID
		}
	}
	names := topics
	if len(names) == 0 {
		seen := map[string]bool{}
		for _, dir := range []string{TopicsPath, ConfigTopicsPath, DeleteTopicsPath} {
			ks, err := zk.Children(ctx, dir)
			if err != nil && !zk.IsNoNode(err) {
				return nil, err
			}
			for _, k := range ks {
				if !seen[k] {
					seen[k] = true
					names = append(names, k)
				}
			}
		}
	}
	for _, t := range names {
		ts := &TopicState{Name: t, States: map[int32]PartitionState{}}
		st.Topics[t] = ts
		if b, zs, err := zk.Get(ctx, TopicPath(t)); err == nil {
			ts.Exists = true
			if err := DecodeZNode(TopicPath(t), b, &ts.Znode); err != nil {
				ts.Errs = append(ts.Errs, err.Error())
				ts.Znode = TopicZNode{}
			}
			ts.Stat = zs
		} else if !zk.IsNoNode(err) {
			return nil, err
		} else {
			ts.Errs = append(ts.Errs, "no topic znode")
		}
		as, _ := ts.Znode.Assignment()
		for p := range as {
			b, _, err := zk.Get(ctx, PartitionStatePath(t, p))
			if err != nil {
				ts.Errs = append(ts.Errs, fmt.Sprintf("partition %d: no state znode", p))
				continue
			}
			var ps PartitionState
			if err := DecodeZNode(PartitionStatePath(t, p), b, &ps); err != nil {
				ts.Errs = append(ts.Errs, err.Error())
				continue
			}
			ts.States[p] = ps
		}
		if b, _, err := zk.Get(ctx, ConfigTopicPath(t)); err == nil {
			var c TopicConfigZNode
			if DecodeZNode(ConfigTopicPath(t), b, &c) == nil {
				ts.Config = c.Config
				if ts.Config == nil {
					ts.Config = map[string]string{}
				}
			}
		}
		if ok, _, err := zk.Exists(ctx, path.Join(DeleteTopicsPath, t)); err == nil && ok {
			ts.PendingDelete = true
		}
	}
	return st, nil
}
