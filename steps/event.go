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
)

var eventKindNames = [...]string{"state", "log", "output", "check", "plan", "progress", "brokers", "status", "action"}

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
		Err   string    `json:"error,omitempty"`
		Down  *int      `json:"brokers_down,omitempty"`
		Total int       `json:"brokers,omitempty"`
	}{Time: e.Time.UTC(), Step: e.Step, Kind: e.Kind.String(), Host: e.Host, Text: e.Text, Check: e.Check, Plan: e.Plan, Act: e.Action}
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

// Reporter receives events; the TUI, the headless printer and tests are
// reporters. It must not block for long.
type Reporter interface{ Report(Event) }

// ReporterFunc adapts a function.
type ReporterFunc func(Event)

func (f ReporterFunc) Report(e Event) { f(e) }
