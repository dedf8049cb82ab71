package drill

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
)

// TestStepFailuresRetriedAreCounted: a step that failed and was retried
// in the same TUI session to done counts as a failure though the command
// exited 0; the failure that ended a command exiting 1 is that command's
// refusal, not counted twice.
func TestStepFailuresRetriedAreCounted(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 20, 54, 0, time.UTC)
	failed := func(at time.Duration, step string) journal.Record {
		b, _ := json.Marshal(map[string]string{"error": "step " + step + ": the pause did not finish in 30 s"})
		return journal.Record{Time: t0.Add(at), Type: journal.StepFailed, Step: step, Data: b}
	}
	meta, _ := json.Marshal(steps.Meta{ID: "r", Runbook: "topic-cleanup"})
	end, _ := json.Marshal(map[string]bool{"ok": false})
	recs := []journal.Record{{Time: t0, Type: journal.RunStart, Data: meta}, failed(48*time.Second, "detach-clients"), {Time: t0.Add(48 * time.Second), Type: journal.RunEnd, Data: end}, failed(10*time.Minute, "verify")}
	for i := range recs {
		recs[i].Seq = int64(i + 1)
	}
	v, err := steps.ViewRecords(recs)
	if err != nil {
		t.Fatal(err)
	}
	cmds := []Command{
		{At: t0, TookS: 459, Exit: 0, Verb: "run"},                        // the TUI session: detach-clients failed, r, done
		{At: t0.Add(9 * time.Minute), TookS: 61, Exit: 1, Verb: "resume"}, // ended by verify's failure
	}
	got := stepFailures(v, "topic-cleanup", cmds)
	if len(got) != 1 || got[0].Command != "topic-cleanup: step detach-clients" || !got[0].At.Equal(t0.Add(48*time.Second)) {
		t.Fatalf("step failures %+v: want only the retried detach-clients", got)
	}
	d := Score(Inputs{State: &State{Scenario: "ghost-topic", Started: t0}, Runs: []RunScore{{Runbook: "topic-cleanup", Failures: got}}, Now: t0.Add(time.Hour)})
	if len(d.RefusedActions) != 1 || d.RefusedActions[0].Command != "topic-cleanup: step detach-clients" {
		t.Fatalf("debrief's refused or failed actions: %+v", d.RefusedActions)
	}
}
