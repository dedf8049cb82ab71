package steps

import (
	"encoding/json"
	"fmt"
	"time"
)

// State of a step in a run.
type State int

const (
	Pending State = iota
	Planning
	Confirming
	Running
	Done
	Failed
	Skipped
)

var stateNames = [...]string{"pending", "planning", "waiting for confirmation", "running", "done", "failed", "skipped"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// EventKind says what an Event carries.
type EventKind int

const (
	EvState    EventKind = iota // a step changed state
	EvLog                       // a line from kremedy itself
	EvOutput                    // a line of remote output
	EvCheck                     // a check result
	EvPlan                      // a plan is ready
	EvProgress                  // what a running step waits for now (not journaled)
	EvBrokers                   // how many of the cluster's brokers are stopped now
	EvStatus                    // where the cluster stands, for the run's header (a migration's phase); journaled as a note
	EvAction                    // an action of the plan starts (Action; Text is its one-line form); journaled as action-start
	EvApproval                  // a decision about a plan was journaled (Approval: who, which digest, signoffs)
	EvOutage                    // the outage window opened or closed (Outage), as the report computes it
	EvWaiting                   // the run waits for someone other than the operator (a second approval of Plan); Text says how to give it
)

var eventKindNames = [...]string{"state", "log", "output", "check", "plan", "progress", "brokers", "status", "action", "approval", "outage", "waiting"}

func (k EventKind) String() string {
	if k < 0 || int(k) >= len(eventKindNames) {
		return fmt.Sprintf("EventKind(%d)", int(k))
	}
	return eventKindNames[k]
}

// Event is what the engine reports while it runs.
type Event struct {
	Time  time.Time
	Step  string
	Kind  EventKind
	State State
	Host  string
	Text  string
	Check *Check
	Plan  *Plan
	// Action is the action that starts (EvAction).
	Action *Action
	// Approval is the decision journaled (EvApproval).
	Approval *Approval
	// Outage is the outage window as it stands (EvOutage).
	Outage *Outage
	Err    error
	// Down of Total brokers are stopped (EvBrokers).
	Down, Total int
}

// MarshalJSON is the event as `--output jsonl` prints it: kind and state by
// name, the error as text, empty fields left out.
func (e Event) MarshalJSON() ([]byte, error) {
	v := struct {
		Time  time.Time `json:"time"`
		Step  string    `json:"step,omitempty"`
		Kind  string    `json:"kind"`
		State string    `json:"state,omitempty"`
		Host  string    `json:"host,omitempty"`
		Text  string    `json:"text,omitempty"`
		Check *Check    `json:"check,omitempty"`
		Plan  *Plan     `json:"plan,omitempty"`
		Act   *Action   `json:"action,omitempty"`
		Appr  *approval `json:"approval,omitempty"`
		Out   *Outage   `json:"outage,omitempty"`
		Err   string    `json:"error,omitempty"`
		Down  *int      `json:"brokers_down,omitempty"`
		Total int       `json:"brokers,omitempty"`
	}{Time: e.Time.UTC(), Step: e.Step, Kind: e.Kind.String(), Host: e.Host, Text: e.Text, Check: e.Check, Plan: e.Plan, Act: e.Action, Out: e.Outage}
	if e.Approval != nil {
		v.Appr = approvalJSON(*e.Approval)
	}
	if e.Kind == EvBrokers {
		v.Down, v.Total = &e.Down, e.Total
	}
	if e.Kind == EvState {
		v.State = e.State.String()
	}
	if e.Err != nil {
		v.Err = e.Err.Error()
	}
	return json.Marshal(v)
}

// approval is an Approval as the journal and `--output jsonl` write it:
// the decision by name, never what was typed.
type approval struct {
	Decision string    `json:"decision"`
	By       string    `json:"by"`
	Digest   string    `json:"digest,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Signoffs []Signoff `json:"signoffs,omitempty"`
}

func approvalJSON(a Approval) *approval {
	return &approval{Decision: a.Decision.String(), By: a.By, Digest: a.Digest, Reason: a.Reason, Signoffs: a.Signoffs}
}

// Outage is the window in which brokers were down, as the report computes
// it from the journal's "brokers down" notes: it opens at the first note
// with a broker down and closes at the end of the step that brought the
// count back to 0 (its health gate included). A run has at most one.
type Outage struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
	// Open: the brokers are not all back yet (or were not when the journal
	// ended).
	Open    bool `json:"open"`
	MaxDown int  `json:"max_down"`
	Total   int  `json:"brokers"`
}

// Length is how long the window lasted (0 while it is open).
func (o Outage) Length() time.Duration {
	if o.Open || o.End.IsZero() {
		return 0
	}
	return o.End.Sub(o.Start)
}

// Reporter receives events; the TUI, the headless printer and tests are
// reporters. It must not block for long.
type Reporter interface{ Report(Event) }

// ReporterFunc adapts a function.
type ReporterFunc func(Event)

func (f ReporterFunc) Report(e Event) { f(e) }

// Reporters reports every event to each of rs in turn (the screen's
// reporter and the notifications, say); nil ones are left out.
func Reporters(rs ...Reporter) Reporter {
	var out multiReporter
	for _, r := range rs {
		if r != nil {
			out = append(out, r)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

type multiReporter []Reporter

func (m multiReporter) Report(e Event) {
	for _, r := range m {
		r.Report(e)
	}
}
