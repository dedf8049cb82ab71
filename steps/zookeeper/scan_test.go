package zookeeper_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchZK.stop != nil {
		benchZK.stop()
	}
	os.Exit(code)
}

func ctxT(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

func mustDo(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// TestCreateMulti: a transaction with one existing node creates nothing and
// names the node that failed.
func TestCreateMulti(t *testing.T) {
	addr := startZK(t)
	c := dial(t, addr)
	ctx := ctxT(t, 30*time.Second)
	mustDo(t, c.Create(ctx, "/b", nil, nil))
	err := c.CreateMulti(ctx, []zookeeper.Node{{Path: "/a"}, {Path: "/a/x", Data: []byte("1")}, {Path: "/b"}, {Path: "/c"}})
	var me *zookeeper.MultiError
	if !errors.As(err, &me) || me.Index != 2 || me.Path != "/b" || !errors.Is(err, zookeeper.ErrNodeExists) {
		t.Fatalf("CreateMulti with an existing third node: %v (%#v)", err, me)
	}
	if ok, _, _ := c.Exists(ctx, "/a"); ok {
		t.Fatal("a failed transaction created /a")
	}
	mustDo(t, c.CreateMulti(ctx, []zookeeper.Node{{Path: "/a"}, {Path: "/a/x", Data: []byte("1")}, {Path: "/c"}}))
	if b, _, err := c.Get(ctx, "/a/x"); err != nil || string(b) != "1" {
		t.Fatalf("/a/x = %q, %v", b, err)
	}
	big := []zookeeper.Node{{Path: "/big", Data: make([]byte, zookeeper.MaxMultiBytes)}}
	if err := c.CreateMulti(ctx, big); err == nil || !strings.Contains(err.Error(), "nothing was created") {
		t.Fatalf("oversized transaction: %v", err)
	}
}

// TestSeedRefuses: Seed writes only into test chroots.
func TestSeedRefuses(t *testing.T) {
	addr := startZK(t)
	root := dial(t, addr)
	ctx := ctxT(t, 30*time.Second)
	for _, p := range []string{"/live", "/live/brokers", "/live/brokers/ids", "/live/brokers/ids/1",
		"/stopped", "/stopped/cluster", "/stopped/cluster/id"} {
		mustDo(t, root.Create(ctx, p, nil, nil))
	}
	for _, tc := range []struct{ connect, why string }{
		{addr, "no chroot"},
		{addr + "/", "no chroot"},
		{addr + "/live", "brokers 1 are registered"},
		{addr + "/stopped", "a Kafka cluster has started"},
	} {
		var out bytes.Buffer
		err := lab.Seed(ctx, tc.connect, 3, 2, &out)
		if !errors.Is(err, lab.ErrNotTestChroot) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("Seed(%q) = %v, want %v mentioning %q", tc.connect, err, lab.ErrNotTestChroot, tc.why)
		}
	}
	for _, p := range []string{"/brokers", "/live/brokers/topics", "/stopped/brokers"} {
		if ok, _, _ := root.Exists(ctx, p); ok {
			t.Errorf("a refused Seed created %s", p)
		}
	}
}

// TestScanWithoutMultiRead: on a ZooKeeper without multiRead (3.5.7, Kafka
// 2.4.1's), a scan that would read in bulk reads one znode per request
// instead, and reads the same.
func TestScanWithoutMultiRead(t *testing.T) {
	zk := startZKProcOf(t, "2.4.1")
	connect := zk.Addr + "/old/kafka"
	ctx := ctxT(t, 2*time.Minute)
	mustDo(t, lab.Seed(ctx, connect, zookeeper.ScanSpreadMin+20, 3, io.Discard))
	c := dial(t, connect)
	want, err := c.ScanSequential(ctx)
	mustDo(t, err)
	got, err := c.Scan(ctx, 0)
	mustDo(t, err)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Scan on ZooKeeper 3.5 differs from ScanSequential:\n%s", diffSnapshots(got, want))
	}
	if c.UsesMultiRead() {
		t.Fatal("bulk sessions opened on a ZooKeeper without multiRead")
	}
	if len(want.Topics) != zookeeper.ScanSpreadMin+20 {
		t.Fatalf("%d topics", len(want.Topics))
	}
}

// TestScan seeds a small chroot, breaks it the ways a real cluster breaks,
// and checks that the concurrent scan and the sequential one agree and see
// every problem without aborting.
func TestScan(t *testing.T) {
	zk := startZKProc(t)
	addr := zk.Addr
	const topics, parts = zookeeper.ScanSpreadMin + 20, 3 // enough to spread over sessions
	connect := addr + "/small/kafka"                      // a nested chroot Seed must create
	ctx := ctxT(t, 2*time.Minute)
	var out bytes.Buffer
	mustDo(t, lab.Seed(ctx, connect, topics, parts, &out))
	t.Log(strings.TrimSpace(out.String()))
	c := dial(t, connect)

	// Idempotent: a second run creates nothing; a topic whose znodes were
	// removed by hand (its config left behind) is completed.
	mustDo(t, c.DeleteRecursive(ctx, kafkazk.TopicPath("seed-00020")))
	out.Reset()
	mustDo(t, lab.Seed(ctx, connect, topics, parts, &out))
	if want := fmt.Sprintf(" %d znodes created in 1 transactions, %d topics already there, 1 other znodes already there", 2+2*parts, topics-1); !strings.Contains(out.String(), want) {
		t.Fatalf("second Seed: %q, want it to say %q", out.String(), want)
	}

	// A cluster with problems.
	mustDo(t, c.Create(ctx, "/brokers/ids/2", []byte(`{"version":5,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"]}`), nil))
	mustDo(t, c.Create(ctx, kafkazk.ControllerPath, []byte(`{"version":2,"brokerid":2,"timestamp":"1"}`), nil))
	_, err := c.Set(ctx, kafkazk.TopicPath("seed-00007"), []byte(`{"version":3,"partitions":`), -1)
	mustDo(t, err)
	_, err = c.Set(ctx, kafkazk.TopicPath("seed-00008"), []byte(`{"version":3,"partitions":{"x":[1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}`), -1)
	mustDo(t, err)
	mustDo(t, c.Delete(ctx, kafkazk.PartitionStatePath("seed-00011", 2), -1))
	_, err = c.Set(ctx, kafkazk.PartitionStatePath("seed-00012", 0), []byte(`nope`), -1)
	mustDo(t, err)
	mustDo(t, c.Create(ctx, kafkazk.DeleteTopicPath("seed-00013"), nil, nil))
	_, err = c.Set(ctx, kafkazk.ConfigTopicPath("seed-00014"), []byte(`{"version":1,"config":{"retention.ms":"86400000"}}`), -1)
	mustDo(t, err)
	mustDo(t, c.Delete(ctx, kafkazk.ConfigTopicPath("seed-00015"), -1))
	mustDo(t, c.Create(ctx, kafkazk.ConfigTopicPath("gone"), []byte(`{"version":1,"config":{}}`), nil))
	mustDo(t, c.Create(ctx, kafkazk.DeleteTopicPath("gone"), nil, nil))

	// With brokers registered, Seed now refuses.
	if err := lab.Seed(ctx, connect, 1, 1, &out); !errors.Is(err, lab.ErrNotTestChroot) {
		t.Fatalf("Seed on a chroot with a registered broker: %v", err)
	}

	want, err := c.ScanSequential(ctx)
	mustDo(t, err)
	for _, n := range []int{0, 1, 2, 7, 64, 1000} {
		got, err := c.Scan(ctx, n)
		mustDo(t, err)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Scan(%d) differs from ScanSequential:\n%s", n, diffSnapshots(got, want))
		}
	}
	// Those scans read in bulk (multiRead: the lab's ZooKeeper is 3.8);
	// one znode per request, when asked, reads the same.
	if !c.UsesMultiRead() {
		t.Fatal("a scan of 120 topics did not use multiRead on ZooKeeper 3.8")
	}
	// With a digest identity the bulk sessions authenticate as the Conn.
	ac, err := zookeeper.Dial(ctx, connect, zookeeper.Options{DigestAuth: "kremedy:secret"})
	mustDo(t, err)
	if got, err := ac.Scan(ctx, 0); err != nil || !reflect.DeepEqual(got, want) || !ac.UsesMultiRead() {
		t.Fatalf("Scan with digest auth (multiRead %v, %v) differs from ScanSequential:\n%s", ac.UsesMultiRead(), err, diffSnapshots(got, want))
	}
	ac.Close()
	nc := dial(t, connect)
	if got, err := nc.ScanWith(ctx, zookeeper.ScanOptions{NoMultiRead: true}); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ScanWith(NoMultiRead) differs from ScanSequential (%v):\n%s", err, diffSnapshots(got, want))
	}
	if nc.UsesMultiRead() {
		t.Fatal("ScanWith(NoMultiRead) opened bulk sessions")
	}
	nc.Close()

	// Sibling sessions: opened on first use, reused, closed with the Conn.
	// So far: c and the siblings its default scans opened.
	before := zookeeper.DefaultScanSessions
	waitFor(t, fmt.Sprintf("%d connections: c and its siblings", before), func() bool { return zkConnections(t, addr) == before })
	sc := dial(t, connect)
	for i, o := range []zookeeper.ScanOptions{{Concurrency: 8, Sessions: 1}, {Concurrency: 8, Sessions: 3}, {Concurrency: 8, Sessions: 3}, {Sessions: 20}} {
		got, err := sc.ScanWith(ctx, o)
		mustDo(t, err)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ScanWith(%+v) differs from ScanSequential:\n%s", o, diffSnapshots(got, want))
		}
		wantConns := before + 1 + min(i, 1)*2
		if i == 3 {
			wantConns = before + 20
		}
		waitFor(t, fmt.Sprintf("%d connections after ScanWith(%+v)", wantConns, o), func() bool { return zkConnections(t, addr) == wantConns })
	}
	sc.Close()
	waitFor(t, fmt.Sprintf("%d connections after Close", before), func() bool { return zkConnections(t, addr) == before })

	// Reads: 5 listings, the topic znodes, their configs (less one
	// deleted, plus "gone"), and the states of every topic whose
	// assignment decodes (all but two).
	if wantReads := 5 + topics + topics + (topics-2)*parts; want.Reads != wantReads {
		t.Errorf("Reads = %d, want %d", want.Reads, wantReads)
	}
	if !slices.Equal(want.Brokers, []int32{2}) || want.Controller != 2 || len(want.Errs) != 0 {
		t.Errorf("cluster: brokers %v controller %d errs %v", want.Brokers, want.Controller, want.Errs)
	}
	if len(want.Topics) != topics+1 {
		t.Fatalf("%d topics, want %d: %v", len(want.Topics), topics+1, want.Sorted())
	}

	ok := want.Topics["seed-00000"]
	if ok.Znode.Version != 3 || len(ok.Znode.TopicID) != 22 || len(ok.Znode.Partitions) != parts ||
		ok.Stat.Version != 0 || ok.Stat.Ctime.IsZero() || ok.Config == nil || len(ok.Config) != 0 ||
		ok.PendingDelete || len(ok.Errs) != 0 {
		t.Errorf("healthy topic: %+v", ok)
	}
	if ids := map[string]bool{}; true {
		for _, ts := range want.Topics {
			if id := ts.Znode.TopicID; id != "" {
				if ids[id] {
					t.Errorf("topic ID %s used twice", id)
				}
				ids[id] = true
			}
		}
	}
	wantState := kafkazk.PartitionState{ControllerEpoch: 1, Leader: 1, Version: 1, LeaderEpoch: 0, ISR: []int32{1, 2, 3}}
	for p := range int32(parts) {
		if !reflect.DeepEqual(ok.States[p], wantState) {
			t.Errorf("seed-00000 partition %d state %+v", p, ok.States[p])
		}
	}

	for _, tc := range []struct {
		topic  string
		errs   []string // substrings, one per expected Errs entry
		states int
		check  func(*kafkazk.TopicState) bool
	}{
		{"seed-00007", []string{"seed-00007: znode data does not decode"}, 0,
			func(ts *kafkazk.TopicState) bool { return ts.Znode.Version == 0 && ts.Config != nil }},
		{"seed-00008", []string{`partition key "x" is not a partition number`}, 0,
			func(ts *kafkazk.TopicState) bool {
				return ts.Znode.TopicID == "AAAAAAAAAAAAAAAAAAAAAA" && ts.Stat.Version == 1
			}},
		{"seed-00011", []string{"partitions/2/state: znode missing: partition 2 has no state znode"}, 2, nil},
		{"seed-00012", []string{"partitions/0/state: znode data does not decode"}, 2, nil},
		{"seed-00013", nil, parts, func(ts *kafkazk.TopicState) bool { return ts.PendingDelete }},
		{"seed-00014", nil, parts, func(ts *kafkazk.TopicState) bool { return ts.Config["retention.ms"] == "86400000" }},
		{"seed-00015", nil, parts, func(ts *kafkazk.TopicState) bool { return ts.Config == nil }},
		{"seed-00020", nil, parts, func(ts *kafkazk.TopicState) bool { return ts.Config != nil }},
		{"gone", []string{"/small/kafka/brokers/topics/gone: znode missing: no topic znode"}, 0,
			func(ts *kafkazk.TopicState) bool { return ts.PendingDelete && ts.Config != nil }},
	} {
		ts := want.Topics[tc.topic]
		if ts == nil {
			t.Errorf("%s: missing from the snapshot", tc.topic)
			continue
		}
		bad := len(ts.Errs) != len(tc.errs) || len(ts.States) != tc.states || (tc.check != nil && !tc.check(ts))
		for i := range min(len(ts.Errs), len(tc.errs)) {
			bad = bad || !strings.Contains(ts.Errs[i].Error(), tc.errs[i])
		}
		if bad {
			t.Errorf("%s: %+v", tc.topic, ts)
		}
	}

	// Only some topics: the same state for them, and a name that exists
	// nowhere is reported, not dropped.
	some, err := c.Scan(ctx, 4, "seed-00011", "nope", "seed-00011")
	mustDo(t, err)
	if len(some.Topics) != 2 || !reflect.DeepEqual(some.Topics["seed-00011"], want.Topics["seed-00011"]) ||
		len(some.Topics["nope"].Errs) != 1 {
		t.Errorf("Scan of two names: %v %+v", some.Sorted(), some.Topics["nope"])
	}
	seq, err := c.ScanSequential(ctx, "nope", "seed-00011")
	mustDo(t, err)
	if !reflect.DeepEqual(seq, some) {
		t.Errorf("named scans differ:\n%s", diffSnapshots(seq, some))
	}
	if _, err := c.Scan(ctx, 4, "../../zookeeper"); !errors.Is(err, kafkazk.ErrInvalidTopic) {
		t.Errorf("Scan of an invalid name: %v", err)
	}

	// A scan that cannot finish returns an error, not half a snapshot.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if s, err := c.Scan(cctx, 8); err == nil || s != nil {
		t.Errorf("Scan with a cancelled context: %v, %v", s, err)
	}
	if s, err := c.ScanSequential(cctx); err == nil || s != nil {
		t.Errorf("ScanSequential with a cancelled context: %v, %v", s, err)
	}

	// A ZooKeeper that stops answering (SIGSTOP) bounds the scan by its
	// context, although go-zookeeper's calls take none.
	mustDo(t, syscall.Kill(zk.Pid, syscall.SIGSTOP))
	cont := sync.OnceFunc(func() { _ = syscall.Kill(zk.Pid, syscall.SIGCONT) })
	t.Cleanup(cont)
	for name, scan := range map[string]func(context.Context) (*kafkazk.ClusterState, error){
		"Scan":           func(ctx context.Context) (*kafkazk.ClusterState, error) { return c.Scan(ctx, 8) },
		"ScanSequential": func(ctx context.Context) (*kafkazk.ClusterState, error) { return c.ScanSequential(ctx) },
	} {
		start := time.Now()
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		s, err := scan(dctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || s != nil || time.Since(start) > 3*time.Second {
			t.Errorf("%s against a stopped ZooKeeper: %v, %v after %s", name, s, err, time.Since(start))
		}
	}
	cont()
	if _, err := c.Scan(ctx, 8); err != nil {
		t.Errorf("Scan after ZooKeeper resumed: %v", err)
	}
}

// zkConnections is the number of client connections ZooKeeper reports
// (the srvr four-letter word, allowed by default).
func zkConnections(t *testing.T, addr string) int {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	mustDo(t, err)
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = nc.Write([]byte("srvr"))
	mustDo(t, err)
	b, err := io.ReadAll(nc)
	mustDo(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Connections: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			mustDo(t, err)
			return n - 1 // not this one
		}
	}
	t.Fatalf("srvr: no connection count in %q", b)
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func diffSnapshots(a, b *kafkazk.ClusterState) string {
	var out []string
	if a.Reads != b.Reads || a.Controller != b.Controller || !reflect.DeepEqual(a.Brokers, b.Brokers) || !reflect.DeepEqual(a.Errs, b.Errs) {
		out = append(out, fmt.Sprintf("cluster: %d %d %v %v vs %d %d %v %v", a.Reads, a.Controller, a.Brokers, a.Errs, b.Reads, b.Controller, b.Brokers, b.Errs))
	}
	for _, n := range slices.Compact(slices.Sorted(slices.Values(append(a.Sorted(), b.Sorted()...)))) {
		if !reflect.DeepEqual(a.Topics[n], b.Topics[n]) {
			out = append(out, fmt.Sprintf("%s:\n  %+v\n  %+v", n, a.Topics[n], b.Topics[n]))
		}
		if len(out) > 5 {
			break
		}
	}
	return strings.Join(out, "\n")
}

// The benchmark's cluster: one ZooKeeper for the whole test binary, seeded
// once with 2,000 topics × 10 partitions (22,000 topic and state znodes,
// 46,000 znodes in all), stopped by TestMain. KREMEDY_BENCH_TOPICS sets
// another number of topics — 20000 is the field's 200,000 partitions — and
// KREMEDY_BENCH_ZK_HEAP the ZooKeeper's heap (default 256m; a production
// ensemble of that size runs with several GiB: 2g is enough for 20,000
// topics).
var benchTopics, benchParts = envInt("KREMEDY_BENCH_TOPICS", 2000), 10

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

var benchZK struct {
	once    sync.Once
	connect string
	err     error
	stop    func()
	pid     int
	ref     *kafkazk.ClusterState // the sequential scan's result, to check the others against
	refMu   sync.Mutex
}

func benchCluster(b *testing.B) string {
	b.Helper()
	if testing.Short() {
		b.Skip("needs a real ZooKeeper; runs without -short")
	}
	benchZK.once.Do(func() {
		dir, err := os.MkdirTemp("", "kremedy-bench-zk-")
		if err != nil {
			benchZK.err = err
			return
		}
		zk, err := startZKProcess(dir, cmp.Or(os.Getenv("KREMEDY_BENCH_ZK_HEAP"), "256m"))
		if err != nil {
			os.RemoveAll(dir)
			benchZK.err = err
			return
		}
		benchZK.stop = func() { zk.Stop(); os.RemoveAll(dir) }
		benchZK.pid = zk.Pid
		benchZK.connect = zk.Addr + "/bench"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		var out bytes.Buffer
		benchZK.err = lab.Seed(ctx, benchZK.connect, benchTopics, benchParts, &out)
		fmt.Fprint(os.Stderr, out.String())
	})
	if benchZK.err != nil {
		b.Fatal(benchZK.err)
	}
	return benchZK.connect
}

// BenchmarkScan reads 2,000 topics × 10 partitions: 24,005 reads (5
// listings, 2,000 topic znodes, 2,000 configs, 20,000 states). znodes/s is
// reads per second; peak-RSS-MB is the test process's VmHWM during the
// sub-benchmark (reset through /proc/self/clear_refs when it starts, after
// a GC that returned free memory to the OS), start-RSS-MB its VmRSS then;
// snapshot-MB is the live heap the finished snapshot holds.
func BenchmarkScan(b *testing.B) {
	connect := benchCluster(b)
	wantReads := 5 + 2*benchTopics + benchTopics*benchParts
	type scanFunc func(ctx context.Context) (*kafkazk.ClusterState, error)
	run := func(b *testing.B, scan scanFunc, compare bool) {
		ctx := context.Background()
		resetPeakRSS()
		rss0 := currentRSS()
		heap0 := liveHeap()
		b.ReportAllocs()
		self0, zk0 := cpuTime(0), cpuTime(benchZK.pid)
		b.ResetTimer()
		var snap *kafkazk.ClusterState
		reads := 0
		for range b.N {
			snap = nil
			s, err := scan(ctx)
			if err != nil {
				b.Fatal(err)
			}
			snap = s
			reads += s.Reads
		}
		b.StopTimer()
		b.ReportMetric(float64(cpuTime(0)-self0)/float64(b.N)/1e6, "client-CPU-ms/op")
		b.ReportMetric(float64(cpuTime(benchZK.pid)-zk0)/float64(b.N)/1e6, "zk-CPU-ms/op")
		b.ReportMetric(float64(reads)/b.Elapsed().Seconds(), "znodes/s")
		b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MB")
		b.ReportMetric(float64(rss0)/(1<<20), "start-RSS-MB")
		b.ReportMetric(float64(liveHeap()-heap0)/(1<<20), "snapshot-MB")
		if snap.Reads != wantReads || len(snap.Topics) != benchTopics {
			b.Fatalf("scan made %d reads over %d topics, want %d over %d", snap.Reads, len(snap.Topics), wantReads, benchTopics)
		}
		benchZK.refMu.Lock()
		defer benchZK.refMu.Unlock()
		if benchZK.ref == nil {
			if !compare {
				benchZK.ref = snap
			}
		} else if !reflect.DeepEqual(snap, benchZK.ref) {
			b.Fatalf("snapshot differs from the sequential scan's:\n%s", diffSnapshots(snap, benchZK.ref))
		}
	}

	c := dial(b, connect)
	b.Run("sequential", func(b *testing.B) {
		run(b, func(ctx context.Context) (*kafkazk.ClusterState, error) { return c.ScanSequential(ctx) }, false)
	})
	// concurrent-N is Scan(ctx, N): N reads in flight over the default
	// DefaultScanSessions sessions. -sessions-K spreads them over K
	// sessions instead; -sessions-1 is one pipelined session.
	// -no-multiread reads one znode per request where the servers would
	// answer multiRead (the scans before it).
	for _, o := range []zookeeper.ScanOptions{{Concurrency: 128, Sessions: 1}, {Concurrency: 32}, {Concurrency: 128},
		{Concurrency: 128, NoMultiRead: true}, {Concurrency: 32, NoMultiRead: true},
		{Concurrency: 128, Sessions: 2}, {Concurrency: 128, Sessions: 8}} {
		name := "concurrent-" + strconv.Itoa(o.Concurrency)
		if o.Sessions != 0 {
			name += "-sessions-" + strconv.Itoa(o.Sessions)
		}
		if o.NoMultiRead {
			name += "-no-multiread"
		}
		b.Run(name, func(b *testing.B) {
			run(b, func(ctx context.Context) (*kafkazk.ClusterState, error) { return c.ScanWith(ctx, o) }, true)
		})
	}
}

// resetPeakRSS returns freed memory to the OS and resets the kernel's
// peak-RSS counter (VmHWM) for this process.
func resetPeakRSS() {
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS is this process's VmHWM in bytes (0 where /proc is absent).
func peakRSS() int64 { return procStatus("VmHWM:") }

// currentRSS is this process's VmRSS in bytes.
func currentRSS() int64 { return procStatus("VmRSS:") }

func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuTime is the user+system CPU time of process pid (0: this one), from
// /proc/<pid>/stat (clock ticks, assumed 100 Hz).
func cpuTime(pid int) time.Duration {
	name := "/proc/self/stat"
	if pid != 0 {
		name = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
