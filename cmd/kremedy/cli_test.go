package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input is refused with exit 2 before anything is contacted or written.
func TestBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory.yaml")
	os.WriteFile(inv, []byte("name: x\nzookeeper:\n  connect: 127.0.0.1:1/kafka\nkafka:\n  bootstrap: [127.0.0.1:1]\nssh:\n  known_hosts: /dev/null\nbrokers:\n  - id: 1\n    host: h\n    stop: s\n    start: s\n    bogus: 1\n"), 0o600)
	runDir := filepath.Join(dir, "run")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "topic-cleanup", "--inventory", inv, "--set", "topic=a;rm -rf /"}, "invalid topic"},
		{[]string{"run", "topic-cleanup", "--inventory", inv, "--set", "topic=../../etc", "--headless", "--yes", "--run-dir", runDir}, "invalid topic"},
		{[]string{"run", "topic-cleanup", "--inventory", inv, "--set", "topic=$(id)", "--headless", "--yes", "--run-dir", runDir}, "invalid topic"},
		{[]string{"run", "topic-cleanup", "--inventory", inv, "--set", "topic=__consumer_offsets", "--headless", "--yes", "--run-dir", runDir}, "internal"},
		{[]string{"run", "topic-cleanup", "--inventory", inv, "--set", "topic=orders", "--headless", "--yes", "--confirm", "order", "--run-dir", runDir}, "does not match"},
		{[]string{"run", "topic-cleanup", "--inventory", inv, "--set", "topic=orders", "--headless", "--run-dir", runDir}, "--yes"},
		{[]string{"run", "topic-cleanup", "--inventory", inv, "--set", "topic=orders", "--headless", "--yes", "--run-dir", runDir}, "inventory.yaml:13:5"},
		{[]string{"run", "topic-cleanup", "--inventory", inv, "--set", "nope=1", "--headless", "--yes", "--run-dir", runDir}, "no such parameter"},
		{[]string{"run", "no-such-runbook", "--inventory", inv, "--headless", "--yes", "--run-dir", runDir}, "unknown runbook"},
		{[]string{"diagnose", "--inventory", inv, "--topic", "a\nb"}, "invalid topic"},
		{[]string{"lab", "break", "nope", "--dir", dir}, "unknown scenario"},
		{[]string{"resume", filepath.Join(dir, "nothing"), "--headless", "--yes"}, "nothing"},
	} {
		r := kremedy(t, tc.args...)
		if r.code != 2 || !strings.Contains(r.out, tc.want) {
			t.Errorf("kremedy %s: exit %d, want 2 with %q\n%s", strings.Join(tc.args, " "), r.code, tc.want, r.out)
		}
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Fatalf("a refused run created its run directory: %v", err)
	}
}

func TestRunbooksList(t *testing.T) {
	r := kremedy(t, "runbooks")
	if r.code != 0 || !strings.Contains(r.out, "topic-cleanup") {
		t.Fatalf("runbooks: %d %s", r.code, r.out)
	}
}

func TestRestoreCommandsRefuseBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"znodes", "restore", filepath.Join(dir, "missing.json")},
		{"segments", "restore", filepath.Join(dir, "missing.json")},
	} {
		if r := kremedy(t, args...); r.code != 2 || !strings.Contains(r.out, "--inventory") {
			t.Errorf("kremedy %v: exit %d\n%s", args, r.code, r.out)
		}
	}
}
