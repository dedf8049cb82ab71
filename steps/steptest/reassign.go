package steptest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Reassigning is the fake Kafka with ports.Reassigner's ability: moves in
// flight, dynamic config overrides and replica sizes, kept here; the rest
// is the embedded Kafka's. It is strict as Kafka is: cancelling a
// partition that is not moving is NO_REASSIGNMENT_IN_PROGRESS, and a
// broker that does not run answers no DescribeConfigs, alter or
// DescribeLogDirs. A new target of running brokers completes at once
// (the topic znode and the partition's state rewritten).
type Reassigning struct {
	*Kafka
	rmu     sync.Mutex
	Moves   []ports.Reassignment
	Configs []ports.ConfigEntry
	// Sizes[broker][topic][partition] are the replicas' sizes.
	Sizes map[int32]map[string]map[int32]int64
	// Done are the changes asked, in order ("cancel t-0", "reassign t-0
	// [1 2]", "set broker 1 k=v", "delete topic t k").
	Done []string
}

var _ ports.Reassigner = (*Reassigning)(nil)

// NewReassigning gives k the reassigner's ability.
func NewReassigning(k *Kafka) *Reassigning {
	return &Reassigning{Kafka: k, Sizes: map[int32]map[string]map[int32]int64{}}
}

func (r *Reassigning) Reassignments(context.Context) ([]ports.Reassignment, error) {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	return slices.Clone(r.Moves), nil
}

func (r *Reassigning) Reassign(ctx context.Context, topic string, p int32, replicas []int32) error {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	i := slices.IndexFunc(r.Moves, func(m ports.Reassignment) bool { return m.Topic == topic && m.Partition == p })
	if replicas == nil {
		if i < 0 {
			return fmt.Errorf("cancel the reassignment of %s-%d: NO_REASSIGNMENT_IN_PROGRESS", topic, p)
		}
		r.Moves = slices.Delete(r.Moves, i, i+1)
		r.Done = append(r.Done, fmt.Sprintf("cancel %s-%d", topic, p))
		return nil
	}
	r.Done = append(r.Done, fmt.Sprintf("reassign %s-%d %v", topic, p, replicas))
	for _, b := range replicas {
		if !r.running(b) {
			return fmt.Errorf("the fake completes only moves onto running brokers; %d is not", b)
		}
	}
	if i >= 0 {
		r.Moves = slices.Delete(r.Moves, i, i+1)
	}
	return r.assign(ctx, topic, p, replicas)
}

// assign rewrites topic's znode with partition p on replicas, and its
// state with them all in sync.
func (r *Reassigning) assign(ctx context.Context, topic string, p int32, replicas []int32) error {
	b, st, err := r.zk.Get(ctx, kafkazk.TopicPath(topic))
	if err != nil {
		return err
	}
	var z map[string]any
	if err := json.Unmarshal(b, &z); err != nil {
		return err
	}
	z["partitions"].(map[string]any)[strconv.Itoa(int(p))] = replicas
	nb, _ := json.Marshal(z)
	if _, err := r.zk.Set(ctx, kafkazk.TopicPath(topic), nb, st.Version); err != nil {
		return err
	}
	state, _ := json.Marshal(kafkazk.PartitionState{ControllerEpoch: 7, Leader: replicas[0], Version: 1, ISR: replicas})
	r.zk.Put(kafkazk.PartitionStatePath(topic, p), string(state))
	return nil
}

func (r *Reassigning) Overrides(_ context.Context, keys []string, brokers []int32, topics []string) ([]ports.ConfigEntry, error) {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	for _, b := range brokers {
		if !r.running(b) {
			return nil, fmt.Errorf("describe broker %d configs: broker %d does not run", b, b)
		}
	}
	var out []ports.ConfigEntry
	for _, c := range r.Configs {
		if !slices.Contains(keys, c.Key) {
			continue
		}
		id, _ := strconv.Atoi(c.Name)
		if c.Resource == ports.ResourceBroker && (c.Name == "" || slices.Contains(brokers, int32(id))) ||
			c.Resource == ports.ResourceTopic && slices.Contains(topics, c.Name) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (r *Reassigning) SetConfig(_ context.Context, resource, name, key string, value *string) error {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	if id, err := strconv.Atoi(name); resource == ports.ResourceBroker && err == nil && !r.running(int32(id)) {
		return fmt.Errorf("alter broker %s configs: broker %s does not run", name, name)
	}
	i := slices.IndexFunc(r.Configs, func(c ports.ConfigEntry) bool {
		return c.Resource == resource && c.Name == name && c.Key == key
	})
	if value == nil {
		r.Done = append(r.Done, fmt.Sprintf("delete %s %s %s", resource, name, key))
		if i >= 0 {
			r.Configs = slices.Delete(r.Configs, i, i+1)
		}
		return nil
	}
	r.Done = append(r.Done, fmt.Sprintf("set %s %s %s=%s", resource, name, key, *value))
	if i >= 0 {
		r.Configs[i].Value = *value
	} else {
		r.Configs = append(r.Configs, ports.ConfigEntry{Resource: resource, Name: name, Key: key, Value: *value})
	}
	return nil
}

func (r *Reassigning) ReplicaBytes(_ context.Context, broker int32, topics []string) (map[string]map[int32]int64, error) {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	if !r.running(broker) {
		return nil, fmt.Errorf("describe log dirs of broker %d: it does not run", broker)
	}
	out := map[string]map[int32]int64{}
	for t, ps := range r.Sizes[broker] {
		if len(topics) == 0 || slices.Contains(topics, t) {
			out[t] = ps
		}
	}
	return out, nil
}

var _ ports.ControllerConfigs = (*Reassigning)(nil)

// DeleteAtControllers deletes broker's keys whether it runs or not (the
// controllers hold every broker's configs).
func (r *Reassigning) DeleteAtControllers(_ context.Context, addrs []string, broker int32, keys []string) error {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	if len(addrs) == 0 {
		return fmt.Errorf("no KRaft controller to ask")
	}
	name := strconv.Itoa(int(broker))
	r.Configs = slices.DeleteFunc(r.Configs, func(c ports.ConfigEntry) bool {
		return c.Resource == ports.ResourceBroker && c.Name == name && slices.Contains(keys, c.Key)
	})
	r.Done = append(r.Done, fmt.Sprintf("delete at the controllers broker %d %v", broker, keys))
	return nil
}
