package lab_test

// The lab tests start real ZooKeeper ensembles, Kafka 3.9 brokers and
// OpenSSH servers on loopback and prove each scenario's symptom with real
// clients. They need Java, /usr/sbin/sshd and the Kafka jars
// (`make lab-install`); when something is missing they FAIL with what to
// install — they never skip, except under `go test -short`.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

var kremedyBin string

// buildFlags are the go build flags of the binary the lab tests run.
var buildFlags []string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kremedy-bin-")
	if err != nil {
		panic(err)
	}
	kremedyBin = filepath.Join(dir, "kremedy")
	if out, err := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", kremedyBin, "../cmd/kremedy")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build kremedy: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireParts fails (never skips) when the lab cannot run here.
func requireParts(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("lab test: needs real ZooKeeper/Kafka/sshd; runs without -short")
	}
	if _, _, err := lab.ResolveKafkaHome("", ""); err != nil {
		t.Fatalf("lab parts missing: %v (run `make lab-install`)", err)
	}
	if _, err := lab.FindJava(); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.FindSSHD(); err != nil {
		t.Fatal(err)
	}
}

type run struct {
	out  string
	code int
	took time.Duration
}

func kremedy(t *testing.T, args ...string) run {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(kremedyBin, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	r := run{out: buf.String(), took: time.Since(start)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kremedy %v: %v", args, err)
	}
	return r
}

func mustKremedy(t *testing.T, args ...string) run {
	t.Helper()
	r := kremedy(t, args...)
	if r.code != 0 {
		t.Fatalf("kremedy %s: exit %d\n%s", strings.Join(args, " "), r.code, r.out)
	}
	return r
}

// labRSS sums the resident memory of every process of the lab in dir.
func labRSS(t *testing.T, dir string) (kib int64, procs int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !bytes.Contains(cl, []byte("-Dkremedy.lab="+dir+"\x00")) && !bytes.Contains(cl, []byte(filepath.Join(dir, "sshd"))) {
			continue
		}
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				kib += n
				procs++
			}
		}
	}
	return kib, procs
}

func labProcs(dir string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
			continue
		}
		if bytes.Contains(cl, []byte("-Dkremedy.lab="+dir+"\x00")) || bytes.Contains(cl, []byte(filepath.Join(dir, "sshd")+"/")) {
			n++
		}
	}
	return n
}

type clients struct {
	l  *lab.Lab
	zk *zookeeper.Conn
	kc *kafka.Client
}

func connect(t *testing.T, dir string) *clients {
	t.Helper()
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	zc, err := zookeeper.Dial(ctx, l.State.Config.ZKConnect(), zookeeper.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kafka.New(l.State.Config.Bootstrap())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zc.Close(); kc.Close() })
	return &clients{l: l, zk: zc, kc: kc}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func breakLab(t *testing.T, dir, scenario, topic string) *lab.Report {
	t.Helper()
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	start := time.Now()
	rep, err := lab.Scenarios[scenario].Run(ctxT(t, 4*time.Minute), l, topic, &out)
	if rep != nil {
		rep.Print(&out)
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", scenario, err, out.String())
	}
	t.Logf("FIGURE scenario %s took %.1fs\n%s", scenario, time.Since(start).Seconds(), out.String())
	return rep
}

func (c *clients) registered(t *testing.T) []int32 {
	ids, err := c.zk.BrokerIDs(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestLab runs one default lab (IBP 3.9, topic IDs) through its life:
// up, idempotent up, repair of a half-started lab, refusals, SSH broker
// control, the stuck-delete, ghost-topic and stale-metadata scenarios, down.
func TestLab(t *testing.T) {
	requireParts(t)
	dir := filepath.Join(t.TempDir(), "lab")
	const net = "9"
	t.Cleanup(func() {
		if labProcs(dir) > 0 {
			kremedy(t, "lab", "down", "--dir", dir)
		}
	})

	r := mustKremedy(t, "lab", "up", "--dir", dir, "--net", net)
	kib, procs := labRSS(t, dir)
	t.Logf("FIGURE lab up (3 ZooKeeper, 3 brokers, 3 sshd) wall time %.1fs; lab RSS %.0f MiB over %d processes", r.took.Seconds(), float64(kib)/1024, procs)
	c := connect(t, dir)
	if got := c.registered(t); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("registered brokers %v after lab up", got)
	}
	for _, f := range []string{"inventory.yaml", "known_hosts", "id_ed25519"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("lab up did not write %s: %v", f, err)
		}
	}
	inv, _ := os.ReadFile(filepath.Join(dir, "inventory.yaml"))
	for _, want := range []string{"127.9.2.1:2181,127.9.2.2:2181,127.9.2.3:2181/kafka", "127.9.1.3:9092", "known_hosts", "kafka-stop"} {
		if !bytes.Contains(inv, []byte(want)) {
			t.Fatalf("inventory lacks %q:\n%s", want, inv)
		}
	}

	t.Run("status", func(t *testing.T) {
		r := mustKremedy(t, "lab", "status", "--dir", dir)
		if strings.Contains(r.out, "DOWN") || !strings.Contains(r.out, "controller") {
			t.Fatalf("status of a healthy lab:\n%s", r.out)
		}
	})

	t.Run("up is idempotent and repairs a half-started lab", func(t *testing.T) {
		r := mustKremedy(t, "lab", "up", "--dir", dir)
		if strings.Contains(r.out, "started (pid") {
			t.Fatalf("second lab up restarted parts:\n%s", r.out)
		}
		// Kill ZooKeeper node 3 and broker 2 outright: a half-started lab.
		// Both markers: other packages' tests run labs of their own at the same time.
		zkPid := pidOf(t, "-Dkremedy.lab="+dir, "-Dkremedy.lab.zk=3")
		bPid := pidOf(t, "-Dkremedy.lab="+dir, "-Dkremedy.lab.broker="+filepath.Join(dir, "broker", "2"))
		_ = exec.Command("kill", "-9", strconv.Itoa(zkPid), strconv.Itoa(bPid)).Run()
		if kremedy(t, "lab", "status", "--dir", dir).code != 1 {
			t.Fatal("lab status exits 0 with a broker and a ZooKeeper node killed")
		}
		r = mustKremedy(t, "lab", "up", "--dir", dir)
		if !strings.Contains(r.out, "zookeeper 3") || !strings.Contains(r.out, "broker    2") {
			t.Fatalf("lab up did not restart the killed parts:\n%s", r.out)
		}
		if got := c.registered(t); !slices.Equal(got, []int32{1, 2, 3}) {
			t.Fatalf("registered %v after repair", got)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		r := kremedy(t, "lab", "up", "--dir", dir, "--brokers", "4")
		if r.code != 2 || !strings.Contains(r.out, "--brokers 4 (the lab has 3)") {
			t.Fatalf("changed settings: exit %d\n%s", r.code, r.out)
		}
		other := filepath.Join(t.TempDir(), "other")
		r = kremedy(t, "lab", "up", "--dir", other, "--net", net)
		if r.code != 2 || !strings.Contains(r.out, "already in use") {
			t.Fatalf("second lab on taken addresses: exit %d\n%s", r.code, r.out)
		}
		if n := labProcs(other); n != 0 {
			t.Fatalf("a refused lab up left %d processes", n)
		}
		r = kremedy(t, "lab", "break", "ghost-topic", "--dir", dir, "--topic", "a;rm -rf /")
		if r.code != 2 || !strings.Contains(r.out, "invalid topic") {
			t.Fatalf("hostile topic: exit %d\n%s", r.code, r.out)
		}
		r = kremedy(t, "lab", "break", "reused-segments", "--dir", dir, "--topic", "x")
		if r.code != 2 || !strings.Contains(r.out, "--ibp 2.7") {
			t.Fatalf("reused-segments on an IBP 3.9 lab: exit %d\n%s", r.code, r.out)
		}
	})

	t.Run("broker stop and start over SSH", func(t *testing.T) {
		r := mustKremedy(t, "lab", "broker", "stop", "2", "--dir", dir)
		if !strings.Contains(r.out, "stopping kafka broker 2") || !strings.Contains(r.out, "gone from ZooKeeper") {
			t.Fatalf("stop output:\n%s", r.out)
		}
		if got := c.registered(t); slices.Contains(got, 2) {
			t.Fatalf("broker 2 still registered after stop: %v", got)
		}
		if listening("127.9.1.2:9092") {
			t.Fatal("broker 2's port still open after stop")
		}
		r = mustKremedy(t, "lab", "broker", "start", "2", "--dir", dir)
		if !strings.Contains(r.out, "registered in ZooKeeper") {
			t.Fatalf("start output:\n%s", r.out)
		}
		if got := c.registered(t); !slices.Contains(got, 2) {
			t.Fatalf("broker 2 not registered after start: %v", got)
		}
	})

	t.Run("stuck-delete", func(t *testing.T) {
		const topic = "invoices"
		rep := breakLab(t, dir, "stuck-delete", topic)
		ctx := ctxT(t, time.Minute)
		names, err := c.kc.ListTopics(ctx)
		if err != nil || slices.Contains(names, topic) {
			t.Fatalf("topic list %v (%v) still has %s", names, err, topic)
		}
		for _, p := range []string{kafkazk.DeleteTopicsPath + "/" + topic, kafkazk.TopicPath(topic)} {
			if ok, _, err := c.zk.Exists(ctx, p); err != nil || !ok {
				t.Fatalf("%s exists=%v err=%v; want a pending deletion", p, ok, err)
			}
		}
		_, err = c.kc.CreateTopic(ctx, topic, [][]int32{{1, 2, 3}}, 0, 0, nil)
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Fatalf("recreate during a stuck deletion: %v", err)
		}
		if got := c.registered(t); slices.Contains(got, rep.Victim) {
			t.Fatalf("victim %d registered; stuck-delete should leave it down", rep.Victim)
		}
		// kremedy diagnose sees it, read-only, and names the missing broker.
		d := kremedy(t, "diagnose", "--inventory", filepath.Join(dir, "inventory.yaml"), "--topic", topic, "--json")
		var diag struct {
			Findings []struct {
				Kind    string  `json:"kind"`
				Brokers []int32 `json:"brokers"`
			} `json:"findings"`
		}
		// Two causes: the deletion that cannot finish, and the broker that is
		// down (which is why it cannot).
		kinds := map[string][]int32{}
		if i := strings.Index(d.out, "{"); d.code == 1 && i >= 0 && json.Unmarshal([]byte(d.out[i:strings.LastIndex(d.out, "}")+1]), &diag) == nil {
			for _, f := range diag.Findings {
				kinds[f.Kind] = f.Brokers
			}
		}
		if len(kinds) != 2 || !slices.Equal(kinds["stuck-deletion"], []int32{rep.Victim}) || !slices.Equal(kinds["broker-down"], []int32{rep.Victim}) {
			t.Fatalf("diagnose of a stuck deletion: exit %d\n%s", d.code, d.out)
		}
		// Starting the broker again lets the deletion finish: the lab heals.
		mustKremedy(t, "lab", "broker", "start", strconv.Itoa(int(rep.Victim)), "--dir", dir)
		if err := c.zk.WaitExists(ctxT(t, time.Minute), kafkazk.DeleteTopicsPath+"/"+topic, false); err != nil {
			t.Fatalf("deletion did not complete after broker %d returned: %v", rep.Victim, err)
		}
	})

	t.Run("ghost-topic", func(t *testing.T) {
		// reused-segments is the same story on a lab that adopts a stale
		// directory; this one (3.9, topic IDs) refuses it and says why.
		if r := kremedy(t, "lab", "break", "reused-segments", "--dir", dir, "--topic", "x"); r.code != 2 || !strings.Contains(r.out, "ghost-topic") {
			t.Fatalf("reused-segments on a 3.9 lab: exit %d\n%s", r.code, r.out)
		}
		const topic = "orders"
		rep := breakLab(t, dir, "ghost-topic", topic)
		ctx := ctxT(t, 2*time.Minute)
		v := rep.Victim
		z, _, err := c.zk.Topic(ctx, topic)
		if err != nil || z.TopicID == "" || z.TopicID == rep.OldID {
			t.Fatalf("recreated znode %+v err=%v old id %s", z, err, rep.OldID)
		}
		// The stale broker's directories keep the old ID.
		for _, ld := range c.l.LogDirs(int(v)) {
			ents, _ := os.ReadDir(ld)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), topic+"-") && !strings.HasPrefix(e.Name(), topic+"-v2") {
					b, _ := os.ReadFile(filepath.Join(ld, e.Name(), "partition.metadata"))
					if !bytes.Contains(b, []byte(rep.OldID)) {
						t.Fatalf("%s/partition.metadata = %q, want old id %s", e.Name(), b, rep.OldID)
					}
				}
			}
		}
		var sawNotLeader, sawURP bool
		for p, reps := range rep.Assign {
			switch {
			case reps[0] == v:
				_, err := c.kc.ListOffsetsAt(ctx, v, topic, int32(p), -1)
				sawNotLeader = errors.Is(err, kerr.NotLeaderForPartition)
				if !sawNotLeader {
					t.Errorf("partition %d led by stale broker %d: ListOffsets err %v, want NOT_LEADER_OR_FOLLOWER", p, v, err)
				}
			case slices.Contains(reps, v):
				st, _, err := c.zk.PartitionStateOf(ctx, topic, int32(p))
				if err != nil {
					t.Fatal(err)
				}
				view, err := c.kc.BrokerView(ctx, st.Leader, topic)
				if err != nil {
					t.Fatal(err)
				}
				pv := view.Topics[topic].Partitions[int32(p)]
				if slices.Contains(pv.ISR, v) {
					t.Errorf("partition %d: stale broker %d still in ISR %v", p, v, pv.ISR)
				} else {
					sawURP = true
				}
			}
		}
		if !sawNotLeader || !sawURP {
			t.Fatalf("symptoms: NotLeaderOrFollower %v, under-replicated %v", sawNotLeader, sawURP)
		}
		// The bystander sharing the prefix is intact on every partition.
		for p := range rep.Assign {
			vals, err := kafka.ReadPartition(ctxT(t, 20*time.Second), c.l.State.Config.Bootstrap(), rep.Bystander, int32(p))
			if err != nil || len(vals) != lab.MessagesPerPartition {
				t.Fatalf("bystander %s-%d: %d records, %v", rep.Bystander, p, len(vals), err)
			}
		}
	})

	t.Run("stale-metadata via the CLI", func(t *testing.T) {
		const topic = "payments"
		r := mustKremedy(t, "lab", "break", "stale-metadata", "--dir", dir, "--topic", topic)
		t.Logf("FIGURE scenario stale-metadata (CLI) took %.1fs\n%s", r.took.Seconds(), r.out)
		ctx := ctxT(t, time.Minute)
		if ok, _, _ := c.zk.Exists(ctx, kafkazk.TopicPath(topic)); ok {
			t.Fatal("topic znode still present")
		}
		var knows, forgot []int32
		for _, id := range []int32{1, 2, 3} {
			v, err := c.kc.BrokerView(ctx, id, topic)
			if err != nil {
				t.Fatal(err)
			}
			if v.Topics[topic].Present() {
				knows = append(knows, id)
			} else if v.Topics[topic].Gone() {
				forgot = append(forgot, id)
			}
		}
		if len(knows) != 2 || len(forgot) != 1 {
			t.Fatalf("brokers that list %s: %v, that answer UNKNOWN_TOPIC_OR_PARTITION: %v; want 2 and 1", topic, knows, forgot)
		}
	})

	t.Run("down leaves nothing running", func(t *testing.T) {
		r := mustKremedy(t, "lab", "down", "--dir", dir)
		t.Logf("FIGURE lab down took %.1fs", r.took.Seconds())
		if n := labProcs(dir); n != 0 {
			t.Fatalf("%d lab processes left after down", n)
		}
		for _, a := range []string{"127.9.1.1:9092", "127.9.1.1:2222", "127.9.2.1:2181"} {
			if listening(a) {
				t.Fatalf("%s still listening after down", a)
			}
		}
		r = mustKremedy(t, "lab", "down", "--dir", dir, "--purge")
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("purge left %s: %v", dir, err)
		}
	})
}

// TestLabIBP27 proves reused-segments on a pre-2.8 lab: the recreated topic
// adopts the old segments and a consumer of the new topic reads old data.
func TestLabIBP27(t *testing.T) {
	requireParts(t)
	dir := filepath.Join(t.TempDir(), "lab27")
	t.Cleanup(func() {
		if labProcs(dir) > 0 {
			kremedy(t, "lab", "down", "--dir", dir)
		}
	})
	r := mustKremedy(t, "lab", "up", "--dir", dir, "--net", "10", "--ibp", "2.7", "--zookeepers", "1")
	t.Logf("FIGURE lab up --ibp 2.7 --zookeepers 1 wall time %.1fs", r.took.Seconds())
	c := connect(t, dir)
	const topic = "orders"
	rep := breakLab(t, dir, "reused-segments", topic)
	z, zst, err := c.zk.Topic(ctxT(t, 10*time.Second), topic)
	if err != nil || z.TopicID != "" {
		t.Fatalf("IBP 2.7 topic znode %+v (%v): want no topic_id", z, err)
	}
	var checked int
	for p, reps := range rep.Assign {
		if reps[0] != rep.Victim {
			continue
		}
		vals, err := kafka.ReadPartition(ctxT(t, 30*time.Second), c.l.State.Config.Bootstrap(), topic, int32(p))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("old message 0 of %s-%d", topic, p)
		if len(vals) != lab.MessagesPerPartition || vals[0] != want {
			t.Fatalf("new %s-%d reads %d records (first %q); want the %d old ones starting %q", topic, p, len(vals), first(vals), lab.MessagesPerPartition, want)
		}
		seg := filepath.Join(c.l.LogDirs(int(rep.Victim))[0], fmt.Sprintf("%s-%d", topic, p), "00000000000000000000.log")
		fi, err := os.Stat(seg)
		if err != nil || !fi.ModTime().Before(zst.Ctime) {
			t.Fatalf("segment %s (%v) should predate the new znode (%s)", seg, err, zst.Ctime)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no partition led by the returning broker")
	}
	mustKremedy(t, "lab", "down", "--dir", dir, "--purge")
	if n := labProcs(dir); n != 0 {
		t.Fatalf("%d processes left", n)
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func pidOf(t *testing.T, markers ...string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		all := true
		for _, m := range markers {
			all = all && bytes.Contains(cl, []byte(m+"\x00"))
		}
		if all {
			return pid
		}
	}
	t.Fatalf("no process with %v", markers)
	return 0
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
