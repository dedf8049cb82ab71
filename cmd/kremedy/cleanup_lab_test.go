package main

// Lab tests of the topic-cleanup runbook: the real binary, headless, against
// a real ZooKeeper-mode Kafka 3.9 lab broken by the lab's scenarios. They
// fail (never skip) when the lab's parts are missing, except under -short.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/inventory/connect"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/cleanup"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/lease"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

var bin string

// buildFlags are the go build flags of the binary the lab tests run.
var buildFlags []string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kremedy-bin-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "kremedy")
	if out, err := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", bin, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func needLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("lab test: runs without -short")
	}
	if _, _, err := lab.ResolveKafkaHome("", ""); err != nil {
		t.Fatalf("lab parts missing: %v (run `make lab-install`)", err)
	}
	if _, err := lab.FindSSHD(); err != nil {
		t.Fatal(err)
	}
}

// heavyLab keeps a lab test for `make test-versions` (KREMEDY_LAB_HEAVY=1),
// the README's second target, where the heaviest labs run: make test keeps
// at least one lab of each runbook and mode, and stays inside CI's budget.
// The skip says where the test runs; it is a lane, not a missing part.
func heavyLab(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("KREMEDY_LAB_HEAVY") == "" {
		t.Skipf("%s runs in `make test-versions` (KREMEDY_LAB_HEAVY=1), not in make test", what)
	}
}

func startLab(t *testing.T, cfg lab.Config) *lab.Lab {
	t.Helper()
	// Not t.TempDir(): a subtest's name can put a ',' or '(' in it, and a
	// log dir kremedy acts on may hold neither (internal/logdir).
	parent, err := os.MkdirTemp("", "kremedy-lab-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if cfg.Secure {
		// The service user that runs a secured lab's nodes reaches its
		// files through this directory.
		if err := os.Chmod(parent, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return startLabIn(t, filepath.Join(parent, "lab"), cfg)
}

func startLabIn(t *testing.T, dir string, cfg lab.Config) *lab.Lab {
	t.Helper()
	start := time.Now()
	// Registered first: a lab up that fails half-way (no quorum) must not
	// leave its sshd and JVMs behind, holding the ports of the next run.
	t.Cleanup(func() { _ = lab.Down(context.Background(), dir, false, io.Discard) })
	t.Cleanup(func() { keepLogs(t, dir) }) // before the lab goes down
	l, err := lab.Up(context.Background(), dir, cfg, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lab up in %.1fs", time.Since(start).Seconds())
	return l
}

// keepLogs copies a failed test's lab logs (every file under a logs
// directory: server.log, controller.log, state-change.log, kafka.out) to
// $KREMEDY_FAILED_LABS, or the temp dir's kremedy-failed-labs, before the
// lab and its temporary directory are removed, and says where.
func keepLogs(t *testing.T, dir string) {
	if !t.Failed() {
		return
	}
	root := cmp.Or(os.Getenv("KREMEDY_FAILED_LABS"), filepath.Join(os.TempDir(), "kremedy-failed-labs"))
	to := filepath.Join(root, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, string(filepath.Separator)+"logs"+string(filepath.Separator)) {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if b, err := os.ReadFile(p); err == nil && os.MkdirAll(filepath.Dir(filepath.Join(to, rel)), 0o755) == nil {
			if len(b) > 32<<20 {
				b = b[len(b)-32<<20:] // the end is what explains a failure
			}
			if os.WriteFile(filepath.Join(to, rel), b, 0o644) == nil {
				n++
			}
		}
		return nil
	})
	t.Logf("the lab's logs (%d files) are kept in %s", n, to)
}

func breakIt(t *testing.T, l *lab.Lab, scenario, topic string) *lab.Report {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := lab.Scenarios[scenario].Run(ctx, l, topic, &out)
	if err != nil {
		t.Fatalf("%s: %v\n%s", scenario, err, out.String())
	}
	return rep
}

type result struct {
	out  string
	code int
	took time.Duration
}

func kremedy(t testing.TB, args ...string) result {
	t.Helper()
	start := time.Now()
	var buf bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	r := result{out: buf.String(), took: time.Since(start)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func runCleanup(t *testing.T, l *lab.Lab, topic, runDir string, extra ...string) result {
	t.Helper()
	args := append([]string{"run", "topic-cleanup", "--inventory", l.InventoryPath(), "--set", "topic=" + topic,
		"--run-dir", runDir, "--headless", "--yes", "--confirm", topic}, extra...)
	r := kremedy(t, args...)
	if r.code != 0 {
		t.Fatalf("cleanup of %s: exit %d\n%s", topic, r.code, r.out)
	}
	t.Logf("FIGURE headless topic-cleanup of %s took %.1fs; outage window: %s", topic, r.took.Seconds(), outageOf(t, runDir))
	return r
}

// outageOf is the outage window a run's report states ("" when none).
func outageOf(t *testing.T, runDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## Outage window\n\n")
	if !ok {
		return ""
	}
	line, _, _ := strings.Cut(rest, "\n")
	return line
}

// clients are a lab's ZooKeeper and Kafka clients, opened from its
// inventory as kremedy opens an operator's (connect.Load); zk is nil on a
// KRaft lab.
type clients struct {
	l  *lab.Lab
	zk *zookeeper.Conn
	kc *kafka.Client
}

func connectLab(t *testing.T, l *lab.Lab) *clients {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := connect.Load(ctx, l.InventoryPath(), connect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return &clients{l: l, zk: cl.ZK, kc: cl.Kafka}
}

// assertRecreated proves, with its own clients, that topic is new and
// healthy on every broker: one topic ID (the znode's), ISR = replicas,
// earliest offset 0, no old record readable.
func (c *clients) assertRecreated(t *testing.T, topic string, oldIDs ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	z, _, err := c.zk.Topic(ctx, topic)
	if err != nil {
		t.Fatalf("znode of recreated %s: %v", topic, err)
	}
	for _, old := range oldIDs {
		if old != "" && z.TopicID == old {
			t.Fatalf("%s kept its old topic id %s", topic, old)
		}
	}
	for id := int32(1); id <= int32(c.l.State.Config.Brokers); id++ {
		v, err := c.kc.BrokerView(ctx, id, topic)
		if err != nil {
			t.Fatal(err)
		}
		tv := v.Topics[topic]
		if !tv.Present() || tv.ID != z.TopicID {
			t.Fatalf("broker %d: %s err=%s id=%s, znode id %s", id, topic, tv.Err, tv.ID, z.TopicID)
		}
		for p, pv := range tv.Partitions {
			if len(pv.ISR) != len(pv.Replicas) || pv.Leader < 0 {
				t.Fatalf("broker %d: %s-%d leader %d isr %v replicas %v", id, topic, p, pv.Leader, pv.ISR, pv.Replicas)
			}
			e, l, err := c.kc.Offsets(ctx, pv.Leader, topic, p)
			// Empty; partition 0 starts past kremedy's canaries (removed
			// with DeleteRecords), the others at 0.
			if err != nil || e != l || (p != 0 && l != 0) {
				t.Fatalf("%s-%d earliest %d latest %d (%v): want a fresh, empty partition (partition 0 past the removed canary)", topic, p, e, l, err)
			}
		}
	}
	for p := int32(0); p < int32(len(z.Partitions)); p++ {
		vals, err := kafka.ReadPartition(ctx, c.l.State.Config.Bootstrap(), topic, p, c.l.KafkaOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		if len(vals) != 0 {
			t.Fatalf("recreated %s-%d serves records %q: want none (no old data, the canary removed)", topic, p, vals)
		}
	}
}

func (c *clients) assertBystander(t *testing.T, rep *lab.Report) {
	t.Helper()
	for p := range rep.Assign {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		vals, err := kafka.ReadPartition(ctx, c.l.State.Config.Bootstrap(), rep.Bystander, int32(p), c.l.KafkaOpts()...)
		cancel()
		if err != nil || len(vals) != lab.MessagesPerPartition {
			t.Fatalf("bystander %s-%d: %d records (%v), want %d", rep.Bystander, p, len(vals), err, lab.MessagesPerPartition)
		}
	}
}

func (c *clients) assertGone(t *testing.T, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range []string{kafkazk.TopicPath(topic), kafkazk.ConfigTopicPath(topic), kafkazk.DeleteTopicPath(topic)} {
		if ok, _, _ := c.zk.Exists(ctx, p); ok {
			t.Fatalf("%s still exists", p)
		}
	}
	for id := int32(1); id <= int32(c.l.State.Config.Brokers); id++ {
		v, err := c.kc.BrokerView(ctx, id, topic)
		if err != nil || !v.Topics[topic].Gone() {
			t.Fatalf("broker %d still knows %s: %+v %v", id, topic, v.Topics[topic], err)
		}
		for _, d := range c.l.LogDirs(int(id)) {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				if i := strings.LastIndexByte(e.Name(), '-'); i > 0 && e.Name()[:i] == topic {
					t.Fatalf("broker %d still has %s/%s", id, d, e.Name())
				}
			}
		}
	}
}

// assertQuarantined checks the manifest: every move done, every moved
// directory present in quarantine, none inside a log dir.
func assertQuarantined(t *testing.T, l *lab.Lab, runDir, topic string, atLeast int) {
	t.Helper()
	assertQuarantinedOf(t, l, runDir, []string{topic}, atLeast)
}

// assertQuarantinedOf is assertQuarantined for a run of several topics:
// every move is of one of them.
func assertQuarantinedOf(t *testing.T, l *lab.Lab, runDir string, topics []string, atLeast int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "quarantine-manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m cleanup.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Moves) < atLeast {
		t.Fatalf("manifest has %d moves, want at least %d", len(m.Moves), atLeast)
	}
	for _, mv := range m.Moves {
		if mv.State != "moved" {
			t.Fatalf("move %+v not done", mv)
		}
		if base := filepath.Base(mv.To); !slices.ContainsFunc(topics, func(topic string) bool {
			return strings.HasPrefix(base, topic+"-") && !strings.HasPrefix(base, topic+"-v2")
		}) {
			t.Fatalf("quarantined %s: not a directory of %v", mv.To, topics)
		}
		// 3.0+ writes partition.metadata when it creates a log; 2.8 only
		// at the partition's next LeaderAndIsr, so a directory of the
		// recreated topic may have none.
		if _, err := os.Stat(filepath.Join(mv.To, "partition.metadata")); err != nil && l.State.RefusesStaleLog() {
			t.Fatalf("quarantined %s: %v", mv.To, err)
		}
		for n := 1; n <= l.State.Config.Brokers; n++ {
			for _, d := range l.LogDirs(n) {
				if strings.HasPrefix(mv.To, d+"/") {
					t.Fatalf("quarantine %s is inside log dir %s", mv.To, d)
				}
			}
		}
	}
}

// logSplit reports, from the journal, how much of a run was spent stopping
// and starting brokers (their steps, health gate included) and how much
// was everything else.
func logSplit(t *testing.T, runDir string) {
	recs, err := journal.Read(filepath.Join(runDir, "journal.jsonl"))
	if err != nil || len(recs) == 0 {
		t.Fatal(err)
	}
	total := recs[len(recs)-1].Time.Sub(recs[0].Time)
	var brokers time.Duration
	start := map[string]time.Time{}
	perStep := map[string]time.Duration{}
	for _, r := range recs {
		switch r.Type {
		case journal.StepStart:
			start[r.Step] = r.Time
		case journal.StepDone:
			d := r.Time.Sub(start[r.Step])
			perStep[r.Step] = d
			if r.Step == "stop-brokers" || r.Step == "start-brokers" {
				brokers += d
			}
		}
	}
	t.Logf("FIGURE run %s: total %.2fs, broker stop/start (incl. health gate) %.2fs, everything else %.2fs (%.1f%%); per step %v",
		filepath.Base(runDir), total.Seconds(), brokers.Seconds(), (total - brokers).Seconds(), 100*float64(total-brokers)/float64(total), perStep)
}

func assertNoActions(t *testing.T, runDir string) {
	t.Helper()
	recs, err := journal.Read(filepath.Join(runDir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Type == journal.ActionStart || r.Type == journal.Approval {
			t.Fatalf("second run was not a no-op: %s %s %s", r.Type, r.Step, r.Data)
		}
	}
}

// everyBroker stops or starts every lab broker with `kremedy lab broker`.
func everyBroker(t *testing.T, l *lab.Lab, verb string) {
	t.Helper()
	for n := 1; n <= l.State.Config.Brokers; n++ {
		if r := kremedy(t, "lab", "broker", verb, fmt.Sprint(n), "--dir", filepath.Dir(l.InventoryPath())); r.code != 0 {
			t.Fatalf("%s broker %d: %s", verb, n, r.out)
		}
	}
}

// restoreRun undoes a cleanup run: segments restore, then znodes restore
// (the brokers stopped).
func restoreRun(t *testing.T, run string) {
	t.Helper()
	for _, args := range [][]string{{"segments", "restore", filepath.Join(run, "quarantine-manifest.json")}, {"znodes", "restore", filepath.Join(run, "backup", "znodes.json")}} {
		if r := kremedy(t, args...); r.code != 0 {
			t.Fatalf("kremedy %v: exit %d\n%s", args, r.code, r.out)
		}
	}
}

// killDuring starts a headless run and SIGKILLs it (KREMEDY_FAULT) right
// after the journal records n completed actions of step, then resumes it
// to the end.
func killDuring(t *testing.T, l *lab.Lab, topic, runDir, step string, n int) {
	t.Helper()
	killed := runWithFault(t, fmt.Sprintf("sigkill@action-end:%s:%d", step, n), "run", "topic-cleanup", "--inventory", l.InventoryPath(),
		"--set", "topic="+topic, "--set", "recreate=true", "--run-dir", runDir, "--headless", "--yes", "--confirm", topic)
	if killed.code != -1 {
		t.Fatalf("run never reached %d actions of %s (exit %d):\n%s", n, step, killed.code, killed.out)
	}
	t.Logf("killed with SIGKILL after %d completed actions of %s", n, step)
	r := kremedy(t, "resume", runDir, "--headless", "--yes", "--confirm", topic)
	if r.code != 0 {
		t.Fatalf("resume after SIGKILL in %s: exit %d\n%s", step, r.code, r.out)
	}
	if !strings.Contains(r.out, "done earlier, re-checked") {
		t.Fatalf("resume did not re-check completed steps:\n%s", r.out)
	}
}

// diagnoseJSON runs `kremedy diagnose --json` and returns the finding kinds
// (kind:topic, sorted), the brokers each names, and the exit code.
func diagnoseJSON(t *testing.T, l *lab.Lab, topic string) ([]string, map[string][]int32, int) {
	t.Helper()
	d, code := diagnosis(t, l, topic) // logs each finding's evidence
	var ks []string
	brokers := map[string][]int32{}
	for _, f := range d.Findings {
		ks = append(ks, f.Kind)
		brokers[f.Kind] = f.Brokers
	}
	slices.Sort(ks)
	t.Logf("diagnose %s: exit %d, findings %v (%s)", topic, code, ks, d.Took)
	return ks, brokers, code
}

// TestCleanupLab repairs ghost-topic and stale-metadata with one headless
// run each, proves the result with its own clients, proves a second run is
// a no-op, and resumes runs killed with SIGKILL inside the stop and the
// wipe steps.
func TestCleanupLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net = 11
	l := startLab(t, cfg)
	c := connectLab(t, l)

	t.Run("healthy lab: diagnose finds nothing", func(t *testing.T) {
		if ks, _, code := diagnoseJSON(t, l, ""); code != 0 || len(ks) != 0 {
			t.Fatalf("healthy lab: exit %d findings %v", code, ks)
		}
	})

	t.Run("ghost-topic repaired", func(t *testing.T) {
		rep := breakIt(t, l, "ghost-topic", "orders")
		ks, brokers, code := diagnoseJSON(t, l, "orders")
		if code != 1 || !slices.Equal(ks, []string{"foreign-segments", "leader-not-serving", "under-replicated"}) {
			t.Fatalf("ghost-topic diagnosis: exit %d findings %v", code, ks)
		}
		for _, k := range ks {
			if !slices.Equal(brokers[k], []int32{rep.Victim}) {
				t.Fatalf("%s names brokers %v, want the stale broker %d", k, brokers[k], rep.Victim)
			}
		}
		run := filepath.Join(t.TempDir(), "run")
		runCleanup(t, l, "orders", run, "--set", "recreate=true")
		c.assertRecreated(t, "orders", rep.OldID, rep.NewID)
		c.assertBystander(t, rep)
		assertQuarantined(t, l, run, "orders", 9)
		logSplit(t, run)
		if b, err := os.ReadFile(filepath.Join(run, "report.md")); err != nil || !bytes.Contains(b, []byte("znodes restore")) {
			t.Fatalf("report.md lacks the undo: %v", err)
		}
		if ks, _, code := diagnoseJSON(t, l, "orders"); code != 0 {
			t.Fatalf("after the cleanup: exit %d findings %v", code, ks)
		}
		again := filepath.Join(t.TempDir(), "again")
		runCleanup(t, l, "orders", again, "--set", "recreate=true")
		assertNoActions(t, again)
	})

	t.Run("stale-metadata repaired", func(t *testing.T) {
		rep := breakIt(t, l, "stale-metadata", "payments")
		ks, brokers, code := diagnoseJSON(t, l, "payments")
		if code != 1 || !slices.Equal(ks, []string{"orphaned-segments", "stale-metadata"}) {
			t.Fatalf("stale-metadata diagnosis: exit %d findings %v", code, ks)
		}
		if slices.Contains(brokers["stale-metadata"], rep.Victim) || len(brokers["stale-metadata"]) != 2 {
			t.Fatalf("stale-metadata names %v; the restarted broker %d forgot the topic, the other two serve it", brokers["stale-metadata"], rep.Victim)
		}
		run := filepath.Join(t.TempDir(), "run")
		runCleanup(t, l, "payments", run)
		if ks, _, code := diagnoseJSON(t, l, ""); code != 0 {
			t.Fatalf("after the cleanups the whole cluster: exit %d findings %v", code, ks)
		}
		c.assertGone(t, "payments")
		c.assertBystander(t, rep)
		assertQuarantined(t, l, run, "payments", 9)
	})

	t.Run("three ghosts of one outage: one run, one stop of each broker", func(t *testing.T) { threeGhosts(t, l, c) })

	t.Run("TUI in tmux repairs ghost-topic", func(t *testing.T) {
		rep := breakIt(t, l, "ghost-topic", "refills")
		run := filepath.Join(t.TempDir(), "run")
		final := tuiInTmux(t, l, "refills", run)
		t.Logf("final screen:\n%s", final)
		if o := outageOf(t, run); !strings.Contains(o, "all 3 brokers down from") {
			t.Fatalf("the report states no outage window: %q", o)
		} else {
			t.Logf("FIGURE TUI outage window: %s", o)
		}
		c.assertRecreated(t, "refills", rep.OldID, rep.NewID)
		c.assertBystander(t, rep)
		assertQuarantined(t, l, run, "refills", 9)
	})

	t.Run("undo: segments restore and znodes restore bring the exact state back", func(t *testing.T) {
		rep := breakIt(t, l, "ghost-topic", "undone")
		run := filepath.Join(t.TempDir(), "run")
		runCleanup(t, l, "undone", run)
		everyBroker(t, l, "stop")
		// Another kremedy holds the cluster's lease: the restore is
		// refused, naming it, and moves nothing.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		other := ports.Holder{RunID: "20261205T101010Z-rolling-restart-lab", Runbook: "rolling-restart", Operator: "alice@bastion", Host: "bastion", Since: time.Now(), Token: "alice"}
		held, err := lease.NewZK(c.zk, c.zk.SessionTimeout()).Acquire(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		manifest := filepath.Join(run, "quarantine-manifest.json")
		if r := kremedy(t, "segments", "restore", manifest); r.code != 1 || !strings.Contains(r.out, "holds the cluster's lease") ||
			!strings.Contains(r.out, other.RunID) || !strings.Contains(r.out, "--break-lease") {
			t.Fatalf("segments restore while another run holds the lease: exit %d, want 1 naming the holder and --break-lease\n%s", r.code, r.out)
		}
		b, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		var m cleanup.Manifest
		if err := json.Unmarshal(b, &m); err != nil || len(m.Moves) == 0 {
			t.Fatalf("manifest: %v (%d moves)", err, len(m.Moves))
		}
		for _, mv := range m.Moves {
			if _, err := os.Stat(mv.To); err != nil {
				t.Fatalf("the refused restore moved %s: %v", mv.To, err)
			}
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		restoreRun(t, run)
		if ok, _, err := c.zk.Exists(ctx, lease.ZKPath); err != nil || ok {
			t.Fatalf("the restores left the lease behind (%v, %v)", ok, err)
		}
		if r := kremedy(t, "znodes", "restore", filepath.Join(run, "backup", "znodes.json")); r.code != 1 || !strings.Contains(r.out, "exist already") {
			t.Fatalf("a second znodes restore must refuse to overwrite: exit %d\n%s", r.code, r.out)
		}
		everyBroker(t, l, "start")
		z, _, err := c.zk.Topic(ctx, "undone")
		if err != nil || z.TopicID != rep.NewID {
			t.Fatalf("restored znode %+v (%v): want topic id %s", z, err, rep.NewID)
		}
		for _, ld := range l.LogDirs(int(rep.Victim)) {
			for p := 0; p < 3; p++ {
				b, err := os.ReadFile(filepath.Join(ld, fmt.Sprintf("undone-%d", p), "partition.metadata"))
				if err != nil || !strings.Contains(string(b), rep.OldID) {
					t.Fatalf("broker %d undone-%d not restored with its old id: %q %v", rep.Victim, p, b, err)
				}
			}
		}
		// The ghost is back exactly as it was; clean it for good.
		if ks, _, _ := diagnoseJSON(t, l, "undone"); !slices.Contains(ks, "foreign-segments") {
			t.Fatalf("after the undo, diagnose finds %v; want the ghost's foreign segments back", ks)
		}
		runCleanup(t, l, "undone", filepath.Join(t.TempDir(), "again"))
	})

	t.Run("SIGKILL inside stop-brokers, then resume", func(t *testing.T) {
		rep := breakIt(t, l, "ghost-topic", "invoices")
		run := filepath.Join(t.TempDir(), "run")
		killDuring(t, l, "invoices", run, "stop-brokers", 1)
		c.assertRecreated(t, "invoices", rep.OldID, rep.NewID)
		c.assertBystander(t, rep)
	})

	t.Run("SIGKILL inside wipe-segments, then resume", func(t *testing.T) {
		rep := breakIt(t, l, "ghost-topic", "refunds")
		run := filepath.Join(t.TempDir(), "run")
		killDuring(t, l, "refunds", run, "wipe-segments", 4) // the manifest, then 3 moves
		c.assertRecreated(t, "refunds", rep.OldID, rep.NewID)
		c.assertBystander(t, rep)
		assertQuarantined(t, l, run, "refunds", 9)
	})
}

// tuiInTmux drives the real binary's terminal UI in a tmux pane, as a person
// would: it reads the screen with capture-pane and answers with send-keys —
// space past the diagnosis, y for y/N steps, the topic name for destructive
// ones, q on the final screen. The pane is 80×24, the smallest supported.
func tuiInTmux(t *testing.T, l *lab.Lab, topic, runDir string) string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing: install it (make deps) — the TUI end-to-end test needs it")
	}
	session := fmt.Sprintf("kremedy-e2e-%d", os.Getpid())
	exitFile := filepath.Join(t.TempDir(), "exit")
	shell := fmt.Sprintf("%s run topic-cleanup --inventory %s --set topic=%s --set recreate=true --run-dir %s; echo $? > %s; sleep 600",
		bin, l.InventoryPath(), topic, runDir, exitFile)
	if out, err := exec.Command("tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", shell).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", session).Run() })
	capture := func() string {
		out, _ := exec.Command("tmux", "capture-pane", "-p", "-t", session).Output()
		return string(out)
	}
	send := func(keys ...string) {
		if out, err := exec.Command("tmux", append([]string{"send-keys", "-t", session}, keys...)...).CombinedOutput(); err != nil {
			t.Fatalf("send-keys %v: %v %s", keys, err, out)
		}
	}
	var last, screen string
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(exitFile); err == nil {
			if code := strings.TrimSpace(string(b)); code != "0" {
				t.Fatalf("the TUI exited %s; last screen:\n%s", code, last)
			}
			return last
		}
		screen = capture()
		acted := true
		switch {
		case strings.Contains(screen, "The run finished"):
			last = screen
			send("q")
		case strings.Contains(screen, "NOTHING HAS CHANGED YET"):
			send("Space")
		case strings.Contains(screen, "Type the topic name"):
			send("-l", topic)
			send("Enter")
		case strings.Contains(screen, "Apply this plan?"):
			send("y")
		default:
			acted = false
		}
		if acted {
			// Wait for the screen to move on before answering again.
			for i := 0; i < 100 && capture() == screen; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the TUI did not finish in 5 minutes; screen:\n%s", screen)
	return ""
}

// TestCleanupLabIBP27 repairs reused-segments: the recreated topic had
// silently adopted the old segments.
func TestCleanupLabIBP27(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.IBP, cfg.ZooKeepers = 12, "2.7", 1
	l := startLab(t, cfg)
	c := connectLab(t, l)
	rep := breakIt(t, l, "reused-segments", "orders")
	if ks, _, code := diagnoseJSON(t, l, "orders"); code != 1 || !slices.Equal(ks, []string{"adopted-segments"}) {
		t.Fatalf("reused-segments diagnosis: exit %d findings %v", code, ks)
	}
	run := filepath.Join(t.TempDir(), "run")
	r := runCleanup(t, l, "orders", run, "--set", "recreate=true")
	if !strings.Contains(r.out, "old segments were adopted") {
		t.Fatalf("preflight did not name the adoption:\n%s", r.out)
	}
	c.assertRecreated(t, "orders")
	c.assertBystander(t, rep)
	assertQuarantined(t, l, run, "orders", 3)
}

// threeGhosts is the subtest of TestCleanupLab for several ghosts of one
// outage (issue 26): the lab's ghost-topic scenario on three topics,
// diagnose naming their shared cause and its one command, then that one
// run repairing all three with one stop and one start of each broker.
func threeGhosts(t *testing.T, l *lab.Lab, c *clients) {
	topics := []string{"alpha", "beta", "gamma"}
	reps := map[string]*lab.Report{}
	for _, tp := range topics {
		reps[tp] = breakIt(t, l, "ghost-topic", tp)
	}
	d, code := diagnosis(t, l, "")
	if code != 1 || len(d.Shared) != 1 || !slices.Equal(d.Shared[0].Topics, topics) {
		t.Fatalf("diagnose: exit %d, shared causes %+v; want one for %v", code, d.Shared, topics)
	}
	if want := "--set topics=alpha,beta,gamma --set recreate=true`"; !strings.Contains(d.Shared[0].Fix, want) {
		t.Fatalf("the shared cause's command lacks %q: %s", want, d.Shared[0].Fix)
	}
	run := filepath.Join(t.TempDir(), "run")
	name := l.Inventory().Name
	// A topic's name does not confirm a several-topic run: the cluster's does.
	r := kremedy(t, "run", "topic-cleanup", "--inventory", l.InventoryPath(), "--set", "topics=alpha,beta,gamma", "--set", "recreate=true",
		"--run-dir", filepath.Join(t.TempDir(), "wrong"), "--headless", "--yes", "--confirm", "alpha")
	if r.code == 0 || !strings.Contains(r.out, name) {
		t.Fatalf("--confirm alpha on a several-topic run: exit %d\n%s", r.code, r.out)
	}
	r = kremedy(t, "run", "topic-cleanup", "--inventory", l.InventoryPath(), "--set", "topics=alpha,beta,gamma", "--set", "recreate=true",
		"--run-dir", run, "--headless", "--yes", "--confirm", name)
	if r.code != 0 {
		t.Fatalf("cleanup of %v: exit %d\n%s", topics, r.code, r.out)
	}
	t.Logf("FIGURE one topic-cleanup of 3 ghosts took %.1fs; outage window: %s", r.took.Seconds(), outageOf(t, run))
	if s := stops(t, run); len(s) != 3 || s[1] != 1 || s[2] != 1 || s[3] != 1 {
		t.Fatalf("stops per broker %v, want each broker stopped once for the three topics", s)
	}
	for _, tp := range topics {
		c.assertRecreated(t, tp, reps[tp].OldID, reps[tp].NewID)
		c.assertBystander(t, reps[tp])
	}
	assertQuarantinedOf(t, l, run, topics, 27)
	if ks, _, code := diagnoseJSON(t, l, ""); code != 0 {
		t.Fatalf("after the cleanup the whole cluster: exit %d findings %v", code, ks)
	}
}
