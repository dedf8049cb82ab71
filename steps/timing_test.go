package steps

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
)

// TestOutageWindowAndTimeSplit: the report's outage window runs from the
// first broker down to the end of the step whose health gate brought them
// back, and each step's time is split into waiting for the operator and
// working; answers given ahead count for their step.
func TestOutageWindowAndTimeSplit(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 6, 47, 0, 0, time.UTC)
	var recs []journal.Record
	at := func(s int, typ, step string, data any) {
		b, _ := json.Marshal(data)
		recs = append(recs, journal.Record{Time: t0.Add(time.Duration(s) * time.Second), Type: typ, Step: step, Data: b})
	}
	down := func(s, n int, step string) {
		at(s, journal.Note, step, map[string]any{"text": "down", "brokers_down": n, "brokers": 3})
	}
	at(0, journal.StepStart, "stop-brokers", nil)
	at(1, journal.Plan, "stop-brokers", map[string]any{"summary": "stop"})
	at(11, journal.Approval, "stop-brokers", map[string]any{"decision": "approve"}) // 10 s reading
	at(12, journal.Plan, "wipe-segments", map[string]any{"summary": "wipe", "ahead": true})
	at(20, journal.Note, "wipe-segments", map[string]any{"text": "confirmed ahead", "approval": map[string]any{}}) // 8 s, ahead
	down(22, 1, "stop-brokers")
	down(24, 3, "stop-brokers")
	at(25, journal.StepDone, "stop-brokers", nil)
	at(25, journal.StepStart, "wipe-segments", nil)
	at(25, journal.Plan, "wipe-segments", map[string]any{"summary": "wipe"})
	at(25, journal.Approval, "wipe-segments", map[string]any{"decision": "approve"})
	at(26, journal.StepDone, "wipe-segments", nil)
	at(26, journal.StepStart, "start-brokers", nil)
	down(30, 0, "start-brokers")
	at(41, journal.StepDone, "start-brokers", nil)

	steps, out := timings(recs)
	if out == nil || out.Open || !out.Start.Equal(t0.Add(22*time.Second)) || !out.End.Equal(t0.Add(41*time.Second)) || out.MaxDown != 3 || out.Waiting != 0 {
		t.Fatalf("outage %+v", out)
	}
	want := map[string][2]time.Duration{ // waiting, working
		"stop-brokers":  {10 * time.Second, 7 * time.Second}, // the 8 s answered ahead are the wipe's
		"wipe-segments": {8 * time.Second, time.Second},
		"start-brokers": {0, 15 * time.Second},
	}
	for _, s := range steps {
		w := want[s.ID]
		if s.Waiting != w[0] || s.Working != w[1] {
			t.Errorf("%s: waiting %s working %s, want %s and %s", s.ID, s.Waiting, s.Working, w[0], w[1])
		}
	}
	r := reportTimes(recs)
	for _, s := range []string{"all 3 brokers down from 06:47:22 to 06:47:41", "**19s**, of which 0s waiting", "| wipe-segments | 1s | 8s |"} {
		if !strings.Contains(r, s) {
			t.Errorf("report lacks %q:\n%s", s, r)
		}
	}
}
