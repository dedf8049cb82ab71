package main

// A lost KRaft quorum on real Kafka 3.9.2 (static quorum): the
// quorum-loss scenario, diagnose naming it, the lab refusing the wiped
// controller, and every node's copy of __cluster_metadata-0 read over SSH
// with the seed it picks. It fails (never skips) when 3.9.2 or sshd is
// missing, except under -short.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/inventory/connect"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/quorum"
)

func TestQuorumRecoveryLab(t *testing.T) {
	needLab(t)
	const v = "3.9.2"
	if _, _, err := lab.ResolveKafkaHome("", v); err != nil {
		t.Fatalf("Kafka %s is not installed: %v (run `kremedy lab install --kafka-version %s`)", v, err, v)
	}
	dir := filepath.Join(t.TempDir(), "lab")
	t.Cleanup(func() { _ = lab.Down(context.Background(), dir, false, &bytes.Buffer{}) })
	up := []string{"lab", "up", "--kraft", "--kafka-version", v, "--net", "70", "--dir", dir}
	if r := kremedy(t, up...); r.code != 0 {
		t.Fatalf("lab up --kraft on %s: exit %d\n%s", v, r.code, r.out)
	}
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep := kraftBreak(t, l, "quorum-loss", "qr")
	l, err = lab.Open(dir) // the scenario recorded the wiped controller
	if err != nil {
		t.Fatal(err)
	}
	if len(l.State.Wiped) != 1 {
		t.Fatalf("quorum-loss recorded wiped controllers %v, want one\n%v", l.State.Wiped, rep.Did)
	}
	wiped := lab.ControllerID(l.State.Wiped[0])
	f := findingOf(kraftDiagnose(t, l, exitFailed, diagnose.FindQuorumLost), diagnose.FindQuorumLost)
	if all := f.Summary + "\n" + strings.Join(f.Evidence, "\n"); !strings.Contains(all, "1 of the 3 voters") {
		t.Errorf("quorum-lost after quorum-loss does not say 1 of the 3 voters:\n%s", all)
	}
	r := kremedy(t, up...)
	for _, want := range []string{fmt.Sprintf("kraft controller %d was wiped", wiped), "quorum-recovery", "did nothing"} {
		if r.code == 0 || !strings.Contains(r.out, want) {
			t.Errorf("lab up after a wipe: exit %d, want a refusal saying %q\n%s", r.code, want, r.out)
		}
	}
	copies := quorumCopies(t, l, wiped)
	quorumLedger(t, copies)
	t.Run("the procedure by hand on 3.9.2", func(t *testing.T) { quorumByHand(t, l, dir, copies) })
	t.Logf("FIGURE quorum-loss on %s to a serving quorum of 3 (diagnose, copies, ledger, the procedure by hand): %.1fs", v, time.Since(start).Seconds())
}

// quorumCopies reads every node's copy of __cluster_metadata-0 over SSH
// (quorum.ReadCopies) after quorum-loss: the wiped controller's is gone,
// every other is read; the seed is of the last epoch and at least as far
// as every copy, and the follower stopped first (its log ends before the
// second loop of topics) is behind it.
func quorumCopies(t *testing.T, l *lab.Lab, wiped int32) []quorum.Copy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := connect.Load(ctx, l.InventoryPath(), connect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	copies := quorum.ReadCopies(ctx, cl.Ports.Target, cl.Ports.Hosts)
	var lines []string
	maxEpoch := int32(-1)
	for _, c := range copies {
		lines = append(lines, c.String())
		switch {
		case c.Node == wiped:
			if c.Known() || !strings.Contains(c.Err, "no directory") {
				t.Errorf("the wiped controller's copy: %s", c)
			}
		case !c.Known():
			t.Errorf("copy not read: %s", c)
		default:
			maxEpoch = max(maxEpoch, c.Epoch)
		}
	}
	if len(copies) != 6 {
		t.Fatalf("%d copies read, want 3 controllers and 3 brokers:\n%s", len(copies), strings.Join(lines, "\n"))
	}
	seed, ok := quorum.Seed(copies)
	if !ok || seed.Epoch != maxEpoch || len(quorum.Beyond(copies, seed)) != 0 {
		t.Fatalf("seed %s (max epoch %d), beyond it %v:\n%s", seed, maxEpoch, quorum.Beyond(copies, seed), strings.Join(lines, "\n"))
	}
	for _, c := range copies {
		if c.Controller && c.Node != wiped && c.Node != seed.Node && c.End >= seed.End && c.Epoch == seed.Epoch && l.ControllerPID(int(c.Node-3000)) == 0 {
			t.Errorf("the follower stopped before the second loop (%s) is not behind the seed (%s)", c, seed)
		}
	}
	t.Logf("FIGURE the copies of __cluster_metadata-0 after quorum-loss (seed: %s):\n%s", seed.Role(), strings.Join(lines, "\n"))
	return copies
}

// quorumLedger decodes real Kafka's metadata log (the lab's copies, read
// in place): the seed's copy holds the TopicRecords of qr-00…qr-09 in
// order; what the seed holds beyond the follower stopped first — the
// ledger a recovery from that follower would show — is exactly the
// topics created after it stopped, qr-05…qr-09.
func quorumLedger(t *testing.T, copies []quorum.Copy) {
	t.Helper()
	seed, _ := quorum.Seed(copies)
	var behind quorum.Copy
	for _, c := range copies {
		if c.Controller && c.Known() && c.End < seed.End {
			behind = c
		}
	}
	all := quorum.ReadLedger(seed, seed.Dir, 0)
	var qr []string
	for _, n := range all.TopicsCreated() {
		if strings.HasPrefix(n, "qr-") {
			qr = append(qr, n)
		}
	}
	want := []string{"qr-00", "qr-01", "qr-02", "qr-03", "qr-04", "qr-05", "qr-06", "qr-07", "qr-08", "qr-09"}
	if all.Err != "" || strings.Join(qr, ",") != strings.Join(want, ",") {
		t.Fatalf("the seed's copy decoded: topics %v (error %q), want %v", qr, all.Err, want)
	}
	if behind.Node == 0 {
		t.Fatalf("no controller copy behind the seed: %v", copies)
	}
	l := quorum.ReadLedger(seed, seed.Dir, behind.End)
	if got := l.TopicsCreated(); l.Err != "" || strings.Join(got, ",") != strings.Join(want[5:], ",") {
		t.Fatalf("the seed's records beyond %s's end: topics %v (error %q), want %v\n%s", behind.Role(), got, l.Err, want[5:], strings.Join(l.Lines(), "\n"))
	}
	t.Logf("FIGURE what %s holds beyond %s's end (offset %d):\n%s", seed.Role(), behind.Role(), behind.End, strings.Join(l.Lines(), "\n"))
}

// quorumByHand walks the static-quorum procedure on real Kafka with the
// lab's own scripts and files, ahead of the runbook that will make it
// (docs/quorum-recovery.md): it proves the procedure's premises on 3.9.2
// — a seed whose controller.quorum.voters names it alone leads with its
// whole log; empty controllers started with the full voter set fetch it,
// one at a time, each start judged by quorum.Rejoin; the seed restarted
// with the full set; every topic back, new ones made, acks=all served.
func quorumByHand(t *testing.T, l *lab.Lab, dir string, copies []quorum.Copy) {
	seed, _ := quorum.Seed(copies)
	if !seed.Controller {
		t.Fatalf("the seed is %s: the procedure by hand starts from a controller's copy", seed.Role())
	}
	start := time.Now()
	c := l.State.Config
	voters := []int32{lab.ControllerID(1), lab.ControllerID(2), lab.ControllerID(3)}
	k := func(id int32) int { return int(id - lab.ControllerID(0)) }
	props := filepath.Join(l.ControllerDir(k(seed.Node)), "controller.properties")
	full := setVoters(t, props, fmt.Sprintf("%d@%s:%d", seed.Node, c.ControllerHost(k(seed.Node)), lab.ControllerPort))
	ctl(t, dir, "stop", seed.Node)
	// The seed's quorum-state rewritten: no leader, no vote, at the
	// highest epoch any node's quorum-state holds (quorum.SeedState says
	// why neither a lower epoch nor the seed's own vote will do).
	epoch := maxStateEpoch(t, l)
	if err := os.WriteFile(filepath.Join(seed.Dir, "quorum-state"), quorum.SeedState(seed.Node, epoch), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the seed's quorum-state set to epoch %d, the highest any node saw", epoch)
	ctl(t, dir, "start", seed.Node)
	q := kraftQuorum(t, l)
	if q.Leader != seed.Node || len(q.Voters) != 1 {
		t.Fatalf("the seed alone: leader %d, voters %+v", q.Leader, q.Voters)
	}
	r := quorum.Rejoin{Voters: voters, Seed: seed.Node, SeedLeads: true, Running: []int32{seed.Node}, Holding: []int32{seed.Node}}
	for _, id := range voters {
		if id == seed.Node {
			continue
		}
		emptyController(t, l, id, seed.Node)
		if why := r.StartRisk(id); why != "" {
			t.Fatalf("starting controller %d empty: %s", id, why)
		}
		if b, err := exec.Command(filepath.Join(l.ControllerDir(k(id)), "kafka-start")).CombinedOutput(); err != nil {
			t.Fatalf("start controller %d: %v\n%s", id, err, b)
		}
		r.Running = append(r.Running, id)
		waitObserverCaughtUp(t, l, id)
		r.Holding = append(r.Holding, id)
	}
	// The last voter started stops while the seed restarts with the full
	// voter set (quorum.Rejoin.StopSeedRisk), then starts again.
	last := r.Running[len(r.Running)-1]
	if why := r.StopSeedRisk(); why == "" {
		t.Fatalf("restarting the seed with %v running was judged safe", r.Running)
	}
	if b, err := exec.Command(filepath.Join(l.ControllerDir(k(last)), "kafka-stop")).CombinedOutput(); err != nil {
		t.Fatalf("stop controller %d: %v\n%s", last, err, b)
	}
	r.Running = r.Running[:len(r.Running)-1]
	if why := r.StopSeedRisk(); why != "" {
		t.Fatalf("restarting the seed: %s", why)
	}
	if err := os.WriteFile(props, full, 0o644); err != nil {
		t.Fatal(err)
	}
	ctl(t, dir, "stop", seed.Node)
	ctl(t, dir, "start", seed.Node)
	ctl(t, dir, "start", last)
	q = kraftQuorum(t, l)
	if q.Leader < 0 || len(q.Voters) != 3 {
		t.Fatalf("after the recovery: leader %d, voters %+v", q.Leader, q.Voters)
	}
	quorumServes(t, l)
	if r := kremedy(t, "lab", "up", "--dir", dir); r.code != 0 || strings.Contains(r.out, "started (pid") {
		t.Errorf("lab up after the recovery (the wiped controller formatted again, running): exit %d\n%s", r.code, r.out)
	}
	t.Logf("FIGURE the procedure by hand on 3.9.2: from the copies read to a serving quorum of 3 in %.1fs", time.Since(start).Seconds())
}

func ctl(t *testing.T, dir, action string, id int32) {
	t.Helper()
	if r := kremedy(t, "lab", "controller", action, strconv.Itoa(int(id)), "--dir", dir); r.code != 0 {
		t.Fatalf("lab controller %s %d: exit %d\n%s", action, id, r.code, r.out)
	}
}

// setVoters sets controller.quorum.voters in props and returns the file
// as it was.
func setVoters(t *testing.T, props, voters string) []byte {
	t.Helper()
	old, err := os.ReadFile(props)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^controller\.quorum\.voters=.*$`)
	if !re.Match(old) {
		t.Fatalf("%s has no controller.quorum.voters", props)
	}
	if err := os.WriteFile(props, re.ReplaceAll(old, []byte("controller.quorum.voters="+voters)), 0o644); err != nil {
		t.Fatal(err)
	}
	return old
}

// emptyController leaves controller id with an empty metadata log: its
// old __cluster_metadata-0 moved aside, or, wiped, a metadata dir with
// meta.properties as kafka-storage format writes it (the seed's cluster
// id, id's node id, a new directory id).
func emptyController(t *testing.T, l *lab.Lab, id, seed int32) {
	t.Helper()
	md := filepath.Join(l.ControllerDir(int(id-lab.ControllerID(0))), "metadata")
	if _, err := os.Stat(filepath.Join(md, "meta.properties")); err == nil {
		if err := os.Rename(filepath.Join(md, quorum.MetadataLog), filepath.Join(md, quorum.MetadataLog+".kremedy-aside")); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(filepath.Join(l.ControllerDir(int(seed-lab.ControllerID(0))), "metadata", "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	dirID := make([]byte, 16)
	rand.Read(dirID)
	mp := regexp.MustCompile(`(?m)^node\.id=.*$`).ReplaceAllString(string(b), fmt.Sprintf("node.id=%d", id))
	mp = regexp.MustCompile(`(?m)^directory\.id=.*$`).ReplaceAllString(mp, "directory.id="+base64.RawURLEncoding.EncodeToString(dirID))
	if err := os.MkdirAll(md, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(md, "meta.properties"), []byte(mp), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitObserverCaughtUp waits until the seed's leader sees controller id
// (an observer of its one-voter quorum) fetched up to its high watermark.
func waitObserverCaughtUp(t *testing.T, l *lab.Lab, id int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var q ports.Quorum
	var err error
	for ctx.Err() == nil {
		if q, err = l.Quorum(ctx); err == nil && q.Leader >= 0 {
			for _, o := range append(q.Observers, q.Voters...) {
				if o.ID == id && o.LogEndOffset >= q.HighWatermark && q.HighWatermark > 0 {
					return
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("controller %d never caught up with the seed: %+v %v", id, q, err)
}

// quorumServes: every topic of the scenario present, a topic created
// afterwards, an acks=all producer served on an older topic.
func quorumServes(t *testing.T, l *lab.Lab) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := connectLab(t, l).kc
	names, err := kc.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if n := fmt.Sprintf("qr-%02d", i); !slices.Contains(names, n) {
			t.Errorf("topic %s is gone after the recovery: %v", n, names)
		}
	}
	// The brokers find the new leader by themselves: unfenced, then a
	// topic created through them (each attempt bounded; retried as an
	// operator would while they reconnect).
	begin := time.Now()
	var st lab.BrokerStates
	for ctx.Err() == nil {
		if st, err = l.BrokerStates(ctx); err == nil && len(st.Unfenced) == l.State.Config.Brokers {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(st.Unfenced) != l.State.Config.Brokers {
		t.Fatalf("brokers unfenced after the recovery: %+v %v", st, err)
	}
	for {
		actx, acancel := context.WithTimeout(ctx, 15*time.Second)
		_, err = kc.CreateTopic(actx, "qr-after", nil, 1, 3, nil)
		acancel()
		if err == nil || strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("a topic created after the recovery: %v", err)
		}
		t.Logf("create qr-after after the recovery: %v (again)", err)
		time.Sleep(time.Second)
	}
	t.Logf("FIGURE after the recovery: brokers unfenced and qr-after created %.1fs after the quorum had its 3 voters", time.Since(begin).Seconds())
	kraftWaitServed(t, kc, "qr-after", 1)
	pr, err := kafka.NewProducer(l.State.Config.Bootstrap(), 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.Produce(ctx, "qr-00", 0, "after the recovery"); err != nil {
		t.Fatalf("acks=all to qr-00 after the recovery: %v", err)
	}
}

// maxStateEpoch is the highest epoch of every node's quorum-state.
func maxStateEpoch(t *testing.T, l *lab.Lab) int32 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(l.Dir, "controller", "*", "metadata", quorum.MetadataLog, "quorum-state"))
	more, _ := filepath.Glob(filepath.Join(l.Dir, "broker", "*", "*", quorum.MetadataLog, "quorum-state"))
	var top int32
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		e, err := quorum.StateEpoch(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		top = max(top, e)
	}
	if len(files)+len(more) < 4 {
		t.Fatalf("quorum-state files: %v %v", files, more)
	}
	return top
}
