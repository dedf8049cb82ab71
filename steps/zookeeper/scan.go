package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kremedy/kremedy/steps"
)

// TopicState is everything ZooKeeper holds about one topic.
type TopicState struct {
	Name  string
	Znode steps.TopicZNode // decoded /brokers/topics/<t>; zero when missing or not JSON
	Stat  steps.ZStat      // of /brokers/topics/<t>
	// States holds the decoded …/partitions/<p>/state of every partition
	// the topic znode assigns; a missing or corrupt one is absent here and
	// named in Errs.
	States map[int32]steps.PartitionState
	// Config is the "config" of /config/topics/<t>, nil if the znode is
	// absent or corrupt, empty (not nil) if it holds no overrides.
	Config        map[string]string
	PendingDelete bool // /admin/delete_topics/<t> exists
	// Errs lists per-znode problems (missing topic znode, corrupt JSON,
	// missing state znode), sorted. They never abort a scan.
	Errs []string
}

// Snapshot is the Kafka topic state of a chroot, read in one scan. The
// reads are not one ZooKeeper transaction: a cluster that changes during the
// scan may show a topic half-way through the change.
type Snapshot struct {
	Brokers    []int32 // registered broker ids, sorted
	Controller int32   // active controller, -1 when none
	// Topics holds every name under /brokers/topics, /config/topics or
	// /admin/delete_topics (or only the names asked for). A name without a
	// topic znode — a leftover config or delete marker, or a name asked for
	// that does not exist — has a zero Znode and says so in Errs.
	Topics map[string]*TopicState
	Reads  int // znode reads issued
	// Errs lists problems outside any topic (a corrupt /controller, a broker
	// id that is not a number), sorted. They never abort a scan.
	Errs []string
}

// Sorted returns the snapshot's topic names in order.
func (s *Snapshot) Sorted() []string {
	names := make([]string, 0, len(s.Topics))
	for n := range s.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultScanConcurrency is the number of reads Scan keeps in flight when
// asked for 0. See BenchmarkScan: on a 2-core machine with ZooKeeper on the
// same cores, throughput stops growing around 32–64 reads in flight.
const DefaultScanConcurrency = 64

// MaxScanConcurrency caps reads in flight on one session. ZooKeeper
// throttles a connection whose outstanding requests pass its share of
// globalOutstandingLimit (1000 by default).
const MaxScanConcurrency = 256

// Scan reads the Kafka topic state of the whole chroot, or only of the
// named topics, with up to concurrency reads in flight (0: the default) on
// this one session. go-zookeeper pipelines concurrent requests on its single
// connection: each is written as soon as it is queued and the responses are
// matched by xid, so a scan costs round trips / concurrency rather than one
// round trip per znode. A fixed pool of concurrency workers issues the
// reads; each result is decoded at once and its bytes dropped, so memory is
// the snapshot plus concurrency responses.
//
// Per-znode problems (missing, corrupt) are recorded in the snapshot and
// never abort the scan; any other error (connection lost, no auth, ctx
// ended) does, and no snapshot is returned.
func (c *Conn) Scan(ctx context.Context, concurrency int, topics ...string) (*Snapshot, error) {
	if concurrency <= 0 {
		concurrency = DefaultScanConcurrency
	}
	return c.scan(ctx, min(concurrency, MaxScanConcurrency), topics)
}

// ScanSequential reads the same znodes as Scan and returns an equal
// snapshot, one request at a time. It is the baseline Scan is measured
// against.
func (c *Conn) ScanSequential(ctx context.Context, topics ...string) (*Snapshot, error) {
	return c.scan(ctx, 1, topics)
}

type readKind uint8

const (
	readBrokers readKind = iota
	readController
	readTopicList
	readConfigList
	readDeleteList
	readTopic
	readConfig
	readState
)

type read struct {
	kind readKind
	ts   *TopicState
	part int32
}

type scanner struct {
	c                *Conn
	reads, completed atomic.Int64

	mu                          sync.Mutex // guards everything below
	snap                        *Snapshot
	topicList, configs, deletes []string
}

func (c *Conn) scan(ctx context.Context, workers int, only []string) (*Snapshot, error) {
	for _, t := range only {
		if err := steps.ValidateTopic(t); err != nil {
			return nil, fmt.Errorf("scan %s: %w", c.Full(TopicsPath), err)
		}
	}
	s := &scanner{c: c, snap: &Snapshot{Controller: -1, Topics: map[string]*TopicState{}}}

	// 1. The cluster: brokers, controller, and the three topic directories.
	err := s.run(ctx, workers, func(yield func(read) bool) {
		for k := readBrokers; k <= readDeleteList; k++ {
			if !yield(read{kind: k}) {
				return
			}
		}
	})
	if err != nil {
		return nil, err
	}

	// The topics: every listed name, or the ones asked for.
	names := slices.Concat(s.topicList, s.configs, s.deletes)
	if len(only) > 0 {
		names = slices.Clone(only)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	order := make([]*TopicState, len(names))
	for i, n := range names {
		ts := &TopicState{Name: n}
		order[i] = ts
		s.snap.Topics[n] = ts
		if len(only) == 0 {
			if err := steps.ValidateTopic(n); err != nil {
				ts.Errs = append(ts.Errs, err.Error())
			}
		}
		_, ts.PendingDelete = slices.BinarySearch(s.deletes, n)
		if _, ok := slices.BinarySearch(s.topicList, n); !ok {
			ts.Errs = append(ts.Errs, fmt.Sprintf("%s: no topic znode", c.Full(TopicPath(n))))
		}
	}

	// 2. Topic and config znodes.
	err = s.run(ctx, workers, func(yield func(read) bool) {
		for _, ts := range order {
			if _, ok := slices.BinarySearch(s.topicList, ts.Name); ok && !yield(read{kind: readTopic, ts: ts}) {
				return
			}
			if _, ok := slices.BinarySearch(s.configs, ts.Name); ok && !yield(read{kind: readConfig, ts: ts}) {
				return
			}
		}
	})
	if err != nil {
		return nil, err
	}

	// 3. The state of every assigned partition.
	err = s.run(ctx, workers, func(yield func(read) bool) {
		for _, ts := range order {
			for _, p := range sortedPartitions(ts.Znode) {
				if !yield(read{kind: readState, ts: ts, part: p}) {
					return
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}

	for _, ts := range order {
		sort.Strings(ts.Errs)
	}
	sort.Strings(s.snap.Errs)
	s.snap.Reads = int(s.reads.Load())
	return s.snap, nil
}

// sortedPartitions lists the partitions a decoded topic znode assigns; a
// topic whose assignment did not decode has none.
func sortedPartitions(z steps.TopicZNode) []int32 {
	ps := make([]int32, 0, len(z.Partitions))
	for k := range z.Partitions {
		n, err := strconv.ParseInt(k, 10, 32)
		if err != nil || n < 0 {
			return nil
		}
		ps = append(ps, int32(n))
	}
	slices.Sort(ps)
	return ps
}

// ErrStalled means ZooKeeper answered none of a scan's reads for
// DefaultOpTimeout while some were in flight.
var ErrStalled = errors.New("zookeeper stopped answering")

// run performs reads from a fixed pool of workers, each with one read in
// flight, fed by one producer. It returns when all are done, at the first
// error that is not a per-znode problem, when ctx ends, or when no read has
// completed for DefaultOpTimeout. go-zookeeper calls take no context: the
// scan as a whole is bounded here, not each read on its own goroutine and
// timer, and workers stuck in an abandoned call finish in the background,
// writing to a scanner nobody reads any more.
func (s *scanner) run(ctx context.Context, workers int, reads iter.Seq[read]) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan read, workers)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r := range ch {
				if ctx.Err() != nil {
					continue // drain
				}
				err := s.do(r)
				s.completed.Add(1)
				if err != nil {
					cancel(err)
				}
			}
		})
	}
	go func() {
		for r := range reads {
			select {
			case ch <- r:
				continue
			case <-ctx.Done():
			}
			break
		}
		close(ch)
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastAt := s.completed.Load(), time.Now()
	for {
		select {
		case <-done:
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		case now := <-tick.C:
			if n := s.completed.Load(); n != last {
				last, lastAt = n, now
			} else if now.Sub(lastAt) >= DefaultOpTimeout {
				err := fmt.Errorf("scan %s: %w: no read answered for %s", s.c.Full("/"), ErrStalled, now.Sub(lastAt).Round(time.Second))
				cancel(err)
				return err
			}
		}
	}
}

// get and children are the scan's reads: unbounded, because run bounds the
// scan as a whole.
func (c *Conn) get(p string) ([]byte, Stat, error) {
	b, st, err := c.zc.Get(c.Full(p))
	if err != nil {
		return nil, Stat{}, fmt.Errorf("get %s: %w", c.Full(p), err)
	}
	return b, statOf(st), nil
}

func (c *Conn) children(p string) ([]string, error) {
	kids, _, err := c.zc.Children(c.Full(p))
	if err != nil {
		return nil, fmt.Errorf("children %s: %w", c.Full(p), err)
	}
	sort.Strings(kids)
	return kids, nil
}

// do issues one read and records its result. It returns only errors that
// end the scan; a missing or corrupt znode is recorded and is not one.
func (s *scanner) do(r read) error {
	c := s.c
	s.reads.Add(1)
	switch r.kind {
	case readBrokers, readTopicList, readConfigList, readDeleteList:
		p := map[readKind]string{readBrokers: BrokerIDsPath, readTopicList: TopicsPath,
			readConfigList: ConfigTopicsPath, readDeleteList: DeleteTopicsPath}[r.kind]
		kids, err := c.children(p)
		if errors.Is(err, ErrNoNode) {
			err = nil
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		switch r.kind {
		case readBrokers:
			ids, err := parseIDs(kids)
			if err != nil {
				s.snap.Errs = append(s.snap.Errs, err.Error())
			}
			s.snap.Brokers = ids
		case readTopicList:
			s.topicList = kids
		case readConfigList:
			s.configs = kids
		case readDeleteList:
			s.deletes = kids
		}
		return nil

	case readController:
		b, _, err := c.get(ControllerPath)
		if errors.Is(err, ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		var z ControllerZNode
		err = decode(c.Full(ControllerPath), b, &z)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.snap.Errs = append(s.snap.Errs, err.Error())
		} else {
			s.snap.Controller = z.BrokerID
		}
		return nil

	case readTopic:
		p := TopicPath(r.ts.Name)
		b, st, err := c.get(p)
		if errors.Is(err, ErrNoNode) {
			s.note(r.ts, fmt.Sprintf("%s: deleted during the scan", c.Full(p)))
			return nil
		}
		if err != nil {
			return err
		}
		var z TopicZNode
		derr := decode(c.Full(p), b, &z)
		if derr != nil {
			z = TopicZNode{} // not JSON: nothing in it is trustworthy
		} else if _, err := z.Assignment(); err != nil {
			// Kept: it still names the topic ID. sortedPartitions
			// yields nothing for it, so no state is read.
			derr = fmt.Errorf("%s: %w", c.Full(p), err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		r.ts.Stat, r.ts.Znode = st, z
		if derr != nil {
			r.ts.Errs = append(r.ts.Errs, derr.Error())
		}
		return nil

	case readConfig:
		p := steps.ConfigTopicPath(r.ts.Name)
		b, _, err := c.get(p)
		if errors.Is(err, ErrNoNode) {
			s.note(r.ts, fmt.Sprintf("%s: deleted during the scan", c.Full(p)))
			return nil
		}
		if err != nil {
			return err
		}
		var z steps.TopicConfigZNode
		if err := decode(c.Full(p), b, &z); err != nil {
			s.note(r.ts, err.Error())
			return nil
		}
		if z.Config == nil {
			z.Config = map[string]string{}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		r.ts.Config = z.Config
		return nil

	case readState:
		p := PartitionStatePath(r.ts.Name, r.part)
		b, _, err := c.get(p)
		if errors.Is(err, ErrNoNode) {
			s.note(r.ts, fmt.Sprintf("%s: partition %d has no state znode", c.Full(p), r.part))
			return nil
		}
		if err != nil {
			return err
		}
		var ps PartitionState
		if err := decode(c.Full(p), b, &ps); err != nil {
			s.note(r.ts, err.Error())
			return nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.ts.States == nil {
			r.ts.States = make(map[int32]steps.PartitionState, len(r.ts.Znode.Partitions))
		}
		r.ts.States[r.part] = ps
		return nil
	}
	return fmt.Errorf("scan: unknown read kind %d", r.kind)
}

func (s *scanner) note(ts *TopicState, msg string) {
	s.mu.Lock()
	ts.Errs = append(ts.Errs, msg)
	s.mu.Unlock()
}
