package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"
)

// Risk says how much a step can hurt.
type Risk int

const (
	ReadOnly Risk = iota
	Low
	Destructive
)

func (r Risk) String() string {
	return [...]string{"read-only", "low", "destructive"}[r]
}

// ParseRisk reads a runbook's risk value.
func ParseRisk(s string) (Risk, error) {
	for r := ReadOnly; r <= Destructive; r++ {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("unknown risk %q", s)
}

// Confirm is a step's confirmation policy.
type Confirm int

const (
	ConfirmNone  Confirm = iota
	ConfirmYes           // y/N, default No
	ConfirmTyped         // the operator types the topic name
)

func (c Confirm) String() string { return [...]string{"none", "yes", "typed"}[c] }

// ParseConfirm reads a runbook's confirm value.
func ParseConfirm(s string) (Confirm, error) {
	for c := ConfirmNone; c <= ConfirmTyped; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown confirm policy %q", s)
}

// Info is a step's static description, from its runbook.
type Info struct {
	ID       string        `json:"id"`
	Kind     string        `json:"kind"`
	Title    string        `json:"title"`
	Why      string        `json:"why"`
	Risk     Risk          `json:"risk"`
	Confirm  Confirm       `json:"confirm"`
	Rollback string        `json:"-"` // template
	Timeout  time.Duration `json:"timeout"`
}

// Action is one concrete thing a plan will do.
type Action struct {
	Kind    string `json:"kind"`              // zk-delete, zk-set, ssh, move, kafka, wait, save
	Target  string `json:"target"`            // znode path, broker, directory
	Detail  string `json:"detail,omitempty"`  // command, destination, what is saved
	Version *int32 `json:"version,omitempty"` // the znode version the plan read
	Broker  int32  `json:"broker,omitempty"`
}

func (a Action) String() string {
	s := a.Kind + " " + a.Target
	if a.Version != nil {
		s += fmt.Sprintf(" (version %d)", *a.Version)
	}
	if a.Detail != "" {
		s += ": " + a.Detail
	}
	return s
}

// Plan is what a step will do, computed read-only from the cluster as it is
// now. Apply acts on exactly this plan.
type Plan struct {
	Step     string          `json:"step"`
	Kind     string          `json:"kind,omitempty"`
	Summary  string          `json:"summary"`
	Actions  []Action        `json:"actions"`
	Notes    []string        `json:"notes,omitempty"`
	Facts    []string        `json:"facts,omitempty"` // what the step saw (preflight, diagnosis)
	NoOp     bool            `json:"noop,omitempty"`  // nothing to do: already in the wanted state
	Rollback string          `json:"rollback,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"` // step-private data Apply consumes
}

// Check is one pre- or postcondition result.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

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

func (s State) String() string {
	return [...]string{"pending", "planning", "waiting for confirmation", "running", "done", "failed", "skipped"}[s]
}

// EventKind says what an Event carries.
type EventKind int

const (
	EvState  EventKind = iota // a step changed state
	EvLog                     // a line from kremedy itself
	EvOutput                  // a line of remote output
	EvCheck                   // a check result
	EvPlan                    // a plan is ready
)

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

// Decision is the operator's answer to a plan.
type Decision int

const (
	Approve Decision = iota
	Skip
	Abort
)

// Approval answers one confirmation.
type Approval struct {
	Decision Decision
	Typed    string // for ConfirmTyped: what the operator typed
	Reason   string // for Skip: why (journaled)
	By       string // who approved (user name, "headless --yes")
}

// Approver is asked before any step with a confirmation policy. It never
// sees a step whose plan is a no-op.
type Approver interface {
	Approve(ctx context.Context, info Info, plan *Plan) (Approval, error)
}

// Errors the engine returns; each is wrapped with the step and the cause.
var (
	ErrCheckFailed = errors.New("check failed")
	ErrRefused     = errors.New("refused")
	ErrAborted     = errors.New("aborted by the operator")
	ErrStalePlan   = errors.New("the cluster changed after the plan was made")
	// ErrUnhosted: every broker answered that it hosts no replica of the
	// partition (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnhosted = errors.New("no broker hosts it")
	// ErrOutcomeUnknown: the action was sent but its result never came
	// back (a dropped SSH session); adapters wrap it.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	ErrNotApproved    = errors.New("confirmation does not match")
)

// Kind implements one kind of step. Plan is read-only. Apply performs
// exactly the plan and is idempotent: applying a plan whose actions are
// already done succeeds. Verify re-checks the step's postconditions; on
// resume it is what proves an earlier completion still holds.
type Kind interface {
	Plan(ctx context.Context, r *Run) (*Plan, error)
	Apply(ctx context.Context, r *Run, p *Plan) error
	Verify(ctx context.Context, r *Run) ([]Check, error)
}

// Step is a configured step of a runbook.
type Step struct {
	Info Info
	Kind Kind
}

// RenderRollback fills a rollback-note template with this run's paths.
func (r *Run) RenderRollback(tmpl string) (string, error) {
	if strings.TrimSpace(tmpl) == "" {
		return "", nil
	}
	t, err := template.New("rollback").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, r.templateData()); err != nil {
		return "", err
	}
	return strings.TrimSpace(b.String()), nil
}
