package drill

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPick(t *testing.T) {
	a, err := Pick("random", 42, Names())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := Pick("random", 42, Names()); a != b {
		t.Fatalf("the same seed picked %q and %q", a, b)
	}
	seen := map[string]bool{}
	for seed := range uint64(64) {
		n, _ := Pick("", seed, Names())
		seen[n] = true
	}
	if len(seen) != len(Names()) {
		t.Fatalf("64 seeds picked only %v of %v", seen, Names())
	}
	if _, err := Pick("ghost-topc", 1, Names()); err == nil || !strings.Contains(err.Error(), "ghost-topic") {
		t.Fatalf("a misspelt scenario: %v", err)
	}
}

func TestHintsAreGradedAndCounted(t *testing.T) {
	s := &State{Scenario: "ghost-topic", Topic: "orders"}
	var levels []int
	for range 4 {
		levels = append(levels, s.NextHint(time.Now(), "inv.yaml").Level)
	}
	if got := len(s.Hints); got != 4 || levels[0] != 1 || levels[2] != 3 || levels[3] != 3 {
		t.Fatalf("levels %v, %d counted", levels, got)
	}
	if last := s.Hints[2].Text; !strings.Contains(last, "topic-cleanup") || !strings.Contains(last, "--inventory inv.yaml") {
		t.Fatalf("the last hint does not give the runbook: %s", last)
	}
}

func TestRecordOnlyARunningDrill(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory.yaml")
	if DirOfInventory(inv) != "" {
		t.Fatal("no drill, yet a drill dir")
	}
	s := &State{Scenario: "ghost-topic", Topic: "orders", Started: time.Now()}
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	if DirOfInventory(inv) != dir {
		t.Fatal("a running drill's inventory is not recognised")
	}
	t.Setenv(internalEnv, internalMark)
	if DirOfInventory(inv) != "" {
		t.Fatal("the drill's own diagnose would be recorded")
	}
	os.Unsetenv(internalEnv)
	at := time.Now()
	for _, c := range []Command{{At: at, Args: []string{"diagnose"}, Exit: -1}, {At: at.Add(time.Second), Args: []string{"plan"}, Exit: -1},
		{At: at, Args: []string{"diagnose"}, Exit: 1}} {
		if err := Record(dir, c); err != nil {
			t.Fatal(err)
		}
	}
	if cs, err := Commands(dir); err != nil || len(cs) != 2 || cs[0].Exit != 1 || cs[1].Exit != -1 {
		t.Fatalf("a start and an end record are one command, a lone start a killed one: %+v %v", cs, err)
	}
	now := time.Now()
	s.Ended = &now
	_ = s.Save(dir)
	if DirOfInventory(inv) != "" {
		t.Fatal("an ended drill still records")
	}
}

func TestScore(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	resolved := t0.Add(90 * time.Second)
	st := &State{Scenario: "ghost-topic", Topic: "orders", KafkaVersion: "3.9.2", Started: t0, Page: "PAGE orders\nmore",
		Hints: []Hint{{At: t0.Add(5 * time.Second), Level: 1, Text: "look"}}, Resolved: &resolved}
	cmds := []Command{
		{At: t0.Add(10 * time.Second), Args: []string{"plan", "rolling-restart"}, Verb: "plan", Exit: 1, Error: "step roll: refused: not whole\nmore"},
		{At: t0.Add(20 * time.Second), Args: []string{"diagnose"}, Verb: "diagnose", Exit: 1},
		{At: t0.Add(30 * time.Second), Args: []string{"diagnose"}, Verb: "diagnose", Exit: 1},
		{At: t0.Add(40 * time.Second), Args: []string{"run", "topic-cleanup"}, Verb: "run", Runbook: "topic-cleanup", RunDir: "r"},
	}
	runs := []RunScore{{RunDir: "r", Runbook: "topic-cleanup", OutageS: 9, WaitS: 2, Steps: []StepScore{
		{ID: "detach-clients", State: "skipped", Why: "Producers and consumers may create topics automatically.\nmore"}, {ID: "verify", State: "done"}}}}
	tr := &TrafficState{At: t0.Add(100 * time.Second), Final: true, Topics: map[string]Counts{
		"orders": {Sent: 10, Acked: 8, Failed: 2, Consumed: 7, Lost: 1, MaxLatencyMs: 300}, "orders-v2": {Sent: 10, Acked: 10, Consumed: 10, Duplicated: 3, MaxLatencyMs: 900}}}
	d := Score(Inputs{State: st, Commands: cmds, Traffic: tr, Runs: runs, Now: t0.Add(100 * time.Second)})
	switch {
	case !d.Resolved || *d.TimeToFirstDiagnoseS != 20 || *d.TimeToResolvedS != 90:
		t.Fatalf("resolved %v, first diagnose %v, resolved at %v", d.Resolved, *d.TimeToFirstDiagnoseS, *d.TimeToResolvedS)
	case len(d.RefusedActions) != 1 || d.RefusedActions[0].Why != "step roll: refused: not whole":
		t.Fatalf("refusals %+v", d.RefusedActions)
	case d.OutageS != 9 || d.OperatorWaitInOutageS != 2 || d.Hints != 1:
		t.Fatalf("outage %v wait %v hints %d", d.OutageS, d.OperatorWaitInOutageS, d.Hints)
	case d.Traffic.Sent != 20 || d.Traffic.Failed != 2 || d.Traffic.Lost != 1 || d.Traffic.Duplicated != 3 || d.Traffic.MaxLatencyMs != 900:
		t.Fatalf("traffic %+v", d.Traffic)
	case len(d.Missed) != 1 || d.Missed[0].ID != "detach-clients":
		t.Fatalf("missed %+v", d.Missed)
	}
	for i := 1; i < len(d.Timeline); i++ {
		if d.Timeline[i].At.Before(d.Timeline[i-1].At) {
			t.Fatalf("timeline out of order at %d: %+v", i, d.Timeline)
		}
	}
	md := d.Markdown()
	for _, want := range []string{"RESOLVED", "**ghost-topic**", "**1 lost**", "detach-clients** (skipped): Producers and consumers", "hint 1: look", "| time to first diagnose | 20.0 s |"} {
		if !strings.Contains(md, want) {
			t.Fatalf("the debrief lacks %q:\n%s", want, md)
		}
	}
	unresolved := Score(Inputs{State: &State{Scenario: "stale-metadata", Started: t0}, Remains: []string{"diagnose does not pass"}, Now: t0})
	if unresolved.Resolved || !strings.Contains(unresolved.Markdown(), "## What remains broken\n- diagnose does not pass") || !strings.Contains(unresolved.Markdown(), "not measured") {
		t.Fatalf("unresolved:\n%s", unresolved.Markdown())
	}
}
