package steps

import (
	"fmt"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
)

// stepTime is how a step's time split: waiting for the operator (from a
// plan shown to the answer, ahead ones included) and working (the rest of
// the time between its start and its end).
type stepTime struct {
	ID               string
	Waiting, Working time.Duration
	Ended            bool
}

// outage is the report's outage window (Outage) and the operator time
// inside it.
type outage struct {
	Outage
	Waiting time.Duration // operator time inside the window
}

// outageTracker follows the outage window record by record: the report
// reads it over the whole journal, the recorder as records are written (to
// report EvOutage when the window opens and closes).
type outageTracker struct {
	out     *Outage
	backTo0 string // the step that brought the count back to 0, until it ends
}

// feed folds one record in; it returns the window when r opened or closed
// it, else nil.
func (t *outageTracker) feed(r journal.Record) *Outage {
	switch r.Type {
	case journal.Note:
		d, _ := journal.Decode[map[string]any](r)
		down, ok := d["brokers_down"].(float64)
		if !ok {
			return nil
		}
		total, _ := d["brokers"].(float64)
		var changed *Outage
		switch {
		case down > 0 && t.out == nil:
			t.out = &Outage{Start: r.Time, Open: true, Total: int(total)}
			changed = t.out
		case down > 0:
			t.backTo0 = "" // down again before that step ended
		case t.out != nil && t.out.Open:
			t.backTo0 = r.Step
		}
		if t.out != nil && t.out.Open {
			t.out.MaxDown = max(t.out.MaxDown, int(down))
		}
		if changed != nil {
			c := *changed
			return &c
		}
	case journal.StepDone:
		if t.out != nil && t.out.Open && t.backTo0 == r.Step {
			t.out.End, t.out.Open = r.Time, false
			c := *t.out
			return &c
		}
	}
	return nil
}

// current is the window so far (nil: no broker was down).
func (t *outageTracker) current() *Outage {
	if t.out == nil {
		return nil
	}
	c := *t.out
	return &c
}

// timings reads the journal's step times and the outage window.
func timings(recs []journal.Record) ([]stepTime, *outage) {
	var order []string
	byID := map[string]*stepTime{}
	get := func(id string) *stepTime {
		if byID[id] == nil {
			byID[id] = &stepTime{ID: id}
			order = append(order, id)
		}
		return byID[id]
	}
	start := map[string]time.Time{}
	shown := map[string]time.Time{} // step -> when its plan awaited an answer
	var tr outageTracker
	var waits [][2]time.Time
	for _, r := range recs {
		tr.feed(r)
		switch r.Type {
		case journal.StepStart:
			start[r.Step] = r.Time
			get(r.Step)
		case journal.Plan:
			shown[r.Step] = r.Time
		case journal.Approval:
			if t, ok := shown[r.Step]; ok {
				get(r.Step).Waiting += r.Time.Sub(t)
				waits = append(waits, [2]time.Time{t, r.Time})
				delete(shown, r.Step)
			}
		case journal.Note:
			d, _ := journal.Decode[map[string]any](r)
			if _, ok := d["approval"]; ok { // an answer given ahead
				if t, ok := shown[r.Step]; ok {
					get(r.Step).Waiting += r.Time.Sub(t)
					waits = append(waits, [2]time.Time{t, r.Time})
					delete(shown, r.Step)
				}
			}
		case journal.StepDone, journal.StepFailed, journal.StepSkipped:
			st := get(r.Step)
			if t, ok := start[r.Step]; ok {
				// Working: the step's time less every wait for the operator
				// inside it (an answer given ahead for a later step too).
				st.Working, st.Ended = r.Time.Sub(t)-overlap(waits, t, r.Time), true
			}
		}
	}
	var out *outage
	if o := tr.current(); o != nil {
		out = &outage{Outage: *o}
	}
	var steps []stepTime
	for _, id := range order {
		steps = append(steps, *byID[id])
	}
	if out != nil {
		end := out.End
		if out.Open && len(recs) > 0 {
			end = recs[len(recs)-1].Time
		}
		out.Waiting = overlap(waits, out.Start, end)
	}
	return steps, out
}

// overlap is how much of the waits falls inside [from, to].
func overlap(waits [][2]time.Time, from, to time.Time) time.Duration {
	var d time.Duration
	for _, w := range waits {
		a, b := maxTime(w[0], from), minTime(w[1], to)
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// reportTimes is the report's outage line and its table of step times.
func reportTimes(recs []journal.Record) string {
	steps, out := timings(recs)
	var b strings.Builder
	if out != nil {
		who := fmt.Sprintf("up to %d of %d brokers down", out.MaxDown, out.Total)
		if out.MaxDown == out.Total {
			who = fmt.Sprintf("all %d brokers down", out.Total)
		}
		if out.Open {
			fmt.Fprintf(&b, "\n## Outage window\n\n%s from %s UTC, **still open** when the run stopped; %s of it waiting for the operator.\n",
				who, out.Start.UTC().Format("15:04:05"), out.Waiting.Round(time.Second))
		} else {
			fmt.Fprintf(&b, "\n## Outage window\n\n%s from %s to %s UTC (the health gate passed): **%s**, of which %s waiting for the operator.\n",
				who, out.Start.UTC().Format("15:04:05"), out.End.UTC().Format("15:04:05"), out.End.Sub(out.Start).Round(100*time.Millisecond), out.Waiting.Round(100*time.Millisecond))
		}
	}
	if len(steps) == 0 {
		return b.String()
	}
	b.WriteString("\n## Time per step\n\n| step | working | waiting for the operator |\n|---|---|---|\n")
	for _, s := range steps {
		work := "-"
		if s.Ended {
			work = s.Working.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", s.ID, work, s.Waiting.Round(time.Millisecond))
	}
	return b.String()
}

// Outage is the run's outage window (nil when no broker was down) and the
// operator's time inside it.
func (v *RunView) Outage() (*Outage, time.Duration) {
	_, o := timings(v.Records)
	if o == nil {
		return nil, 0
	}
	return &o.Outage, o.Waiting
}
