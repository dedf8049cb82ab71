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

	"github.com/go-zookeeper/zk"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

// ScanOptions tune a scan.
type ScanOptions struct {
	// Concurrency is how many reads are in flight in all: 0 means
	// DefaultScanConcurrency, 1 one read at a time; at most
	// MaxScanConcurrency.
	Concurrency int
	// Sessions is how many ZooKeeper sessions the reads are spread over:
	// this one and up to Sessions-1 more, which the Conn opens on first use
	// and keeps until it is closed. 0 means DefaultScanSessions; 1 keeps
	// the scan on this session. Scans of fewer than ScanSpreadMin topics
	// stay on this session.
	Sessions int
	// NoMultiRead reads one znode per request even where the servers
	// answer multiRead (the baseline the benchmarks compare with).
	NoMultiRead bool
}

// Defaults of a Scan, as BenchmarkScan measured them (2,000 topics × 10
// partitions, 24,005 reads; ZooKeeper 3.8 on the same 2 cores as the
// client): one request at a time takes 6–8 s; 128 in flight on one session
// about 2 s; spread over 4 sessions about 1 s (see siblings). More reads in
// flight than 32–128, or more sessions than 4, add little; each session
// costs about 3 MB of client memory (go-zookeeper's buffers).
const (
	DefaultScanConcurrency = 128
	DefaultScanSessions    = 4
	// MaxScanConcurrency caps reads in flight: ZooKeeper throttles clients
	// so that no more than globalOutstandingLimit requests (1,000 by
	// default, for all clients together) are outstanding, and a scan should
	// not crowd out the brokers' own requests.
	MaxScanConcurrency = 256
	// ScanSpreadMin is the number of topics from which a scan uses more
	// than one session.
	ScanSpreadMin = 100
)

// Scan reads the Kafka topic state of the whole chroot, or only of the
// named topics, with up to concurrency reads in flight (0: the default),
// spread over DefaultScanSessions sessions. See ScanWith.
func (c *Conn) Scan(ctx context.Context, concurrency int, topics ...string) (*kafkazk.ClusterState, error) {
	return c.ScanWith(ctx, ScanOptions{Concurrency: concurrency}, topics...)
}

// ScanSequential reads the same znodes as Scan and returns an equal
// state, one request at a time on this session. It is the baseline Scan
// is measured against.
func (c *Conn) ScanSequential(ctx context.Context, topics ...string) (*kafkazk.ClusterState, error) {
	return c.ScanWith(ctx, ScanOptions{Concurrency: 1, Sessions: 1}, topics...)
}

// ScanWith reads the Kafka topic state of the whole chroot, or only of the
// named topics: brokers, controller, the three topic directories, then
// every topic and config znode, then the state of every assigned
// partition. go-zookeeper pipelines concurrent requests on a connection
// (each is written as soon as it is queued; responses are matched by xid),
// so a fixed pool of o.Concurrency workers, each with one read in flight,
// costs round trips / concurrency instead of one round trip per znode.
// Workers are spread over o.Sessions sessions (see siblings). Each result
// is decoded at once and its bytes dropped: memory is the snapshot plus one
// response per worker.
//
// Per-znode problems (missing, corrupt) are recorded in the snapshot and
// never abort the scan; any other error (connection lost, no auth, ctx
// ended, ZooKeeper silent for DefaultOpTimeout) does, and no snapshot is
// returned. The reads are not one transaction (see kafkazk.ClusterState).
func (c *Conn) ScanWith(ctx context.Context, o ScanOptions, topics ...string) (*kafkazk.ClusterState, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultScanConcurrency
	}
	if o.Sessions <= 0 {
		o.Sessions = DefaultScanSessions
	}
	o.Concurrency = min(o.Concurrency, MaxScanConcurrency)
	o.Sessions = min(o.Sessions, o.Concurrency)
	if !o.NoMultiRead {
		st, err := c.scan(ctx, o, topics, true)
		if err == nil || ctx.Err() != nil || !errors.Is(err, errBulk) {
			return st, err
		}
		// A bulk session failed mid-scan: the whole scan again, one znode
		// per request (a half-recorded snapshot is never returned).
	}
	return c.scan(ctx, o, topics, false)
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
	ts   *kafkazk.TopicState
	part int32
}

type scanner struct {
	c                *Conn
	reads, completed atomic.Int64

	mu                          sync.Mutex // guards everything below
	snap                        *kafkazk.ClusterState
	topicList, configs, deletes []string
}

// errBulk marks a scan's failure in its bulk sessions (multiRead).
var errBulk = errors.New("bulk read failed")

// scan is one ScanWith attempt, with multiRead (bulk) or one znode per
// request: the cluster's znodes, then every topic's topic and config
// znodes, then the state of every assigned partition.
func (c *Conn) scan(ctx context.Context, o ScanOptions, only []string, bulk bool) (*kafkazk.ClusterState, error) {
	for _, t := range only {
		if err := kafkazk.ValidateTopic(t); err != nil {
			return nil, fmt.Errorf("scan %s: %w", c.Full(kafkazk.TopicsPath), err)
		}
	}
	s := &scanner{c: c, snap: &kafkazk.ClusterState{Controller: -1, Topics: map[string]*kafkazk.TopicState{}}}

	// 1. The cluster: brokers, controller, and the three topic directories.
	err := s.run(ctx, min(o.Concurrency, int(readDeleteList)+1), nil, func(yield func(read) bool) {
		for k := readBrokers; k <= readDeleteList; k++ {
			if !yield(read{kind: k}) {
				return
			}
		}
	})
	if err != nil {
		return nil, err
	}
	order := s.topics(only)

	// Spread the rest over sibling sessions when there is enough of it:
	// bulk sessions where the servers answer multiRead, else siblings.
	var sessions []*scanSession
	var rs []*reader
	if o.Sessions > 1 && len(order) >= ScanSpreadMin {
		if bulk { // as many sessions as the siblings would be
			rs = c.bulkReaders(ctx, o.Sessions-1)
		}
		if len(rs) == 0 {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			sessions = c.scanSessions(sctx, o.Sessions-1)
		}
	}
	// With multiRead a request carries up to bulk*Batch reads: at most
	// Concurrency/16 of them are in flight (8 by default), at least one.
	runPhase := func(batch int, reads iter.Seq[read]) error {
		if len(rs) > 0 {
			// A request's failure is errBulk (the scan starts again one
			// znode per request); a znode's own that ends the scan is not.
			return s.runBulk(ctx, rs, max(1, o.Concurrency/16), batch, reads)
		}
		return s.run(ctx, o.Concurrency, sessions, reads)
	}
	// 2. Topic and config znodes.
	if err := runPhase(bulkTopicBatch, s.topicReads(order)); err != nil {
		return nil, err
	}
	// 3. The state of every assigned partition.
	if err := runPhase(bulkStateBatch, stateReads(order)); err != nil {
		return nil, err
	}

	for _, ts := range order {
		kafkazk.SortErrs(ts.Errs)
		slices.Sort(ts.MissingStates)
	}
	kafkazk.SortErrs(s.snap.Errs)
	s.snap.Reads = int(s.reads.Load())
	return s.snap, nil
}

// topics adds to the snapshot, in name order, a state for every topic
// the cluster's znodes list (or, given only, for those), each with whether
// it is pending deletion and the errors known already (a name Kafka would
// refuse, no topic znode); it returns them in that order.
func (s *scanner) topics(only []string) []*kafkazk.TopicState {
	names := slices.Concat(s.topicList, s.configs, s.deletes)
	if len(only) > 0 {
		names = slices.Clone(only)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	order := make([]*kafkazk.TopicState, len(names))
	for i, n := range names {
		ts := kafkazk.NewTopicState(n)
		order[i] = ts
		s.snap.Topics[n] = ts
		if len(only) == 0 {
			if err := kafkazk.ValidateTopic(n); err != nil {
				ts.Errs = append(ts.Errs, err)
			}
		}
		_, ts.PendingDelete = slices.BinarySearch(s.deletes, n)
		if _, ok := slices.BinarySearch(s.topicList, n); !ok {
			ts.Errs = append(ts.Errs, fmt.Errorf("%s: %w: no topic znode", s.c.Full(kafkazk.TopicPath(n)), kafkazk.ErrMissing))
		}
	}
	return order
}

// topicReads are the reads of the topic and config znodes of the topics
// in order that the topic directories list.
func (s *scanner) topicReads(order []*kafkazk.TopicState) iter.Seq[read] {
	return func(yield func(read) bool) {
		for _, ts := range order {
			if _, ok := slices.BinarySearch(s.topicList, ts.Name); ok && !yield(read{kind: readTopic, ts: ts}) {
				return
			}
			if _, ok := slices.BinarySearch(s.configs, ts.Name); ok && !yield(read{kind: readConfig, ts: ts}) {
				return
			}
		}
	}
}

// stateReads are the reads of the state znode of every partition the
// topics in order assign (their topic znodes read).
func stateReads(order []*kafkazk.TopicState) iter.Seq[read] {
	return func(yield func(read) bool) {
		for _, ts := range order {
			for _, p := range sortedPartitions(ts.Znode) {
				if !yield(read{kind: readState, ts: ts, part: p}) {
					return
				}
			}
		}
	}
}

// sortedPartitions lists the partitions a decoded topic znode assigns; a
// topic whose assignment did not decode has none.
func sortedPartitions(z kafkazk.TopicZNode) []int32 {
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
// flight, fed by one producer. Worker i reads on this session or, when
// sessions are given, on session i mod (len(sessions)+1) as soon as that
// one is ready. run returns when all reads are done, at the first error that
// is not a per-znode problem, when ctx ends, or when no read has completed
// for DefaultOpTimeout. go-zookeeper calls take no context: the scan as a
// whole is bounded here, not each read on its own goroutine and timer, and
// workers stuck in an abandoned call finish in the background, writing to a
// scanner nobody reads any more.
func (s *scanner) run(ctx context.Context, workers int, sessions []*scanSession, reads iter.Seq[read]) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan read, workers)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		var mine *scanSession
		if j := i % (len(sessions) + 1); j > 0 {
			mine = sessions[j-1]
		}
		wg.Go(func() {
			zc := s.c.zc
			for r := range ch {
				if ctx.Err() != nil {
					continue // drain
				}
				if mine != nil {
					select {
					case <-mine.ready:
						if mine.zc != nil {
							zc = mine.zc
						}
						mine = nil
					default:
					}
				}
				err := s.do(zc, r)
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

// get and children are the scan's reads, on session zc: unbounded,
// because run bounds the scan as a whole.
func (c *Conn) get(zc *zk.Conn, p string) ([]byte, kafkazk.ZStat, error) {
	b, st, err := zc.Get(c.Full(p))
	if err != nil {
		return nil, kafkazk.ZStat{}, fmt.Errorf("get %s: %w", c.Full(p), err)
	}
	return b, statOf(st), nil
}

func (c *Conn) children(zc *zk.Conn, p string) ([]string, error) {
	kids, _, err := zc.Children(c.Full(p))
	if err != nil {
		return nil, fmt.Errorf("children %s: %w", c.Full(p), err)
	}
	sort.Strings(kids)
	return kids, nil
}

// do issues one read and records its result. It returns only errors that
// end the scan; a missing or corrupt znode is recorded and is not one.
func (s *scanner) do(zc *zk.Conn, r read) error {
	c := s.c
	s.reads.Add(1)
	switch r.kind {
	case readBrokers, readTopicList, readConfigList, readDeleteList:
		p := map[readKind]string{readBrokers: kafkazk.BrokerIDsPath, readTopicList: kafkazk.TopicsPath,
			readConfigList: kafkazk.ConfigTopicsPath, readDeleteList: kafkazk.DeleteTopicsPath}[r.kind]
		kids, err := c.children(zc, p)
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
				s.snap.Errs = append(s.snap.Errs, err)
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
		b, _, err := c.get(zc, kafkazk.ControllerPath)
		if errors.Is(err, ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		var z kafkazk.ControllerZNode
		err = decode(c.Full(kafkazk.ControllerPath), b, &z)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.snap.Errs = append(s.snap.Errs, err)
		} else {
			s.snap.Controller = z.BrokerID
		}
		return nil

	case readTopic, readConfig, readState:
		b, st, err := c.get(zc, s.pathOf(r))
		return s.record(r, b, st, err)
	}
	return fmt.Errorf("scan: unknown read kind %d", r.kind)
}

// pathOf is the znode a topic's read reads.
func (s *scanner) pathOf(r read) string {
	switch r.kind {
	case readTopic:
		return kafkazk.TopicPath(r.ts.Name)
	case readConfig:
		return kafkazk.ConfigTopicPath(r.ts.Name)
	}
	return kafkazk.PartitionStatePath(r.ts.Name, r.part)
}

// record keeps what a topic's read returned (its data and stat, or its
// error). It returns only errors that end the scan.
func (s *scanner) record(r read, b []byte, st kafkazk.ZStat, err error) error {
	c := s.c
	switch r.kind {
	case readTopic:
		p := kafkazk.TopicPath(r.ts.Name)
		if errors.Is(err, ErrNoNode) {
			s.note(r.ts, fmt.Errorf("%s: %w: deleted during the scan", c.Full(p), kafkazk.ErrMissing))
			return nil
		}
		if err != nil {
			return err
		}
		var z kafkazk.TopicZNode
		derr := decode(c.Full(p), b, &z)
		if derr != nil {
			z = kafkazk.TopicZNode{} // not JSON: nothing in it is trustworthy
		} else if _, err := z.Assignment(); err != nil {
			// Kept: it still names the topic ID. sortedPartitions
			// yields nothing for it, so no state is read.
			derr = fmt.Errorf("%s: %w", c.Full(p), err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		r.ts.Exists, r.ts.Stat, r.ts.Znode = true, st, z
		if derr != nil {
			r.ts.Errs = append(r.ts.Errs, derr)
		}
		return nil

	case readConfig:
		p := kafkazk.ConfigTopicPath(r.ts.Name)
		if errors.Is(err, ErrNoNode) {
			s.note(r.ts, fmt.Errorf("%s: %w: deleted during the scan", c.Full(p), kafkazk.ErrMissing))
			return nil
		}
		if err != nil {
			return err
		}
		var z kafkazk.TopicConfigZNode
		if err := decode(c.Full(p), b, &z); err != nil {
			s.note(r.ts, err)
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
		p := kafkazk.PartitionStatePath(r.ts.Name, r.part)
		if errors.Is(err, ErrNoNode) {
			s.mu.Lock()
			r.ts.MissingStates = append(r.ts.MissingStates, r.part)
			s.mu.Unlock()
			s.note(r.ts, fmt.Errorf("%s: %w: partition %d has no state znode", c.Full(p), kafkazk.ErrMissing, r.part))
			return nil
		}
		if err != nil {
			return err
		}
		var ps kafkazk.PartitionState
		if err := decode(c.Full(p), b, &ps); err != nil {
			s.note(r.ts, err)
			return nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		r.ts.States[r.part] = ps
		return nil
	}
	return fmt.Errorf("scan: unknown read kind %d", r.kind)
}

func (s *scanner) note(ts *kafkazk.TopicState, err error) {
	s.mu.Lock()
	ts.Errs = append(ts.Errs, err)
	s.mu.Unlock()
}

var _ kafkazk.StateReader = (*Conn)(nil)

// ReadState implements kafkazk.StateReader with a pipelined Scan, at most
// Options.MaxInFlight reads in flight.
func (c *Conn) ReadState(ctx context.Context, topics ...string) (*kafkazk.ClusterState, error) {
	return c.Scan(ctx, c.opts.MaxInFlight, topics...)
}
