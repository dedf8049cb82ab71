package main

// A lost dynamic KRaft quorum (KIP-853, kraft.version 1) on real Kafka
// 4.1.2: the quorum-loss scenario, diagnose naming it, quorum-recovery
// shrinking the voter set in the seed's log and adding the other
// controllers back with AddRaftVoter — killed with SIGKILL right after
// its append and resumed —, diagnose clean afterwards, and a controller
// restored with its old log and its old directory id, started, taking no
// part in the quorum. It fails (never skips) when 4.1.2 or sshd is
// missing, except under -short.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/ports"
)

func TestQuorumRecoveryDynamicLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	l, _, _ := kraftLabUp(t, "4.1.2", "73", "--kraft-quorum", "dynamic")
	oldDirs := map[int32]string{}
	for k := 1; k <= 3; k++ {
		oldDirs[lab.ControllerID(k)] = directoryID(t, filepath.Join(l.ControllerDir(k), "metadata", "meta.properties"))
	}
	kraftBreak(t, l, "quorum-loss", "qd")
	lossAt := time.Now()
	f := findingOf(kraftDiagnose(t, l, exitFailed, diagnose.FindQuorumLost), diagnose.FindQuorumLost)
	if f == nil || !strings.Contains(f.Summary+strings.Join(f.Evidence, "\n"), "1 of the 3 voters") {
		t.Errorf("quorum-lost on the dynamic quorum does not say 1 of the 3 voters: %+v", f)
	}

	run := filepath.Join(t.TempDir(), "run")
	name := l.Inventory().Name
	// The rewrite's third action appends the records that shrink the
	// voter set: killed right after it, the resumed run finds them there.
	killed := runWithFault(t, "sigkill@action-end:rewrite:3", "run", "quorum-recovery", "--inventory", l.InventoryPath(), "--run-dir", run, "--headless", "--yes", "--confirm", name)
	if killed.code != -1 || !strings.Contains(killed.out, "bytes appended") {
		t.Fatalf("quorum-recovery never appended to the seed's log in its rewrite (exit %d):\n%s", killed.code, killed.out)
	}
	for _, want := range []string{"dynamic quorum", "WHAT THIS RECOVERY DISCARDS: no record", "one voter at a time"} {
		if !strings.Contains(killed.out, want) {
			t.Errorf("the run's plan does not say %q:\n%s", want, killed.out)
		}
	}
	r := kremedy(t, "resume", run, "--headless", "--yes", "--confirm", name)
	if r.code != 0 || !strings.Contains(r.out, "holds the records already") {
		t.Fatalf("resume after SIGKILL past the append: exit %d (want 0, the records found appended)\n%s", r.code, r.out)
	}
	q := kraftQuorum(t, l)
	if q.Leader < 0 || len(q.Voters) != 3 {
		t.Fatalf("after quorum-recovery: leader %d, voters %+v", q.Leader, q.Voters)
	}
	for _, vo := range q.Voters {
		if vo.ID != q.Leader && (vo.DirID == "" || vo.DirID == oldDirs[vo.ID]) {
			t.Errorf("voter %d has directory id %q after the recovery; its old one was %s (a controller back empty gets a new one)", vo.ID, vo.DirID, oldDirs[vo.ID])
		}
	}
	t.Logf("FIGURE quorum-recovery on a dynamic quorum, 4.1.2 (killed once, resumed): from the quorum's loss to a leader and 3 voters in %.1fs", time.Since(lossAt).Seconds())
	quorumServesAs(t, l, "qd", 10, 0)
	t.Logf("FIGURE from the dynamic quorum's loss to a serving cluster: %.1fs", time.Since(lossAt).Seconds())
	kraftDiagnoseClean(t, l)
	var restored int32
	t.Run("a controller restored with its old log takes no part", func(t *testing.T) { restored = quorumOldLogIgnored(t, l, q, oldDirs) })
	if restored == 0 {
		t.Fatal("no controller was restored with its old log")
	}
	t.Run("controller-replace gives it a new disk", func(t *testing.T) { controllerReplace(t, l, restored, q, oldDirs) })
}

// controllerReplace runs controller-replace on the controller left
// stopped with its old log: removed from the voter set, its old log
// moved aside, a new directory id (neither its first nor the one the
// recovery gave it), started, caught up, added back; three voters caught
// up and diagnose clean afterwards.
func controllerReplace(t *testing.T, l *lab.Lab, id int32, before ports.Quorum, oldDirs map[int32]string) {
	controllerReplaceIn(t, l, id, before, oldDirs, filepath.Join(t.TempDir(), "run"))
}

// controllerReplaceIn is controllerReplace with the run in runDir; it
// returns what kremedy printed.
func controllerReplaceIn(t *testing.T, l *lab.Lab, id int32, before ports.Quorum, oldDirs map[int32]string, runDir string) string {
	var recovered string
	for _, vo := range before.Voters {
		if vo.ID == id {
			recovered = vo.DirID
		}
	}
	start := time.Now()
	r := kremedy(t, "run", "controller-replace", "--inventory", l.InventoryPath(), "--set", fmt.Sprintf("controller=%d", id), "--run-dir", runDir, "--headless", "--yes", "--confirm", l.Inventory().Name)
	if r.code != 0 {
		t.Fatalf("controller-replace --set controller=%d: exit %d\n%s", id, r.code, r.out)
	}
	for _, want := range []string{"RemoveRaftVoter", "survives 0 lost", "a new directory.id", "AddRaftVoter"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("controller-replace does not say %q:\n%s", want, r.out)
		}
	}
	q := kraftQuorum(t, l)
	if q.Leader < 0 || len(q.Voters) != 3 {
		t.Fatalf("after controller-replace: leader %d, voters %+v", q.Leader, q.Voters)
	}
	for _, vo := range q.Voters {
		if vo.ID == id && (vo.DirID == "" || vo.DirID == oldDirs[id] || vo.DirID == recovered) {
			t.Errorf("controller %d is a voter under directory %q (its first %s, the recovery's %s): want a new one", id, vo.DirID, oldDirs[id], recovered)
		}
	}
	if got := directoryID(t, filepath.Join(l.ControllerDir(int(id-3000)), "metadata", "meta.properties")); !slices.ContainsFunc(q.Voters, func(v ports.Voter) bool { return v.ID == id && v.DirID == got }) {
		t.Errorf("controller %d's meta.properties names directory %s, not the one the voter set has: %+v", id, got, q.Voters)
	}
	kraftDiagnoseClean(t, l)
	t.Logf("FIGURE controller-replace of controller %d on 4.1.2, secure %v (removed, new disk, caught up, added back): %.1fs", id, l.State.Config.Secure, time.Since(start).Seconds())
	return r.out
}

// kraftDiagnoseClean: diagnose finds nothing (exit 0) within a minute of
// the recovery (a broker may still be catching up at the first read).
func kraftDiagnoseClean(t *testing.T, l *lab.Lab) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := kremedy(t, "diagnose", "--inventory", l.InventoryPath())
		if r.code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("diagnose after the recovery: exit %d, want 0 (clean)\n%s", r.code, r.out)
		}
		time.Sleep(3 * time.Second)
	}
}

// quorumOldLogIgnored restores, on a voter that came back empty, the copy
// of the metadata log the run moved aside and the meta.properties it
// replaced (its old directory id), and starts it: a controller back from
// a lost quorum with its old log. The quorum keeps its leader and epoch,
// and the voter set keeps the new directory id: the old copy is at most
// an observer, never a voter, so it cannot form a second quorum.
func quorumOldLogIgnored(t *testing.T, l *lab.Lab, before ports.Quorum, oldDirs map[int32]string) int32 {
	// The voter that came back empty from a copy of its own (the one
	// wiped has none kept aside).
	var id int32
	var cdir, aside string
	for k := 1; k <= 3; k++ {
		m, _ := filepath.Glob(filepath.Join(l.ControllerDir(k), "metadata.__cluster_metadata-0.kremedy-aside-*"))
		if lab.ControllerID(k) != before.Leader && len(m) == 1 {
			id, cdir, aside = lab.ControllerID(k), l.ControllerDir(k), m[0]
		}
	}
	if id == 0 {
		t.Fatalf("no controller but the leader %d has its old copy kept aside", before.Leader)
	}
	meta := filepath.Join(cdir, "metadata")
	sh := func(script string) {
		t.Helper()
		if out, err := exec.Command("bash", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	sh(filepath.Join(cdir, "kafka-stop"))
	sh("set -e; cd " + meta + "; rm -rf __cluster_metadata-0; cp -a " + aside + " __cluster_metadata-0; cp meta.properties.kremedy-* meta.properties")
	if got := directoryID(t, filepath.Join(meta, "meta.properties")); got != oldDirs[id] {
		t.Fatalf("controller %d's restored meta.properties has directory %s, want its old %s", id, got, oldDirs[id])
	}
	sh(filepath.Join(cdir, "kafka-start"))
	// Started, it fetches from the leader; the leader sees it as an
	// observer (its directory id is not the voter's).
	var q ports.Quorum
	deadline := time.Now().Add(time.Minute)
	for {
		q = kraftQuorum(t, l)
		if slices.ContainsFunc(q.Observers, func(o ports.Voter) bool { return o.ID == id && o.DirID == oldDirs[id] }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("controller %d started with its old log never showed as an observer of leader %d: voters %+v observers %+v", id, q.Leader, q.Voters, q.Observers)
		}
		time.Sleep(time.Second)
	}
	if q.Leader != before.Leader || q.Epoch != before.Epoch {
		t.Errorf("after controller %d started with its old log: leader %d epoch %d, was leader %d epoch %d", id, q.Leader, q.Epoch, before.Leader, before.Epoch)
	}
	for _, vo := range q.Voters {
		if vo.ID == id && vo.DirID == oldDirs[id] {
			t.Errorf("controller %d is a voter again under its old directory id %s", id, vo.DirID)
		}
	}
	t.Logf("FIGURE controller %d started with its old log (directory %s): leader %d epoch %d kept; voters %+v; observers %+v", id, oldDirs[id], q.Leader, q.Epoch, q.Voters, q.Observers)
	sh(filepath.Join(cdir, "kafka-stop"))
	return id
}

func directoryID(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "directory.id="); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no directory.id", path)
	return ""
}
