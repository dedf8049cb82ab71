package main

// A static KRaft quorum made dynamic on real Kafka 4.1.2
// (quorum-to-dynamic) under an acks=all producer, then a controller's
// disk replaced on it (controller-replace). It fails (never skips) when
// 4.1.2 or sshd is missing, except under -short.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestQuorumToDynamicLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	const v = "4.1.2"
	l, _, _ := kraftLabUp(t, v, "76") // a static quorum
	quorumToDynamicCase(t, l, v, "dledger")
}

// quorumToDynamicCase converts the static quorum of l (Kafka v) under an
// acks=all producer to topic (a client of opts), checks every node
// restarted once on its new config and every voter with its directory
// id, diagnose clean, a second run saying it is dynamic already, then
// replaces a follower controller's disk on the converted quorum.
func quorumToDynamicCase(t *testing.T, l *lab.Lab, v, topic string, opts ...kgo.Opt) {
	t.Helper()
	kc := connectLab(t, l).kc
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kc.CreateTopic(ctx, topic, nil, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	kraftWaitServed(t, kc, topic, 3)
	before := kraftNodePIDs(l)
	stop := make(chan struct{})
	wait := produceDuringWith(t, l, topic, 3, stop, opts...)
	start := time.Now()
	run := filepath.Join(t.TempDir(), "run")
	r := kremedy(t, "run", "quorum-to-dynamic", "--inventory", l.InventoryPath(), "--run-dir", run, "--headless", "--yes", "--confirm", l.Inventory().Name)
	close(stop)
	got := wait()
	if r.code != 0 {
		t.Fatalf("quorum-to-dynamic: exit %d\n%s", r.code, r.out)
	}
	took := time.Since(start)
	if got.failed != 0 || got.acked == 0 {
		t.Errorf("%d sends failed (%d acknowledged) during the conversion: %v", got.failed, got.acked, got.errs)
	}
	for _, want := range []string{"WHAT THIS CANNOT UNDO", "controller.quorum.bootstrap.servers="} {
		if !strings.Contains(r.out, want) {
			t.Errorf("the run does not say %q:\n%s", want, r.out)
		}
	}
	after := kraftNodePIDs(l)
	for id, pid := range before {
		if after[id] == pid || after[id] == 0 {
			t.Errorf("node %d: pid %d before, %d after: every node restarts once on its new config", id, pid, after[id])
		}
	}
	for k := 1; k <= 3; k++ {
		b, err := os.ReadFile(filepath.Join(l.ControllerDir(k), "controller.properties"))
		if err != nil || strings.Contains(string(b), "controller.quorum.voters") || !strings.Contains(string(b), "controller.quorum.bootstrap.servers=") {
			t.Errorf("controller %d's config after the conversion (%v):\n%s", k, err, b)
		}
	}
	q := kraftQuorum(t, l)
	if q.Leader < 0 || len(q.Voters) != 3 || slices.ContainsFunc(q.Voters, func(v ports.Voter) bool { return v.DirID == "" }) {
		t.Fatalf("after the conversion: leader %d, voters %+v (each with its directory id)", q.Leader, q.Voters)
	}
	t.Logf("FIGURE quorum-to-dynamic on %s (kraft.version 1, 6 configs, 3 controllers and 3 brokers rolled): %.1fs; the producer: %d acknowledged, 0 failed, longest send %s", v, took.Seconds(), got.acked, got.longest.Round(time.Millisecond))
	kraftDiagnoseClean(t, l)
	if r := kremedy(t, "run", "quorum-to-dynamic", "--inventory", l.InventoryPath(), "--run-dir", filepath.Join(t.TempDir(), "again"), "--headless", "--yes", "--confirm", l.Inventory().Name); r.code != 0 || !strings.Contains(r.out, "dynamic already") {
		t.Errorf("quorum-to-dynamic on the dynamic quorum: exit %d, want 0 saying it is dynamic already\n%s", r.code, r.out)
	}
	t.Run("controller-replace on the converted quorum", func(t *testing.T) {
		id := lab.ControllerID(1)
		if id == q.Leader {
			id = lab.ControllerID(2)
		}
		controllerReplace(t, l, id, q, map[int32]string{})
	})
	t.Logf("FIGURE %s", fmt.Sprint("static to dynamic, then a disk replaced, in ", time.Since(start).Round(time.Second)))
}
