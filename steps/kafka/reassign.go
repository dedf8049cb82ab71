package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/ports"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Client has ports.Reassigner's ability.
var _ ports.Reassigner = (*Client)(nil)

// Reassignments lists every reassignment in flight: ListPartitionReassignments
// with a null topic list (every topic), answered by the controller.
func (c *Client) Reassignments(ctx context.Context) ([]ports.Reassignment, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 15000
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, fmt.Errorf("list partition reassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("list partition reassignments: %w", err)
	}
	var out []ports.Reassignment
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, ports.Reassignment{Topic: t.Topic, Partition: p.Partition,
				Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas})
		}
	}
	slices.SortFunc(out, func(a, b ports.Reassignment) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	return out, nil
}

// Reassign sends AlterPartitionReassignments for one partition; nil
// replicas cancels the one in flight.
func (c *Client) Reassign(ctx context.Context, topic string, p int32, replicas []int32) error {
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, replicas)
	rs, err := c.adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		what := fmt.Sprintf("reassign %s-%d to %v", topic, p, replicas)
		if replicas == nil {
			what = fmt.Sprintf("cancel the reassignment of %s-%d", topic, p)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Overrides reads the dynamic overrides of keys on the brokers (each asked
// itself: per broker, and the cluster-wide default as Name "") and topics.
func (c *Client) Overrides(ctx context.Context, keys []string, brokers []int32, topics []string) ([]ports.ConfigEntry, error) {
	var out []ports.ConfigEntry
	var errs []error
	if len(brokers) > 0 {
		rcs, err := c.adm.DescribeBrokerConfigs(ctx, brokers...)
		out = append(out, overrides(ports.ResourceBroker, rcs, keys)...)
		errs = append(errs, describeErrs("broker", rcs, err)...)
	}
	if len(topics) > 0 {
		rcs, err := c.adm.DescribeTopicConfigs(ctx, topics...)
		out = append(out, overrides(ports.ResourceTopic, rcs, keys)...)
		errs = append(errs, describeErrs("topic", rcs, err)...)
	}
	return out, errors.Join(errs...)
}

// overrides are the configs of keys set dynamically on each resource; a
// broker's cluster-wide default is named "".
func overrides(resource string, rcs kadm.ResourceConfigs, keys []string) []ports.ConfigEntry {
	var out []ports.ConfigEntry
	seen := map[string]bool{}
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if !slices.Contains(keys, cfg.Key) || cfg.Value == nil {
				continue
			}
			name := ""
			switch cfg.Source {
			case kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigSourceDynamicBrokerConfig:
				name = rc.Name
			case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
			default:
				continue
			}
			e := ports.ConfigEntry{Resource: resource, Name: name, Key: cfg.Key, Value: *cfg.Value}
			if k := e.Resource + "/" + e.Name + "/" + e.Key; !seen[k] {
				seen[k] = true
				out = append(out, e)
			}
		}
	}
	return out
}

func describeErrs(what string, rcs kadm.ResourceConfigs, err error) []error {
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("describe %s configs: %w", what, err))
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			errs = append(errs, fmt.Errorf("describe %s %s configs: %w", what, rc.Name, rc.Err))
		}
	}
	return errs
}

// SetConfig sets or (nil value) deletes one dynamic config with
// IncrementalAlterConfigs; a broker named "" is the cluster-wide default.
func (c *Client) SetConfig(ctx context.Context, resource, name, key string, value *string) error {
	op := kadm.SetConfig
	if value == nil {
		op = kadm.DeleteConfig
	}
	alter := []kadm.AlterConfig{{Op: op, Name: key, Value: value}}
	var rs kadm.AlterConfigsResponses
	var err error
	switch resource {
	case ports.ResourceTopic:
		rs, err = c.adm.AlterTopicConfigs(ctx, alter, name)
	case ports.ResourceBroker:
		var ids []int32
		if name != "" {
			id, perr := strconv.ParseInt(name, 10, 32)
			if perr != nil {
				return fmt.Errorf("broker %q: not a broker id: %w", name, perr)
			}
			ids = append(ids, int32(id))
		}
		rs, err = c.adm.AlterBrokerConfigs(ctx, alter, ids...)
	default:
		return fmt.Errorf("set %s on %s %q: unknown resource", key, resource, name)
	}
	if err == nil {
		for _, r := range rs {
			if r.Err != nil {
				err = fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
				break
			}
		}
	}
	if err != nil {
		verb := "set"
		if value == nil {
			verb = "delete"
		}
		return fmt.Errorf("%s %s of %s %q: %w", verb, key, resource, name, err)
	}
	return nil
}

// ReplicaBytes asks one broker for the sizes of its replicas of topics
// (every topic when none is named).
func (c *Client) ReplicaBytes(ctx context.Context, broker int32, topics []string) (map[string]map[int32]int64, error) {
	// A topic listed without partitions would describe none of them: ask
	// for every log dir and keep the topics'.
	dirs, err := c.adm.DescribeBrokerLogDirs(ctx, broker, nil)
	if err != nil {
		return nil, fmt.Errorf("describe log dirs of broker %d: %w", broker, err)
	}
	out := map[string]map[int32]int64{}
	dirs.EachPartition(func(p kadm.DescribedLogDirPartition) {
		if p.IsFuture || len(topics) > 0 && !slices.Contains(topics, p.Topic) {
			return
		}
		if out[p.Topic] == nil {
			out[p.Topic] = map[int32]int64{}
		}
		out[p.Topic][p.Partition] = p.Size
	})
	return out, nil
}

// The Client has ports.ControllerConfigs' ability.
var _ ports.ControllerConfigs = (*Client)(nil)

// DeleteAtControllers sends IncrementalAlterConfigs deleting keys of
// broker's configs to the KRaft controllers at addrs, one after another
// until the active one accepts it (the others answer NOT_CONTROLLER).
func (c *Client) DeleteAtControllers(ctx context.Context, addrs []string, broker int32, keys []string) error {
	if len(addrs) == 0 {
		return errors.New("no KRaft controller to ask")
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(broker))
	for _, k := range keys {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op = k, kmsg.IncrementalAlterConfigOpDelete
		r.Configs = append(r.Configs, cfg)
	}
	req.Resources = append(req.Resources, r)
	var errs []error
	for _, addr := range addrs {
		err := c.atController(ctx, addr, req)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return fmt.Errorf("delete %v of broker %d at the controllers: %w", keys, broker, errors.Join(errs...))
}

func (c *Client) atController(ctx context.Context, addr string, req *kmsg.IncrementalAlterConfigsRequest) error {
	sec := c.extra
	if c.ctrl != nil {
		sec = c.ctrl
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(3 * time.Second),
		kgo.RequestRetries(0), kgo.RetryTimeout(3 * time.Second)}, sec...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return errors.New("no seed")
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := seeds[0].Request(rctx, req)
	if err != nil {
		return err
	}
	for _, rr := range raw.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
			return fmt.Errorf("%w (%s)", err, ptrStr(rr.ErrorMessage))
		}
	}
	return nil
}

func ptrStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
