package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kremedy/kremedy/steps/ports"
)

var _ ports.Kafka = (*Client)(nil)

// Groups lists consumer groups with members assigned partitions of topic,
// or with offsets committed on it. A broker that is down fails its shard
// and a loading coordinator fails its groups' OffsetFetch
// (COORDINATOR_LOAD_IN_PROGRESS): the groups read are returned with an
// error wrapping ports.ErrGroupsIncomplete naming each hole, since a group
// left out may be the one furthest behind. Only when every broker fails is
// there no answer at all.
func (c *Client) Groups(ctx context.Context, topic string) ([]ports.GroupUse, error) {
	listed, err := askAll(ctx, func() (kadm.ListedGroups, error) { return c.adm.ListGroups(ctx) })
	if err != nil && !partial(err) {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	holes := shardHoles("ListGroups", err)
	names := listed.Groups()
	if len(names) == 0 {
		return nil, incomplete(holes)
	}
	described, err := c.adm.DescribeGroups(ctx, names...)
	if err != nil && !partial(err) {
		return nil, fmt.Errorf("describe groups: %w", err)
	}
	holes = append(holes, shardHoles("DescribeGroups", err)...)
	out, more := mergeGroups(topic, names, described, c.adm.FetchManyOffsets(ctx, names...))
	return out, incomplete(append(holes, more...))
}

// mergeGroups keeps the groups with members assigned partitions of topic
// or offsets committed on it, and names every group it could not read
// whole: not described, its OffsetFetch failed, a partition of topic
// answered with an error.
func mergeGroups(topic string, names []string, described kadm.DescribedGroups, fetched kadm.FetchOffsetsResponses) ([]ports.GroupUse, []string) {
	var out []ports.GroupUse
	var holes []string
	for _, name := range names {
		g := ports.GroupUse{Group: name}
		d, ok := described[name]
		switch {
		case !ok:
			holes = append(holes, fmt.Sprintf("group %s: no DescribeGroups answer", name))
		case d.Err != nil:
			holes = append(holes, fmt.Sprintf("group %s: DescribeGroups %s", name, kerrName(d.Err)))
		default:
			g.State = d.State
			for _, m := range d.Members {
				if cm, ok := m.Assigned.AsConsumer(); ok {
					for _, t := range cm.Topics {
						if t.Topic == topic && len(t.Partitions) > 0 {
							g.Members = append(g.Members, m.MemberID)
							break
						}
					}
				}
			}
		}
		f, ok := fetched[name]
		switch {
		case !ok:
			holes = append(holes, fmt.Sprintf("group %s: no OffsetFetch answer", name))
		case f.Err != nil:
			holes = append(holes, fmt.Sprintf("group %s: OffsetFetch %s", name, kerrName(f.Err)))
		}
		for _, p := range slices.Sorted(maps.Keys(f.Fetched[topic])) {
			switch o := f.Fetched[topic][p]; {
			case o.Err != nil:
				holes = append(holes, fmt.Sprintf("group %s on %s-%d: OffsetFetch %s", name, topic, p, kerrName(o.Err)))
			case o.At >= 0:
				if g.Offsets == nil {
					g.Offsets = map[int32]int64{}
				}
				g.Offsets[p] = o.At
			}
		}
		if len(g.Members) > 0 || len(g.Offsets) > 0 {
			out = append(out, g)
		}
	}
	return out, holes
}

// shardHoles names the brokers whose shard of a sharded request failed.
func shardHoles(req string, err error) []string {
	var se *kadm.ShardErrors
	if !errors.As(err, &se) {
		return nil
	}
	var out []string
	for _, e := range se.Errs {
		out = append(out, fmt.Sprintf("%s to broker %d: %s", req, e.Broker.NodeID, kerrName(e.Err)))
	}
	return out
}

// incomplete is the error of an answer with holes, nil without.
func incomplete(holes []string) error {
	if len(holes) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ports.ErrGroupsIncomplete, strings.Join(holes, "; "))
}

// askAll sends a request sharded to every broker, and sends it again (at
// most 4 times in all) while no shard was issued: a broker that accepts
// connections but does not answer (frozen in a GC or I/O stall) can take
// the metadata request that finds the brokers to ask, twice over; kgo
// rotates the broker it asks for metadata, so a later try reaches a live
// one.
func askAll[T any](ctx context.Context, send func() (T, error)) (T, error) {
	got, err := send()
	for try := 1; try < 4 && unissued(err) && ctx.Err() == nil; try++ {
		got, err = send()
	}
	return got, err
}

// unissued reports a sharded request that reached no broker: every shard
// failed before it was sent (kgo names the broker of such a shard -1), as
// when the metadata request that finds the brokers timed out.
func unissued(err error) bool {
	var se *kadm.ShardErrors
	if !errors.As(err, &se) || !se.AllFailed || len(se.Errs) == 0 {
		return false
	}
	for _, e := range se.Errs {
		if e.Broker.NodeID >= 0 {
			return false
		}
	}
	return true
}

// partial reports a sharded request that failed on some brokers only.
func partial(err error) bool {
	var se *kadm.ShardErrors
	return errors.As(err, &se) && !se.AllFailed
}

// Producers asks every broker at once for the producers it tracks on the
// partitions: the brokers given (ZooKeeper's registrations) and every broker
// the cluster's metadata names. Every broker hosting a replica answers from
// its own log (followers replicate the producer state;
// Partition.activeProducerState), and in the states kremedy repairs brokers
// disagree about who leads: asking them all does not depend on any broker's
// metadata. See mergeProducers for how the answers count.
func (c *Client) Producers(ctx context.Context, topic string, partitions []int32, brokers []int32) ([]ports.ProducerUse, error) {
	ids := slices.Clone(brokers)
	if more, err := c.Brokers(ctx); err == nil {
		ids = append(ids, more...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil, errors.New("no broker to ask about producers")
	}
	answers := make(chan producerAnswer, len(ids))
	for _, id := range ids {
		go func() {
			req := kmsg.NewPtrDescribeProducersRequest()
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = topic, partitions
			req.Topics = append(req.Topics, rt)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			resp, err := c.cl.Broker(int(id)).Request(rctx, req)
			a := producerAnswer{broker: id, err: err}
			if err == nil {
				a.resp = resp.(*kmsg.DescribeProducersResponse)
			}
			answers <- a
		}()
	}
	all := make([]producerAnswer, 0, len(ids))
	for range ids {
		all = append(all, <-answers)
	}
	return mergeProducers(topic, partitions, all)
}

type producerAnswer struct {
	broker int32
	resp   *kmsg.DescribeProducersResponse
	err    error
}

// mergeProducers merges every broker's DescribeProducers answer. A producer
// seen by several replicas is listed once, the most active of what they
// saw. A partition is checked only when some broker answered for it and
// every broker gave an answer that can be trusted: a broker whose request
// failed, or that returned another error than "I host no replica", may be
// the leader a producer is writing to, so every partition it should have
// answered for is an error ("no answer"), holding the caller's gate. A
// partition every broker said it does not host wraps ports.ErrUnhosted
// (nobody can write to it). The producers found are returned either way.
func mergeProducers(topic string, partitions []int32, answers []producerAnswer) ([]ports.ProducerUse, error) {
	seen := map[[2]int64]ports.ProducerUse{}
	ok := map[int32]int{}
	unhosted := map[int32]int{}
	why := map[int32][]string{}
	for _, a := range answers {
		if a.err != nil {
			for _, p := range partitions {
				why[p] = append(why[p], fmt.Sprintf("broker %d: %v", a.broker, a.err))
			}
			continue
		}
		answered := map[int32]bool{}
		for _, t := range a.resp.Topics {
			if t.Topic != topic {
				continue
			}
			for _, p := range t.Partitions {
				answered[p.Partition] = true
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					why[p.Partition] = append(why[p.Partition], fmt.Sprintf("broker %d: %s", a.broker, kerrName(err)))
					if errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownTopicOrPartition) {
						unhosted[p.Partition]++
					}
					continue
				}
				ok[p.Partition]++
				for _, ap := range p.ActiveProducers {
					u := ports.ProducerUse{Partition: p.Partition, ProducerID: ap.ProducerID,
						LastTimestamp: time.UnixMilli(ap.LastTimestamp), TxnStart: ap.CurrentTxnStartOffset,
						Epoch: int16(ap.ProducerEpoch), CoordinatorEpoch: ap.CoordinatorEpoch}
					k := [2]int64{int64(p.Partition), ap.ProducerID}
					if prev, ok := seen[k]; ok {
						u.TxnStart = max(u.TxnStart, prev.TxnStart)
						u.Epoch, u.CoordinatorEpoch = max(u.Epoch, prev.Epoch), max(u.CoordinatorEpoch, prev.CoordinatorEpoch)
						if prev.LastTimestamp.After(u.LastTimestamp) {
							u.LastTimestamp = prev.LastTimestamp
						}
					}
					seen[k] = u
				}
			}
		}
		for _, p := range partitions {
			if !answered[p] {
				why[p] = append(why[p], fmt.Sprintf("broker %d: no entry for the partition", a.broker))
			}
		}
	}
	var errs []error
	for _, p := range partitions {
		sort.Strings(why[p])
		switch trusted := ok[p] + unhosted[p]; {
		case trusted < len(answers):
			errs = append(errs, fmt.Errorf("%s-%d: no answer (%s)", topic, p, strings.Join(why[p], "; ")))
		case ok[p] == 0:
			errs = append(errs, fmt.Errorf("%s-%d: %w (%s)", topic, p, ports.ErrUnhosted, strings.Join(why[p], "; ")))
		}
	}
	out := make([]ports.ProducerUse, 0, len(seen))
	for _, u := range seen {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].ProducerID < out[j].ProducerID
	})
	return out, errors.Join(errs...)
}

// kerrName is a Kafka error's name without its long explanation.
func kerrName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// BrokerConfig reads one broker's effective value of key.
func (c *Client) BrokerConfig(ctx context.Context, broker int32, key string) (string, error) {
	rcs, err := c.adm.DescribeBrokerConfigs(ctx, broker)
	if err != nil {
		return "", fmt.Errorf("configs of broker %d: %w", broker, err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return "", fmt.Errorf("configs of broker %d: %w", broker, rc.Err)
		}
		for _, cfg := range rc.Configs {
			if cfg.Key == key && cfg.Value != nil {
				return *cfg.Value, nil
			}
		}
	}
	return "", fmt.Errorf("broker %d does not report %s: %w", broker, key, ports.ErrNoConfig)
}

// Offsets asks one broker for a partition's earliest and latest offsets.
func (c *Client) Offsets(ctx context.Context, broker int32, topic string, p int32) (int64, int64, error) {
	e, err := c.ListOffsetsAt(ctx, broker, topic, p, -2)
	if err != nil {
		return -1, -1, err
	}
	l, err := c.ListOffsetsAt(ctx, broker, topic, p, -1)
	return e, l, err
}

// CanaryKey is the key of kremedy's canary record (a compacted topic
// refuses records without a key); its header kremedy-canary holds the run.
const CanaryKey = "kremedy-canary"

// Canary produces one record with acks=all to partition p, reads it back,
// then removes it: DeleteRecords moves the partition's start past it, so
// that the topic's consumers never read it. A compact-only topic refuses
// DeleteRecords; there a tombstone for the canary's key follows it.
func (c *Client) Canary(ctx context.Context, topic string, p int32, value string) (ports.CanaryResult, error) {
	var res ports.CanaryResult
	// Not idempotent: one record needs no producer ID, and an idempotent
	// producer would wait for the brokers' transaction coordinator, which
	// answers COORDINATOR_LOAD_IN_PROGRESS for a few seconds after a full
	// restart (measured: 1.6 s of the canary on the lab) and is not what
	// the canary proves.
	pr, err := NewProducer(c.seeds, 15*time.Second, append([]kgo.Opt{kgo.DisableIdempotentWrite()}, c.extra...)...)
	if err != nil {
		return res, err
	}
	defer pr.Close()
	start := time.Now()
	rec := &kgo.Record{Topic: topic, Partition: p, Key: []byte(CanaryKey), Value: []byte(value),
		Headers: []kgo.RecordHeader{{Key: CanaryKey, Value: []byte(value)}}}
	r, err := pr.cl.ProduceSync(ctx, rec).First()
	if err != nil {
		return res, fmt.Errorf("canary produce to %s-%d (acks=all): %w", topic, p, err)
	}
	res.Offset, res.Produce = r.Offset, time.Since(start)
	start = time.Now()
	if err := c.readBack(ctx, topic, p, r.Offset, value); err != nil {
		return res, err
	}
	res.Read = time.Since(start)
	var os kadm.Offsets
	os.AddOffset(topic, p, r.Offset+1, -1)
	dr, err := c.adm.DeleteRecords(ctx, os)
	if err == nil {
		if d, ok := dr.Lookup(topic, p); !ok {
			err = fmt.Errorf("no answer for %s-%d", topic, p)
		} else {
			err = d.Err
		}
	}
	if err == nil {
		res.Removed = "DeleteRecords"
		return res, nil
	}
	tomb := &kgo.Record{Topic: topic, Partition: p, Key: []byte(CanaryKey), Headers: rec.Headers} // nil value: a tombstone
	if ts := pr.cl.ProduceSync(ctx, tomb).FirstErr(); ts != nil {
		return res, fmt.Errorf("canary at %s-%d offset %d could not be removed (DeleteRecords: %v; tombstone: %v): consumers reading from the start will see one record with key %s", topic, p, r.Offset, err, ts, CanaryKey)
	}
	res.Removed = fmt.Sprintf("tombstone (DeleteRecords refused: %v)", err)
	return res, nil
}

// readBack reads partition p from offset until it sees value.
func (c *Client) readBack(ctx context.Context, topic string, p int32, offset int64, value string) error {
	found := false
	err := c.scan(ctx, topic, p, offset, func(rec *kgo.Record) bool {
		found = string(rec.Value) == value
		return !found
	})
	if err != nil {
		return fmt.Errorf("canary written to %s-%d at offset %d but not read back: %w", topic, p, offset, err)
	}
	return nil
}

// OnlyCanaries reports whether every record in [from, to) carries the
// canary header.
func (c *Client) OnlyCanaries(ctx context.Context, topic string, p int32, from, to int64) (bool, error) {
	if from >= to {
		return true, nil
	}
	only := true
	err := c.scan(ctx, topic, p, from, func(rec *kgo.Record) bool {
		ok := false
		for _, h := range rec.Headers {
			ok = ok || h.Key == CanaryKey
		}
		only = only && ok && string(rec.Key) == CanaryKey
		return only && rec.Offset+1 < to
	})
	if err != nil {
		return false, fmt.Errorf("read %s-%d offsets %d..%d: %w", topic, p, from, to-1, err)
	}
	return only, nil
}

// scan reads partition p from offset, handing each record to more until it
// returns false; at most 15 s.
func (c *Client) scan(ctx context.Context, topic string, p int32, offset int64, more func(*kgo.Record) bool) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(offset)}}),
		kgo.FetchMaxWait(300 * time.Millisecond)}, c.extra...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			return cctx.Err()
		}
		for _, fe := range fs.Errors() {
			return fe.Err
		}
		going := true
		fs.EachRecord(func(rec *kgo.Record) { going = going && more(rec) })
		if !going {
			return nil
		}
	}
}

// DeleteGroupOffsets deletes a group's committed offsets on topic.
func (c *Client) DeleteGroupOffsets(ctx context.Context, group, topic string) error {
	var ts kadm.TopicsSet
	ts.Add(topic)
	rs, err := c.adm.DeleteOffsets(ctx, group, ts)
	if err != nil {
		return fmt.Errorf("delete offsets of group %s on %s: %w", group, topic, err)
	}
	var errs []error
	for _, ps := range rs {
		for p, e := range ps {
			if e != nil && !errors.Is(e, kerr.UnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("partition %d: %w", p, e))
			}
		}
	}
	return errors.Join(errs...)
}

// LogDirs asks one broker for its log directories.
func (c *Client) LogDirs(ctx context.Context, broker int32) ([]string, error) {
	ds, err := c.adm.DescribeBrokerLogDirs(ctx, broker, nil)
	if err != nil {
		return nil, fmt.Errorf("log dirs of broker %d: %w", broker, err)
	}
	var out []string
	for dir, d := range ds {
		if d.Err == nil {
			out = append(out, dir)
		}
	}
	sort.Strings(out)
	return out, nil
}

// FirstRecordTime reads a partition's first record's timestamp.
func (c *Client) FirstRecordTime(ctx context.Context, topic string, p int32) (time.Time, bool, error) {
	leader := int32(-1)
	if ids, err := c.Brokers(ctx); err == nil {
		for _, id := range ids {
			if v, err := c.BrokerView(ctx, id, topic); err == nil {
				if pv, ok := v.Topics[topic].Partitions[p]; ok {
					leader = pv.Leader
					break
				}
			}
		}
	}
	if leader < 0 {
		return time.Time{}, false, fmt.Errorf("%s-%d has no leader", topic, p)
	}
	e, l, err := c.Offsets(ctx, leader, topic, p)
	if err != nil {
		return time.Time{}, false, err
	}
	if l <= e {
		return time.Time{}, false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(e)}}),
		kgo.FetchMaxWait(300 * time.Millisecond)}, c.extra...)...)
	if err != nil {
		return time.Time{}, false, err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			return time.Time{}, false, fmt.Errorf("first record of %s-%d: %w", topic, p, cctx.Err())
		}
		for _, fe := range fs.Errors() {
			return time.Time{}, false, fmt.Errorf("first record of %s-%d: %w", topic, p, fe.Err)
		}
		var ts time.Time
		fs.EachRecord(func(r *kgo.Record) {
			if ts.IsZero() {
				ts = r.Timestamp
			}
		})
		if !ts.IsZero() {
			return ts, true, nil
		}
	}
}

// Listening reports whether addr accepts TCP connections.
func (c *Client) Listening(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// Releases asks each broker, one by one and in parallel, for its API
// versions and its inter.broker.protocol.version.
func (c *Client) Releases(ctx context.Context, ids []int32) []ports.BrokerRelease {
	out := make([]ports.BrokerRelease, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = c.release(ctx, id)
		}()
	}
	wg.Wait()
	return out
}

func (c *Client) release(ctx context.Context, id int32) ports.BrokerRelease {
	r := ports.BrokerRelease{Broker: id}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kremedy", "1"
	resp, err := req.RequestWith(rctx, c.cl.Broker(int(id)))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		r.Err = fmt.Sprintf("ApiVersions: %v", err)
		return r
	}
	maxOf := map[int16]int16{}
	for _, k := range resp.ApiKeys {
		maxOf[k.ApiKey] = k.MaxVersion
	}
	_, r.DescribeProducers = maxOf[kmsg.DescribeProducers.Int16()]
	r.MetadataIDs = maxOf[kmsg.Metadata.Int16()] >= 10
	r.Release30 = maxOf[kmsg.ListOffsets.Int16()] >= 7
	r.Guess = kversion.FromApiVersionsResponse(resp).VersionGuess()
	ibp, err := c.BrokerConfig(rctx, id, "inter.broker.protocol.version")
	if err != nil && !errors.Is(err, ports.ErrNoConfig) {
		// A 4.x broker has no IBP (metadata.version took its place): "".
		r.Err = err.Error()
	}
	r.IBP = ibp
	return r
}

// EndOffsets returns every partition's log end offset, each asked of its
// leader (kadm routes ListOffsets by the metadata).
func (c *Client) EndOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	lo, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	if len(lo) == 0 || len(lo[topic]) == 0 {
		// The brokers' metadata has no such topic: none serves it.
		return nil, fmt.Errorf("%s: %w (no broker's metadata has it)", topic, ports.ErrUnhosted)
	}
	out := map[int32]int64{}
	var errs []error
	lo.Each(func(o kadm.ListedOffset) {
		name := fmt.Sprintf("%s-%d", topic, o.Partition)
		if o.Partition < 0 {
			name = topic + " (every partition)"
		}
		switch {
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition), errors.Is(o.Err, kerr.NotLeaderForPartition):
			// No broker serves it: nobody can write to it either.
			errs = append(errs, fmt.Errorf("%s: %w (%v)", name, ports.ErrUnhosted, o.Err))
		case o.Err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", name, o.Err))
		default:
			out[o.Partition] = o.Offset
		}
	})
	return out, errors.Join(errs...)
}

// Quorum asks the KRaft controllers at addrs, one after another until one
// answers, for the metadata quorum. The request goes to that controller
// itself (a client seeded with it alone; controllers answer DescribeQuorum
// on their controller listener since 3.7, KIP-919), with the inventory's
// security options.
//
// Only the quorum's leader answers DescribeQuorum; the others say
// NOT_LEADER_OR_FOLLOWER. When every controller says so, an election is in
// progress (or the quorum has lost its leader): that is read again for up to
// QuorumElectionWait before it counts (CI: all three controllers of a lab
// just started answered so once).
func (c *Client) Quorum(ctx context.Context, addrs []string) (ports.Quorum, error) {
	if len(addrs) == 0 {
		return ports.Quorum{}, errors.New("no KRaft controller to ask")
	}
	deadline := time.Now().Add(QuorumElectionWait)
	for {
		var errs []error
		electing := true
		for _, addr := range addrs {
			q, err := c.quorumAt(ctx, addr)
			if err == nil {
				return q, nil
			}
			if !errors.Is(err, kerr.NotLeaderForPartition) {
				electing = false
			}
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		}
		if !electing || time.Now().After(deadline) || ctx.Err() != nil {
			if electing {
				errs = append(errs, fmt.Errorf("no controller was the quorum's leader for %s: an election in progress, or the quorum has lost its majority", QuorumElectionWait))
			}
			return ports.Quorum{}, errors.Join(errs...)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// QuorumElectionWait bounds how long Quorum reads again while no controller
// is the leader.
var QuorumElectionWait = 10 * time.Second

func (c *Client) quorumAt(ctx context.Context, addr string) (ports.Quorum, error) {
	sec := c.extra
	if c.ctrl != nil {
		sec = c.ctrl
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(3 * time.Second),
		kgo.RequestRetries(0), kgo.RetryTimeout(3 * time.Second)}, sec...)...)
	if err != nil {
		return ports.Quorum{}, err
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return ports.Quorum{}, errors.New("no seed")
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{t}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := seeds[0].Request(rctx, req)
	if err != nil {
		return ports.Quorum{}, err
	}
	resp := raw.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return ports.Quorum{}, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return ports.Quorum{}, errors.New("DescribeQuorum answered without the metadata partition")
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return ports.Quorum{}, err
	}
	q := ports.Quorum{Leader: p.LeaderID, Epoch: p.LeaderEpoch, HighWatermark: p.HighWatermark, AskedAt: addr}
	conv := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []ports.Voter {
		var out []ports.Voter
		for _, r := range rs {
			v := ports.Voter{ID: r.ReplicaID, LogEndOffset: r.LogEndOffset, LastCaughtUpMs: r.LastCaughtUpTimestamp, LastFetchMs: r.LastFetchTimestamp}
			if r.ReplicaDirectoryID != ([16]byte{}) {
				v.DirID = base64.RawURLEncoding.EncodeToString(r.ReplicaDirectoryID[:])
			}
			out = append(out, v)
		}
		return out
	}
	q.Voters, q.Observers = conv(p.CurrentVoters), conv(p.Observers)
	for _, n := range resp.Nodes {
		if q.Listeners == nil {
			q.Listeners = map[int32][]ports.Listener{}
		}
		for _, l := range n.Listeners {
			q.Listeners[n.NodeID] = append(q.Listeners[n.NodeID], ports.Listener{Name: l.Name, Host: l.Host, Port: int(l.Port)})
		}
	}
	return q, nil
}

// controllerAt is a client of the one controller at addr (its own
// security settings when the inventory gives them).
func (c *Client) controllerAt(addr string) (*kgo.Client, *kgo.Broker, error) {
	sec := c.extra
	if c.ctrl != nil {
		sec = c.ctrl
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(3 * time.Second),
		kgo.RequestRetries(0), kgo.RetryTimeout(3 * time.Second)}, sec...)...)
	if err != nil {
		return nil, nil, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		cl.Close()
		return nil, nil, errors.New("no seed")
	}
	return cl, seeds[0], nil
}

// RemoveVoter sends RemoveRaftVoter to the controller at addr.
func (c *Client) RemoveVoter(ctx context.Context, addr string, id int32, dirID string) error {
	dir, err := base64.RawURLEncoding.DecodeString(dirID)
	if err != nil || len(dir) != 16 {
		return fmt.Errorf("controller %d's directory id %q is not a Kafka uuid", id, dirID)
	}
	cl, seed, err := c.controllerAt(addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID = id
	copy(req.VoterDirectoryID[:], dir)
	rctx, cancel := context.WithTimeout(ctx, 35*time.Second)
	defer cancel()
	raw, err := seed.Request(rctx, req)
	if err != nil {
		return fmt.Errorf("RemoveRaftVoter %d at %s: %w", id, addr, err)
	}
	resp := raw.(*kmsg.RemoveRaftVoterResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return fmt.Errorf("RemoveRaftVoter %d at %s: %w%s", id, addr, err, msg)
	}
	return nil
}

// UpgradeFeature sends UpdateFeatures (an upgrade of one feature) to the
// controller at addr.
func (c *Client) UpgradeFeature(ctx context.Context, addr, feature string, level int16) error {
	cl, seed, err := c.controllerAt(addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.TimeoutMillis = 30000
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = feature, level, 1 // 1: upgrade
	req.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{u}
	rctx, cancel := context.WithTimeout(ctx, 35*time.Second)
	defer cancel()
	raw, err := seed.Request(rctx, req)
	if err != nil {
		return fmt.Errorf("UpdateFeatures %s=%d at %s: %w", feature, level, addr, err)
	}
	resp := raw.(*kmsg.UpdateFeaturesResponse)
	msg := func(m *string) string {
		if m == nil || *m == "" {
			return ""
		}
		return ": " + *m
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("UpdateFeatures %s=%d at %s: %w%s", feature, level, addr, err, msg(resp.ErrorMessage))
	}
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("UpdateFeatures %s=%d at %s: %w%s", feature, level, addr, err, msg(r.ErrorMessage))
		}
	}
	return nil
}

// AddVoter sends AddRaftVoter to the controller at addr, acknowledged
// once the new voter set is committed.
func (c *Client) AddVoter(ctx context.Context, addr string, v ports.NewVoter) error {
	dir, err := base64.RawURLEncoding.DecodeString(v.DirID)
	if err != nil || len(dir) != 16 {
		return fmt.Errorf("controller %d's directory id %q is not a Kafka uuid", v.ID, v.DirID)
	}
	cl, seed, err := c.controllerAt(addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	seeds := []*kgo.Broker{seed}
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.TimeoutMillis = 30000
	req.VoterID = v.ID
	copy(req.VoterDirectoryID[:], dir)
	req.AckWhenCommitted = true
	for _, l := range v.Listeners {
		rl := kmsg.NewAddRaftVoterRequestListener()
		rl.Name, rl.Host, rl.Port = l.Name, l.Host, uint16(l.Port)
		req.Listeners = append(req.Listeners, rl)
	}
	rctx, cancel := context.WithTimeout(ctx, 35*time.Second)
	defer cancel()
	raw, err := seeds[0].Request(rctx, req)
	if err != nil {
		return fmt.Errorf("AddRaftVoter %d at %s: %w", v.ID, addr, err)
	}
	resp := raw.(*kmsg.AddRaftVoterResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return fmt.Errorf("AddRaftVoter %d at %s: %w%s", v.ID, addr, err, msg)
	}
	return nil
}

// DescribeCluster asks any broker for the cluster's id, controller and
// brokers, the fenced ones too where the broker answers v2 (Kafka 4.0+).
func (c *Client) DescribeCluster(ctx context.Context) (ports.ClusterView, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return ports.ClusterView{}, fmt.Errorf("describe cluster: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return ports.ClusterView{}, fmt.Errorf("describe cluster: %w", err)
	}
	v := ports.ClusterView{ClusterID: resp.ClusterID, Controller: resp.ControllerID, FencedKnown: resp.Version >= 2}
	for _, b := range resp.Brokers {
		n := ports.BrokerNode{ID: b.NodeID, Host: b.Host, Port: b.Port, Fenced: b.IsFenced}
		if b.Rack != nil {
			n.Rack = *b.Rack
		}
		v.Brokers = append(v.Brokers, n)
	}
	slices.SortFunc(v.Brokers, func(a, b ports.BrokerNode) int { return int(a.ID) - int(b.ID) })
	return v, nil
}

// Features asks each broker for the features it supports and the levels
// finalized in the cluster (ApiVersions v3+).
func (c *Client) Features(ctx context.Context, ids []int32) (ports.Features, error) {
	f := ports.Features{Finalized: map[string]int16{}, Supported: map[int32]map[string][2]int16{}, Errs: map[int32]string{}}
	epoch := int64(-1)
	for _, id := range ids {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kremedy", "1"
		raw, err := c.cl.Broker(int(id)).Request(ctx, req)
		if err == nil {
			if e := kerr.ErrorForCode(raw.(*kmsg.ApiVersionsResponse).ErrorCode); e != nil {
				err = e
			}
		}
		if err != nil {
			f.Errs[id] = err.Error()
			continue
		}
		resp := raw.(*kmsg.ApiVersionsResponse)
		sup := map[string][2]int16{}
		for _, s := range resp.SupportedFeatures {
			sup[s.Name] = [2]int16{s.MinVersion, s.MaxVersion}
		}
		f.Supported[id] = sup
		// The newest epoch's levels: every broker caches them, one may lag.
		if resp.FinalizedFeaturesEpoch >= epoch {
			epoch = resp.FinalizedFeaturesEpoch
			clear(f.Finalized)
			for _, fin := range resp.FinalizedFeatures {
				f.Finalized[fin.Name] = fin.MaxVersionLevel
			}
		}
	}
	if len(f.Supported) == 0 && len(ids) > 0 {
		return f, fmt.Errorf("no broker answered ApiVersions: %v", f.Errs)
	}
	return f, nil
}

// TopicOverrides returns the topics' own value of key: what DescribeConfigs
// says was set on the topic (a dynamic topic config), nothing for a topic
// that inherits the broker's default.
func (c *Client) TopicOverrides(ctx context.Context, key string, topics []string) (map[string]string, error) {
	out := map[string]string{}
	if len(topics) == 0 {
		return out, nil
	}
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("describe topic configs: %w", err)
	}
	var errs []string
	for _, rc := range rcs {
		if rc.Err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", rc.Name, rc.Err))
			continue
		}
		for _, cfg := range rc.Configs {
			if cfg.Key == key && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig && cfg.Value != nil {
				out[rc.Name] = *cfg.Value
			}
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("describe topic configs: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// EligibleLeaders pages through DescribeTopicPartitions for the topics'
// eligible leader replicas (KIP-966), when every broker answers it.
func (c *Client) EligibleLeaders(ctx context.Context, topics []string) (map[string]map[int32]ports.ELR, error) {
	out := map[string]map[int32]ports.ELR{}
	if len(topics) == 0 {
		return out, nil
	}
	vs, err := c.adm.ApiVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("api versions: %w", err)
	}
	supported := len(vs) > 0
	var askErr error
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil { // a broker that did not answer is not one that does not support it
			askErr = fmt.Errorf("api versions of broker %d: %w", v.NodeID, v.Err)
		} else if _, ok := v.KeyMaxVersion(kmsg.DescribeTopicPartitions.Int16()); !ok {
			supported = false
		}
	})
	if askErr != nil {
		return nil, askErr
	}
	if !supported {
		return nil, fmt.Errorf("DescribeTopicPartitions: %w (Kafka 3.8+)", ports.ErrUnsupported)
	}
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 2000
	for _, t := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	for range 10000 { // pages: bounded, as every loop that asks a cluster
		resp, err := req.RequestWith(ctx, c.cl)
		if err != nil {
			return nil, fmt.Errorf("describe topic partitions: %w", err)
		}
		for _, t := range resp.Topics {
			if t.Topic == nil || kerr.ErrorForCode(t.ErrorCode) != nil {
				continue
			}
			m := out[*t.Topic]
			if m == nil {
				m = map[int32]ports.ELR{}
				out[*t.Topic] = m
			}
			for _, p := range t.Partitions {
				m[p.Partition] = ports.ELR{Eligible: p.EligibleLeaderReplicas, LastKnown: p.LastKnownELR}
			}
		}
		if resp.NextCursor == nil {
			return out, nil
		}
		cur := kmsg.NewDescribeTopicPartitionsRequestCursor()
		cur.Topic, cur.Partition = resp.NextCursor.Topic, resp.NextCursor.Partition
		req.Cursor = &cur
	}
	return out, errors.New("describe topic partitions: more than 10000 pages")
}
