package main

// The combined KRaft lab (`lab up --kraft --combined`, issue 42): three
// nodes each both broker and controller (process.roles=broker,controller),
// checked with `inventory init`, `inventory check` and `diagnose`, one
// node stopped, then rolled with kraft-rolling-restart under an acks=all
// producer.

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestKRaftCombinedLab brings up a 3-node combined KRaft lab, secured
// (`lab up --kraft --combined --secure`, net 64: SASL_SSL with SCRAM on
// the brokers' listener, SASL_SSL with PLAIN on the controllers' listener
// of the same process, StandardAuthorizer, every node run by the service
// user, SSH as the operator through sudo): the quorum's voters are the
// brokers 1–3; inventory check and diagnose find it whole, and inventory
// init lists each node as broker and controller. With node 2 stopped,
// diagnose names it on both sides (the quorum's margin, the broker down)
// and kraft-rolling-restart refuses before any stop, naming both rules.
// Rolled, each node restarts exactly once, with the controllers (the
// quorum's leader last), none again with the brokers, losing no send of a
// SCRAM acks=all producer on a replication-factor-3,
// min.insync.replicas=2 topic. TestKRaftCombinedPlainLab runs the same on
// a plaintext lab in make test-versions.
func TestKRaftCombinedLab(t *testing.T) {
	needSecureLab(t)
	t.Parallel()
	kraftCombinedLab(t, 64, true)
}

// TestKRaftCombinedPlainLab is TestKRaftCombinedLab on a plaintext
// combined lab, SSH as root (net 82, make test-versions).
func TestKRaftCombinedPlainLab(t *testing.T) {
	needLab(t)
	heavyLab(t, "the plaintext combined KRaft lab")
	t.Parallel()
	kraftCombinedLab(t, 82, false)
}

func kraftCombinedLab(t *testing.T, net int, secure bool) {
	dir := filepath.Join(openTempDir(t), "lab")
	t.Cleanup(func() { _ = lab.Down(context.Background(), dir, false, &bytes.Buffer{}) })
	t.Cleanup(func() { keepLogs(t, dir) })
	up := []string{"lab", "up", "--kraft", "--combined", "--net", strconv.Itoa(net), "--dir", dir}
	if secure {
		up = append(up, "--secure")
	}
	r := kremedy(t, up...)
	if r.code != 0 || secure != strings.Contains(r.out, "StandardAuthorizer") {
		t.Fatalf("%v: exit %d\n%s", up, r.code, r.out)
	}
	t.Logf("FIGURE lab up --kraft --combined (secure %v) took %.1fs", secure, r.took.Seconds())
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	q := kraftQuorum(t, l)
	var voters []int32
	for _, v := range q.Voters {
		voters = append(voters, v.ID)
	}
	if slices.Sort(voters); !slices.Equal(voters, []int32{1, 2, 3}) || l.State.Config.KRaftControllers != 0 {
		t.Fatalf("voters %v (leader %d), controllers of its own %d: want the brokers 1–3 as the quorum", voters, q.Leader, l.State.Config.KRaftControllers)
	}
	// lab status puts each node's place in the quorum on its broker's line.
	if r := kremedy(t, "lab", "status", "--dir", dir); r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("registered, unfenced; quorum leader (epoch %d)", q.Epoch)) || strings.Count(r.out, "registered, unfenced; voter, caught up") != 2 {
		t.Errorf("lab status of the combined lab: exit %d\n%s", r.code, r.out)
	}
	combinedSeen(t, l)
	combinedNodeDown(t, l, dir, up)
	combinedRoll(t, l)
}

// combinedSeen: inventory check and diagnose find the combined lab whole;
// inventory init on the live cluster lists each combined node twice, one
// process, which inventory check then accepts.
func combinedSeen(t *testing.T, l *lab.Lab) {
	t.Helper()
	if r := kremedy(t, "inventory", "check", "--inventory", l.InventoryPath()); r.code != 0 {
		t.Fatalf("inventory check of the combined lab: exit %d\n%s", r.code, r.out)
	}
	if d := kraftDiagnose(t, l, 0); !d.Healthy || len(d.Findings) != 0 || d.Quorum == nil {
		t.Fatalf("diagnose of the healthy combined lab: %+v", d)
	}
	inv := l.Inventory()
	out := filepath.Join(t.TempDir(), "init.yaml")
	args := []string{"inventory", "init", "--bootstrap", inv.Kafka.Bootstrap[0], "--ssh-user", inv.SSH.User, "--ssh-port", strconv.Itoa(inv.SSH.Port),
		"--identity-file", inv.SSH.IdentityFile, "--known-hosts", inv.SSH.KnownHosts, "--ssh-config", "none", "--name", inv.Name, "-o", out}
	secure := inv.Kafka.ClientProperties != ""
	if secure {
		args = append(args, "--client-properties", inv.Kafka.ClientProperties, "--become", inv.SSH.Become)
		// Without the controllers' own client properties, init says to
		// review them, and inventory check says why it fails and the way on.
		if r := kremedy(t, args...); r.code != 0 || !strings.Contains(r.out, "REVIEW kafka.controller_client_properties") {
			t.Fatalf("inventory init --bootstrap --client-properties on the secured combined lab: exit %d\n%s", r.code, r.out)
		}
		if r := kremedy(t, "inventory", "check", "--inventory", out); r.code == 0 || !strings.Contains(r.out, "UNSUPPORTED_SASL_MECHANISM") || !strings.Contains(r.out, "give it a client properties file of its own, kafka.controller_client_properties") {
			t.Fatalf("inventory check without the controllers' client properties: exit %d, want a failure naming the way on\n%s", r.code, r.out)
		}
		args = append(args, "--force", "--controller-client-properties", inv.Kafka.ControllerClientProperties)
	}
	if r := kremedy(t, args...); r.code != 0 {
		t.Fatalf("inventory init --bootstrap on the combined lab: exit %d\n%s", r.code, r.out)
	}
	written, err := inventory.Load(out)
	if err != nil || !written.KRaft() || len(written.Brokers) != 3 || len(written.KRaftControllers) != 3 || written.KRaftControllers[0].ID != 1 || written.KRaftControllers[0].Stop != written.Brokers[0].Stop ||
		written.Kafka.ControllerClientProperties != inv.Kafka.ControllerClientProperties || written.SSH.Become != inv.SSH.Become {
		t.Fatalf("inventory init wrote %+v, %v", written, err)
	}
	if r := kremedy(t, "inventory", "check", "--inventory", out); r.code != 0 {
		t.Fatalf("inventory check of what init wrote on the combined lab: exit %d\n%s", r.code, r.out)
	}
}

// combinedNodeDown: with combined node 2 stopped, diagnose names it as a
// voter lost to the quorum and as a broker down, and kraft-rolling-restart
// refuses before any stop on both counts; lab up starts it again.
func combinedNodeDown(t *testing.T, l *lab.Lab, dir string, up []string) {
	t.Helper()
	if r := kremedy(t, "lab", "broker", "stop", "2", "--dir", dir); r.code != 0 {
		t.Fatalf("lab broker stop 2: exit %d\n%s", r.code, r.out)
	}
	d := kraftDiagnose(t, l, exitFailed, diagnose.FindQuorumMargin, diagnose.FindBrokerDown)
	for _, k := range []string{diagnose.FindQuorumMargin, diagnose.FindBrokerDown} {
		if f := findingOf(d, k); !slices.Contains(f.Brokers, 2) {
			t.Errorf("the %s finding does not name node 2: %+v", k, f)
		}
	}
	run := filepath.Join(t.TempDir(), "refused")
	r := runKRaftRoll(t, l, run)
	if r.code != exitFailed || !strings.Contains(r.out, "controller 2 is not caught up") || !strings.Contains(r.out, "brokers: ") || !strings.Contains(r.out, "Nothing was changed") {
		t.Errorf("with combined node 2 stopped: exit %d, want 1 naming it as controller and as broker\n%s", r.code, r.out)
	}
	if s := stops(t, run); len(s) != 0 {
		t.Errorf("a refused roll ran stop commands: %v", s)
	}
	if r := kremedy(t, up...); r.code != 0 {
		t.Fatalf("lab up after stopping node 2: exit %d\n%s", r.code, r.out)
	}
}

// combinedRoll: kraft-rolling-restart restarts each combined node once,
// with the controllers, the quorum's leader last, under an acks=all
// producer that loses nothing.
func combinedRoll(t *testing.T, l *lab.Lab) {
	t.Helper()
	kc := connectLab(t, l).kc
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// On the secured lab the producer is the app's SCRAM user, allowed its
	// prefix's topics by an ACL.
	topic, opts := "kledger", []kgo.Opt(nil)
	if l.State.Config.Secure {
		topic, opts = lab.AppPrefix+"-kledger", userOpts(t, l, lab.AppUser)
	}
	if _, err := kc.CreateTopic(ctx, topic, nil, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	kraftWaitServed(t, kc, topic, 3)
	leader := kraftQuorum(t, l).Leader
	before := kraftNodePIDs(l)
	run := filepath.Join(t.TempDir(), "run")
	stop := make(chan struct{})
	wait := produceDuringWith(t, l, topic, 3, stop, opts...)
	r := runKRaftRoll(t, l, run)
	close(stop)
	got := wait()
	if r.code != 0 {
		t.Fatalf("kraft-rolling-restart on combined nodes: exit %d\n%s", r.code, r.out)
	}
	if got.failed != 0 || got.acked == 0 {
		t.Fatalf("%d sends failed (%d acknowledged): %v", got.failed, got.acked, got.errs)
	}
	after := kraftNodePIDs(l)
	for id, pid := range before {
		if after[id] == pid || after[id] == 0 {
			t.Errorf("node %d: pid %d before, %d after: not a new process", id, pid, after[id])
		}
	}
	acts, err := steptest.Ended(run, "")
	if err != nil {
		t.Fatal(err)
	}
	var order []int32
	for _, a := range acts {
		if strings.HasPrefix(a.ID, "stop-") {
			order = append(order, a.Broker)
		}
	}
	if len(order) != 3 || order[2] != leader || !slices.Equal(slices.Sorted(slices.Values(order)), []int32{1, 2, 3}) {
		t.Fatalf("stops in order %v: want each combined node once, the quorum's leader %d last", order, leader)
	}
	if !strings.Contains(r.out, "a combined node (process.roles=broker,controller): it restarts with the controllers") {
		t.Errorf("the brokers' roll does not say it left the combined nodes to the controllers':\n%s", r.out)
	}
	cf, ct := stepSpan(t, run, "roll-controllers")
	t.Logf("FIGURE kraft-rolling-restart of 3 combined nodes (Kafka %s, secure %v): %s whole run, %s for the nodes; %d sends acknowledged, 0 failed, longest send %s",
		l.State.Kafka, l.State.Config.Secure, r.took.Round(time.Second), ct.Sub(cf).Round(time.Second), got.acked, got.longest.Round(time.Millisecond))
}
