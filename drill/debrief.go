package drill

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// RunScore is one of the trainee's runbook runs, read from its journal by
// the caller: the outage window and the operator's time inside it, and
// each step's end.
type RunScore struct {
	RunDir   string      `json:"run_dir"`
	Runbook  string      `json:"runbook"`
	OutageS  float64     `json:"outage_s"`
	WaitS    float64     `json:"operator_wait_in_outage_s"`
	Steps    []StepScore `json:"steps"`
	Finished bool        `json:"finished"`
	// Failures are the steps that failed while the run went, each time
	// one did (a step retried to done is still one).
	Failures []Refusal `json:"step_failures,omitempty"`
}

// StepScore is a step of a run: done, skipped, failed or not reached, and
// its why-note (the runbook's reason for it).
type StepScore struct {
	ID    string    `json:"id"`
	State string    `json:"state"`
	Why   string    `json:"why,omitempty"`
	At    time.Time `json:"at,omitzero"`
}

// Refusal is a command kremedy refused or that failed its checks.
type Refusal struct {
	At      time.Time `json:"at"`
	Command string    `json:"command"`
	Why     string    `json:"why"`
}

// Event is one line of the debrief's timeline.
type Event struct {
	At   time.Time `json:"at"`
	From string    `json:"from"` // page, trainee, kremedy, traffic, drill
	What string    `json:"what"`
}

// TrafficScore is the customers' experience, over every topic.
type TrafficScore struct {
	Sent         int64             `json:"sent"`
	Failed       int64             `json:"failed"`
	Lost         int64             `json:"lost"`
	Duplicated   int64             `json:"duplicated"`
	MaxLatencyMs int64             `json:"max_latency_ms"`
	Topics       map[string]Counts `json:"topics"`
}

// Debrief is a drill's score.
type Debrief struct {
	Resolved              bool         `json:"resolved"`
	Scenario              string       `json:"scenario"`
	Topic                 string       `json:"topic"`
	KafkaVersion          string       `json:"kafka_version"`
	Secure                bool         `json:"secure,omitempty"`
	Seed                  uint64       `json:"seed"`
	Started               time.Time    `json:"started"`
	Ended                 time.Time    `json:"ended"`
	TimeToFirstDiagnoseS  *float64     `json:"time_to_first_diagnose_s"`
	TimeToResolvedS       *float64     `json:"time_to_resolved_s"`
	RefusedActions        []Refusal    `json:"refused_actions"`
	Hints                 int          `json:"hints"`
	OutageS               float64      `json:"outage_s"`
	OperatorWaitInOutageS float64      `json:"operator_wait_in_outage_s"`
	Traffic               TrafficScore `json:"traffic"`
	Remains               []string     `json:"remains,omitempty"` // what is still broken
	Runs                  []RunScore   `json:"runs"`
	Missed                []StepScore  `json:"missed_steps,omitempty"`
	Reference             Reference    `json:"reference"`
	Earlier               []Past       `json:"earlier_attempts,omitempty"`
	Timeline              []Event      `json:"timeline"`
}

// Inputs is everything the debrief is made of.
type Inputs struct {
	State    *State
	Commands []Command
	Traffic  *TrafficState
	Runs     []RunScore
	Remains  []string // empty: the victory check passed
	Earlier  []Past
	Now      time.Time
}

func secs(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

// Score makes the debrief.
func Score(in Inputs) Debrief {
	s := in.State
	d := Debrief{Scenario: s.Scenario, Topic: s.Topic, KafkaVersion: s.KafkaVersion, Secure: s.Secure, Seed: s.Seed, Started: s.Started, Ended: in.Now,
		Hints: len(s.Hints), Reference: Scenarios[s.Scenario].Reference, Earlier: in.Earlier, Runs: in.Runs, Remains: in.Remains,
		Resolved: len(in.Remains) == 0, RefusedActions: []Refusal{}}
	d.Timeline = append(d.Timeline, Event{At: s.Started, From: "page", What: firstLine(s.Page)})
	for _, c := range in.Commands {
		line := "kremedy " + strings.Join(c.Args, " ")
		what := fmt.Sprintf("%s → exit %d (%.1fs)", line, c.Exit, c.TookS)
		if c.Exit < 0 {
			what = line + " → did not end (killed, or still running)"
		}
		d.Timeline = append(d.Timeline, Event{At: c.At, From: "trainee", What: what})
		if c.Verb == "diagnose" && d.TimeToFirstDiagnoseS == nil {
			v := secs(c.At.Sub(s.Started))
			d.TimeToFirstDiagnoseS = &v
		}
		if c.Exit > 0 && (c.Verb == "run" || c.Verb == "resume" || c.Verb == "plan") {
			d.RefusedActions = append(d.RefusedActions, Refusal{At: c.At, Command: line, Why: firstLine(c.Error)})
		}
	}
	for _, h := range s.Hints {
		d.Timeline = append(d.Timeline, Event{At: h.At, From: "drill", What: fmt.Sprintf("hint %d: %s", h.Level, h.Text)})
	}
	for _, r := range in.Runs {
		d.OutageS += r.OutageS
		d.OperatorWaitInOutageS += r.WaitS
		for _, f := range r.Failures {
			d.RefusedActions = append(d.RefusedActions, f)
			d.Timeline = append(d.Timeline, Event{At: f.At, From: "kremedy", What: fmt.Sprintf("%s failed: %s", f.Command, firstLine(f.Why))})
		}
		for _, st := range r.Steps {
			if !st.At.IsZero() {
				d.Timeline = append(d.Timeline, Event{At: st.At, From: "kremedy", What: fmt.Sprintf("%s: %s %s", r.Runbook, st.ID, st.State)})
			}
		}
	}
	// The missed steps are those of the last run of the scenario's runbook
	// (none run: every step of it is missed, said by Remains).
	for i := len(in.Runs) - 1; i >= 0; i-- {
		if in.Runs[i].Runbook != Scenarios[s.Scenario].Runbook {
			continue
		}
		for _, st := range in.Runs[i].Steps {
			if st.State != "done" && st.State != "no-op" {
				d.Missed = append(d.Missed, st)
			}
		}
		break
	}
	if s.Resolved != nil {
		v := secs(s.Resolved.Sub(s.Started))
		d.TimeToResolvedS = &v
		d.Timeline = append(d.Timeline, Event{At: *s.Resolved, From: "drill", What: "victory check passed: diagnose clean, traffic flowing on every topic"})
	}
	if t := in.Traffic; t != nil {
		d.Traffic.Topics = t.Topics
		for _, name := range slices.Sorted(mapKeys(t.Topics)) {
			c := t.Topics[name]
			d.Traffic.Sent += c.Sent
			d.Traffic.Failed += c.Failed
			d.Traffic.Lost += c.Lost
			d.Traffic.Duplicated += c.Duplicated
			d.Traffic.MaxLatencyMs = max(d.Traffic.MaxLatencyMs, c.MaxLatencyMs)
			d.Timeline = append(d.Timeline, Event{At: t.At, From: "traffic", What: fmt.Sprintf("%s: %d sent, %d acknowledged, %d failed, %d read, %d lost, %d duplicated, max latency %d ms",
				name, c.Sent, c.Acked, c.Failed, c.Consumed, c.Lost, c.Duplicated, c.MaxLatencyMs)})
		}
	}
	slices.SortStableFunc(d.RefusedActions, func(a, b Refusal) int { return a.At.Compare(b.At) })
	slices.SortStableFunc(d.Timeline, func(a, b Event) int { return a.At.Compare(b.At) })
	return d
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func orDash(f *float64) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f s", *f)
}

// Markdown is the debrief for the trainee and their mentor: the verdict,
// what remains broken, the score, the customers, what was refused or
// failed, the missed steps, the earlier drills and the timeline.
func (d Debrief) Markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	d.mdHead(w)
	d.mdScore(w)
	d.mdCustomers(w)
	d.mdLists(w)
	w("## Timeline (UTC)")
	for _, e := range d.Timeline {
		w("- %s [%s] %s", e.At.UTC().Format("15:04:05"), e.From, e.What)
	}
	return b.String()
}

// mdLine writes one line of the debrief's Markdown.
type mdLine func(format string, a ...any)

// mdHead is the verdict, the hidden cause and, when unresolved, what
// remains broken.
func (d Debrief) mdHead(w mdLine) {
	verdict := "RESOLVED"
	if !d.Resolved {
		verdict = "NOT RESOLVED"
	}
	w("# Drill debrief — %s", verdict)
	w("")
	secured := ""
	if d.Secure {
		secured = ", secured: SASL_SSL, ZooKeeper ACLs, SSH through sudo"
	}
	w("The hidden cause was **%s** on topic `%s` (Kafka %s%s, seed %d). Started %s, ended %s.", d.Scenario, d.Topic, d.KafkaVersion, secured, d.Seed,
		d.Started.UTC().Format(time.RFC3339), d.Ended.UTC().Format(time.RFC3339))
	w("")
	if !d.Resolved {
		w("## What remains broken")
		for _, r := range d.Remains {
			w("- %s", r)
		}
		w("")
	}
}

// mdScore is the score table beside the scenario's reference.
func (d Debrief) mdScore(w mdLine) {
	w("## Score")
	ref := func(v float64) string {
		if d.Reference.Measured == "" {
			return "not measured"
		}
		return fmt.Sprintf("%.1f s", v)
	}
	w("| | this drill | reference (%s, headless) |", Scenarios[d.Scenario].Runbook)
	w("|---|---|---|")
	w("| time to first diagnose | %s | — |", orDash(d.TimeToFirstDiagnoseS))
	w("| time to resolved | %s | the run alone: %s |", orDash(d.TimeToResolvedS), ref(d.Reference.RunS))
	w("| outage (brokers down, from the runs' journals) | %.1f s | %s |", d.OutageS, ref(d.Reference.OutageS))
	w("| operator wait inside the outage | %.1f s | 0 s |", d.OperatorWaitInOutageS)
	w("| hints | %d | — |", d.Hints)
	w("| refused or failed actions | %d | 0 |", len(d.RefusedActions))
	w("")
	if d.Reference.Measured != "" {
		w("Reference measured: %s.", d.Reference.Measured)
	} else {
		w("No reference was measured for this scenario yet.")
	}
	w("")
}

// mdCustomers is what the customers saw, in all and by topic.
func (d Debrief) mdCustomers(w mdLine) {
	w("## Customers")
	w("%d records sent, %d failed, **%d lost** (acknowledged, never read), %d duplicated; longest send-to-read %d ms.",
		d.Traffic.Sent, d.Traffic.Failed, d.Traffic.Lost, d.Traffic.Duplicated, d.Traffic.MaxLatencyMs)
	for _, name := range slices.Sorted(mapKeys(d.Traffic.Topics)) {
		c := d.Traffic.Topics[name]
		w("- `%s`: %d sent, %d acknowledged, %d failed, %d read, %d lost, %d duplicated", name, c.Sent, c.Acked, c.Failed, c.Consumed, c.Lost, c.Duplicated)
	}
	w("")
}

// mdLists are the sections shown only when they hold something: what was
// refused or failed, the steps missed, the earlier drills.
func (d Debrief) mdLists(w mdLine) {
	if len(d.RefusedActions) > 0 {
		w("## What kremedy refused, or what failed and was retried")
		for _, r := range d.RefusedActions {
			w("- %s `%s`: %s", r.At.UTC().Format("15:04:05"), r.Command, r.Why)
		}
		w("")
	}
	if len(d.Missed) > 0 {
		w("## Steps skipped or not done (and why they matter)")
		for _, st := range d.Missed {
			w("- **%s** (%s): %s", st.ID, st.State, firstLine(st.Why))
		}
		w("")
	}
	if len(d.Earlier) > 0 {
		w("## Earlier drills on this machine")
		for _, p := range d.Earlier {
			res := "not resolved"
			if p.Resolved {
				res = fmt.Sprintf("resolved in %.1f s", p.TimeToResolved)
			}
			w("- %s %s: %s, %d hints", p.Ended.UTC().Format("2006-01-02 15:04"), p.Scenario, res, p.Hints)
		}
		w("")
	}
}
