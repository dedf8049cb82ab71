package steps

import (
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
)

var eventKindNames = [...]string{"state", "log", "output", "check", "plan", "progress"}

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
	Err   error
}

// Reporter receives events; the TUI, the headless printer and tests are
// reporters. It must not block for long.
type Reporter interface{ Report(Event) }

// ReporterFunc adapts a function.
type ReporterFunc func(Event)

func (f ReporterFunc) Report(e Event) { f(e) }
