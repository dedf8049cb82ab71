package main

// The KRaft lab (`lab up --kraft`) on real Kafka: a ZooKeeper-free cluster
// per release, each of its scenarios, checked with the test's own clients
// and on the disks. It fails (never skips) when a release or sshd is
// missing, except under -short.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
)

// kraftLabVersions are the releases TestKRaftLab runs:
// $KREMEDY_KRAFT_LAB_VERSIONS (comma-separated; `make test-versions` adds
// the newest 4.x), else 3.9.2 (KRaft mode of the last release with both
// modes) and 4.1.2 (KRaft only, log4j2).
func kraftLabVersions() []string {
	if v := os.Getenv("KREMEDY_KRAFT_LAB_VERSIONS"); v != "" {
		return strings.Split(v, ",")
	}
	// make test runs 4.1.2 (a dynamic quorum); 3.9.2's static quorum has
	// its lab tests in make test too (TestQuorumRecoveryLab,
	// TestKRaftCombinedLab, TestZKToKRaftLab's end state), and this whole
	// lab on 3.9.2 in make test-versions.
	return []string{"4.1.2"}
}

// TestKRaftLabFlags: what `lab up --kraft` refuses, before anything is
// made (no lab runs; it runs with -short too).
func TestKRaftLabFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kraft", "--zookeepers", "3"}, "--kraft with --zookeepers: a KRaft lab runs no ZooKeeper"},
		{[]string{"--kraft", "--ibp", "3.9"}, "--kraft with --ibp: a KRaft cluster has metadata.version"},
		{[]string{"--kraft", "--chroot", "/k"}, "--kraft with --chroot"},
		{[]string{"--kraft", "--secure", "--kerberos", "--combined"}, "--kerberos with --combined: not yet"},
		{[]string{"--kraft", "--kraft-controllers", "2"}, "--kraft-controllers 2: use 0 (none), 1, 3 or 5"},
		{[]string{"--kraft", "--kafka-version", "3.4.1"}, "the KRaft lab runs 3.7 and later"},
		{[]string{"--kafka-version", "4.1.2"}, "Kafka 4.x has no ZooKeeper mode: add --kraft"},
		{[]string{"--combined"}, "--combined without --kraft"},
		{[]string{"--kraft", "--combined", "--kraft-controllers", "3"}, "--combined with --kraft-controllers: the combined brokers are the quorum"},
		{[]string{"--kraft", "--combined", "--brokers", "4"}, "--combined with --brokers 4: the brokers are the quorum's voters; use an odd number"},
	} {
		r := kremedy(t, append([]string{"lab", "up", "--dir", dir}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.out, tc.want) {
			t.Errorf("lab up %s: exit %d, want 2 with %q\n%s", strings.Join(tc.args, " "), r.code, tc.want, r.out)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused lab up made %s: %v", dir, err)
	}
	// Completion offers a KRaft lab only its scenarios.
	fake := t.TempDir()
	os.WriteFile(filepath.Join(fake, "lab.json"), []byte(`{"format": 1, "config": {"brokers": 3, "kraft_controllers": 3, "kraft": true}}`), 0o600)
	r := kremedy(t, "__complete", "lab", "break", "--dir", fake, "")
	for _, n := range lab.ScenarioOrder {
		if offered := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(n) + `\t`).MatchString(r.out); offered != (lab.Scenarios[n].Mode == lab.KRaftMode) {
			t.Errorf("completion on a KRaft lab offers %s: %v\n%s", n, offered, r.out)
		}
	}
	r = kremedy(t, "lab", "break", "--help")
	for _, n := range lab.ScenariosFor(lab.KRaftMode) {
		if !regexp.MustCompile(regexp.QuoteMeta(n) + `\s+\[KRaft labs\]`).MatchString(r.out) {
			t.Errorf("lab break --help does not list %s as a KRaft scenario:\n%s", n, r.out)
		}
	}
}

// TestKRaftLab brings up, for each release, one KRaft-only lab (net 30+i;
// 3 controllers, 3 brokers) with the CLI, proves it is KRaft (no ZooKeeper
// process, a quorum of 3001–3003 with a leader, every broker registered and
// unfenced), round-trips a record, loads its inventory (mode: kraft), runs
// each KRaft scenario and checks its symptom with its own clients and on
// the disks, restoring the lab in between (lab up, lab controller start),
// and ends with `lab down` leaving no process.
func TestKRaftLab(t *testing.T) {
	needLab(t)
	for _, v := range kraftLabVersions() {
		if _, _, err := lab.ResolveKafkaHome("", v); err != nil {
			t.Fatalf("Kafka %s is not installed: %v (run `kremedy lab install --kafka-version %s`, or `make lab-install`)", v, err, v)
		}
	}
	t.Parallel()
	start := time.Now()
	for i, v := range kraftLabVersions() {
		t.Run("kafka-"+v, func(t *testing.T) { kraftLabOf(t, v, 30+i) })
	}
	t.Logf("FIGURE TestKRaftLab on %v took %.1fs", kraftLabVersions(), time.Since(start).Seconds())
}

func kraftLabOf(t *testing.T, v string, net int) {
	dir := filepath.Join(t.TempDir(), "lab")
	t.Cleanup(func() { _ = lab.Down(context.Background(), dir, false, &bytes.Buffer{}) })
	up := []string{"lab", "up", "--kraft", "--kafka-version", v, "--net", strconv.Itoa(net), "--dir", dir}
	if strings.HasPrefix(v, "4.") {
		// 3.9.2 rehearses a static quorum, 4.x a dynamic one (KIP-853:
		// what a new 4.x cluster is formatted as).
		up = append(up, "--kraft-quorum", lab.QuorumDynamic)
	}
	r := kremedy(t, up...)
	if r.code != 0 {
		t.Fatalf("lab up --kraft on %s: exit %d\n%s", v, r.code, r.out)
	}
	t.Logf("FIGURE lab up --kraft (new lab, Kafka %s) took %.1fs", v, r.took.Seconds())
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !l.State.KRaft() || l.State.Kafka != v || l.State.ClusterID == "" {
		t.Fatalf("lab.json: kraft %v, Kafka %s, cluster id %q", l.State.KRaft(), l.State.Kafka, l.State.ClusterID)
	}
	kc := connectLab(t, l).kc

	kraftIsKRaft(t, l, dir, kc)
	kraftRoundTrip(t, l, kc)
	kraftInventory(t, l)
	kraftKremedySees(t, l)
	t.Run("KafkaConformance on real Kafka", func(t *testing.T) {
		labConformance(t, l, labConformanceConfigs(v, true), labNoAuthorizer)
	})
	if r := kremedy(t, "lab", "status", "--dir", dir); r.code != 0 || !strings.Contains(r.out, "quorum leader") || strings.Contains(r.out, "DOWN") {
		t.Fatalf("lab status of a healthy KRaft lab: exit %d\n%s", r.code, r.out)
	}
	// Idempotent: on a running lab, up starts nothing.
	if r := kremedy(t, up...); r.code != 0 || strings.Contains(r.out, "started (pid") {
		t.Fatalf("lab up on a running KRaft lab: exit %d\n%s", r.code, r.out)
	}
	// A ZooKeeper scenario refuses the lab, naming why.
	if r := kremedy(t, "lab", "break", "ghost-topic", "--dir", dir); r.code != exitUsage || !strings.Contains(r.out, "runs KRaft with no ZooKeeper") {
		t.Fatalf("ghost-topic on a KRaft lab: exit %d\n%s", r.code, r.out)
	}

	kraftStrayLogs(t, l, kc)
	kraftMissingPartitionMetadata(t, l, kc)
	kraftStrayCleanup(t, l)
	kraftControllerDown(t, l, kc, dir)
	kraftQuorumLost(t, l, dir)
	kraftBrokerDown(t, l, kc, dir, up)
	kraftRollingRestart(t, l, kc, dir)

	// lab controller stop|start over SSH, by node.id and by number.
	q := kraftQuorum(t, l)
	if r := kremedy(t, "lab", "controller", "stop", strconv.Itoa(int(q.Leader)), "--dir", dir); r.code != 0 {
		t.Fatalf("lab controller stop %d: exit %d\n%s", q.Leader, r.code, r.out)
	}
	if q2 := kraftQuorum(t, l); q2.Leader == q.Leader || q2.Leader < 0 {
		t.Fatalf("leader %d stopped, the quorum's leader is now %d", q.Leader, q2.Leader)
	}
	if r := kremedy(t, "lab", "status", "--dir", dir); r.code != exitFailed || !strings.Contains(r.out, "DOWN controller") {
		t.Fatalf("lab status with a controller stopped: exit %d\n%s", r.code, r.out)
	}
	if r := kremedy(t, "lab", "controller", "start", strconv.Itoa(int(q.Leader-3000)), "--dir", dir); r.code != 0 || !strings.Contains(r.out, "caught-up voter") {
		t.Fatalf("lab controller start %d: exit %d\n%s", q.Leader-3000, r.code, r.out)
	}

	// Down leaves no process; up restarts the stopped lab from its disks.
	if r := kremedy(t, "lab", "down", "--dir", dir); r.code != 0 {
		t.Fatalf("lab down: exit %d\n%s", r.code, r.out)
	} else {
		t.Logf("FIGURE lab down (KRaft, Kafka %s) took %.1fs", v, r.took.Seconds())
	}
	if n := kraftLabProcs(dir, ""); n != 0 {
		t.Fatalf("lab down left %d processes", n)
	}
	r = kremedy(t, up...)
	if r.code != 0 || strings.Contains(r.out, "formatted") {
		t.Fatalf("lab up of a stopped KRaft lab: exit %d (it must not format again)\n%s", r.code, r.out)
	}
	t.Logf("FIGURE lab up --kraft (restart of a stopped lab, Kafka %s) took %.1fs", v, r.took.Seconds())
	kraftIsKRaft(t, l, dir, kc)
	if r := kremedy(t, "lab", "down", "--dir", dir, "--purge"); r.code != 0 || kraftLabProcs(dir, "") != 0 {
		t.Fatalf("lab down --purge: exit %d\n%s", r.code, r.out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("lab down --purge kept %s: %v", dir, err)
	}
}

// kraftLabProcs counts the live processes of the lab in dir whose command
// line also holds sub ("": any).
func kraftLabProcs(dir, sub string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
			continue
		}
		ours := bytes.Contains(cl, []byte("-Dkremedy.lab="+dir+"\x00")) || bytes.Contains(cl, []byte(filepath.Join(dir, "sshd")+"/"))
		if ours && bytes.Contains(cl, []byte(sub)) {
			n++
		}
	}
	return n
}

func kraftQuorum(t *testing.T, l *lab.Lab) ports.Quorum {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var q ports.Quorum
	var err error
	for ctx.Err() == nil {
		if q, err = l.Quorum(ctx); err == nil && q.Leader >= 0 {
			return q
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("DescribeQuorum: leader %d, %v", q.Leader, err)
	return q
}

// kraftIsKRaft: no ZooKeeper anywhere; a quorum of 3001–3003 with a
// leader; every broker registered and unfenced, configured as a KRaft
// broker; every node formatted with the lab's cluster id.
func kraftIsKRaft(t *testing.T, l *lab.Lab, dir string, kc *kafka.Client) {
	t.Helper()
	if n := kraftLabProcs(dir, "QuorumPeerMain"); n != 0 {
		t.Fatalf("a KRaft lab runs %d ZooKeeper processes", n)
	}
	if n := kraftLabProcs(dir, "kafka.Kafka"); n != 6 {
		t.Fatalf("%d Kafka JVMs, want 3 controllers and 3 brokers", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "zk")); !os.IsNotExist(err) {
		t.Fatalf("a KRaft lab has a zk/ directory: %v", err)
	}
	q := kraftQuorum(t, l)
	var voters []int32
	for _, vt := range q.Voters {
		voters = append(voters, vt.ID)
	}
	slices.Sort(voters)
	if !slices.Equal(voters, []int32{3001, 3002, 3003}) || !slices.Contains(voters, q.Leader) {
		t.Fatalf("quorum: leader %d, voters %v", q.Leader, voters)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := l.BrokerStates(ctx)
	if err != nil || !slices.Equal(st.Unfenced, []int32{1, 2, 3}) || len(st.Fenced) != 0 {
		t.Fatalf("brokers: %+v, %v", st, err)
	}
	for n := 1; n <= 3; n++ {
		b, _ := os.ReadFile(filepath.Join(l.BrokerDir(n), "server.properties"))
		if !strings.Contains(string(b), "process.roles=broker\n") || strings.Contains(string(b), "zookeeper.") {
			t.Fatalf("broker %d's server.properties is not a KRaft broker's:\n%s", n, b)
		}
		meta, _ := os.ReadFile(filepath.Join(l.LogDirs(n)[0], "meta.properties"))
		if !strings.Contains(string(meta), "cluster.id="+l.State.ClusterID) || !strings.Contains(string(meta), "node.id="+strconv.Itoa(n)) {
			t.Fatalf("broker %d's meta.properties:\n%s", n, meta)
		}
	}
	logCfg := "log4j.properties"
	if strings.HasPrefix(l.State.Kafka, "4.") {
		logCfg = "log4j2.properties"
	}
	if _, err := os.Stat(filepath.Join(l.BrokerDir(1), logCfg)); err != nil {
		t.Fatalf("Kafka %s logs through %s: %v", l.State.Kafka, logCfg, err)
	}
	if b, _ := os.ReadFile(filepath.Join(l.BrokerDir(1), "logs", "server.log")); !bytes.Contains(b, []byte("Kafka Server started")) {
		t.Fatalf("broker 1's server.log does not show it started (the logging backend works?):\n%s", lastLines(b, 10))
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// kraftRoundTrip produces and consumes one record with acks=all.
func kraftRoundTrip(t *testing.T, l *lab.Lab, kc *kafka.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kc.CreateTopic(ctx, "hello", nil, 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	kraftWaitServed(t, kc, "hello", 1)
	pr, err := kafka.NewProducer(l.State.Config.Bootstrap(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	want := "hello from " + l.State.Kafka
	if err := pr.Produce(ctx, "hello", 0, want); err != nil {
		t.Fatal(err)
	}
	got, err := kafka.ReadPartition(ctx, l.State.Config.Bootstrap(), "hello", 0)
	if err != nil || !slices.Equal(got, []string{want}) {
		t.Fatalf("read back %q, %v", got, err)
	}
}

// kraftInventory: the lab's inventory loads as a KRaft one.
func kraftInventory(t *testing.T, l *lab.Lab) {
	t.Helper()
	inv, err := inventory.Load(l.InventoryPath())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(l.InventoryPath())
	if inv.Mode != inventory.ModeKRaft || inv.ZooKeeper.Connect != "" || strings.Contains(string(b), "zookeeper:") {
		t.Fatalf("inventory: mode %q, zookeeper %q\n%s", inv.Mode, inv.ZooKeeper.Connect, b)
	}
	if len(inv.KRaftControllers) != 3 || len(inv.Brokers) != 3 {
		t.Fatalf("inventory: %d controllers, %d brokers", len(inv.KRaftControllers), len(inv.Brokers))
	}
	for i, c := range inv.KRaftControllers {
		if c.ID != lab.ControllerID(i+1) || c.Listener == "" || c.Config == "" || c.Stop == "" || c.Start == "" {
			t.Fatalf("controller %d: %+v", i+1, c)
		}
		if _, err := os.Stat(c.Config); err != nil {
			t.Fatalf("controller %d's config: %v", c.ID, err)
		}
	}
	for _, br := range inv.Brokers {
		if len(br.LogDirs) == 0 || br.Config == "" {
			t.Fatalf("broker %d: %+v", br.ID, br)
		}
	}
}

// strays lists broker n's -stray directories of topic, by its own glob.
func strays(t *testing.T, l *lab.Lab, n int32, topic string) []string {
	t.Helper()
	var out []string
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(topic) + `-\d+\.[0-9a-f]{32}-stray$`)
	for _, ld := range l.LogDirs(int(n)) {
		ents, _ := os.ReadDir(ld)
		for _, e := range ents {
			if re.MatchString(e.Name()) {
				out = append(out, filepath.Join(ld, e.Name()))
			}
		}
	}
	return out
}

func topicIDOnDisk(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "partition.metadata"))
	_, id, _ := strings.Cut(string(b), "topic_id: ")
	return strings.TrimSpace(id)
}

func serverLogHas(l *lab.Lab, n int32, s string) bool {
	b, _ := os.ReadFile(filepath.Join(l.BrokerDir(int(n)), "logs", "server.log"))
	return bytes.Contains(b, []byte(s))
}

func kraftStrayLogs(t *testing.T, l *lab.Lab, kc *kafka.Client) {
	t.Helper()
	rep := kraftBreak(t, l, "stray-logs", "orders")
	ss := strays(t, l, rep.Victim, "orders")
	if len(ss) != 3 {
		t.Fatalf("broker %d holds %d -stray directories of orders, want 3: %v", rep.Victim, len(ss), ss)
	}
	for _, s := range ss {
		if id := topicIDOnDisk(s); id != rep.OldID || id == rep.NewID {
			t.Fatalf("%s: topic id %q, want the old %s (new %s)", s, id, rep.OldID, rep.NewID)
		}
	}
	if !serverLogHas(l, rep.Victim, "marked stray and renamed to") {
		t.Fatalf("broker %d's server.log has no \"marked stray\" line", rep.Victim)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for p := int32(0); p < 3; p++ {
		vals, err := kafka.ReadPartition(ctx, l.State.Config.Bootstrap(), "orders", p)
		if err != nil || len(vals) != lab.MessagesPerPartition || !strings.HasPrefix(vals[0], "new ") {
			t.Fatalf("orders-%d reads %d records (%v): want only the %d new ones", p, len(vals), err, lab.MessagesPerPartition)
		}
	}
	t.Logf("stray-logs on %s: %s", l.State.Kafka, strings.Join(ss, ", "))
	d := kraftDiagnose(t, l, exitFailed, diagnose.FindStrayLogs)
	f := findingOf(d, diagnose.FindStrayLogs)
	if !slices.Contains(f.Brokers, rep.Victim) || !strings.Contains(strings.Join(f.Evidence, "\n"), "old topic id "+rep.OldID) || !strings.Contains(strings.Join(f.Evidence, "\n"), "is in sync on it") {
		t.Fatalf("the stray finding on Kafka %s: %+v", l.State.Kafka, f)
	}
}

func kraftMissingPartitionMetadata(t *testing.T, l *lab.Lab, kc *kafka.Client) {
	t.Helper()
	rep := kraftBreak(t, l, "missing-partition-metadata", "audit")
	ss := strays(t, l, rep.Victim, "audit")
	if len(ss) != 1 {
		t.Fatalf("broker %d holds %v, want one -stray directory of audit", rep.Victim, ss)
	}
	if _, err := os.Stat(filepath.Join(ss[0], "partition.metadata")); !os.IsNotExist(err) {
		t.Fatalf("%s has a partition.metadata: %v", ss[0], err)
	}
	live := strings.SplitN(filepath.Base(ss[0]), ".", 2)[0]
	if id := topicIDOnDisk(filepath.Join(filepath.Dir(ss[0]), live)); id != rep.OldID {
		t.Fatalf("the recreated %s has topic id %q, want %s", live, id, rep.OldID)
	}
	t.Logf("missing-partition-metadata on %s: %s", l.State.Kafka, ss[0])
	if f := findingOf(kraftDiagnose(t, l, exitFailed, diagnose.FindStrayLogs), diagnose.FindStrayLogs); !strings.Contains(strings.Join(f.Evidence, "\n"), ss[0]+": ") || !strings.Contains(strings.Join(f.Evidence, "\n"), "none (no partition.metadata)") {
		t.Fatalf("the stray finding does not name %s without partition.metadata: %+v", ss[0], f)
	}
}

func kraftControllerDown(t *testing.T, l *lab.Lab, kc *kafka.Client, dir string) {
	t.Helper()
	rep := kraftBreak(t, l, "controller-down", "probe")
	k := int(rep.Victim - 3000)
	if l.ControllerPID(k) != 0 {
		t.Fatalf("controller %d still runs", rep.Victim)
	}
	q := kraftQuorum(t, l)
	now := time.Now()
	for _, v := range q.Voters {
		since := now.Sub(time.UnixMilli(v.LastCaughtUpMs))
		if v.ID == rep.Victim && v.LastCaughtUpMs > 0 && since < 2*time.Second || v.ID != rep.Victim && v.ID != q.Leader && since > 5*time.Second {
			t.Fatalf("quorum after killing %d: voter %d last caught up %d (leader %d)", rep.Victim, v.ID, v.LastCaughtUpMs, q.Leader)
		}
	}
	if q.Leader == rep.Victim || len(q.Voters) != 3 {
		t.Fatalf("quorum: leader %d, %d voters", q.Leader, len(q.Voters))
	}
	f := findingOf(kraftDiagnose(t, l, exitFailed, diagnose.FindQuorumMargin), diagnose.FindQuorumMargin)
	if f.Severity != diagnose.Critical || !slices.Equal(f.Brokers, []int32{rep.Victim}) || !strings.Contains(f.Summary, "tolerates 0 more lost") {
		t.Fatalf("the quorum finding with controller %d killed: %+v", rep.Victim, f)
	}
	if r := kremedy(t, "lab", "controller", "start", strconv.Itoa(int(rep.Victim)), "--dir", dir); r.code != 0 {
		t.Fatalf("lab controller start %d: exit %d\n%s", rep.Victim, r.code, r.out)
	}
}

// kraftQuorumLost stops two of the three voters (the followers, over
// SSH): the survivor cannot stay or become leader, and diagnose names the
// quorum lost, voter by voter, with the two logs whole on disk — so its fix
// is to start them, which the test does and the quorum elects a leader.
func kraftQuorumLost(t *testing.T, l *lab.Lab, dir string) {
	t.Helper()
	q := kraftQuorum(t, l)
	var stopped []int32
	for _, v := range q.Voters {
		if v.ID != q.Leader {
			stopped = append(stopped, v.ID)
		}
	}
	slices.Sort(stopped)
	for _, id := range stopped {
		if r := kremedy(t, "lab", "controller", "stop", strconv.Itoa(int(id)), "--dir", dir); r.code != 0 {
			t.Fatalf("lab controller stop %d: exit %d\n%s", id, r.code, r.out)
		}
	}
	f := findingOf(kraftDiagnose(t, l, exitFailed, diagnose.FindQuorumLost), diagnose.FindQuorumLost)
	all := f.Summary + "\n" + strings.Join(f.Evidence, "\n") + "\n" + f.Fix
	for _, want := range []string{
		"1 of the 3 voters", quorumKind(l),
		fmt.Sprintf("start controllers %v with their metadata logs as they are", stopped),
		fmt.Sprintf("controller %d (", q.Leader), "accepts connections", "quorum-state: leader",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the quorum-lost finding (Kafka %s) does not say %q:\n%s", l.State.Kafka, want, all)
		}
	}
	if f.Severity != diagnose.Critical || !slices.Equal(f.Brokers, stopped) {
		t.Errorf("quorum-lost: severity %s, controllers %v; want critical naming %v", f.Severity, f.Brokers, stopped)
	}
	for _, id := range stopped {
		if r := kremedy(t, "lab", "controller", "start", strconv.Itoa(int(id)), "--dir", dir); r.code != 0 {
			t.Fatalf("lab controller start %d after the quorum was lost: exit %d\n%s", id, r.code, r.out)
		}
	}
	if q2 := kraftQuorum(t, l); q2.Leader < 0 || len(q2.Voters) != 3 {
		t.Fatalf("after starting %v again: leader %d, voters %+v", stopped, q2.Leader, q2.Voters)
	}
	t.Logf("FIGURE quorum-lost: diagnose named controllers %v of Kafka %s's quorum (dynamic: %v)", stopped, l.State.Kafka, l.State.Config.DynamicQuorum())
}

// quorumKind is how the quorum-lost finding names the lab's quorum.
func quorumKind(l *lab.Lab) string {
	if l.State.Config.DynamicQuorum() {
		return "a dynamic quorum: controller 3001's config sets controller.quorum.bootstrap.servers and no voters"
	}
	return "a static quorum: controller.quorum.voters on controller 3001 names [3001 3002 3003]"
}

func kraftBrokerDown(t *testing.T, l *lab.Lab, kc *kafka.Client, dir string, up []string) {
	t.Helper()
	rep := kraftBreak(t, l, "broker-down", "payments")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := l.BrokerStates(ctx)
	if err != nil || slices.Contains(st.Unfenced, rep.Victim) {
		t.Fatalf("broker %d stopped, yet unfenced: %+v %v", rep.Victim, st, err)
	}
	if st.SeesFenced != strings.HasPrefix(l.State.Kafka, "4.") || st.SeesFenced && !slices.Contains(st.Fenced, rep.Victim) {
		t.Fatalf("Kafka %s: DescribeCluster fenced %v (v2: %v)", l.State.Kafka, st.Fenced, st.SeesFenced)
	}
	v, err := kc.BrokerView(ctx, 1, "payments")
	if err != nil {
		t.Fatal(err)
	}
	for p, pv := range v.Topics["payments"].Partitions {
		if slices.Contains(pv.ISR, rep.Victim) || len(pv.ISR) != 2 {
			t.Fatalf("payments-%d: isr %v with broker %d down", p, pv.ISR, rep.Victim)
		}
	}
	d := kraftDiagnose(t, l, exitFailed)
	var cause *diagnose.Finding
	for _, c := range d.Causes() {
		// Stopped: down, though on 4.x its registration outlives it, fenced.
		if c.Kind == diagnose.FindBrokerDown && slices.Equal(c.Brokers, []int32{rep.Victim}) {
			cause = &c
		}
	}
	if cause == nil || len(d.Explained(cause.ID)) == 0 {
		t.Fatalf("broker %d stopped: no broker-down cause explaining its partitions: %+v", rep.Victim, d.Findings)
	}
	r := kremedy(t, up...)
	if r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("broker    %d", rep.Victim)) {
		t.Fatalf("lab up after broker-down: exit %d\n%s", r.code, r.out)
	}
	t.Logf("FIGURE lab up --kraft (restarting one stopped broker, Kafka %s) took %.1fs", l.State.Kafka, r.took.Seconds())
}

// kraftKremedySees: kremedy reaches every part of the lab's KRaft inventory
// (inventory check), diagnoses the healthy lab clean, and writes an
// inventory from the running cluster that passes the same check.
func kraftKremedySees(t *testing.T, l *lab.Lab) {
	t.Helper()
	if r := kremedy(t, "inventory", "check", "--inventory", l.InventoryPath()); r.code != 0 || strings.Contains(r.out, "zookeeper") {
		t.Fatalf("inventory check of the KRaft lab: exit %d\n%s", r.code, r.out)
	}
	if d := kraftDiagnose(t, l, 0); !d.Healthy || len(d.Findings) != 0 || d.Quorum == nil || d.Quorum.Leader < 3001 {
		t.Fatalf("diagnose of the healthy KRaft lab: %+v", d)
	}
	inv, err := inventory.Load(l.InventoryPath())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "init.yaml")
	r := kremedy(t, "inventory", "init", "--bootstrap", inv.Kafka.Bootstrap[0], "--ssh-user", inv.SSH.User, "--ssh-port", strconv.Itoa(inv.SSH.Port),
		"--identity-file", inv.SSH.IdentityFile, "--known-hosts", inv.SSH.KnownHosts, "--ssh-config", "none", "--name", inv.Name, "-o", out)
	if r.code != 0 {
		t.Fatalf("inventory init --bootstrap on the KRaft lab: exit %d\n%s", r.code, r.out)
	}
	got, err := inventory.Load(out)
	if err != nil || !got.KRaft() || len(got.Brokers) != 3 || len(got.KRaftControllers) != 3 {
		t.Fatalf("inventory init wrote %+v, %v", got, err)
	}
	if r := kremedy(t, "inventory", "check", "--inventory", out); r.code != 0 {
		t.Fatalf("inventory check of what init wrote: exit %d\n%s", r.code, r.out)
	}
}

// kraftDiagnose runs `kremedy diagnose --json` with the lab's inventory,
// wants exit code and, among the findings, each kind of want.
func kraftDiagnose(t *testing.T, l *lab.Lab, code int, want ...string) *diagnose.Diagnosis {
	t.Helper()
	r := kremedy(t, "diagnose", "--inventory", l.InventoryPath(), "--json")
	var d diagnose.Diagnosis
	i := strings.Index(r.out, "{")
	if i < 0 || json.Unmarshal([]byte(r.out[i:strings.LastIndex(r.out, "}")+1]), &d) != nil || r.code != code {
		t.Fatalf("diagnose of the KRaft lab: exit %d, want %d\n%s", r.code, code, r.out)
	}
	for _, k := range want {
		if findingOf(&d, k) == nil {
			t.Fatalf("diagnose of the KRaft lab (Kafka %s) has no %s finding: %+v", l.State.Kafka, k, d.Findings)
		}
	}
	for _, f := range d.Findings {
		if strings.Contains(f.Summary+strings.Join(f.Evidence, " "), "__cluster_metadata") && f.Kind != diagnose.FindQuorumLost {
			t.Fatalf("a finding about Kafka's own metadata log: %+v", f)
		}
	}
	t.Logf("FIGURE kremedy diagnose of the KRaft lab (Kafka %s) took %s: %d findings", l.State.Kafka, d.Took, len(d.Findings))
	return &d
}

func findingOf(d *diagnose.Diagnosis, kind string) *diagnose.Finding {
	for i := range d.Findings {
		if d.Findings[i].Kind == kind {
			return &d.Findings[i]
		}
	}
	return nil
}

// kraftBreak runs a scenario through the CLI's engine (lab.Scenarios) and
// logs its report.
func kraftBreak(t *testing.T, l *lab.Lab, scenario, topic string) *lab.Report {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := lab.Scenarios[scenario].Run(ctx, l, topic, &out)
	if rep != nil {
		rep.Print(&out)
	}
	if err != nil {
		t.Fatalf("%s on Kafka %s: %v\n%s", scenario, l.State.Kafka, err, out.String())
	}
	t.Logf("FIGURE scenario %s on KRaft %s took %.1fs\n%s", scenario, l.State.Kafka, time.Since(start).Seconds(), out.String())
	return rep
}
