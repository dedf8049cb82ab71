package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafka"
)

// TestSecureKRaftLab brings up one secured KRaft lab (`lab up --kraft
// --secure --kraft-quorum dynamic`, Kafka 4.1.2, net 71: a dynamic quorum
// as 4.x formats one, brokers on SASL_SSL with SCRAM-SHA-512
// and TLS from the lab CA, StandardAuthorizer with ACLs, controllers on
// SASL_SSL with PLAIN, SCRAM users made at format time, every node run by
// the service user, SSH as the operator through sudo) and proves on it,
// through the CLI and its inventory alone: the lab is what it says (the
// service user runs every node; no credentials, no entry; the intruder is
// denied, the app user allowed); `inventory check` passes; `diagnose` is
// clean; `kraft-rolling-restart` rolls every node under a SCRAM acks=all
// idempotent producer with no failed send; `lab break stray-logs` then
// `run stray-cleanup` leaves no stray and diagnose clean; the quorum
// runbooks through the controllers' secured listener and sudo
// (secureKRaftQuorum). Then the same net runs the Kerberized variant
// (secureKRaftKerberos).
func TestSecureKRaftLab(t *testing.T) {
	needSecureLab(t)
	if _, _, err := lab.ResolveKafkaHome("", "4.1.2"); err != nil {
		t.Fatalf("Kafka 4.1.2 is not installed: %v (run `kremedy lab install --kafka-version 4.1.2`)", err)
	}
	t.Parallel()
	dir := filepath.Join(openTempDir(t), "lab")
	t.Cleanup(func() { _ = lab.Down(context.Background(), dir, false, io.Discard) })
	t.Cleanup(func() { keepLogs(t, dir) })
	r := kremedy(t, "lab", "up", "--kraft", "--secure", "--kraft-quorum", "dynamic", "--kafka-version", "4.1.2", "--net", "71", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.out, "StandardAuthorizer") || !strings.Contains(r.out, "no ZooKeeper") {
		t.Fatalf("lab up --kraft --secure: exit %d\n%s", r.code, r.out)
	}
	t.Logf("FIGURE lab up --kraft --secure (new lab, Kafka 4.1.2) took %.1fs", r.took.Seconds())
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := connectLab(t, l)
	t.Run("secured", func(t *testing.T) { secureKRaftIsSecured(t, l, c.kc) })
	t.Run("inventory check", func(t *testing.T) {
		r := kremedy(t, "inventory", "check", "--inventory", l.InventoryPath())
		if r.code != 0 || !strings.Contains(r.out, "sudo -n works") || !strings.Contains(r.out, "metadata quorum") || !strings.Contains(r.out, "accepted by the brokers") {
			t.Fatalf("inventory check: exit %d\n%s", r.code, r.out)
		}
	})
	t.Run("diagnose", func(t *testing.T) {
		if d := kraftDiagnose(t, l, 0); len(d.Findings) != 0 {
			t.Fatalf("diagnose of the new secured KRaft lab: %+v", d.Findings)
		}
	})
	t.Run("kraft-rolling-restart", func(t *testing.T) { secureKRaftRoll(t, l, c.kc) })
	t.Run("stray-cleanup", func(t *testing.T) { secureKRaftStrays(t, l, dir) })
	t.Run("quorum runbooks", func(t *testing.T) { secureKRaftQuorum(t, l) })
	// The Kerberized variant on the same net (this lab goes first) is a
	// second lab of minutes: the heavy target runs it (make test-versions);
	// make test keeps the SCRAM one above and TestKerberosLab's ZooKeeper
	// mode, within CI's budget.
	if os.Getenv("KREMEDY_LAB_HEAVY") == "" {
		t.Log("the Kerberized KRaft variant (lab up --kraft --secure --kerberos) runs in `make test-versions` (KREMEDY_LAB_HEAVY=1)")
		return
	}
	if err := lab.Down(context.Background(), dir, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Run("kerberos", secureKRaftKerberos)
}

// secureKRaftKerberos: `lab up --kraft --secure --kerberos` (one controller,
// to keep it short): the brokers speak GSSAPI between themselves, kremedy
// logs in with the operator's keytab; `inventory check` and `diagnose` pass
// through it, a topic of replication factor 3 is served with its whole ISR
// (the brokers replicate over Kerberos), the app user's SCRAM still writes.
func secureKRaftKerberos(t *testing.T) {
	dir := filepath.Join(openTempDir(t), "lab")
	t.Cleanup(func() { _ = lab.Down(context.Background(), dir, false, io.Discard) })
	t.Cleanup(func() { keepLogs(t, dir) })
	r := kremedy(t, "lab", "up", "--kraft", "--secure", "--kerberos", "--kraft-controllers", "1", "--kafka-version", "4.1.2", "--net", "71", "--dir", dir)
	if r.code != 0 || !strings.Contains(r.out, "kdc ") {
		t.Fatalf("lab up --kraft --secure --kerberos: exit %d\n%s", r.code, r.out)
	}
	t.Logf("FIGURE lab up --kraft --secure --kerberos (new lab, 1 controller) took %.1fs", r.took.Seconds())
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	props, _ := os.ReadFile(l.ClientProperties())
	server, _ := os.ReadFile(filepath.Join(l.BrokerDir(1), "server.properties"))
	if !strings.Contains(string(props), "sasl.mechanism=GSSAPI") || !strings.Contains(string(server), "sasl.mechanism.inter.broker.protocol=GSSAPI") ||
		!strings.Contains(string(server), "StandardAuthorizer") || l.Inventory().Kafka.Krb5Conf != l.Krb5Conf() {
		t.Fatalf("not a Kerberized KRaft lab:\n%s\n%s", props, server)
	}
	if r := kremedy(t, "inventory", "check", "--inventory", l.InventoryPath()); r.code != 0 || !strings.Contains(r.out, "accepted by the brokers") {
		t.Fatalf("inventory check with the operator's keytab: exit %d\n%s", r.code, r.out)
	}
	kc := connectLab(t, l).kc
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = lab.AppPrefix + "-krb"
	if _, err := kc.CreateTopic(ctx, topic, nil, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	kraftWaitServed(t, kc, topic, 3)
	if err := produceOnce(ctx, l, topic, userOpts(t, l, lab.AppUser)); err != nil {
		t.Errorf("the app user's SCRAM beside Kerberos: %v", err)
	}
	if d := kraftDiagnose(t, l, 0); len(d.Findings) != 0 {
		t.Fatalf("diagnose of the Kerberized KRaft lab: %+v", d.Findings)
	}
}

// secureKRaftIsSecured: every node is the service user's process, the
// configs name StandardAuthorizer and no ZooKeeper, a client without
// credentials gets nothing from the brokers nor from the controllers, the
// intruder is denied and the app user allowed.
func secureKRaftIsSecured(t *testing.T, l *lab.Lab, kc *kafka.Client) {
	svc, err := user.Lookup(lab.ServiceUser)
	if err != nil {
		t.Fatal(err)
	}
	for id, pid := range kraftNodePIDs(l) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil || pid == 0 {
			t.Fatalf("node %d (pid %d): %v", id, pid, err)
		}
		if uid := uidOf(string(b)); uid != svc.Uid {
			t.Errorf("node %d runs as uid %s, want %s's", id, uid, lab.ServiceUser)
		}
	}
	for _, p := range []string{filepath.Join(l.BrokerDir(1), "server.properties"), filepath.Join(l.ControllerDir(1), "controller.properties")} {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "StandardAuthorizer") || strings.Contains(string(b), "zookeeper.") || strings.Contains(string(b), "PLAINTEXT") {
			t.Fatalf("%s: want StandardAuthorizer, no ZooKeeper, no PLAINTEXT listener (%v)\n%s", p, err, b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bare, err := kafka.New(l.State.Config.Bootstrap())
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.ListTopics(ctx); err == nil {
		t.Fatal("a client without TLS or SASL listed the topics")
	}
	if q, err := bare.Quorum(ctx, []string{l.State.Config.ControllerHost(1) + ":9093"}); err == nil {
		t.Fatalf("a client without credentials read the quorum from the controllers' listener: %+v", q)
	}
	const topic = lab.AppPrefix + "-probe"
	if _, err := kc.CreateTopic(ctx, topic, nil, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	kraftWaitServed(t, kc, topic, 3)
	if err := produceOnce(ctx, l, topic, userOpts(t, l, lab.AppUser)); err != nil {
		t.Errorf("the app user, allowed %s…, cannot write %s: %v", lab.AppPrefix, topic, err)
	}
	if err := produceOnce(ctx, l, topic, userOpts(t, l, lab.IntruderUser)); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("the intruder, with no ACL, wrote %s or failed otherwise: %v", topic, err)
	}
}

// uidOf is the real uid in a /proc/PID/status.
func uidOf(status string) string {
	for _, line := range strings.Split(status, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	return ""
}

// secureKRaftRoll: kraft-rolling-restart on the secured lab, through its
// inventory (SSH as the operator with sudo, the controllers reached with
// PLAIN), under the app user's SCRAM acks=all idempotent producer: every
// node a new process, no failed send.
func secureKRaftRoll(t *testing.T, l *lab.Lab, kc *kafka.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = lab.AppPrefix + "-ledger"
	if _, err := kc.CreateTopic(ctx, topic, nil, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	kraftWaitServed(t, kc, topic, 3)
	before := kraftNodePIDs(l)
	stop := make(chan struct{})
	wait := produceDuringWith(t, l, topic, 3, stop, userOpts(t, l, lab.AppUser)...)
	r := runKRaftRoll(t, l, filepath.Join(t.TempDir(), "run"))
	close(stop)
	got := wait()
	if r.code != 0 {
		t.Fatalf("kraft-rolling-restart on the secured KRaft lab: exit %d\n%s", r.code, r.out)
	}
	if got.failed != 0 || got.acked == 0 {
		t.Fatalf("%d SCRAM sends failed (%d acknowledged): %v", got.failed, got.acked, got.errs)
	}
	for id, pid := range kraftNodePIDs(l) {
		if pid == before[id] || pid == 0 {
			t.Errorf("node %d: pid %d before, %d after: not a new process", id, before[id], pid)
		}
	}
	t.Logf("FIGURE kraft-rolling-restart on the secured KRaft lab (Kafka %s): %s; %d SCRAM sends acknowledged, 0 failed, longest %s",
		l.State.Kafka, r.took.Round(time.Second), got.acked, got.longest.Round(time.Millisecond))
}

// secureKRaftStrays: `lab break stray-logs`, then `run stray-cleanup`
// through the inventory (sudo moves the service user's directories) with
// the brokers running: no stray left, diagnose clean.
func secureKRaftStrays(t *testing.T, l *lab.Lab, dir string) {
	r := kremedy(t, "lab", "break", "stray-logs", "--topic", "orders", "--dir", dir)
	if r.code != 0 {
		t.Fatalf("lab break stray-logs: exit %d\n%s", r.code, r.out)
	}
	if ss := allStrays(t, l, "orders"); len(ss) != 3 {
		t.Fatalf("after stray-logs the lab holds %d -stray directories of orders, want 3: %v", len(ss), ss)
	}
	kraftDiagnose(t, l, exitFailed, diagnose.FindStrayLogs)
	pids := kraftNodePIDs(l)
	r = kremedy(t, "run", "stray-cleanup", "--inventory", l.InventoryPath(), "--run-dir", filepath.Join(t.TempDir(), "strays"),
		"--headless", "--yes", "--confirm", l.Inventory().Name)
	if r.code != 0 {
		t.Fatalf("run stray-cleanup: exit %d\n%s", r.code, r.out)
	}
	if left := allStrays(t, l, "orders"); len(left) != 0 {
		t.Fatalf("stray-cleanup left %v", left)
	}
	for id, pid := range kraftNodePIDs(l) {
		if pids[id] != pid {
			t.Errorf("node %d was restarted by the stray cleanup (pid %d → %d)", id, pids[id], pid)
		}
	}
	if d := kraftDiagnose(t, l, 0); findingOf(d, diagnose.FindStrayLogs) != nil {
		t.Fatalf("diagnose after the stray cleanup still finds strays: %+v", d.Findings)
	}
}

// secureKRaftQuorum: the quorum runbooks on the secured dynamic quorum,
// through the inventory alone (AddRaftVoter, RemoveRaftVoter and
// DescribeQuorum at the controllers' SASL_SSL listener with PLAIN; every
// file the runs write on the service user's data through sudo):
// controller-replace of controller 3002, then the quorum lost (a follower
// stopped, the leader's disk wiped), diagnose naming quorum-lost,
// quorum-recovery back to a leader and three voters, every topic served,
// the service user still owning every metadata dir's files, diagnose
// clean, and no lab password in the runs' files, kremedy's output or what
// sudo logged on the hosts.
func secureKRaftQuorum(t *testing.T, l *lab.Lab) {
	runs := t.TempDir()
	sudoFrom := sudoLogSize(t)
	oldDirs := map[int32]string{}
	for k := 1; k <= 3; k++ {
		oldDirs[lab.ControllerID(k)] = directoryID(t, filepath.Join(l.ControllerDir(k), "metadata", "meta.properties"))
	}
	replaced := controllerReplaceIn(t, l, lab.ControllerID(2), kraftQuorum(t, l), oldDirs, filepath.Join(runs, "replace"))
	kraftBreak(t, l, "quorum-loss", "sq")
	lossAt := time.Now()
	kraftDiagnose(t, l, exitFailed, diagnose.FindQuorumLost)
	name := l.Inventory().Name
	r := kremedy(t, "run", "quorum-recovery", "--inventory", l.InventoryPath(), "--run-dir", filepath.Join(runs, "recover"), "--headless", "--yes", "--confirm", name)
	if r.code != 0 || !strings.Contains(r.out, "AddRaftVoter") {
		t.Fatalf("quorum-recovery on the secured dynamic quorum: exit %d\n%s", r.code, r.out)
	}
	if q := kraftQuorum(t, l); q.Leader < 0 || len(q.Voters) != 3 {
		t.Fatalf("after quorum-recovery: leader %d, voters %+v", q.Leader, q.Voters)
	}
	quorumServesAs(t, l, "sq", 10, 0)
	t.Logf("FIGURE secured dynamic quorum (4.1.2), from the quorum's loss to a serving cluster: %.1fs", time.Since(lossAt).Seconds())
	svc, err := user.Lookup(lab.ServiceUser)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(svc.Uid)
	for k := 1; k <= 3; k++ {
		meta := filepath.Join(l.ControllerDir(k), "metadata")
		err := filepath.WalkDir(meta, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
				t.Errorf("%s is uid %d's after the runs, not %s's: the controller could not write it", path, st.Uid, lab.ServiceUser)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	kraftDiagnoseClean(t, l)
	secrets := labSecrets(t, l)
	files := leaksUnder(t, secrets, runs)
	leaksIn(t, secrets, "quorum-recovery's output", []byte(r.out))
	leaksIn(t, secrets, "controller-replace's output", []byte(replaced))
	// What sudo ran on the hosts for both runs (meta.properties written,
	// logs moved aside): no password on a command line.
	logged, err := os.ReadFile(sudoLog)
	if err != nil || int64(len(logged)) <= sudoFrom || !strings.Contains(string(logged[sudoFrom:]), "meta.properties") {
		t.Fatalf("%s since the runs began (%d bytes): %v; the lab's sudoers log every command (make lab-users)", sudoLog, int64(len(logged))-sudoFrom, err)
	}
	leaksIn(t, secrets, sudoLog, logged[sudoFrom:])
	// Each run's journal and report at least.
	if files < 4 {
		t.Fatalf("the quorum runs wrote %d files under %s", files, runs)
	}
}
