package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kremedy/kremedy/internal/kafkaver"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// labVersions are the Kafka releases TestVersionsLab runs: $KREMEDY_LAB_VERSIONS
// (comma-separated; `make test-versions` runs every tested release), else
// the three whose behaviour differs from 3.9's (3.9.2 itself is
// TestCleanupLab's): 2.4.1 (the recreated topic gets no leaders), 2.7.2 (no
// topic IDs, no DescribeProducers: silent adoption), 2.8.2 (topic IDs, yet
// adoption after a restart, late partition.metadata).
func labVersions() []string {
	if v := os.Getenv("KREMEDY_LAB_VERSIONS"); v != "" {
		return strings.Split(v, ",")
	}
	// make test runs the oldest release and field report 001's; 2.7.2
	// (and 3.4.1) run in make test-versions, and IBP 2.7 has its own lab
	// tests in make test (TestLabIBP27, TestCleanupLabIBP27).
	return []string{"2.4.1", "2.8.2"}
}

// TestVersionsLab runs, on a real lab of each release, the incident's
// ghost-topic scenario with that release's symptoms, the diagnosis (with the
// capability probe), and one headless topic-cleanup that repairs it, checked
// with real clients. On a release without DescribeProducers a producer that
// keeps writing holds the detach gate and the run goes on once it stops. On
// 2.8.2 with 4 brokers, field report 001's crash is diagnosed as one broker
// down. The releases run one after another (one lab at a time), beside the
// other lab tests.
func TestVersionsLab(t *testing.T) {
	needLab(t)
	for _, v := range labVersions() {
		if _, _, err := lab.ResolveKafkaHome("", v); err != nil {
			t.Fatalf("Kafka %s is not installed: %v (run `kremedy lab install --kafka-version %s`, or `make lab-install`)", v, err, v)
		}
	}
	t.Parallel()
	for i, v := range labVersions() {
		t.Run("kafka-"+v, func(t *testing.T) { versionLab(t, v, 21+i) })
	}
}

func versionLab(t *testing.T, v string, net int) {
	sw := kafkaver.MustParse(v)
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers, cfg.KafkaVersion = net, 1, v
	if v == "2.8.2" {
		cfg.Brokers = 4 // field report 001's cluster
	}
	l := startLab(t, cfg)
	if l.State.Kafka != v {
		t.Fatalf("lab runs Kafka %s, want %s", l.State.Kafka, v)
	}
	c := connectLab(t, l)
	rep := breakIt(t, l, "ghost-topic", "orders")
	t.Logf("ghost-topic on %s: %d symptoms seen", v, len(rep.Observed))

	// The recreated topic may be younger than diagnose's settle window
	// (2.4's stuck recreation shows at once): until it is older, what it
	// shows is settling, not yet a finding.
	time.Sleep(diagnose.DefaultSettle)
	d, code := diagnosis(t, l, "orders")
	if code != 1 {
		t.Fatalf("diagnose after ghost-topic: exit %d", code)
	}
	want := "v" + strings.Join(strings.Split(v, ".")[:2], ".")
	for _, r := range d.Releases {
		if r.Guess != want {
			t.Fatalf("capability probe: broker %d guessed %q, want %q (%+v)", r.Broker, r.Guess, want, d.Releases)
		}
		if r.DescribeProducers != sw.AtLeast(2, 8) || r.MetadataIDs != sw.AtLeast(2, 8) {
			t.Fatalf("capability probe of %s: %+v", v, r)
		}
	}
	kinds := map[string]bool{}
	for _, f := range d.Findings {
		kinds[f.Kind] = true
	}
	switch {
	case l.State.StuckRecreate():
		if !kinds[diagnose.FindStaleMetadata] {
			t.Fatalf("%s: the recreated topic no broker serves is not found: %v", v, kinds)
		}
	case l.State.RefusesStaleLog():
		if !kinds[diagnose.FindForeignSegments] {
			t.Fatalf("%s: no foreign-segments: %v", v, kinds)
		}
	default:
		if !kinds[diagnose.FindAdoptedSegments] {
			t.Fatalf("%s: the adopted segments are not found: %v", v, kinds)
		}
		if l.State.TopicIDs() && !kinds[diagnose.FindForeignSegments] {
			t.Fatalf("%s: the adopted directory's old topic ID is not found: %v", v, kinds)
		}
	}

	planJSON(t, l, "orders")
	diagnoseJSONL(t, l, "orders")
	run := filepath.Join(t.TempDir(), "run")
	if !sw.AtLeast(2, 8) && !l.State.StuckRecreate() {
		cleanupWhileWriting(t, l, "orders", run)
	} else {
		cleanupJSONL(t, l, "orders", run)
	}
	c.assertRecreated(t, "orders", rep.OldID, rep.NewID)
	c.assertBystander(t, rep)
	assertQuarantined(t, l, run, "orders", 3)
	report, err := os.ReadFile(filepath.Join(run, "report.md"))
	if err != nil || !bytes.Contains(report, []byte("- releases: broker ")) || !bytes.Contains(report, []byte("Kafka "+want)) {
		t.Fatalf("report.md lacks the releases (%v)", err)
	}
	if d, code := diagnosis(t, l, "orders"); code != 0 {
		t.Fatalf("after the cleanup on %s: exit %d, %d findings", v, code, len(d.Findings))
	}
	logDirsAsked(t, l)
	// A cluster below 3.9 cannot migrate to KRaft: readiness says so and why.
	out, code := stdoutOf(t, "diagnose", "--inventory", l.InventoryPath(), "--migration", "--json")
	var md diagnose.Diagnosis
	if err := json.Unmarshal([]byte(out), &md); err != nil || code != 1 || md.Migration == nil || md.Migration.Ready ||
		!slices.ContainsFunc(md.Findings, func(f diagnose.Finding) bool { return f.Kind == diagnose.FindMigrationRelease }) {
		t.Fatalf("migration readiness on %s: exit %d (%v)\n%s", v, code, err, out)
	}

	if cfg.Brokers == 4 {
		crashed(t, l)
	}
}

// stdoutOf runs kremedy and returns its stdout alone, and its exit code.
func stdoutOf(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Logf("stderr of %v:\n%s", args[:2], errb.String())
	}
	return out.String(), 0
}

// jsonLinesOf parses every line of out as one JSON object.
func jsonLinesOf(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// cleanupJSONL runs the headless cleanup with --output jsonl: stdout is
// only JSON lines, from run-start to run-end, with every step's events.
func cleanupJSONL(t *testing.T, l *lab.Lab, topic, run string) {
	t.Helper()
	out, code := stdoutOf(t, append(cleanupArgs(l, topic, run), "--set", "recreate=true", "--output", "jsonl")...)
	lines := jsonLinesOf(t, out)
	first, last := lines[0], lines[len(lines)-1]
	if code != 0 || first["kind"] != "run-start" || last["kind"] != "run-end" || last["ending"] != "finished" || last["exit"] != float64(0) {
		t.Fatalf("cleanup --output jsonl: exit %d, first %v, last %v", code, first, last)
	}
	kinds := map[string]int{}
	for _, m := range lines {
		kinds[fmt.Sprint(m["kind"])]++
	}
	if kinds["plan"] < 7 || kinds["check"] == 0 || kinds["state"] == 0 {
		t.Fatalf("cleanup --output jsonl: events by kind %v", kinds)
	}
}

// diagnoseJSONL: one finding per line, then the diagnosis.
func diagnoseJSONL(t *testing.T, l *lab.Lab, topic string) {
	t.Helper()
	out, code := stdoutOf(t, "diagnose", "--inventory", l.InventoryPath(), "--topic", topic, "--output", "jsonl")
	lines := jsonLinesOf(t, out)
	last := lines[len(lines)-1]
	if code != 1 || last["type"] != "diagnosis" || len(lines) < 2 {
		t.Fatalf("diagnose --output jsonl: exit %d, %d lines, last %v", code, len(lines), last)
	}
	for _, m := range lines[:len(lines)-1] {
		if m["type"] != "finding" || m["kind"] == nil || m["id"] == nil {
			t.Fatalf("diagnose --output jsonl: finding line %v", m)
		}
	}
}

// planJSON checks `plan --json` on the broken lab: every step planned, the
// preflight finding the topic inconsistent, the destructive steps' actions
// with their digests; nothing changed.
func planJSON(t *testing.T, l *lab.Lab, topic string) {
	t.Helper()
	r := kremedy(t, "plan", "topic-cleanup", "--inventory", l.InventoryPath(), "--set", "topic="+topic, "--json")
	var p struct {
		Runbook string
		Steps   []struct {
			Info   struct{ ID, Risk string }
			Plan   *struct{ Summary string }
			Digest string
			Error  string
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.out), &p) != nil || p.Runbook != "topic-cleanup" || len(p.Steps) < 7 {
		t.Fatalf("plan --json: exit %d\n%s", r.code, r.out)
	}
	if s := p.Steps[0]; s.Info.ID != "preflight" || s.Plan == nil || !strings.Contains(s.Plan.Summary, "inconsistent") {
		t.Fatalf("plan --json preflight: %+v", s)
	}
	for _, s := range p.Steps {
		if s.Info.Risk == "destructive" && s.Error == "" && s.Digest == "" {
			t.Fatalf("plan --json: destructive step %s without a digest", s.Info.ID)
		}
	}
}

// logDirsAsked diagnoses through an inventory without log_dirs: the log
// dirs come from each broker's DescribeLogDirs (v1 on 2.4, v4 on 3.9), then
// are listed over SSH.
func logDirsAsked(t *testing.T, l *lab.Lab) {
	t.Helper()
	inv, err := inventory.Load(l.InventoryPath())
	if err != nil {
		t.Fatal(err)
	}
	for i := range inv.Brokers {
		inv.Brokers[i].LogDirs = nil
	}
	p := filepath.Join(t.TempDir(), "no-log-dirs.yaml")
	if err := inventory.Write(p, inv); err != nil {
		t.Fatal(err)
	}
	r := kremedy(t, "diagnose", "--inventory", p, "--json")
	var d diagnose.Diagnosis
	if i := strings.Index(r.out, "{"); i < 0 || json.Unmarshal([]byte(r.out[i:]), &d) != nil {
		t.Fatalf("diagnose output is not JSON (exit %d):\n%s", r.code, r.out)
	}
	if r.code != 0 || !d.Disk {
		t.Fatalf("diagnose with log dirs from DescribeLogDirs: exit %d, disks checked %v:\n%s", r.code, d.Disk, r.out)
	}
}

// cleanupWhileWriting runs a headless topic-cleanup while a producer keeps
// writing to the topic: the detach gate (end offsets watched, no
// DescribeProducers) must hold, with nothing deleted, until the producer
// stops; then the run completes.
func cleanupWhileWriting(t *testing.T, l *lab.Lab, topic, run string) {
	t.Helper()
	pr, err := kafka.NewProducer(l.State.Config.Bootstrap(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var acked atomic.Int64
	wg.Go(func() {
		defer pr.Close()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if pr.Produce(ctx, topic, 0, "still writing") == nil {
				acked.Add(1)
			}
			cancel()
		}
	})
	stopped := false
	stopWriting := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopWriting()

	var out bytes.Buffer
	cmd := exec.Command(bin, append(cleanupArgs(l, topic, run), "--set", "recreate=true")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	journal := filepath.Join(run, "journal.jsonl")
	holding := 0
	for holding < 3 && time.Since(start) < 2*time.Minute {
		select {
		case err := <-done:
			t.Fatalf("the run ended while a producer was writing (%v):\n%s", err, out.String())
		case <-time.After(time.Second):
		}
		b, _ := os.ReadFile(journal)
		holding = bytes.Count(b, []byte("log end offsets moved on partitions [0]"))
	}
	if holding < 3 {
		t.Fatalf("the detach gate never said the producer was writing:\n%s", out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ok, _, err := connectLab(t, l).zk.Exists(ctx, kafkazk.TopicPath(topic)); err != nil || !ok {
		t.Fatalf("the topic's znode was deleted while a producer was writing (exists=%v, %v)", ok, err)
	}
	stopWriting()
	t.Logf("the gate held %d re-checks while a producer wrote (%d records acknowledged); producer stopped after %.1fs", holding, acked.Load(), time.Since(start).Seconds())
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("cleanup after the producer stopped: %v\n%s", err, out.String())
		}
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("cleanup did not finish after the producer stopped:\n%s", out.String())
	}
	if acked.Load() == 0 {
		t.Fatal("the producer never wrote: the gate was not tested")
	}
}

// crashed is field report 001: broker 1 killed with SIGKILL under a topic
// of 10 partitions replicated on 4 brokers. diagnose must name broker 1 as
// the cause, show the new leaders and broker 1 out of every ISR, and send
// no partition to a destructive runbook.
func crashed(t *testing.T, l *lab.Lab) {
	t.Helper()
	rep := breakIt(t, l, "broker-crash", "test")
	d, code := diagnosis(t, l, "")
	if code != 1 {
		t.Fatalf("diagnose after the crash: exit %d", code)
	}
	var down, urp *diagnose.Finding
	for i, f := range d.Findings {
		if f.Runbook == "topic-cleanup" {
			t.Errorf("finding %s suggests topic-cleanup for a broker that is simply down: %+v", f.Kind, f)
		}
		switch {
		case f.Kind == diagnose.FindBrokerDown:
			down = &d.Findings[i]
		case f.Kind == diagnose.FindUnderReplicated && f.Topic == "test":
			urp = &d.Findings[i]
		}
	}
	if down == nil || !slices.Equal(down.Brokers, []int32{rep.Victim}) {
		t.Fatalf("no broker-down finding naming broker %d: %+v", rep.Victim, d.Findings)
	}
	if urp == nil || !slices.Equal(urp.Brokers, []int32{rep.Victim}) || len(urp.Partitions) != lab.CrashPartitions ||
		!strings.Contains(urp.Fix, "being down") || strings.Contains(urp.Fix, "topic-cleanup") {
		t.Fatalf("under-replicated finding of test: %+v", urp)
	}
	for _, ev := range urp.Evidence {
		if strings.Contains(ev, "leader 1,") || !strings.Contains(ev, "isr [") || strings.Contains(strings.SplitN(ev, "isr ", 2)[1], "1") {
			t.Fatalf("evidence should show a new leader and broker 1 out of the ISR: %q", ev)
		}
	}
	if r := kremedy(t, "lab", "up", "--dir", filepath.Dir(l.InventoryPath())); r.code != 0 {
		t.Fatalf("lab up after the crash: %s", r.out)
	}
}
