package main

// The drill, played by a script as a trainee would: a real lab broken by a
// hidden scenario, the drill's own customers writing and reading, the
// trainee's commands recorded, the debrief checked against the journals
// and an independent count of the records.

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kremedy/kremedy/drill"
	"github.com/kremedy/kremedy/lab"
)

// startDrill starts a drill in a new directory; the cleanup stops its
// traffic process and the lab whatever happens.
func startDrill(t *testing.T, net, scenario string, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "drill")
	if slices.Contains(extra, "--secure") {
		dir = filepath.Join(openTempDir(t), "drill")
	}
	t.Cleanup(func() {
		if st, err := drill.Load(dir); err == nil && st.TrafficPID > 0 {
			_ = syscall.Kill(st.TrafficPID, syscall.SIGKILL)
		}
		_ = lab.Down(context.Background(), dir, false, io.Discard)
	})
	r := kremedy(t, append([]string{"drill", "start", "--dir", dir, "--scenario", scenario, "--seed", "7", "--net", net}, extra...)...)
	if r.code != 0 {
		t.Fatalf("drill start: exit %d\n%s", r.code, r.out)
	}
	if strings.Contains(r.out, scenario) {
		t.Fatalf("the page names the hidden scenario:\n%s", r.out)
	}
	if !strings.Contains(r.out, "PAGE") {
		t.Fatalf("no page:\n%s", r.out)
	}
	return dir
}

func readDebrief(t *testing.T, dir string) drill.Debrief {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, drill.DebriefJSON))
	if err != nil {
		t.Fatal(err)
	}
	var d drill.Debrief
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// ourRecords counts, with a client of its own, the drill's records in
// topic: an independent count of what the customers' producer wrote.
func ourRecords(t *testing.T, l *lab.Lab, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, _, err := drill.ReadBack(ctx, l.State.Config.Bootstrap(), topic, l.KafkaOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	return int64(n)
}

// TestDrillLab plays a drill to its end twice: a trainee who diagnoses,
// makes a wrong move kremedy refuses, asks for a hint and runs the right
// runbook (the victory check ends the drill by itself); and one who gives
// up (unresolved, saying what remains).
func TestDrillLab(t *testing.T) {
	needLab(t)
	t.Parallel()

	t.Run("resolved", func(t *testing.T) {
		dir := startDrill(t, "44", "ghost-topic")
		inv := filepath.Join(dir, "inventory.yaml")
		if r := kremedy(t, "diagnose", "--inventory", inv); r.code != 1 || !strings.Contains(r.out, "topic-cleanup") {
			t.Fatalf("diagnose of the broken drill: exit %d\n%s", r.code, r.out)
		}
		if r := kremedy(t, "run", "rolling-restart", "--inventory", inv, "--run-dir", filepath.Join(dir, "wrong"), "--headless", "--yes", "--confirm", "kremedy-lab"); r.code != 1 {
			t.Fatalf("a rolling restart of the broken cluster: exit %d, want a refusal\n%s", r.code, r.out)
		}
		if r := kremedy(t, "drill", "hint", "--dir", dir); r.code != 0 || !strings.Contains(r.out, "hint 1 of 3") {
			t.Fatalf("drill hint: exit %d\n%s", r.code, r.out)
		}
		run := filepath.Join(dir, "repair")
		if r := kremedy(t, "run", "topic-cleanup", "--inventory", inv, "--set", "topic=orders", "--set", "recreate=true", "--run-dir", run, "--headless", "--yes", "--confirm", "orders"); r.code != 0 {
			t.Fatalf("topic-cleanup: exit %d\n%s", r.code, r.out)
		}
		// The victory check runs every 10 s once the customers flow again.
		deadline := time.Now().Add(3 * time.Minute)
		for {
			if st, err := drill.Load(dir); err == nil && st.Ended != nil {
				break
			}
			if time.Now().After(deadline) {
				r := kremedy(t, "drill", "status", "--dir", dir)
				t.Fatalf("the drill did not end by itself within 3 min of the repair:\n%s", r.out)
			}
			time.Sleep(time.Second)
		}
		d := readDebrief(t, dir)
		t.Logf("debrief:\n%s", mustRead(t, filepath.Join(dir, drill.DebriefFile)))
		switch {
		case !d.Resolved || len(d.Remains) != 0:
			t.Fatalf("not resolved: %v", d.Remains)
		case d.Scenario != "ghost-topic" || d.KafkaVersion != lab.KafkaVersion:
			t.Fatalf("scenario %q version %q", d.Scenario, d.KafkaVersion)
		case len(d.RefusedActions) != 1 || !strings.Contains(d.RefusedActions[0].Command, "rolling-restart"):
			t.Fatalf("refused actions: %+v", d.RefusedActions)
		case d.Hints != 1:
			t.Fatalf("hints %d", d.Hints)
		case d.TimeToFirstDiagnoseS == nil || d.TimeToResolvedS == nil || *d.TimeToFirstDiagnoseS >= *d.TimeToResolvedS:
			t.Fatalf("time to first diagnose %v, to resolved %v", d.TimeToFirstDiagnoseS, d.TimeToResolvedS)
		case d.OutageS <= 0:
			t.Fatalf("no outage measured: %+v", d.Runs)
		}
		l, err := lab.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		by := d.Traffic.Topics["orders-v2"]
		if by.Lost != 0 || by.Failed != 0 || by.Acked == 0 || by.Consumed != by.Acked {
			t.Fatalf("the bystander's customers: %+v", by)
		}
		if n := ourRecords(t, l, "orders-v2"); n != by.Acked {
			t.Fatalf("the bystander holds %d of the customers' records; the traffic counted %d acknowledged", n, by.Acked)
		}
		o := d.Traffic.Topics["orders"]
		if o.Consumed+o.Lost != o.Acked || o.Acked == 0 {
			t.Fatalf("orders' counts do not add up: %+v", o)
		}
		// The recreated topic holds what was written after the repair, every
		// record of it acknowledged and read.
		if n := ourRecords(t, l, "orders"); n == 0 || n > o.Acked {
			t.Fatalf("the recreated orders holds %d of the customers' records (acknowledged in all: %d)", n, o.Acked)
		}
		t.Logf("FIGURE drill: time to first diagnose %.1f s, to resolved %.1f s, outage %.1f s; customers: %d sent, %d failed, %d lost, %d duplicated, max latency %d ms",
			*d.TimeToFirstDiagnoseS, *d.TimeToResolvedS, d.OutageS, d.Traffic.Sent, d.Traffic.Failed, d.Traffic.Lost, d.Traffic.Duplicated, d.Traffic.MaxLatencyMs)
	})

	t.Run("given up on a secured lab", func(t *testing.T) {
		dir := startDrill(t, "45", "stale-metadata", "--secure")
		r := kremedy(t, "drill", "end", "--dir", dir, "--json")
		if r.code != 1 {
			t.Fatalf("drill end of an unrepaired drill: exit %d\n%s", r.code, r.out)
		}
		d := readDebrief(t, dir)
		if d.Resolved || len(d.Remains) == 0 || !strings.Contains(strings.Join(d.Remains, " "), "diagnose") {
			t.Fatalf("an unrepaired drill: resolved %v, remains %v", d.Resolved, d.Remains)
		}
		// The customers ran through SASL_SSL: acknowledged writes, none lost.
		if by := d.Traffic.Topics[d.Topic+"-v2"]; !d.Secure || d.Traffic.Sent == 0 || by.Acked == 0 || d.Traffic.Lost != 0 {
			t.Fatalf("secured drill traffic: secure %v, %+v", d.Secure, d.Traffic)
		}
		if d.TimeToFirstDiagnoseS != nil || d.TimeToResolvedS != nil {
			t.Fatalf("nothing was diagnosed or resolved: %v %v", d.TimeToFirstDiagnoseS, d.TimeToResolvedS)
		}
		if r := kremedy(t, "drill", "hint", "--dir", dir); r.code != 2 {
			t.Fatalf("a hint after the end: exit %d", r.code)
		}
	})
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
