package lab

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// ErrNotTestChroot means Seed was pointed at a chroot that a Kafka cluster
// uses (or used), or at no chroot at all. Nothing was written.
var ErrNotTestChroot = errors.New("not a test chroot")

// SeedTopicName is the name of seeded topic i: seed-00000, seed-00001, …
func SeedTopicName(i int) string { return fmt.Sprintf("seed-%05d", i) }

// seedInFlight is how many seeding transactions are in flight at once.
// ZooKeeper logs (and fsyncs) each one; a few in flight let it group commits.
const seedInFlight = 4

// Seed fills the chroot of a Kafka-style connect string ("h:2181/chroot")
// with the znodes Kafka 3.9 (ZK mode, IBP >= 2.8) keeps for `topics` topics
// named seed-00000… with `partitions` partitions each, replicated on brokers
// 1..3: /brokers/topics/<t> (v3, with a fresh topic_id),
// …/partitions/<p>/state, and /config/topics/<t>. It is for benchmarks and
// tests: it refuses the root, and any chroot where brokers are registered or
// a Kafka cluster has ever started (/cluster/id exists).
//
// Seed is idempotent: topics that already have a /brokers/topics znode are
// skipped, and any other znode that already exists is left as it is. Each
// topic is written in one ZooKeeper transaction (several topics share one),
// so an interrupted Seed leaves whole topics, and running it again completes
// the set.
func Seed(ctx context.Context, connect string, topics, partitions int, out io.Writer) error {
	start := time.Now()
	switch {
	case topics < 0 || topics > 100000:
		return fmt.Errorf("seed: %d topics: want 0 to 100000; nothing was written", topics)
	case partitions < 1 || partitions > 10000:
		return fmt.Errorf("seed: %d partitions: want 1 to 10000; nothing was written", partitions)
	}
	servers, chroot, err := kafkazk.ParseConnect(connect)
	if err != nil {
		return err
	}
	if chroot == "" {
		return fmt.Errorf("seed %s: %w: the connect string names no chroot, and Seed never writes at the root of an ensemble; add one (%s/seed); nothing was written",
			connect, ErrNotTestChroot, strings.Join(servers, ","))
	}
	if err := ensureChroot(ctx, strings.Join(servers, ","), chroot); err != nil {
		return err
	}
	zc, err := zookeeper.Dial(ctx, connect, zookeeper.Options{})
	if err != nil {
		return err
	}
	defer zc.Close()

	if err := refuseLiveChroot(ctx, zc); err != nil {
		return err
	}
	for _, p := range []string{"/brokers", kafkazk.BrokerIDsPath, kafkazk.TopicsPath, "/config", kafkazk.ConfigTopicsPath, "/admin", kafkazk.DeleteTopicsPath} {
		if err := zc.Create(ctx, p, nil, nil); err != nil && !errors.Is(err, zookeeper.ErrNodeExists) {
			return fmt.Errorf("seed: %w; topics were not seeded", err)
		}
	}
	existing, err := zc.Children(ctx, kafkazk.TopicsPath)
	if err != nil {
		return fmt.Errorf("seed: %w; topics were not seeded", err)
	}
	jobs, skipped, err := seedJobs(existing, chroot, topics, partitions)
	if err != nil {
		return err
	}
	created, present, err := runSeedJobs(ctx, zc, jobs)
	if err != nil {
		return fmt.Errorf("seed %s: %w; %d znodes were created before the failure, whole topics at a time; run Seed again to complete the set",
			connect, err, created)
	}
	fmt.Fprintf(out, "seeded %s: %d topics × %d partitions, %d znodes created in %d transactions, %d topics already there, %d other znodes already there (%s)\n",
		zc.Full("/"), topics, partitions, created, len(jobs), skipped, present, time.Since(start).Round(time.Millisecond))
	return nil
}

// seedJobs lists the znodes of the seed topics not in existing (the
// children of /brokers/topics, sorted) as jobs, each a sequence of
// transactions run in order. It groups whole topics into transactions of
// at most MaxMultiBytes; a topic too big for one transaction is split,
// parents first, into a job of its own. skipped counts the topics already
// there.
func seedJobs(existing []string, chroot string, topics, partitions int) (jobs [][][]zookeeper.Node, skipped int, err error) {
	var (
		batch []zookeeper.Node
		size  int
	)
	flush := func() {
		if len(batch) > 0 {
			jobs = append(jobs, [][]zookeeper.Node{batch})
			batch, size = nil, 0
		}
	}
	for i := range topics {
		name := SeedTopicName(i)
		if _, found := slices.BinarySearch(existing, name); found {
			skipped++
			continue
		}
		nodes, err := seedTopic(name, i, partitions)
		if err != nil {
			return nil, 0, err
		}
		n := 0
		for _, z := range nodes {
			n += zookeeper.MultiSize(z, chroot)
		}
		if n > zookeeper.MaxMultiBytes {
			flush()
			jobs = append(jobs, splitTopic(nodes, chroot))
			continue
		}
		if size+n > zookeeper.MaxMultiBytes {
			flush()
		}
		batch, size = append(batch, nodes...), size+n
	}
	flush()
	return jobs, skipped, nil
}

// splitTopic splits the znodes of a topic too big for one transaction,
// parents first, into a sequence of transactions of at most MaxMultiBytes
// each, to run in order.
func splitTopic(nodes []zookeeper.Node, chroot string) [][]zookeeper.Node {
	var seq [][]zookeeper.Node
	var cur []zookeeper.Node
	cs := 0
	for _, z := range nodes {
		zs := zookeeper.MultiSize(z, chroot)
		if cs+zs > zookeeper.MaxMultiBytes && len(cur) > 0 {
			seq, cur, cs = append(seq, cur), nil, 0
		}
		cur, cs = append(cur, z), cs+zs
	}
	return append(seq, cur)
}

// runSeedJobs runs jobs, seedInFlight at a time, each job's transactions in
// order. The first failure (or ctx's end) stops the rest; it returns how
// many znodes were created and found already there, and that failure.
func runSeedJobs(ctx context.Context, zc *zookeeper.Conn, jobs [][][]zookeeper.Node) (created, present int, err error) {
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan [][]zookeeper.Node)
	)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(seedInFlight, len(jobs)) {
		wg.Go(func() {
			for job := range next {
				for _, txn := range job {
					c, p, err := createMissing(sctx, zc, txn)
					mu.Lock()
					created, present = created+c, present+p
					if err != nil && firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					if err != nil {
						break
					}
				}
			}
		})
	}
feed:
	for _, job := range jobs {
		select {
		case next <- job:
		case <-sctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return created, present, firstErr
}

// ensureChroot creates the chroot and its parents, as a broker with
// createChrootIfNecessary would.
func ensureChroot(ctx context.Context, servers, chroot string) error {
	root, err := zookeeper.Dial(ctx, servers, zookeeper.Options{})
	if err != nil {
		return err
	}
	defer root.Close()
	if ok, _, err := root.Exists(ctx, chroot); err != nil || ok {
		return err
	}
	p := ""
	for _, seg := range strings.Split(strings.TrimPrefix(chroot, "/"), "/") {
		p += "/" + seg
		if err := root.Create(ctx, p, nil, nil); err != nil && !errors.Is(err, zookeeper.ErrNodeExists) {
			return fmt.Errorf("seed: creating the chroot: %w; nothing else was written", err)
		}
	}
	return nil
}

// refuseLiveChroot refuses a chroot with registered brokers or a cluster id.
func refuseLiveChroot(ctx context.Context, zc *zookeeper.Conn) error {
	ids, err := zc.Children(ctx, kafkazk.BrokerIDsPath)
	if err != nil && !errors.Is(err, zookeeper.ErrNoNode) {
		return err
	}
	if len(ids) > 0 {
		return fmt.Errorf("seed %s: %w: brokers %s are registered under %s; Seed only fills test chroots; nothing was written",
			zc.Full("/"), ErrNotTestChroot, strings.Join(ids, ","), zc.Full(kafkazk.BrokerIDsPath))
	}
	ok, _, err := zc.Exists(ctx, kafkazk.ClusterIDPath)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("seed %s: %w: %s exists, so a Kafka cluster has started on this chroot (its brokers may only be stopped); Seed only fills test chroots; nothing was written",
			zc.Full("/"), ErrNotTestChroot, zc.Full(kafkazk.ClusterIDPath))
	}
	return nil
}

// createMissing creates txn in one transaction, dropping the nodes that
// already exist (one retry per such node). It returns how many znodes it
// created and how many it found already there.
func createMissing(ctx context.Context, zc *zookeeper.Conn, txn []zookeeper.Node) (created, present int, err error) {
	txn = slices.Clone(txn)
	for len(txn) > 0 {
		err := zc.CreateMulti(ctx, txn)
		if err == nil {
			return created + len(txn), present, nil
		}
		var me *zookeeper.MultiError
		if !errors.As(err, &me) || !errors.Is(err, zookeeper.ErrNodeExists) {
			return created, present, err
		}
		txn = slices.Delete(txn, me.Index, me.Index+1)
		present++
	}
	return created, present, nil
}

// seedTopic lists topic i's znodes, parents first.
func seedTopic(name string, i, partitions int) ([]zookeeper.Node, error) {
	id, err := topicID()
	if err != nil {
		return nil, err
	}
	z := kafkazk.TopicZNode{
		Version:          3,
		Partitions:       make(map[string][]int32, partitions),
		TopicID:          id,
		AddingReplicas:   map[string][]int32{},
		RemovingReplicas: map[string][]int32{},
	}
	for p := range partitions {
		// Rotate brokers 1..3 so that preferred leaders spread, as Kafka's
		// own assignment does.
		z.Partitions[strconv.Itoa(p)] = []int32{int32(1 + (i+p)%3), int32(1 + (i+p+1)%3), int32(1 + (i+p+2)%3)}
	}
	topic, err := json.Marshal(z)
	if err != nil {
		return nil, err
	}
	state, err := json.Marshal(kafkazk.PartitionState{ControllerEpoch: 1, Leader: 1, Version: 1, LeaderEpoch: 0, ISR: []int32{1, 2, 3}})
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(kafkazk.TopicConfigZNode{Version: 1, Config: map[string]string{}})
	if err != nil {
		return nil, err
	}
	tp := kafkazk.TopicPath(name)
	nodes := make([]zookeeper.Node, 0, 3+2*partitions)
	nodes = append(nodes, zookeeper.Node{Path: tp, Data: topic}, zookeeper.Node{Path: tp + "/partitions"})
	for p := range partitions {
		pp := tp + "/partitions/" + strconv.Itoa(p)
		nodes = append(nodes, zookeeper.Node{Path: pp}, zookeeper.Node{Path: pp + "/state", Data: state})
	}
	return append(nodes, zookeeper.Node{Path: kafkazk.ConfigTopicPath(name), Data: config}), nil
}

// topicID mints a topic ID the way Kafka's Uuid.randomUuid does: a random
// (version 4) UUID that is neither zero nor the metadata topic's ID and whose
// base64url form, without padding, does not start with '-'.
func topicID() (string, error) {
	var b [16]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		b[6] = b[6]&0x0f | 0x40 // version 4
		b[8] = b[8]&0x3f | 0x80 // IETF variant
		s := base64.RawURLEncoding.EncodeToString(b[:])
		if !strings.HasPrefix(s, "-") && s != "AAAAAAAAAAAAAAAAAAAAAQ" {
			return s, nil
		}
	}
}
