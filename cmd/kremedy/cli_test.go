package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/drill"
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

// TestUsageErrorsExitTwo: every usage error, on every command, exits 2 with
// a message that says what was wrong; one cause, one code.
func TestUsageErrorsExitTwo(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, `unknown command "nosuch" for "kremedy"`},
		{[]string{"znodes", "restor", "x"}, `unknown command "restor" for "kremedy znodes"`},
		{[]string{"segments", "restre", "x"}, `unknown command "restre" for "kremedy segments"`},
		{[]string{"lab", "brak", "x"}, `unknown command "brak" for "kremedy lab"`},
		{[]string{"lab", "dwn", "--dir", dir}, `unknown command "dwn" for "kremedy lab"`},
		{[]string{"lab"}, `"kremedy lab" needs a command: break, broker, controller, down, fill, install, status, up`},
		{[]string{"znodes"}, `"kremedy znodes" needs a command: restore`},
		{[]string{"lab", "up", "--brokers", "0", "--dir", filepath.Join(dir, "lab")}, "--brokers 0: the lab runs 1 to 9 brokers; nothing was started"},
		{[]string{"lab", "up", "--kafka-version", "4.0.0", "--dir", filepath.Join(dir, "lab")}, "no ZooKeeper mode"},
		{[]string{"lab", "install", "--kafka-version", "2.3.1"}, "cannot resolve addresses on Java 14"},
		{[]string{"lab", "down", "--nope"}, "unknown flag: --nope"},
		{[]string{"run", "topic-cleanup"}, `required flag(s) "inventory" not set`},
		{[]string{"plan", "topic-cleanup"}, `required flag(s) "inventory" not set`},
		{[]string{"diagnose"}, `required flag(s) "inventory" not set`},
		{[]string{"diagnose", "extra", "--inventory", "x"}, `unknown command "extra"`},
		{[]string{"resume"}, "accepts 1 arg(s)"},
		{[]string{"runbooks", "x"}, `unknown command "x"`},
		{[]string{"inventory", "init", "--zookeeper", "127.0.0.1:1", "--controller-client-properties", "/etc/c.properties"}, "--controller-client-properties with --zookeeper"},
	} {
		r := kremedy(t, tc.args...)
		if r.code != 2 || !strings.Contains(r.out, tc.want) {
			t.Errorf("kremedy %s: exit %d, want 2 with %q\n%s", strings.Join(tc.args, " "), r.code, tc.want, r.out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "lab")); !os.IsNotExist(err) {
		t.Errorf("a refused lab up created its directory: %v", err)
	}
}

// TestUnreachableZooKeeperExitsTwoFast: a ZooKeeper that refuses
// connections is said as soon as every server refused ("connection refused",
// naming them; the 15 s connect deadline would say "context deadline
// exceeded"), with the same exit code from every command.
func TestUnreachableZooKeeperExitsTwoFast(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory.yaml")
	os.WriteFile(inv, []byte("name: x\nzookeeper:\n  connect: 127.0.0.1:1,127.0.0.1:2/kafka\nkafka:\n  bootstrap: [127.0.0.1:3]\nssh:\n  known_hosts: /dev/null\nbrokers:\n  - id: 1\n    host: 127.0.0.1\n    stop: s\n    start: s\n"), 0o600)
	for _, args := range [][]string{
		{"diagnose", "--inventory", inv},
		{"plan", "topic-cleanup", "--inventory", inv, "--set", "topic=orders"},
		{"run", "topic-cleanup", "--inventory", inv, "--set", "topic=orders", "--headless", "--yes", "--run-dir", filepath.Join(dir, "run")},
		{"run", "rolling-restart", "--inventory", inv, "--headless", "--yes", "--run-dir", filepath.Join(dir, "run2")},
	} {
		r := kremedy(t, args...)
		if r.code != 2 || !strings.Contains(r.out, "connection refused by every server (127.0.0.1:1, 127.0.0.1:2)") {
			t.Errorf("kremedy %s: exit %d after %s, want 2 with connection refused\n%s", strings.Join(args, " "), r.code, r.took, r.out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "run")); !os.IsNotExist(err) {
		t.Errorf("an unreachable cluster left a run directory: %v", err)
	}
	// -v shows the ZooKeeper client's own log: each refused attempt.
	if r := kremedy(t, "-v", "diagnose", "--inventory", inv); r.code != 2 || !strings.Contains(r.out, "zookeeper: ") || !strings.Contains(r.out, "127.0.0.1:1") {
		t.Errorf("kremedy -v diagnose: exit %d, no client log:\n%s", r.code, r.out)
	}
}

// TestRunbooksShow: a runbook's parameters with types and defaults, its
// steps with risk and confirmation, as text and as JSON.
func TestRunbooksShow(t *testing.T) {
	r := kremedy(t, "runbooks", "show", "topic-cleanup")
	for _, want := range []string{"parameters (--set name=value):", "producer_idle", "duration", "default 30s", "topic               topic     optional", "topics              topics    default", "[delete-znodes: destructive, confirm typed", "quarantine-manifest.json"} {
		if r.code != 0 || !strings.Contains(r.out, want) {
			t.Errorf("runbooks show lacks %q (exit %d):\n%s", want, r.code, r.out)
		}
	}
	j := kremedy(t, "runbooks", "show", "rolling-restart", "--json")
	var rb struct {
		Name   string
		Params []struct{ Name, Type, Default string }
		Steps  []struct{ ID, Risk, Confirm string }
	}
	if j.code != 0 || json.Unmarshal([]byte(j.out), &rb) != nil || rb.Name != "rolling-restart" || len(rb.Steps) == 0 || len(rb.Params) == 0 {
		t.Fatalf("runbooks show --json: exit %d\n%s", j.code, j.out)
	}
	if r := kremedy(t, "runbooks", "show", "nope"); r.code != 2 || !strings.Contains(r.out, "unknown runbook") {
		t.Errorf("runbooks show nope: exit %d\n%s", r.code, r.out)
	}
	if r := kremedy(t, "__complete", "run", "topic-cleanup", "--set", ""); r.code != 0 || !strings.Contains(r.out, "producer_idle=") {
		t.Errorf("completion of --set: exit %d\n%s", r.code, r.out)
	}
}

// TestCommandsOnADrillAreRecorded: every command that acts on a running
// drill's inventory says so itself (actsOn) and is recorded with its exit
// code, a failed one too; a command on another inventory is not.
func TestCommandsOnADrillAreRecorded(t *testing.T) {
	dir := t.TempDir()
	if err := (&drill.State{Scenario: "ghost-topic", Topic: "orders", Started: time.Now()}).Save(dir); err != nil {
		t.Fatal(err)
	}
	inv := filepath.Join(dir, "inventory.yaml") // unreadable as an inventory: every command ends with exit 2
	if err := os.WriteFile(inv, []byte("name: drill\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(other, []byte("name: other\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	want := map[string]string{
		"diagnose":         "diagnose --inventory " + inv,
		"inventory check":  "inventory check --inventory " + inv,
		"plan":             "plan topic-cleanup --inventory " + inv + " --set topic=orders",
		"run":              "run topic-cleanup --inventory " + inv + " --set topic=orders --headless --yes --confirm orders --run-dir " + runDir,
		"znodes restore":   "znodes restore " + filepath.Join(dir, "znodes.json") + " --inventory " + inv,
		"segments restore": "segments restore " + filepath.Join(dir, "manifest.json") + " --inventory " + inv,
	}
	for _, line := range want {
		if r := kremedy(t, strings.Fields(line)...); r.code != 2 {
			t.Fatalf("kremedy %s: exit %d, want 2\n%s", line, r.code, r.out)
		}
	}
	if r := kremedy(t, "diagnose", "--inventory", other); r.code != 2 {
		t.Fatalf("diagnose of another inventory: exit %d\n%s", r.code, r.out)
	}
	cs, err := drill.Commands(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range cs {
		if c.Exit != 2 || strings.Join(c.Args, " ") != want[c.Verb] {
			t.Errorf("recorded %q: exit %d, args %q; want exit 2, args %q", c.Verb, c.Exit, c.Args, want[c.Verb])
		}
		got[c.Verb] = true
	}
	for verb := range want {
		if !got[verb] {
			t.Errorf("kremedy %s was not recorded", verb)
		}
	}
	if len(cs) != len(want) {
		t.Errorf("%d commands recorded, want %d (the other inventory's diagnose is not the drill's): %+v", len(cs), len(want), cs)
	}
}
