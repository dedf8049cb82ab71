package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/cleanup"
	"github.com/kremedy/kremedy/steps/diagnose"
)

// allStrays lists every -stray directory of topics on every broker of the
// lab, by the lab's own glob.
func allStrays(t *testing.T, l *lab.Lab, topics ...string) []string {
	t.Helper()
	var out []string
	for n := int32(1); n <= int32(l.State.Config.Brokers); n++ {
		for _, topic := range topics {
			out = append(out, strays(t, l, n, topic)...)
		}
	}
	return out
}

// treeSum is a digest of a directory's files: each one's path below dir,
// mode and bytes.
func treeSum(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", rel, info.Mode(), info.Size())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("digest of %s: %v", dir, err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// kraftStrayCleanup: after stray-logs (orders) and
// missing-partition-metadata (audit), `run stray-cleanup` moves every
// -stray directory off the log dirs while the brokers run — the one
// without partition.metadata only with unproven=true, which the plan
// without it names with why — every one in the manifest, diagnose without
// a stray finding; `segments restore` brings them back byte for byte.
func kraftStrayCleanup(t *testing.T, l *lab.Lab) {
	t.Helper()
	before := map[string]string{}
	ss := allStrays(t, l, "orders", "audit")
	if len(ss) != 4 {
		t.Fatalf("the lab holds %d -stray directories of orders and audit, want 4: %v", len(ss), ss)
	}
	for _, s := range ss {
		before[s] = treeSum(t, s)
	}
	pids := kraftNodePIDs(l)

	// Without unproven: the stray without partition.metadata stays, named.
	r := kremedy(t, "plan", "stray-cleanup", "--inventory", l.InventoryPath())
	if r.code != 0 || !strings.Contains(r.out, "no partition.metadata") || strings.Count(r.out, "-stray: → ") != 3 {
		t.Fatalf("plan stray-cleanup: exit %d, want the 3 strays of orders moved and audit's named as left\n%s", r.code, r.out)
	}

	run := filepath.Join(t.TempDir(), "strays")
	r = kremedy(t, "run", "stray-cleanup", "--inventory", l.InventoryPath(), "--run-dir", run,
		"--headless", "--yes", "--confirm", l.Inventory().Name, "--set", "unproven=true")
	if r.code != 0 {
		t.Fatalf("run stray-cleanup: exit %d\n%s", r.code, r.out)
	}
	t.Logf("FIGURE stray-cleanup (Kafka %s): 4 strays moved in %s", l.State.Kafka, r.took.Round(100e6))
	if left := allStrays(t, l, "orders", "audit"); len(left) != 0 {
		t.Fatalf("stray-cleanup left %v", left)
	}
	for id, pid := range kraftNodePIDs(l) {
		if pids[id] != pid {
			t.Errorf("node %d was restarted by the stray cleanup (pid %d → %d): it must move strays with the brokers running", id, pids[id], pid)
		}
	}
	manifest := filepath.Join(run, "quarantine-manifest.json")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m cleanup.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var moved []string
	for _, mv := range m.Moves {
		if mv.State != "moved" || mv.Kind != "stray" {
			t.Errorf("manifest entry %+v: want a moved stray", mv)
		}
		if got := treeSum(t, mv.To); got != before[mv.From] {
			t.Errorf("%s in quarantine (%s) differs from the stray it was", mv.To, mv.From)
		}
		moved = append(moved, mv.From)
	}
	slices.Sort(moved)
	slices.Sort(ss)
	if !slices.Equal(moved, ss) {
		t.Fatalf("the manifest lists %v, want every stray %v", moved, ss)
	}
	d := kraftDiagnose(t, l, 0)
	if f := findingOf(d, diagnose.FindStrayLogs); f != nil {
		t.Fatalf("diagnose after the stray cleanup still finds strays: %+v", f)
	}

	// A second run finds nothing to do.
	r = kremedy(t, "plan", "stray-cleanup", "--inventory", l.InventoryPath())
	if r.code != 0 || !strings.Contains(r.out, "nothing to clean up") {
		t.Fatalf("plan stray-cleanup on a clean lab: exit %d\n%s", r.code, r.out)
	}

	// Restore, the brokers running: every stray back, byte for byte.
	r = kremedy(t, "segments", "restore", manifest)
	if r.code != 0 {
		t.Fatalf("segments restore %s: exit %d\n%s", manifest, r.code, r.out)
	}
	for _, s := range ss {
		if _, err := os.Stat(s); err != nil {
			t.Fatalf("after segments restore: %v", err)
		}
		if treeSum(t, s) != before[s] {
			t.Errorf("%s restored, but not byte for byte", s)
		}
	}
	kraftDiagnose(t, l, exitFailed, diagnose.FindStrayLogs)

	// A live log Kafka would set aside at its broker's next start (a
	// copy of a deleted topic's partition, as a restore from backup
	// leaves one): would_be=true moves it through a restart of that
	// broker alone, and the strays with it.
	victim := ss[slices.IndexFunc(ss, func(s string) bool { return strings.Contains(filepath.Base(s), "orders-") })] // one with partition.metadata
	n := int32(0)
	fmt.Sscanf(filepath.Base(filepath.Dir(filepath.Dir(victim))), "%d", &n)
	would := filepath.Join(filepath.Dir(victim), "kwould-0")
	if out, err := exec.Command("cp", "-a", victim, would).CombinedOutput(); err != nil {
		t.Fatalf("cp %s %s: %v %s", victim, would, err, out)
	}
	r = kremedy(t, "plan", "stray-cleanup", "--inventory", l.InventoryPath())
	if r.code != 0 || !strings.Contains(r.out, "kwould-0: topic id") || !strings.Contains(r.out, "would_be=true") {
		t.Fatalf("plan stray-cleanup with a would-be stray: exit %d\n%s", r.code, r.out)
	}
	pids = kraftNodePIDs(l)
	run = filepath.Join(t.TempDir(), "would-be")
	r = kremedy(t, "run", "stray-cleanup", "--inventory", l.InventoryPath(), "--run-dir", run,
		"--headless", "--yes", "--confirm", l.Inventory().Name, "--set", "unproven=true", "--set", "would_be=true")
	if r.code != 0 {
		t.Fatalf("run stray-cleanup with would_be=true: exit %d\n%s", r.code, r.out)
	}
	t.Logf("FIGURE stray-cleanup with would_be=true (Kafka %s): %s, broker %d restarted", l.State.Kafka, r.took.Round(time.Second), n)
	if _, err := os.Stat(would); !os.IsNotExist(err) {
		t.Fatalf("%s is still in the log dir: %v", would, err)
	}
	for id, pid := range kraftNodePIDs(l) {
		if (id == n) == (pid == pids[id]) {
			t.Errorf("node %d: pid %d → %d; want only broker %d restarted", id, pids[id], pid, n)
		}
	}
	if left := allStrays(t, l, "orders", "audit", "kwould"); len(left) != 0 {
		t.Fatalf("strays left after the would_be run: %v", left)
	}
	d = kraftDiagnose(t, l, 0)
	for _, k := range []string{diagnose.FindStrayLogs, diagnose.FindWouldBeStray} {
		if f := findingOf(d, k); f != nil {
			t.Fatalf("diagnose after the would_be run: %+v", f)
		}
	}
}
