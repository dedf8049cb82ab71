package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
)

// jbodRecord is the size of one record the JBOD test writes (random
// bytes: the producer compresses).
const jbodRecord = 256 << 10

// jbodCommitted is the offset group jbod-readers commits on each
// partition of the JBOD test's topic.
const jbodCommitted = 40

// TestDiskFullJBODLab: a ZooKeeper-mode lab (Kafka 3.9.2) whose brokers
// have two log dirs each, every one a 64 MiB tmpfs. Broker 1 keeps every
// replica of "orders" in its first dir, filled to 95%; its second dir is
// empty; group jbod-readers committed offset 40 of each partition. A
// headless `run disk-full` relieves the first dir by moving replicas to
// the second (AlterReplicaLogDirs): no record deleted (every one read back
// from offset 0), the topic's configs as before; a second run does
// nothing. Then the first dir is filled until ENOSPC: Kafka takes it
// offline and broker 1 runs on with its second dir; the plan says an
// offline dir's replicas cannot be moved, and the run deletes records to
// the group's commit, stops the broker (a restart on the full dir crashes
// it), moves replicated partition dirs aside and starts it: both dirs
// online, every record past the commit readable, the configs as before.
func TestDiskFullJBODLab(t *testing.T) {
	needLab(t)
	heavyLab(t, "the JBOD disk-full lab (make test keeps TestDiskFullLab and TestDiskFullKRaftLab)")
	needRoot(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers, cfg.LogDirSize, cfg.LogDirsPerBroker = 67, 1, "64m", 2
	jbodCase(t, cfg, "disk-full")
}

// TestDiskFullJBODKRaftLab is TestDiskFullJBODLab on KRaft 4.1.2 (JBOD
// with KIP-858: a failed dir reported to the controller, the broker runs
// on) with kraft-disk-full. The metadata log lives in a KRaft broker's
// first log dir, and its failure stops the broker: so the dir filled is
// the second, and the moves go to the first.
func TestDiskFullJBODKRaftLab(t *testing.T) {
	needLab(t)
	heavyLab(t, "the JBOD disk-full lab on KRaft (make test keeps TestDiskFullLab and TestDiskFullKRaftLab)")
	needRoot(t)
	t.Parallel()
	cfg := lab.KRaftConfig()
	cfg.Net, cfg.KafkaVersion, cfg.KRaftControllers, cfg.LogDirSize, cfg.LogDirsPerBroker = 79, "4.1.2", 1, "64m", 2
	jbodCase(t, cfg, "kraft-disk-full")
}

// jbodCase is the JBOD lab test on a lab of cfg with runbook.
func jbodCase(t *testing.T, cfg lab.Config, runbook string) {
	l := startLab(t, cfg)
	c := connectLab(t, l)
	const topic, victim = "orders", int32(1)
	dirs := l.LogDirs(int(victim))
	if cfg.KRaft {
		dirs = []string{dirs[1], dirs[0]} // the metadata log stays in the first
	}
	acked := jbodSetup(t, l, c, topic, victim, dirs[0])
	configs := topicConfigs(t, c, topic)

	t.Run("diagnose names the nearly full dir", func(t *testing.T) {
		d, code := diagnosis(t, l, "")
		causes := d.Causes()
		if code != 1 || len(causes) == 0 || causes[0].Kind != diagnose.FindLogDirFull || !slices.Contains(causes[0].Brokers, victim) {
			t.Fatalf("want exit 1 and log-dir-full on broker %d first; exit %d, causes %+v", victim, code, causes)
		}
	})
	run := func() result {
		return kremedy(t, "run", runbook, "--inventory", l.InventoryPath(), "--set", fmt.Sprintf("broker=%d", victim),
			"--run-dir", filepath.Join(t.TempDir(), "run"), "--headless", "--yes", "--confirm", "kremedy-lab")
	}
	t.Run("run: replicas moved to the other dir, no record deleted, configs as before", func(t *testing.T) {
		r := run()
		t.Logf("FIGURE headless disk-full (JBOD moves) took %.1fs", r.took.Seconds())
		if r.code != 0 || !strings.Contains(r.out, "AlterReplicaLogDirs") {
			t.Fatalf("disk-full: exit %d (want 0, with AlterReplicaLogDirs planned)\n%s", r.code, r.out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		reps, err := c.kc.Replicas(ctx, victim)
		if err != nil {
			t.Fatal(err)
		}
		moved := 0
		for _, rd := range reps {
			if rd.Topic == topic && rd.Dir == dirs[1] && !rd.Future {
				moved++
			}
		}
		if moved == 0 {
			t.Errorf("no replica of %s in %s: %+v", topic, dirs[1], reps)
		}
		if free := freeBytes(t, dirs[0]); free < 64<<20/5*9/10 {
			t.Errorf("%s has %d bytes free after the run, want about 20%% of 64 MiB", dirs[0], free)
		}
		for p := range int32(len(acked)) {
			readFrom(t, ctx, l, topic, p, acked[p], 0)
		}
		if after := topicConfigs(t, c, topic); after != configs {
			t.Errorf("topic configs changed:\nbefore %s\nafter  %s", configs, after)
		}
	})
	t.Run("a second run has nothing to do", func(t *testing.T) {
		if r := run(); r.code != 0 || !strings.Contains(r.out, "nothing to do: [lower-local move-dirs free-records quarantine start restore-local]") {
			t.Fatalf("second disk-full: exit %d, want 0 with no step done\n%s", r.code, r.out)
		}
	})
	t.Run("a dir filled to ENOSPC goes offline, the broker runs on; the run stops it, moves replicated dirs aside, starts it", func(t *testing.T) {
		jbodOfflineCase(t, l, c, runbook, topic, victim, dirs, acked, configs)
	})
}

// jbodOfflineCase fills dirs[0] until Kafka takes it offline, then: the
// plan says its replicas cannot be moved; a headless run deletes to the
// group's commit, stops the broker, moves replicated directories to the
// quarantine and starts it; both dirs online, every record past the
// commit readable, the configs as before.
func jbodOfflineCase(t *testing.T, l *lab.Lab, c *clients, runbook, topic string, victim int32, dirs []string, acked []int, configs string) {
	t.Helper()
	jbodFillOffline(t, l, c, topic, victim, dirs, acked)
	// diagnose names the offline dir of the running broker.
	d, code := diagnosis(t, l, "")
	var f *diagnose.Finding
	for i, x := range d.Findings {
		if x.Kind == diagnose.FindLogDirFull && slices.Contains(x.Brokers, victim) {
			f = &d.Findings[i]
		}
	}
	if code != 1 || f == nil || !strings.Contains(strings.Join(f.Evidence, "\n"), fmt.Sprintf("DescribeLogDirs on broker %d: %s is offline (", victim, dirs[0])) {
		t.Fatalf("diagnose does not name broker %d's offline dir %s: exit %d, %+v", victim, dirs[0], code, f)
	}
	r := kremedy(t, "plan", runbook, "--inventory", l.InventoryPath(), "--set", fmt.Sprintf("broker=%d", victim))
	if !strings.Contains(r.out, "AlterReplicaLogDirs cannot move its replicas") {
		t.Errorf("the plan does not say the offline dir's replicas cannot be moved: exit %d\n%s", r.code, r.out)
	}
	q := filepath.Join(l.BrokerDir(int(victim)), "quarantine")
	if err := os.MkdirAll(q, 0o755); err != nil {
		t.Fatal(err)
	}
	r = kremedy(t, "run", runbook, "--inventory", l.InventoryPath(), "--set", fmt.Sprintf("broker=%d", victim), "--set", "quarantine="+q,
		"--run-dir", filepath.Join(t.TempDir(), "run"), "--headless", "--yes", "--confirm", "kremedy-lab")
	t.Logf("FIGURE headless disk-full (JBOD, a dir offline) took %.1fs", r.took.Seconds())
	if r.code != 0 || !strings.Contains(r.out, "stop broker 1") {
		t.Fatalf("disk-full on the offline dir: exit %d (want 0, the broker stopped before the moves)\n%s\nserver.log: %s", r.code, r.out,
			grepLog(filepath.Join(l.BrokerDir(int(victim)), "logs", "server.log")))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	states, err := c.kc.DescribeLogDirs(ctx, victim)
	if err != nil || len(states) != 2 || states[0].Err != "" || states[1].Err != "" {
		t.Fatalf("broker %d's log dirs: %+v, %v", victim, states, err)
	}
	for p := range int32(len(acked)) {
		readFrom(t, ctx, l, topic, p, acked[p], jbodCommitted)
	}
	if after := topicConfigs(t, c, topic); after != configs {
		t.Errorf("topic configs changed:\nbefore %s\nafter  %s", configs, after)
	}
	if moved, _ := filepath.Glob(filepath.Join(q, "kremedy-*", topic+"-*", "*.log")); len(moved) == 0 {
		t.Errorf("no segment in the quarantine %s: the moved directories must be kept", q)
	}
}

// jbodSetup makes topic (4 partitions, 2 MiB segments, each on victim
// and another broker), moves victim's replicas into dir, and writes
// records until dir's filesystem is 95% used: the records acknowledged
// per partition.
func jbodSetup(t *testing.T, l *lab.Lab, c *clients, topic string, victim int32, dir string) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	assign := [][]int32{{victim, 2}, {victim, 3}, {victim, 2}, {victim, 3}}
	if _, err := c.kc.CreateTopic(ctx, topic, assign, 0, 0, map[string]string{"segment.bytes": fmt.Sprint(2 << 20)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, fmt.Sprintf("broker %d keeps every replica of %s in %s", victim, topic, dir), func() (bool, string) {
		reps, err := c.kc.Replicas(ctx, victim)
		if err != nil {
			return false, err.Error()
		}
		in := 0
		for p := range int32(len(assign)) {
			if where := replicaDir(reps, topic, p); where == dir {
				in++
			} else if where != "" {
				if err := c.kc.MoveReplicaDir(ctx, victim, dir, topic, p); err != nil {
					return false, err.Error()
				}
			}
		}
		return in == len(assign), fmt.Sprintf("%d of %d there: %+v", in, len(assign), reps)
	})
	acked := make([]int, len(assign))
	produceUntil(t, ctx, l, topic, acked, func() bool { return usedPercent(t, dir) >= 95 })
	t.Logf("%s: %d%% used, %d bytes free; records per partition %v", dir, usedPercent(t, dir), freeBytes(t, dir), acked)
	offs := kadm.Offsets{}
	for p := range int32(len(assign)) {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: jbodCommitted, LeaderEpoch: -1})
	}
	rs, err := c.kc.Admin().CommitOffsets(ctx, "jbod-readers", offs)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	return acked
}

// jbodFillOffline writes to the partitions victim keeps in dirs[0] until
// DescribeLogDirs reports that dir offline, then checks that victim still
// serves with dirs[1] online.
func jbodFillOffline(t *testing.T, l *lab.Lab, c *clients, topic string, victim int32, dirs []string, acked []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	reps, err := c.kc.Replicas(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	var only []int32
	for p := range int32(4) {
		if replicaDir(reps, topic, p) == dirs[0] {
			only = append(only, p)
		}
	}
	offline := func() bool {
		states, err := c.kc.DescribeLogDirs(ctx, victim)
		return err == nil && slices.ContainsFunc(states, func(s ports.LogDirState) bool { return s.Dir == dirs[0] && s.Err != "" })
	}
	produceTo(t, ctx, l, topic, only, acked, 600, offline)
	states, err := c.kc.DescribeLogDirs(ctx, victim)
	t.Logf("records %v, the last to %v: broker %d pid %d, log dirs %+v (%v)", acked, only, victim, l.BrokerPID(int(victim)), states, err)
	if !offline() {
		t.Fatalf("%s never went offline", dirs[0])
	}
	if l.BrokerPID(int(victim)) <= 0 || !slices.ContainsFunc(states, func(s ports.LogDirState) bool { return s.Dir == dirs[1] && s.Err == "" }) {
		t.Fatalf("broker %d should run on with %s online: pid %d, %+v", victim, dirs[1], l.BrokerPID(int(victim)), states)
	}
}

// produceUntil writes records round-robin to every partition of acked
// until done, counting the acknowledged ones.
func produceUntil(t *testing.T, ctx context.Context, l *lab.Lab, topic string, acked []int, done func() bool) {
	t.Helper()
	var ps []int32
	for p := range int32(len(acked)) {
		ps = append(ps, p)
	}
	produceTo(t, ctx, l, topic, ps, acked, 1000, done)
	if !done() {
		t.Fatalf("1000 records written and still not there: %v", acked)
	}
}

// produceTo writes at most most records round-robin to partitions ps
// (records "topic-p NNNNNN random"), checking done before each.
func produceTo(t *testing.T, ctx context.Context, l *lab.Lab, topic string, ps []int32, acked []int, most int, done func() bool) {
	t.Helper()
	pr, err := kafka.NewProducer(l.State.Config.Bootstrap(), 15*time.Second, l.KafkaOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	buf := make([]byte, jbodRecord)
	_, _ = rand.Read(buf)
	for i := 0; i < most && len(ps) > 0 && !done(); i++ {
		p := ps[i%len(ps)]
		if err := pr.Produce(ctx, topic, p, fmt.Sprintf("%s-%d %06d %s", topic, p, acked[p], buf)); err != nil {
			t.Logf("write %d to %s-%d failed: %v", i, topic, p, err)
			return
		}
		acked[p]++
	}
}

// readFrom proves partition p holds every acknowledged record from an
// offset at or below maxFirst on: nothing a reader had not committed past
// was deleted.
func readFrom(t *testing.T, ctx context.Context, l *lab.Lab, topic string, p int32, acked, maxFirst int) {
	t.Helper()
	vals, err := kafka.ReadPartition(ctx, l.State.Config.Bootstrap(), topic, p, l.KafkaOpts()...)
	if err != nil || len(vals) == 0 {
		t.Fatalf("read %s-%d: %d records, %v", topic, p, len(vals), err)
	}
	var first int
	if _, err := fmt.Sscanf(vals[0], topic+"-%d %06d", new(int), &first); err != nil || first > maxFirst {
		t.Fatalf("%s-%d: the first record %.20q is past offset %d (%v)", topic, p, vals[0], maxFirst, err)
	}
	for i, v := range vals {
		if want := fmt.Sprintf("%s-%d %06d ", topic, p, first+i); !strings.HasPrefix(v, want) {
			t.Fatalf("%s-%d: record %d is %.40q, want %q", topic, p, i, v, want)
		}
	}
	if first+len(vals) < acked {
		t.Errorf("%s-%d: records %d..%d readable, %d were acknowledged", topic, p, first, first+len(vals)-1, acked)
	}
}

// replicaDir is the dir of the broker's current replica of topic-p ("":
// none, or a move under way).
func replicaDir(reps []ports.ReplicaDir, topic string, p int32) string {
	dir := ""
	for _, r := range reps {
		if r.Topic == topic && r.Partition == p {
			if r.Future {
				return ""
			}
			dir = r.Dir
		}
	}
	return dir
}

func statfs(t *testing.T, dir string) syscall.Statfs_t {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func freeBytes(t *testing.T, dir string) int64 {
	st := statfs(t, dir)
	return int64(st.Bavail) * st.Bsize
}

func usedPercent(t *testing.T, dir string) int {
	st := statfs(t, dir)
	return int((st.Blocks - st.Bfree) * 100 / st.Blocks)
}

// waitFor polls cond every half second until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	for {
		ok, why := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: never: %s", what, why)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func grepLog(path string) string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "ERROR") || strings.Contains(l, "FATAL") || strings.Contains(l, "offline") || strings.Contains(l, "Shutdown") {
			out = append(out, l[:min(len(l), 300)])
		}
	}
	return strings.Join(out[max(0, len(out)-40):], "\n")
}
