package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/kremedy/kremedy/steps/ports"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client talks to one Kafka cluster. It never lets a request auto-create a
// topic, and it asks brokers one by one when their views must be compared.
type Client struct {
	cl    *kgo.Client
	adm   *kadm.Client
	seeds []string
	extra []kgo.Opt
	// ctrl are the security options for the KRaft controllers' own
	// listener (nil: extra's).
	ctrl []kgo.Opt
}

// SetControllerOptions sets the security options Quorum uses on the KRaft
// controllers' listener, when it is secured otherwise than the brokers'
// (the inventory's kafka.controller_client_properties).
func (c *Client) SetControllerOptions(opts []kgo.Opt) { c.ctrl = opts }

// New builds a client over the bootstrap servers. extra options (TLS, SASL)
// come from the inventory's client properties.
func New(bootstrap []string, extra ...kgo.Opt) (*Client, error) {
	return open(bootstrap, []kgo.Opt{kgo.RetryBackoffFn(retryBackoff)}, extra)
}

// retryBackoff is franz-go's own schedule (250 ms doubling up to 5 s, ±20 %)
// but for the first retry, which comes after 50 ms. A broker that
// restarted leaves the client a connection to its old process, found dead
// only when a request's read fails: every health gate of a roll asked a
// restarted broker first on that connection, and waited 200–300 ms for
// the retry that then succeeds at once.
func retryBackoff(fails int) time.Duration {
	if fails <= 1 {
		return 50 * time.Millisecond
	}
	d := 250 * time.Millisecond << min(fails-1, 5)
	return min(time.Duration(float64(d)*(0.8+0.4*rand.Float64())), 5*time.Second)
}

// open builds a client with own options (kept to it) and extra ones (TLS,
// SASL: kept in Client.extra for the clients it builds later, such as the
// canary producer, which keep franz-go's retry schedule as an
// application's client would).
func open(bootstrap []string, own, extra []kgo.Opt) (*Client, error) {
	opts := append(append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap...),
		kgo.DialTimeout(5 * time.Second),
		kgo.RequestTimeoutOverhead(10 * time.Second),
		kgo.RetryTimeout(15 * time.Second),
		// kadm serves Metadata from a cache (5 s by default): a topic just
		// deleted would still show. kremedy wants the broker's answer now.
		kgo.MetadataMinAge(100 * time.Millisecond),
	}, own...), extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client %v: %w", bootstrap, err)
	}
	return &Client{cl: cl, adm: kadm.NewClient(cl), seeds: bootstrap, extra: extra}, nil
}

// TopicIDString renders a topic ID the way Kafka does (Uuid.toString:
// URL-safe base64 without padding), as in the znode and partition.metadata.
func TopicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// Close releases connections.
func (c *Client) Close() { c.cl.Close() }

// Kgo exposes the underlying client for producing and consuming.
func (c *Client) Kgo() *kgo.Client { return c.cl }

// Admin exposes kadm for calls this adapter does not wrap.
func (c *Client) Admin() *kadm.Client { return c.adm }

// BrokerView asks one broker — and only that broker — for its metadata
// (connection errors are retried against the same broker, never another)
// about the topics (all topics when none are named). The request never
// auto-creates a topic and bypasses the client's metadata cache. Each
// topic's and partition's error is the broker's own code, typed
// (ports.KafkaErr): UNKNOWN_TOPIC_OR_PARTITION for a topic it does not
// know, TOPIC_AUTHORIZATION_FAILED for one kremedy may not Describe (which
// a list of all topics leaves out instead).
func (c *Client) BrokerView(ctx context.Context, id int32, topics ...string) (ports.BrokerView, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	if len(topics) > 0 {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := c.cl.Broker(int(id)).RetriableRequest(ctx, req)
	if err != nil {
		return ports.BrokerView{Broker: id}, fmt.Errorf("metadata from broker %d: %w", id, err)
	}
	mr := resp.(*kmsg.MetadataResponse)
	v := ports.BrokerView{Broker: id, Controller: mr.ControllerID, Topics: map[string]ports.TopicView{}}
	for _, b := range mr.Brokers {
		v.Brokers = append(v.Brokers, b.NodeID)
	}
	sort.Slice(v.Brokers, func(i, j int) bool { return v.Brokers[i] < v.Brokers[j] })
	for _, t := range mr.Topics {
		if t.Topic == nil {
			continue
		}
		tv := ports.TopicView{Name: *t.Topic, Err: ports.KafkaErr(t.ErrorCode), Partitions: map[int32]ports.PartitionView{}}
		if t.TopicID != ([16]byte{}) {
			tv.ID = TopicIDString(t.TopicID)
		}
		for _, p := range t.Partitions {
			tv.Partitions[p.Partition] = ports.PartitionView{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, Offline: p.OfflineReplicas,
				Err: ports.KafkaErr(p.ErrorCode),
			}
		}
		v.Topics[tv.Name] = tv
	}
	return v, nil
}

// Brokers lists the broker ids the cluster currently advertises.
func (c *Client) Brokers(ctx context.Context) ([]int32, error) {
	m, err := c.adm.BrokerMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker metadata: %w", err)
	}
	ids := m.Brokers.NodeIDs()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// CreateTopic creates t with an explicit replica assignment (partition p's
// replicas are assignment[p]) and optional configs.
// With an assignment, partitions and rf are ignored (-1).
func (c *Client) CreateTopic(ctx context.Context, t string, assignment [][]int32, partitions int32, rf int16, configs map[string]string) (string, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = t
	rt.NumPartitions, rt.ReplicationFactor = partitions, rf
	if len(assignment) > 0 {
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
	}
	for p, reps := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition = int32(p)
		ra.Replicas = reps
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return "", fmt.Errorf("create topic %s: %w", t, err)
	}
	if len(resp.Topics) != 1 {
		return "", fmt.Errorf("create topic %s: %d topics in response", t, len(resp.Topics))
	}
	r := resp.Topics[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		return "", &CreateError{Topic: t, Err: err, Message: msg}
	}
	id := ""
	if r.TopicID != ([16]byte{}) {
		id = TopicIDString(r.TopicID)
	}
	return id, nil
}

// CreateError is a refused CreateTopics with the broker's own message
// (e.g. "Topic 'orders' is marked for deletion.").
type CreateError struct {
	Topic   string
	Err     error
	Message string
}

func (e *CreateError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("create topic %s: %v: %s", e.Topic, e.Err, e.Message)
	}
	return fmt.Sprintf("create topic %s: %v", e.Topic, e.Err)
}
func (e *CreateError) Unwrap() error { return e.Err }

// DeleteTopic asks the controller to delete t. Success only means the
// controller accepted it: in ZK mode the deletion may then stall.
func (c *Client) DeleteTopic(ctx context.Context, t string) error {
	rs, err := c.adm.DeleteTopics(ctx, t)
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", t, err)
	}
	if r, ok := rs[t]; ok && r.Err != nil {
		return fmt.Errorf("delete topic %s: %w", t, r.Err)
	}
	return nil
}

// ListTopics lists topic names the cluster advertises (not internal ones),
// as `kafka-topics --list` would.
func (c *Client) ListTopics(ctx context.Context) ([]string, error) {
	tds, err := c.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	return tds.Names(), nil
}

// ListOffsetsAt asks one broker for a partition's latest offset. A broker
// that holds a stale or inconsistent replica answers with an error such as
// NOT_LEADER_OR_FOLLOWER — that answer is the point of asking it directly.
func (c *Client) ListOffsetsAt(ctx context.Context, broker int32, t string, p int32, timestamp int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = t
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = p
	rp.Timestamp = timestamp
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.cl.Broker(int(broker)).RetriableRequest(ctx, req)
	if err != nil {
		return -1, fmt.Errorf("list offsets %s-%d on broker %d: %w", t, p, broker, err)
	}
	lr := resp.(*kmsg.ListOffsetsResponse)
	for _, tt := range lr.Topics {
		for _, pp := range tt.Partitions {
			if pp.Partition == p {
				if err := kerr.ErrorForCode(pp.ErrorCode); err != nil {
					return -1, fmt.Errorf("list offsets %s-%d on broker %d: %w", t, p, broker, err)
				}
				return pp.Offset, nil
			}
		}
	}
	return -1, fmt.Errorf("list offsets %s-%d on broker %d: partition missing from response", t, p, broker)
}

// Produce writes values to partition p with acks=all and waits for them.
func (c *Client) Produce(ctx context.Context, t string, p int32, values ...string) error {
	var errs []error
	for _, v := range values {
		r := &kgo.Record{Topic: t, Partition: p, Value: []byte(v)}
		if err := c.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			errs = append(errs, err)
			break
		}
	}
	return errors.Join(errs...)
}

// NewProducer is a client for Produce: manual partitioning, acks=all, a
// bounded delivery timeout so that a broker that refuses forever surfaces
// as an error instead of a hang.
func NewProducer(bootstrap []string, deliveryTimeout time.Duration, extra ...kgo.Opt) (*Client, error) {
	return open(bootstrap, nil, append([]kgo.Opt{
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
		kgo.ProducerLinger(0),
	}, extra...))
}

// ReadPartition consumes partition p from the earliest offset until it has
// read up to the partition's high watermark at call time, or ctx ends.
func ReadPartition(ctx context.Context, bootstrap []string, t string, p int32, extra ...kgo.Opt) ([]string, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t: {p: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, extra...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", t, err)
	}
	end, ok := ends.Lookup(t, p)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("end offset of %s-%d: %v", t, p, end.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", t, err)
	}
	start, ok := starts.Lookup(t, p)
	if !ok || start.Err != nil {
		return nil, fmt.Errorf("start offset of %s-%d: %v", t, p, start.Err)
	}
	var out []string
	next := start.Offset - 1 // records before the log start are gone (DeleteRecords, retention)
	for next+1 < end.Offset {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("read %s-%d: %d of %d records: %w", t, p, len(out), end.Offset, err)
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.Canceled) {
				return out, fmt.Errorf("read %s-%d: %w", t, p, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, string(r.Value))
			next = r.Offset
		})
	}
	return out, nil
}
