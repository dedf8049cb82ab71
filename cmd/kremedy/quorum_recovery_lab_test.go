package main

// A lost KRaft quorum on real Kafka 3.9.2 (static quorum): the
// quorum-loss scenario, diagnose naming it, the lab refusing the wiped
// controller, and every node's copy of __cluster_metadata-0 read over SSH
// with the seed it picks. It fails (never skips) when 3.9.2 or sshd is
// missing, except under -short.

import (
	"bytes"
	"context"
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
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/quorum"
)

// kraftLabUp brings up a 3-controller KRaft lab of Kafka v on net, with
// extra flags (--kraft-quorum dynamic), taken down at the test's end. It
// returns the lab, its dir and the lab up command (run again, it resumes).
func kraftLabUp(t *testing.T, v, net string, extra ...string) (*lab.Lab, string, []string) {
	t.Helper()
	if _, _, err := lab.ResolveKafkaHome("", v); err != nil {
		t.Fatalf("Kafka %s is not installed: %v (run `kremedy lab install --kafka-version %s`)", v, err, v)
	}
	dir := filepath.Join(t.TempDir(), "lab")
	t.Cleanup(func() { _ = lab.Down(context.Background(), dir, false, &bytes.Buffer{}) })
	up := append([]string{"lab", "up", "--kraft", "--kafka-version", v, "--net", net, "--dir", dir}, extra...)
	if r := kremedy(t, up...); r.code != 0 {
		t.Fatalf("%s: exit %d\n%s", strings.Join(up, " "), r.code, r.out)
	}
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l, dir, up
}

func TestQuorumRecoveryLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	const v = "3.9.2"
	l, dir, up := kraftLabUp(t, v, "70")
	start := time.Now()
	rep := kraftBreak(t, l, "quorum-loss", "qr")
	lossAt := time.Now()
	l, err := lab.Open(dir) // the scenario recorded the wiped controller
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
	t.Run("quorum-recovery, killed in its rewrite and resumed", func(t *testing.T) { quorumRunbook(t, l, dir, lossAt) })
	t.Run("a controller restored with its old log follows the new timeline", func(t *testing.T) { quorumOldLogFollows(t, l) })
	t.Run("only a stale controller left: refused, then --set seed with the ledger of what it discards", func(t *testing.T) { quorumChosenSeed(t, dir) })
	t.Run("only a stale controller left again: --set copy_from seeds from a broker's copy, nothing lost", func(t *testing.T) { quorumCopyFrom(t, dir) })
	t.Logf("FIGURE quorum-loss on %s to a serving quorum of 3 (the scenario, diagnose, copies, ledger, quorum-recovery): %.1fs", v, time.Since(start).Seconds())
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

// quorumRunbook runs quorum-recovery on the lost quorum, killed with
// SIGKILL inside its irreversible step (the rewrite, after its sixth
// action: the seed leads alone and the first empty controller is on its
// way back) and resumed: a leader and three voters again, the ledger says
// nothing is discarded (no copy holds a record beyond the seed), every
// topic served, a topic created and acks=all served (quorumServes), and
// diagnose finds nothing.
func quorumRunbook(t *testing.T, l *lab.Lab, dir string, lossAt time.Time) {
	run := filepath.Join(t.TempDir(), "run")
	name := l.Inventory().Name
	killed := runWithFault(t, "sigkill@action-end:rewrite:6", "run", "quorum-recovery", "--inventory", l.InventoryPath(), "--run-dir", run, "--headless", "--yes", "--confirm", name)
	if killed.code != -1 {
		t.Fatalf("quorum-recovery never reached 6 actions of its rewrite (exit %d):\n%s", killed.code, killed.out)
	}
	for _, want := range []string{"WHAT THIS RECOVERY DISCARDS: no record", "the seed:"} {
		if !strings.Contains(killed.out, want) {
			t.Errorf("the run's plan does not say %q:\n%s", want, killed.out)
		}
	}
	t.Logf("killed with SIGKILL after 6 actions of the rewrite")
	r := kremedy(t, "resume", run, "--headless", "--yes", "--confirm", name)
	if r.code != 0 {
		t.Fatalf("resume after SIGKILL in the rewrite: exit %d\n%s", r.code, r.out)
	}
	if n := count(records(t, run), journal.ActionEnd, "rewrite", `"do":"file"`); n > 2 {
		t.Errorf("the resumed rewrite wrote files %d times (the seed's quorum-state and one meta.properties at most)", n)
	}
	q := kraftQuorum(t, l)
	if q.Leader < 0 || len(q.Voters) != 3 {
		t.Fatalf("after quorum-recovery: leader %d, voters %+v", q.Leader, q.Voters)
	}
	t.Logf("FIGURE quorum-recovery on 3.9.2 (killed once, resumed): from the quorum's loss to a leader and 3 voters in %.1fs", time.Since(lossAt).Seconds())
	quorumServes(t, l)
	t.Logf("FIGURE from the quorum's loss to a serving cluster (brokers unfenced, a topic created, acks=all served): %.1fs", time.Since(lossAt).Seconds())
	kraftDiagnoseClean(t, l)
	// controller-replace is for a dynamic quorum: on this static one it
	// refuses, naming the way by hand, and changes nothing.
	rr := kremedy(t, "run", "controller-replace", "--inventory", l.InventoryPath(), "--set", "controller=3001", "--run-dir", filepath.Join(t.TempDir(), "replace"), "--headless", "--yes", "--confirm", name)
	if rr.code == 0 || !strings.Contains(rr.out, "static quorum") || !strings.Contains(rr.out, "kafka-storage.sh format") {
		t.Errorf("controller-replace on a static quorum: exit %d, want a refusal naming the way by hand\n%s", rr.code, rr.out)
	}
	// quorum-to-dynamic needs 4.1: on 3.9.2 it refuses, changing nothing.
	rc := kremedy(t, "run", "quorum-to-dynamic", "--inventory", l.InventoryPath(), "--run-dir", filepath.Join(t.TempDir(), "convert"), "--headless", "--yes", "--confirm", name)
	if rc.code == 0 || !strings.Contains(rc.out, "Kafka 4.1 or later") {
		t.Errorf("quorum-to-dynamic on 3.9.2: exit %d, want a refusal naming 4.1\n%s", rc.code, rc.out)
	}
	rep, err := os.ReadFile(filepath.Join(run, "report.md"))
	if err != nil || !strings.Contains(string(rep), "nothing: no copy held a record beyond the seed's end") {
		t.Errorf("the report does not give the ledger (%v):\n%s", err, rep)
	}
	if r := kremedy(t, "lab", "up", "--dir", dir); r.code != 0 || strings.Contains(r.out, "started (pid") {
		t.Errorf("lab up after the recovery (every controller back, running): exit %d\n%s", r.code, r.out)
	}
}

// quorumChosenSeed loses the quorum again (quorum-loss, topics qs-…) and
// wipes the last running controller too: the only controller copy left is
// the follower stopped before qs-05…qs-09, every broker's is ahead of it.
// quorum-recovery refuses, naming --set seed; with it, the plan's ledger
// lists exactly qs-05…qs-09 before the typed gate, and afterwards
// qs-00…qs-04 are served and qs-05…qs-09 are gone from the metadata.
func quorumChosenSeed(t *testing.T, dir string) {
	l, lossAt, args, r := loseToBrokersCopies(t, dir, "qs")
	m := regexp.MustCompile(`--set seed=(\d+)`).FindStringSubmatch(r.out)
	if r.code != exitFailed || m == nil || !strings.Contains(r.out, "holds the newest copy") {
		t.Fatalf("quorum-recovery with every broker's copy ahead of the only controller's: exit %d, want 1 naming --set seed\n%s", r.code, r.out)
	}
	run := filepath.Join(t.TempDir(), "run")
	r = kremedy(t, append(args, "--run-dir", run, "--set", "seed="+m[1])...)
	if r.code != 0 {
		t.Fatalf("quorum-recovery --set seed=%s: exit %d\n%s", m[1], r.code, r.out)
	}
	ledger := r.out
	if i := strings.Index(ledger, "WHAT THIS RECOVERY DISCARDS"); i >= 0 {
		ledger = ledger[i:]
	} else {
		t.Fatalf("the plan shows no ledger:\n%s", r.out)
	}
	got := map[string]bool{}
	for _, mm := range regexp.MustCompile(`topic (qs-\d\d) created`).FindAllStringSubmatch(ledger, -1) {
		got[mm[1]] = true
	}
	want := map[string]bool{"qs-05": true, "qs-06": true, "qs-07": true, "qs-08": true, "qs-09": true}
	if !regexp.MustCompile(`broker 1, broker 2, broker 3: offsets \d+ to \d+ beyond the seed's end`).MatchString(ledger) {
		t.Errorf("the ledger does not list the brokers' identical tails once:\n%s", ledger)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the ledger lists topics %v, want exactly qs-05…qs-09:\n%s", got, ledger)
	}
	t.Logf("FIGURE --set seed=%s: from the second loss to a leader and 3 voters in %.1fs; the ledger:\n%s", m[1], time.Since(lossAt).Seconds(), ledger[:min(len(ledger), 3000)])
	q := kraftQuorum(t, l)
	if q.Leader < 0 || len(q.Voters) != 3 {
		t.Fatalf("after quorum-recovery --set seed: leader %d, voters %+v", q.Leader, q.Voters)
	}
	quorumServesAs(t, l, "qs", 5, 5)
	var strays []string
	for b := 1; b <= l.State.Config.Brokers; b++ {
		for _, d := range l.LogDirs(b) {
			m, _ := filepath.Glob(filepath.Join(d, "qs-0[5-9]-*-stray"))
			strays = append(strays, m...)
		}
	}
	if len(strays) == 0 {
		t.Errorf("no log of qs-05…qs-09 was renamed -stray on the brokers after their start")
	}
	t.Logf("FIGURE the logs of the discarded topics on the brokers after their start: %d -stray directories (stray-cleanup offers them)", len(strays))
}

// loseToBrokersCopies loses the quorum (quorum-loss, topics prefix-…) and
// wipes the last running controller too: the only controller copy left
// is the follower stopped first, every broker's ahead of it. It returns
// the lab, when the quorum was lost, the run's arguments, and the first
// run's refusal.
func loseToBrokersCopies(t *testing.T, dir, prefix string) (*lab.Lab, time.Time, []string, result) {
	t.Helper()
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	kraftBreak(t, l, "quorum-loss", prefix)
	lossAt := time.Now()
	for k := 1; k <= 3; k++ {
		if l.ControllerPID(k) != 0 {
			if r := kremedy(t, "lab", "controller", "wipe", strconv.Itoa(int(lab.ControllerID(k))), "--dir", dir); r.code != 0 {
				t.Fatalf("lab controller wipe %d: exit %d\n%s", lab.ControllerID(k), r.code, r.out)
			}
		}
	}
	args := []string{"run", "quorum-recovery", "--inventory", l.InventoryPath(), "--headless", "--yes", "--confirm", l.Inventory().Name}
	return l, lossAt, args, kremedy(t, append(args, "--run-dir", filepath.Join(t.TempDir(), "refused"))...)
}

// quorumCopyFrom loses the quorum a third time (topics qc-…) and wipes
// the last running controller too, as quorumChosenSeed does; the refusal
// names --set copy_from=B; with it the backup step copies broker B's copy
// over the stale controller's, the ledger discards nothing, and every
// topic qc-00…qc-09 is served afterwards.
func quorumCopyFrom(t *testing.T, dir string) {
	l, lossAt, args, r := loseToBrokersCopies(t, dir, "qc")
	m := regexp.MustCompile(`--set copy_from=(\d+)`).FindStringSubmatch(r.out)
	if r.code != exitFailed || m == nil {
		t.Fatalf("quorum-recovery with every broker's copy ahead of the only controller's: exit %d, want 1 naming --set copy_from\n%s", r.code, r.out)
	}
	run := filepath.Join(t.TempDir(), "run")
	r = kremedy(t, append(args, "--run-dir", run, "--set", "copy_from="+m[1])...)
	if r.code != 0 {
		t.Fatalf("quorum-recovery --set copy_from=%s: exit %d\n%s", m[1], r.code, r.out)
	}
	for _, want := range []string{"the broker's copy in its place", "WHAT THIS RECOVERY DISCARDS: no record"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("quorum-recovery --set copy_from=%s does not say %q:\n%s", m[1], want, r.out)
		}
	}
	q := kraftQuorum(t, l)
	if q.Leader < 0 || len(q.Voters) != 3 {
		t.Fatalf("after quorum-recovery --set copy_from: leader %d, voters %+v", q.Leader, q.Voters)
	}
	t.Logf("FIGURE --set copy_from=%s: from the third loss to a leader and 3 voters in %.1fs, nothing discarded", m[1], time.Since(lossAt).Seconds())
	quorumServesAs(t, l, "qc", 10, 0)
}

// quorumOldLogFollows restores, on a voter of the static quorum that came
// back empty, the copy of its metadata log the run moved aside, and starts
// it. A static voter has no directory id, so Kafka cannot keep it out; it
// cannot lead a second timeline either: the recovery set the seed's epoch
// above every epoch any node had seen, so the old copy's candidacy loses
// and it follows the leader, its log made the leader's. The leader and
// the epoch stay; it is a voter caught up again.
func quorumOldLogFollows(t *testing.T, l *lab.Lab) {
	var id int32
	var cdir, aside string
	for k := 1; k <= 3; k++ {
		if m, _ := filepath.Glob(filepath.Join(l.ControllerDir(k), "metadata.__cluster_metadata-0.kremedy-aside-*")); len(m) == 1 {
			id, cdir, aside = lab.ControllerID(k), l.ControllerDir(k), m[0]
		}
	}
	if id == 0 {
		t.Fatal("no controller has its old copy kept aside")
	}
	sh := func(script string) {
		t.Helper()
		if out, err := exec.Command("bash", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	meta := filepath.Join(cdir, "metadata")
	sh(filepath.Join(cdir, "kafka-stop"))
	stopped := kraftQuorum(t, l) // a leader among the other two (a new one if it led)
	sh("set -e; cd " + meta + "; rm -rf __cluster_metadata-0; cp -a " + aside + " __cluster_metadata-0")
	sh(filepath.Join(cdir, "kafka-start"))
	var q ports.Quorum
	deadline := time.Now().Add(time.Minute)
	for {
		q = kraftQuorum(t, l)
		if slices.ContainsFunc(q.Voters, func(v ports.Voter) bool { return v.ID == id && v.LogEndOffset >= q.HighWatermark }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("controller %d started with its old log never caught up: leader %d epoch %d, voters %+v", id, q.Leader, q.Epoch, q.Voters)
		}
		time.Sleep(time.Second)
	}
	if q.Leader != stopped.Leader || q.Epoch != stopped.Epoch {
		t.Errorf("controller %d's return with its old log moved the quorum: leader %d epoch %d, was leader %d epoch %d", id, q.Leader, q.Epoch, stopped.Leader, stopped.Epoch)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names, err := connectLab(t, l).kc.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"qr-05", "qr-09", "qr-after"} { // beyond its old log's end
		if !slices.Contains(names, n) {
			t.Errorf("topic %s is gone after controller %d came back with its old log: %v", n, id, names)
		}
	}
	t.Logf("FIGURE controller %d started with its old log on the static quorum: it follows leader %d (epoch %d kept), caught up; the topics its old log lacked are all there", id, q.Leader, q.Epoch)
}

// quorumServes: every topic of the scenario present, a topic created
// afterwards, an acks=all producer served on an older topic.
func quorumServes(t *testing.T, l *lab.Lab) { quorumServesAs(t, l, "qr", 10, 0) }

// quorumServesAs: topics prefix-00 … prefix-(kept-1) present and the next
// gone ones absent, then prefix-after created and acks=all served on
// prefix-00.
func quorumServesAs(t *testing.T, l *lab.Lab, prefix string, kept, gone int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := connectLab(t, l).kc
	names, err := kc.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < kept+gone; i++ {
		if n := fmt.Sprintf("%s-%02d", prefix, i); slices.Contains(names, n) != (i < kept) {
			t.Errorf("topic %s present after the recovery: %v, want %v (%v)", n, !(i < kept), i < kept, names)
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
		_, err = kc.CreateTopic(actx, prefix+"-after", nil, 1, 3, nil)
		acancel()
		if err == nil || strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("a topic created after the recovery: %v", err)
		}
		t.Logf("create %s-after after the recovery: %v (again)", prefix, err)
		time.Sleep(time.Second)
	}
	t.Logf("FIGURE after the recovery: brokers unfenced and %s-after created %.1fs after the quorum had its 3 voters", prefix, time.Since(begin).Seconds())
	kraftWaitServed(t, kc, prefix+"-after", 1)
	pr, err := kafka.NewProducer(l.State.Config.Bootstrap(), 60*time.Second, l.KafkaOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.Produce(ctx, prefix+"-00", 0, "after the recovery"); err != nil {
		t.Fatalf("acks=all to %s-00 after the recovery: %v", prefix, err)
	}
}
