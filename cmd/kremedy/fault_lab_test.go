package main

// The fault matrix of "nothing lost, nobody let in", on a real lab: each
// subtest breaks something real at an exact point of a headless run (the
// point is chosen with KREMEDY_FAULT, see fault.go), then proves the
// cluster is recoverable, the journal tells the truth and `resume` reaches
// the end state of an uninterrupted run.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/cleanup"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/twmb/franz-go/pkg/kgo"
)

const faultMsgs = 10 // messages per partition a seeded topic holds

// seeded is a topic with known messages, made inconsistent the cheapest way
// (one broker of three stopped: preflight sees it and the cleanup applies),
// and a bystander sharing its prefix.
type seeded struct {
	topic, id string
	msgs      map[int32][]string
	bystander string
}

func (c *clients) seed(t *testing.T, topic string) *seeded {
	t.Helper()
	return c.seedWith(t, topic, nil)
}

// seedWith seeds a topic (and its bystander) created with configs; the
// records are keyed so that a compacted topic takes them.
func (c *clients) seedWith(t *testing.T, topic string, configs map[string]string) *seeded {
	t.Helper()
	// Each subtest starts from a whole lab, whatever the one before left.
	if _, err := lab.Up(context.Background(), c.l.Dir, c.l.State.Config, nil, &bytes.Buffer{}); err != nil {
		t.Fatalf("lab up (repair): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The consumer groups' topic, created while all three brokers run: with
	// one stopped its replication factor (3) could not be met and no group
	// could ever join.
	for {
		_, err := c.kc.Admin().FetchOffsets(ctx, "kremedy-warmup")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("group coordinator: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // COORDINATOR_NOT_AVAILABLE while the topic is created
	}
	s := &seeded{topic: topic, msgs: map[int32][]string{}, bystander: topic + "-v2"}
	pr, err := kafka.NewProducer(c.l.State.Config.Bootstrap(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for _, name := range []string{topic, s.bystander} {
		// A broker the repair just started is registered before the
		// controller counts it: retry while it says too few brokers.
		id, err := c.kc.CreateTopic(ctx, name, nil, 3, 3, configs)
		for err != nil && strings.Contains(err.Error(), "INVALID_REPLICATION_FACTOR") && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			id, err = c.kc.CreateTopic(ctx, name, nil, 3, 3, configs)
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		if name == topic {
			s.id = id
		}
		for p := int32(0); p < 3; p++ {
			var vals []string
			for i := 0; i < faultMsgs; i++ {
				vals = append(vals, fmt.Sprintf("%s message %d-%d", name, p, i))
			}
			for i, v := range vals {
				rec := &kgo.Record{Topic: name, Partition: p, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v)}
				if err := pr.Kgo().ProduceSync(ctx, rec).FirstErr(); err != nil {
					t.Fatalf("produce to %s-%d: %v", name, p, err)
				}
			}
			if name == topic {
				s.msgs[p] = vals
			}
		}
	}
	labBroker(t, c.l, "stop", 3)
	// The topic's own inconsistency (a broker being down is none): a
	// leftover directory of a partition the topic does not have, as a
	// partition count changed by hand leaves (report 000), on the stopped
	// broker's disk.
	left := filepath.Join(c.l.LogDirs(3)[0], topic+"-3")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "partition.metadata"), []byte("version: 0\ntopic_id: "+s.id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func labBroker(t *testing.T, l *lab.Lab, action string, n int) {
	t.Helper()
	if r := kremedy(t, "lab", "broker", action, strconv.Itoa(n), "--dir", l.Dir); r.code != 0 {
		t.Fatalf("lab broker %s %d: exit %d\n%s", action, n, r.code, r.out)
	}
}

// assertBystander: the sibling topic keeps every message.
func (c *clients) assertSibling(t *testing.T, s *seeded) {
	t.Helper()
	for p := int32(0); p < 3; p++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		vals, err := kafka.ReadPartition(ctx, c.l.State.Config.Bootstrap(), s.bystander, p)
		cancel()
		if err != nil || len(vals) != faultMsgs {
			t.Fatalf("bystander %s-%d: %d records (%v), want %d", s.bystander, p, len(vals), err, faultMsgs)
		}
	}
}

// faultRun is a headless run (or resume) with KREMEDY_FAULT set.
type faultRun struct {
	cmd     *exec.Cmd
	out     *bytes.Buffer
	release string
}

func startFault(t *testing.T, fault string, args ...string) *faultRun {
	t.Helper()
	f := &faultRun{out: &bytes.Buffer{}, release: filepath.Join(t.TempDir(), "release")}
	f.cmd = exec.Command(bin, args...)
	f.cmd.Env = append(os.Environ(), faultEnv+"="+fault, releaseEnv+"="+f.release)
	f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A subtest that fails half-way must not leave its run going on into
	// the next one.
	t.Cleanup(func() {
		if f.cmd.ProcessState == nil {
			_ = f.cmd.Process.Kill()
			_, _ = f.cmd.Process.Wait()
		}
	})
	return f
}

// waitPaused waits until the run sits at its pause point.
func (f *faultRun) waitPaused(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(f.release + ".paused"); err == nil {
			return
		}
		if f.cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the run never reached its pause point:\n%s", f.out.String())
}

func (f *faultRun) resume(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(f.release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *faultRun) wait(t *testing.T) result {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(4 * time.Minute):
		_ = f.cmd.Process.Kill()
		<-done
		t.Fatalf("the run did not end in 4 minutes:\n%s", f.out.String())
	}
	return result{out: f.out.String(), code: f.cmd.ProcessState.ExitCode()}
}

// runWithFault runs to the end with one fault and returns how it ended.
func runWithFault(t *testing.T, fault string, args ...string) result {
	t.Helper()
	return startFault(t, fault, args...).wait(t)
}

// cleanupArgs: a headless cleanup. producer_idle is short because seeding
// the topic wrote to it a moment ago (the gate would wait 30 s for that
// producer to count as gone).
func cleanupArgs(l *lab.Lab, topic, run string, extra ...string) []string {
	return cleanupArgsInv(l.InventoryPath(), topic, run, extra...)
}

func cleanupArgsInv(inv, topic, run string, extra ...string) []string {
	return append([]string{"run", "topic-cleanup", "--inventory", inv, "--set", "topic=" + topic,
		"--set", "producer_idle=2s", "--run-dir", run, "--headless", "--yes", "--confirm", topic}, extra...)
}

func resumeArgs(run, topic string) []string {
	return []string{"resume", run, "--headless", "--yes", "--confirm", topic}
}

func records(t *testing.T, run string) []journal.Record {
	t.Helper()
	recs, err := journal.Read(filepath.Join(run, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// count counts records of typ in step whose data contains text.
func count(recs []journal.Record, typ, step, text string) int {
	n := 0
	for _, r := range recs {
		if (typ == "" || r.Type == typ) && (step == "" || r.Step == step) && strings.Contains(string(r.Data), text) {
			n++
		}
	}
	return n
}

func mustEnd(t *testing.T, r result, code int, what string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\n%s", what, r.code, code, r.out)
	}
}

// interrupted checks an attempt ended with exit 3, told how to resume, and
// that its journal ends with an "interrupted" record.
func interrupted(t *testing.T, r result, run, what string) {
	t.Helper()
	mustEnd(t, r, exitInterrupted, what)
	if !strings.Contains(r.out, "resume: kremedy resume "+run) {
		t.Fatalf("%s: no resume command in the output:\n%s", what, r.out)
	}
	recs := records(t, run)
	if last := recs[len(recs)-1]; last.Type != journal.Interrupted {
		t.Fatalf("%s: the journal ends with %s, want %s", what, last.Type, journal.Interrupted)
	}
}

// TestFaultsLab is the fault matrix. It runs beside TestCleanupLab on its
// own lab (net 13).
func TestFaultsLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net = 13
	l := startLab(t, cfg)
	c := connectLab(t, l)

	t.Run("unknown or changed host key: refused before any action, with the fingerprint", func(t *testing.T) {
		kh, err := os.ReadFile(l.KnownHostsPath())
		if err != nil {
			t.Fatal(err)
		}
		host2 := fmt.Sprintf("[%s]:%d", l.State.Config.BrokerHost(2), lab.SSHPort)
		var without, changed []string
		for _, line := range strings.Split(strings.TrimSpace(string(kh)), "\n") {
			if strings.HasPrefix(line, host2+" ") {
				f := strings.Fields(line)
				// Another host's key of the same type under broker 2's name.
				for _, other := range strings.Split(string(kh), "\n") {
					if o := strings.Fields(other); len(o) == 3 && o[0] != f[0] && o[1] == f[1] {
						changed = append(changed, f[0]+" "+o[1]+" "+o[2])
						break
					}
				}
				continue
			}
			without = append(without, line)
			changed = append(changed, line)
		}
		for name, lines := range map[string][]string{"unknown": without, "changed": changed} {
			dir := t.TempDir()
			khf := filepath.Join(dir, "known_hosts")
			if err := os.WriteFile(khf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			inv, err := os.ReadFile(l.InventoryPath())
			if err != nil {
				t.Fatal(err)
			}
			invf := filepath.Join(dir, "inventory.yaml")
			if err := os.WriteFile(invf, bytes.ReplaceAll(inv, []byte(l.KnownHostsPath()), []byte(khf)), 0o600); err != nil {
				t.Fatal(err)
			}
			run := filepath.Join(dir, "run")
			r := kremedy(t, "run", "topic-cleanup", "--inventory", invf, "--set", "topic=keys", "--run-dir", run, "--headless", "--yes", "--confirm", "keys")
			want := map[string]string{"unknown": "is not in known_hosts", "changed": "HOST KEY MISMATCH"}[name]
			if r.code != exitFailed || !strings.Contains(r.out, want) || !strings.Contains(r.out, "SHA256:") || !strings.Contains(r.out, "ssh-keygen") {
				t.Fatalf("%s host key: exit %d, want 1 with %q, the fingerprint and how to trust it:\n%s", name, r.code, want, r.out)
			}
			if n := count(records(t, run), journal.ActionStart, "", ""); n != 0 {
				t.Fatalf("%s host key: %d actions started", name, n)
			}
			t.Logf("%s host key refused: %s", name, firstLine(r.out, want))
		}
	})

	t.Run("round trip: cleanup through the wipe, restore both, every message back", func(t *testing.T) {
		s := c.seed(t, "roundtrip")
		run := filepath.Join(t.TempDir(), "run")
		r := runWithFault(t, "sigint@step-done:wipe-segments", cleanupArgs(l, s.topic, run, "--set", "recreate=true")...)
		interrupted(t, r, run, "cleanup stopped after the wipe")
		recs := records(t, run)
		if count(recs, journal.StepStart, "start-brokers", "") != 0 || count(recs, journal.StepDone, "wipe-segments", "") != 1 {
			t.Fatalf("the run went past the wipe:\n%s", r.out)
		}
		for _, args := range [][]string{{"segments", "restore", filepath.Join(run, "quarantine-manifest.json")}, {"znodes", "restore", filepath.Join(run, "backup", "znodes.json")}} {
			if r := kremedy(t, args...); r.code != 0 {
				t.Fatalf("kremedy %v: exit %d\n%s", args, r.code, r.out)
			}
		}
		for n := 1; n <= 3; n++ {
			labBroker(t, l, "start", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		z, _, err := c.zk.Topic(ctx, s.topic)
		if err != nil || z.TopicID != s.id {
			t.Fatalf("restored znode %+v (%v): want the original topic id %s", z, err, s.id)
		}
		for p, want := range s.msgs {
			got, err := kafka.ReadPartition(ctx, l.State.Config.Bootstrap(), s.topic, p)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("%s-%d after the restore: %q (%v), want every original message %q", s.topic, p, got, err, want)
			}
		}
		for id := int32(1); id <= 3; id++ {
			v, err := c.kc.BrokerView(ctx, id, s.topic)
			if tv := v.Topics[s.topic]; err != nil || tv.ID != s.id {
				t.Fatalf("broker %d serves %s with id %q (%v), want %s", id, s.topic, tv.ID, err, s.id)
			}
		}
		c.assertSibling(t, s)
		t.Logf("topic %s back with id %s and all %d messages", s.topic, s.id, 3*faultMsgs)
	})

	t.Run("compacted topic, and another topic already under-replicated: a tombstone follows the canary, the other is not blamed on the run", func(t *testing.T) {
		s := c.seedWith(t, "ledger", map[string]string{"cleanup.policy": "compact"})
		// Another topic with a replica on broker 4, which is in no
		// inventory (decommissioned): under-replicated before the run, and
		// after any restart. Written as AdminZkClient writes a topic; the
		// controller elects broker 1 and gives it a topic ID.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const other = "decommissioned"
		if err := c.zk.Create(ctx, kafkazk.ConfigTopicPath(other), []byte(`{"version":1,"config":{}}`), nil); err != nil {
			t.Fatal(err)
		}
		if err := c.zk.Create(ctx, kafkazk.TopicPath(other), []byte(`{"version":3,"partitions":{"0":[1,4]},"adding_replicas":{},"removing_replicas":{}}`), nil); err != nil {
			t.Fatal(err)
		}
		for {
			if st, _, err := c.zk.PartitionStateOf(ctx, other, 0); err == nil && st.Leader == 1 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the controller did not elect a leader for %s-0", other)
			}
			time.Sleep(100 * time.Millisecond)
		}
		run := filepath.Join(t.TempDir(), "run")
		r := kremedy(t, cleanupArgs(l, s.topic, run, "--set", "recreate=true", "--set", "health_grace=5s")...)
		mustEnd(t, r, 0, "cleanup of a compacted topic beside an under-replicated one")
		if !strings.Contains(r.out, "tombstone (DeleteRecords refused") {
			t.Fatalf("the canary of a compacted topic was not followed by a tombstone:\n%s", r.out)
		}
		for _, want := range []string{"already offline or under-replicated, before anything is done: " + other + "-0.", "no longer counted after the grace, already so before the run and no worse now: " + other + "-0"} {
			if !strings.Contains(r.out, want) {
				t.Fatalf("output lacks %q:\n%s", want, r.out)
			}
		}
		// And kremedy cleans that one too: a topic assigned to a broker that
		// is gone for good.
		mustEnd(t, kremedy(t, cleanupArgs(l, other, filepath.Join(t.TempDir(), "other"))...), 0, "cleanup of "+other)
		c.assertGone(t, other)
		data, _, err := c.zk.Get(ctx, kafkazk.ConfigTopicPath(s.topic))
		if err != nil || !bytes.Contains(data, []byte(`"cleanup.policy":"compact"`)) {
			t.Fatalf("recreated %s has configs %s (%v), want cleanup.policy=compact from the backup", s.topic, data, err)
		}
		only, err := c.kc.OnlyCanaries(ctx, s.topic, 0, 0, 2)
		if err != nil || !only {
			t.Fatalf("%s-0 should hold exactly the canary and its tombstone: %v %v", s.topic, only, err)
		}
		c.assertSibling(t, s)
	})

	t.Run("SIGINT at every step boundary, resume each time", func(t *testing.T) {
		s := c.seed(t, "bounds")
		run := filepath.Join(t.TempDir(), "run")
		steps := []string{"preflight", "detach-clients", "delete-znodes", "stop-brokers", "wipe-segments", "start-brokers"}
		for i, st := range steps {
			args := resumeArgs(run, s.topic)
			if i == 0 {
				args = cleanupArgs(l, s.topic, run, "--set", "recreate=true")
			}
			interrupted(t, runWithFault(t, "sigint@step-done:"+st, args...), run, "SIGINT after "+st)
		}
		r := kremedy(t, resumeArgs(run, s.topic)...)
		mustEnd(t, r, 0, "final resume")
		c.assertRecreated(t, s.topic, s.id)
		c.assertSibling(t, s)
		assertQuarantined(t, l, run, s.topic, 9)
		noRedoAfterRestart(t, run)
		if n := count(records(t, run), journal.Interrupted, "", ""); n != len(steps) {
			t.Fatalf("journal records %d interruptions, want %d", n, len(steps))
		}
	})

	t.Run("SIGINT inside every step, resume each time", func(t *testing.T) {
		s := c.seed(t, "inside")
		run := filepath.Join(t.TempDir(), "run")
		points := []string{"plan:preflight", "plan:detach-clients", "action-start:delete-znodes:3", "action-start:stop-brokers:1",
			"action-end:wipe-segments:5", "action-start:start-brokers:2", "action-start:verify:1", "action-start:verify:4"}
		for i, p := range points {
			args := resumeArgs(run, s.topic)
			if i == 0 {
				args = cleanupArgs(l, s.topic, run, "--set", "recreate=true")
			}
			interrupted(t, runWithFault(t, "sigint@"+p, args...), run, "SIGINT at "+p)
		}
		// As if the last attempt had died after writing its canary and
		// before removing it: resume must recognise it, not call it adopted.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pr, err := kafka.NewProducer(l.State.Config.Bootstrap(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		leftover := &kgo.Record{Topic: s.topic, Partition: 0, Key: []byte(kafka.CanaryKey), Value: []byte("kremedy canary (interrupted)"),
			Headers: []kgo.RecordHeader{{Key: kafka.CanaryKey, Value: []byte("interrupted")}}}
		if err := pr.Kgo().ProduceSync(ctx, leftover).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		r := kremedy(t, resumeArgs(run, s.topic)...)
		mustEnd(t, r, 0, "final resume")
		if !strings.Contains(r.out, "only kremedy canaries of an interrupted attempt") {
			t.Fatalf("resume did not recognise the leftover canary:\n%s", r.out)
		}
		c.assertRecreated(t, s.topic, s.id)
		c.assertSibling(t, s)
		assertQuarantined(t, l, run, s.topic, 9)
		noRedoAfterRestart(t, run)
	})

	t.Run("SIGKILL inside delete-znodes, resume", func(t *testing.T) {
		s := c.seed(t, "crash")
		run := filepath.Join(t.TempDir(), "run")
		r := runWithFault(t, "sigkill@action-end:delete-znodes:3", cleanupArgs(l, s.topic, run, "--set", "recreate=true")...)
		if r.code != -1 {
			t.Fatalf("want the run killed, got exit %d\n%s", r.code, r.out)
		}
		b, err := os.ReadFile(filepath.Join(run, "backup", "znodes.json"))
		if err != nil || !bytes.Contains(b, []byte(kafkazk.TopicPath(s.topic)+"/partitions/2/state")) {
			t.Fatalf("the backup written before the crash lacks the topic's subtree: %v", err)
		}
		mustEnd(t, kremedy(t, resumeArgs(run, s.topic)...), 0, "resume after SIGKILL")
		after, _ := os.ReadFile(filepath.Join(run, "backup", "znodes.json"))
		if !bytes.Equal(b, after) {
			t.Fatal("the resumed run overwrote the first attempt's znode backup")
		}
		c.assertRecreated(t, s.topic, s.id)
		c.assertSibling(t, s)
	})

	t.Run("one run per cluster: a second run is refused naming the holder, diagnose names it, a SIGKILLed holder's lease lapses with its session", func(t *testing.T) {
		s := c.seed(t, "leased")
		run := filepath.Join(t.TempDir(), "holder")
		f := startFault(t, "pause@step-start:preflight", cleanupArgs(l, s.topic, run)...)
		f.waitPaused(t)
		meta, err := steps.ReadMeta(run)
		if err != nil {
			t.Fatal(err)
		}
		if count(records(t, run), journal.Note, "", "took the cluster's lease: run "+meta.ID) != 1 {
			t.Fatalf("the holder's journal does not record the lease it took:\n%s", f.out)
		}
		// A second operator (another run directory) on the same cluster.
		second := filepath.Join(t.TempDir(), "second")
		r := kremedy(t, cleanupArgs(l, s.topic, second)...)
		for _, want := range []string{"refused", "another kremedy run holds the cluster's lease: run " + meta.ID + " (topic-cleanup) by ", "since ", "/kremedy/lease", "--break-lease"} {
			if !strings.Contains(r.out, want) {
				t.Fatalf("second run: exit %d without %q\n%s", r.code, want, r.out)
			}
		}
		mustEnd(t, r, exitFailed, "a second run while the first holds the lease")
		t.Logf("the second run: %s", firstLine(r.out, "another kremedy run"))
		if recs := records(t, second); count(recs, journal.StepStart, "", "") != 0 || count(recs, journal.ActionStart, "", "") != 0 {
			t.Fatalf("the refused run started a step")
		}
		// diagnose names the holder, as a note of its own.
		r = kremedy(t, "diagnose", "--inventory", l.InventoryPath(), "--topic", s.topic, "--no-disk", "--json")
		var d struct {
			Findings []struct{ Kind, Severity, Summary string }
		}
		if err := json.NewDecoder(strings.NewReader(r.out)).Decode(&d); err != nil {
			t.Fatalf("diagnose --json: %v\n%s", err, r.out)
		}
		held := false
		for _, fd := range d.Findings {
			held = held || fd.Kind == "lease-held" && fd.Severity == "info" && strings.HasPrefix(fd.Summary, "a kremedy run holds this cluster: run "+meta.ID+" (topic-cleanup) by ")
		}
		if !held {
			t.Fatalf("diagnose does not name the holder:\n%s", r.out)
		}
		// The holder crashes: its ZooKeeper session, and with it the
		// lease, expires after the session timeout (10 s).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if ok, _, err := c.zk.Exists(ctx, "/kremedy/lease"); !ok || err != nil {
			t.Fatalf("the lease znode: %v %v", ok, err)
		}
		killed := time.Now()
		if err := f.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		f.wait(t)
		for ok := true; ok; time.Sleep(100 * time.Millisecond) {
			if ok, _, err = c.zk.Exists(ctx, "/kremedy/lease"); err != nil {
				t.Fatalf("the lease did not lapse within a minute of the SIGKILL: %v", err)
			}
		}
		lapsed := time.Since(killed)
		if lapsed < 3*time.Second {
			t.Fatalf("the lease went %s after the SIGKILL: not the session's expiry (10 s)", lapsed)
		}
		t.Logf("FIGURE the SIGKILLed holder's lease lapsed %s after the kill (ZooKeeper session timeout 10 s)", lapsed.Round(100*time.Millisecond))
		// A new run proceeds, to the end.
		mustEnd(t, kremedy(t, cleanupArgs(l, s.topic, filepath.Join(t.TempDir(), "third"))...), 0, "a new run once the lease lapsed")
		c.assertGone(t, s.topic)
		c.assertSibling(t, s)
	})

	t.Run("a broker that will not start: the step fails with its log tail, verify never runs", func(t *testing.T) {
		s := c.seed(t, "nostart")
		stray := filepath.Join(l.LogDirs(1)[0], s.topic+"-0.bak")
		if err := os.Mkdir(stray, 0o755); err != nil {
			t.Fatal(err)
		}
		props := filepath.Join(l.BrokerDir(2), "server.properties")
		orig, err := os.ReadFile(props)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(props, append(slices.Clone(orig), "num.io.threads=not-a-number\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		run := filepath.Join(t.TempDir(), "run")
		r := kremedy(t, cleanupArgs(l, s.topic, run, "--set", "recreate=true")...)
		mustEnd(t, r, exitFailed, "run with two broken brokers")
		for _, want := range []string{s.topic + "-0.bak", "not-a-number"} {
			if !strings.Contains(r.out, want) {
				t.Fatalf("the output does not show %q (the stray in preflight, broker 2's log tail at start):\n%s", want, r.out)
			}
		}
		recs := records(t, run)
		if count(recs, journal.StepFailed, "start-brokers", "") != 1 || count(recs, journal.StepStart, "verify", "") != 0 {
			t.Fatalf("want start-brokers failed and verify never started:\n%s", r.out)
		}
		if _, err := os.Stat(stray); err != nil {
			t.Fatalf("kremedy moved or removed the stray it cannot parse: %v", err)
		}
		// The operator fixes both and resumes.
		if err := os.Remove(stray); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(props, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		mustEnd(t, kremedy(t, resumeArgs(run, s.topic)...), 0, "resume after the fix")
		c.assertRecreated(t, s.topic, s.id)
		c.assertSibling(t, s)
	})

	t.Run("SSH session dropped while stopping, then a broker that will not stop: the wipe never runs", func(t *testing.T) {
		s := c.seed(t, "hang")
		// The victim is the running broker that is not the controller: the
		// step stops it before the controller (which goes last).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var victim int
		for victim == 0 && ctx.Err() == nil {
			if b, _, err := c.zk.Get(ctx, "/controller"); err == nil {
				var ctl struct{ BrokerID int }
				if json.Unmarshal(b, &ctl) == nil && (ctl.BrokerID == 1 || ctl.BrokerID == 2) {
					victim = 3 - ctl.BrokerID
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if victim == 0 {
			t.Fatal("no controller among brokers 1 and 2")
		}
		// A 4 s stop timeout for the victim, in a copy of the inventory.
		inv, err := os.ReadFile(l.InventoryPath())
		if err != nil {
			t.Fatal(err)
		}
		invf := filepath.Join(t.TempDir(), "inventory.yaml")
		inv = bytes.Replace(inv, []byte("stop: "+l.StopScript(victim)+"\n"), []byte("stop: "+l.StopScript(victim)+" 4\n"), 1)
		if err := os.WriteFile(invf, inv, 0o600); err != nil {
			t.Fatal(err)
		}
		run := filepath.Join(t.TempDir(), "run")
		f := startFault(t, "pause@step-start:stop-brokers", cleanupArgsInv(invf, s.topic, run)...)
		f.waitPaused(t)
		jvm := l.BrokerPID(victim)
		if jvm == 0 {
			t.Fatalf("broker %d is not running", victim)
		}
		// Frozen (a GC or I/O stall): SIGTERM stays pending, it does not stop.
		if err := syscall.Kill(jvm, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer func() {
			syscall.Kill(jvm, syscall.SIGCONT)
			if t.Failed() {
				// Thawed, it would stop on its pending SIGTERM while the
				// next subtest's lab up counts it as running: kill it and
				// wait, so that lab up starts it again.
				syscall.Kill(jvm, syscall.SIGKILL)
				for i := 0; i < 100 && l.BrokerPID(victim) == jvm; i++ {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
		f.resume(t)
		// While kafka-stop waits on it, kill the server side of the session.
		waitJournal(t, run, fmt.Sprintf("stopping kafka broker %d", victim))
		killed := killSessions(t, l.SSHDPID(victim))
		r := f.wait(t)
		if killed == 0 || r.code != exitFailed {
			t.Fatalf("killed %d sshd sessions; the run ended with exit %d, want 1\n%s", killed, r.code, r.out)
		}
		recs := records(t, run)
		if count(recs, journal.ActionEnd, "stop-brokers", "outcome\":\"unknown") == 0 || count(recs, journal.StepFailed, "stop-brokers", "unknown") == 0 {
			t.Fatalf("the journal does not say the stop's outcome is unknown:\n%s", r.out)
		}
		// Still frozen: resuming runs its stop again, which times out; the
		// wipe must never start.
		r = kremedy(t, resumeArgs(run, s.topic)...)
		if r.code != exitFailed || !strings.Contains(r.out, "did not stop") || !strings.Contains(r.out, "if its shutdown hangs") {
			t.Fatalf("resume with broker %d frozen: exit %d, want 1, a stop that timed out and the way forward\n%s", victim, r.code, r.out)
		}
		if n := count(records(t, run), journal.StepStart, "wipe-segments", ""); n != 0 {
			t.Fatalf("the wipe step started while broker %d was still running", victim)
		}
		for p := 0; p < 3; p++ {
			if _, err := os.Stat(filepath.Join(l.LogDirs(victim)[0], fmt.Sprintf("%s-%d", s.topic, p))); err != nil {
				t.Fatalf("broker %d's %s-%d was touched: %v", victim, s.topic, p, err)
			}
		}
		if err := syscall.Kill(jvm, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		// Thawed, it handles the pending SIGTERM: a controlled shutdown
		// that may outlast the 4 s stop timeout (its ZooKeeper session
		// expired while frozen). The operator waits for it to go, then resumes.
		for i := 0; i < 300 && l.BrokerPID(victim) == jvm; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if l.BrokerPID(victim) == jvm {
			// Its shutdown hangs (CI saw one stuck for minutes after
			// "ZooKeeperClient Kafka server Closing", its session expired
			// while frozen). The operator does what the refusal says.
			t.Logf("broker %d's shutdown hangs 30 s after the thaw; killing its JVM -9, as the refusal advises", victim)
			if err := syscall.Kill(jvm, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 100 && l.BrokerPID(victim) == jvm; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		mustEnd(t, kremedy(t, resumeArgs(run, s.topic)...), 0, "resume after the broker came back")
		c.assertGone(t, s.topic)
		c.assertSibling(t, s)
	})

	t.Run("ZooKeeper node loss and session expiry during the znode step", func(t *testing.T) {
		s := c.seed(t, "zkfault")
		run := filepath.Join(t.TempDir(), "run")
		f := startFault(t, "pause@approval:delete-znodes", cleanupArgs(l, s.topic, run)...)
		f.waitPaused(t)
		// Kill the ZooKeeper node the run's session is on (the journal
		// names it), then freeze the whole process past its session timeout.
		var server string
		for _, r := range records(t, run) {
			if _, rest, ok := strings.Cut(string(r.Data), "ZooKeeper: session "); ok {
				_, server, _ = strings.Cut(rest, " via ")
				server, _, _ = strings.Cut(server, "\"")
				break
			}
		}
		n := 0
		for i := 1; i <= l.State.Config.ZooKeepers; i++ {
			if server == fmt.Sprintf("%s:%d", l.State.Config.ZKHost(i), lab.ZKPort) {
				n = i
			}
		}
		if n == 0 {
			t.Fatalf("the journal does not name the ZooKeeper server of the session (%q)", server)
		}
		if err := syscall.Kill(l.ZKPID(n), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := lab.Up(context.Background(), l.Dir, cfg, nil, &bytes.Buffer{}); err != nil {
				t.Errorf("restart the killed ZooKeeper node: %v", err)
			}
		})
		waitJournal(t, run, "session re-established")
		pid := f.cmd.Process.Pid
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(14 * time.Second) // session timeout 10 s
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitJournal(t, run, "NEW session")
		f.resume(t)
		r := f.wait(t)
		mustEnd(t, r, 0, "run across a lost ZooKeeper node and an expired session")
		recs := records(t, run)
		if count(recs, journal.Note, "", "EXPIRED") == 0 {
			t.Fatalf("the journal does not record the expiry:\n%s", r.out)
		}
		c.assertGone(t, s.topic)
		c.assertSibling(t, s)
	})

	t.Run("a znode changed after it was planned: planned and confirmed again, never deleted blind", func(t *testing.T) {
		s := c.seed(t, "stale")
		run := filepath.Join(t.TempDir(), "run")
		f := startFault(t, "pause@plan:delete-znodes", cleanupArgs(l, s.topic, run, "--set", "recreate=true")...)
		f.waitPaused(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.zk.Set(ctx, kafkazk.ConfigTopicPath(s.topic), []byte(`{"version":1,"config":{"retention.ms":"4321000"}}`), -1); err != nil {
			t.Fatal(err)
		}
		f.resume(t)
		r := f.wait(t)
		mustEnd(t, r, 0, "run with a stale plan")
		recs := records(t, run)
		if count(recs, journal.Plan, "delete-znodes", "") != 2 || count(recs, journal.Note, "delete-znodes", "stale plan") == 0 {
			t.Fatalf("want the znode step planned twice with a stale-plan note:\n%s", r.out)
		}
		// The change made after the first plan is in the backup, and the
		// recreated topic took its configs from it.
		var bk cleanup.Backup
		if b, err := os.ReadFile(filepath.Join(run, "backup", "znodes.json")); err != nil || json.Unmarshal(b, &bk) != nil {
			t.Fatalf("znode backup: %v", err)
		}
		changed := false
		for _, n := range bk.Nodes {
			changed = changed || n.Path == kafkazk.ConfigTopicPath(s.topic) && bytes.Contains(n.Data, []byte("4321000"))
		}
		if !changed {
			t.Fatalf("the znode backup lacks the change made after the first plan: %+v", bk.Nodes)
		}
		// The stale attempt deleted nothing: every delete in the journal
		// comes after the stale-plan note.
		stale := false
		for _, r := range recs {
			stale = stale || r.Type == journal.Note && strings.Contains(string(r.Data), "stale plan")
			if !stale && r.Type == journal.ActionStart && strings.Contains(string(r.Data), "zk-delete") {
				t.Fatal("a znode was deleted before the stale plan was noticed")
			}
		}
		gctx, gcancel := context.WithTimeout(context.Background(), 20*time.Second) // the run outlasts ctx
		defer gcancel()
		data, _, err := c.zk.Get(gctx, kafkazk.ConfigTopicPath(s.topic))
		if err != nil || !bytes.Contains(data, []byte("4321000")) {
			t.Fatalf("recreated %s has configs %s (%v), want retention.ms from the backup", s.topic, data, err)
		}
		c.assertRecreated(t, s.topic, s.id)
	})

	t.Run("clients attached: the detach gate blocks until they leave", func(t *testing.T) {
		s := c.seed(t, "attached")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cons, err := kgo.NewClient(kgo.SeedBrokers(l.State.Config.Bootstrap()...), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics(s.topic))
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		go func() {
			for ctx.Err() == nil {
				cons.PollFetches(ctx)
			}
		}()
		// The group has joined and committed before the run looks.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			offs, err := c.kc.Admin().FetchOffsets(ctx, "billing")
			if _, ok := offs.Lookup(s.topic, 0); err == nil && ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group billing never committed on %s: %v", s.topic, err)
			}
		}
		pr, err := kafka.NewProducer(l.State.Config.Bootstrap(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		stopProducing := make(chan struct{})
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stopProducing:
					return
				case <-time.After(200 * time.Millisecond):
					_ = pr.Produce(ctx, s.topic, 0, fmt.Sprintf("live %d", i))
				}
			}
		}()
		run := filepath.Join(t.TempDir(), "run")
		f := startFault(t, "", cleanupArgs(l, s.topic, run)...)
		waitJournal(t, run, "still attached")
		waitJournal(t, run, "billing")
		if n := count(records(t, run), journal.StepStart, "delete-znodes", ""); n != 0 {
			t.Fatal("the znode step started while clients were attached")
		}
		close(stopProducing)
		cons.Close()
		r := f.wait(t)
		mustEnd(t, r, 0, "run after the clients left")
		var saved []ports.GroupUse
		if b, err := os.ReadFile(filepath.Join(run, "offsets.json")); err != nil || json.Unmarshal(b, &saved) != nil || len(saved) == 0 || saved[0].Group != "billing" {
			t.Fatalf("offsets.json does not hold group billing: %v %+v", err, saved)
		}
		c.assertGone(t, s.topic)
		c.assertSibling(t, s)
	})

	t.Run("auto-create recreates the topic between steps: the run notices and stops", func(t *testing.T) {
		s := c.seed(t, "race")
		run := filepath.Join(t.TempDir(), "run")
		// The window: right after the restart, before verify. (Before the
		// restart the brokers still cache the old topic and a producer
		// writes into that, creating nothing.)
		f := startFault(t, "pause@step-done:start-brokers", cleanupArgs(l, s.topic, run, "--set", "recreate=true")...)
		f.waitPaused(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pr, err := kgo.NewClient(kgo.SeedBrokers(l.State.Config.Bootstrap()...), kgo.AllowAutoTopicCreation(), kgo.DisableIdempotentWrite())
		if err != nil {
			t.Fatal(err)
		}
		if err := pr.ProduceSync(ctx, &kgo.Record{Topic: s.topic, Value: []byte("from a client nobody stopped")}).FirstErr(); err != nil {
			t.Fatalf("auto-create by producing: %v", err)
		}
		pr.Close()
		z, _, err := c.zk.Topic(ctx, s.topic)
		if err != nil {
			t.Fatalf("the producer did not auto-create %s: %v", s.topic, err)
		}
		f.resume(t)
		r := f.wait(t)
		if r.code != exitFailed || !strings.Contains(r.out, "exists again") || !strings.Contains(r.out, z.TopicID) || !strings.Contains(r.out, "auto-create") {
			t.Fatalf("want exit 1 naming the auto-created topic %s, got %d\n%s", z.TopicID, r.code, r.out)
		}
		recs := records(t, run)
		if count(recs, journal.ActionStart, "verify", "") != 0 {
			t.Fatal("verify acted on a topic it did not make")
		}
		// The operator deletes the intruder (the brokers are up), resumes.
		if err := c.kc.DeleteTopic(ctx, s.topic); err != nil {
			t.Fatal(err)
		}
		for ok := true; ok && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
			ok, _, _ = c.zk.Exists(ctx, kafkazk.TopicPath(s.topic))
		}
		mustEnd(t, kremedy(t, resumeArgs(run, s.topic)...), 0, "resume once the intruder is gone")
		noRedoAfterRestart(t, run)
		c.assertRecreated(t, s.topic, s.id, z.TopicID)
		c.assertSibling(t, s)
	})
}

// noRedoAfterRestart: once start-brokers has completed, no later attempt
// started the znode, stop or wipe step again (a second cluster restart, or
// deleting the topic the run had just recreated).
func noRedoAfterRestart(t *testing.T, run string) {
	t.Helper()
	restarted := false
	for _, r := range records(t, run) {
		if r.Type == journal.StepDone && r.Step == "start-brokers" {
			restarted = true
		}
		if restarted && r.Type == journal.StepStart && slices.Contains([]string{"delete-znodes", "stop-brokers", "wipe-segments"}, r.Step) {
			t.Fatalf("after the restart, a later attempt ran %s again", r.Step)
		}
	}
	if !restarted {
		t.Fatal("the run never completed start-brokers")
	}
}

// waitJournal waits until a journal record of run contains text.
func waitJournal(t *testing.T, run, text string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if recs, err := journal.Read(filepath.Join(run, "journal.jsonl")); err == nil && count(recs, "", "", text) > 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the journal never recorded %q", text)
}

// killSessions SIGKILLs the per-connection children of an sshd listener
// (the server side of every SSH session to that host) and says how many.
func killSessions(t *testing.T, listener int) int {
	t.Helper()
	if listener == 0 {
		t.Fatal("sshd listener not running")
	}
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(listener) && f[0] != "Z" {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

func firstLine(out, containing string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, containing) {
			return l
		}
	}
	return ""
}
