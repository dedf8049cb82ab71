package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
)

// TestMigrationReadinessLab checks ZooKeeper → KRaft readiness on a real
// 3.9.2 cluster: ready when healthy; not ready after the incident's ghost
// topic (a deletion that never finished, stale segments), naming the topic
// and the runbook that fixes it, before anything changes; ready again
// after topic-cleanup.
func TestMigrationReadinessLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers = 18, 1
	l := startLab(t, cfg)
	readiness := func() (*diagnose.Diagnosis, string, int) {
		t.Helper()
		out, code := stdoutOf(t, "diagnose", "--inventory", l.InventoryPath(), "--migration", "--json")
		var d diagnose.Diagnosis
		if err := json.Unmarshal([]byte(out), &d); err != nil || d.Migration == nil {
			t.Fatalf("diagnose --migration --json: %v\n%s", err, out)
		}
		text := kremedy(t, "diagnose", "--inventory", l.InventoryPath(), "--migration")
		if text.code != code {
			t.Fatalf("text exit %d, JSON exit %d", text.code, code)
		}
		return &d, text.out, code
	}
	if d, out, code := readiness(); code != 0 || !d.Migration.Ready || !strings.Contains(out, "READY") {
		t.Fatalf("a healthy 3.9.2 lab: exit %d ready=%v blockers %v\n%s", code, d.Migration.Ready, d.Migration.Blockers, out)
	}

	rep := breakIt(t, l, "ghost-topic", "orders")
	d, out, code := readiness()
	if code != 1 || d.Migration.Ready || !strings.Contains(out, "NOT READY") {
		t.Fatalf("after ghost-topic: exit %d ready=%v\n%s", code, d.Migration.Ready, out)
	}
	named := false
	for _, id := range d.Migration.Blockers {
		for _, f := range d.Findings {
			if f.ID == id && f.Topic == "orders" && f.Runbook == "topic-cleanup" {
				named = true
			}
		}
	}
	if !named || !strings.Contains(out, "topic-cleanup") {
		t.Fatalf("no blocker names %q and the topic-cleanup runbook: %v\n%s", "orders", d.Migration.Blockers, out)
	}
	t.Logf("readiness after ghost-topic (victim broker %d): blockers %v", rep.Victim, d.Migration.Blockers)

	runCleanup(t, l, "orders", filepath.Join(t.TempDir(), "run"), "--set", "recreate=true")
	if d, out, code := readiness(); code != 0 || !d.Migration.Ready {
		t.Fatalf("after topic-cleanup: exit %d blockers %v\n%s", code, d.Migration.Blockers, out)
	}
}
