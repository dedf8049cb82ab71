package tui

import (
	"context"
	"errors"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/kremedy/kremedy/steps"
)

// Mode says what kind of cluster the run touches; the header shows it in
// an unmistakable colour.
type Mode int

const (
	Live Mode = iota
	Lab
	DryRun
)

func (m Mode) String() string {
	return [...]string{"LIVE cluster", "LAB", "DRY-RUN"}[m]
}

// ModeOf derives the mode from a run's metadata.
func ModeOf(lab, dryRun bool) Mode {
	switch {
	case dryRun:
		return DryRun
	case lab:
		return Lab
	default:
		return Live
	}
}

// StartFunc walks the runbook with the given Approver and Reporter and
// returns how it ended. The caller owns the run's steps.Session (its journal); the TUI
// calls it once to start, and again (never concurrently) when the operator
// retries or re-checks a failed step, so it must continue from the journal
// on every later call.
type StartFunc func(ctx context.Context, a steps.Approver, r steps.Reporter) (steps.Outcome, error)

// Resume describes an unfinished run found in the run directory.
type Resume struct {
	// Ask offers the resume on the first screen and starts nothing until the
	// operator accepts; false means the operator already asked for it
	// (`kremedy resume`).
	Ask           bool
	ID            string
	Started       time.Time
	Done, Skipped []string
	Stopped       string // the step the earlier attempt stopped at, if known
	Records       int    // journal records so far
}

// Artifact is a file the run produced that the operator should know about.
type Artifact struct{ What, Path string }

// Options is everything the TUI needs; cmd builds it.
type Options struct {
	// Steps are the runbook's steps as the UI shows them: it never runs one.
	Steps []steps.Info
	Start StartFunc

	Runbook, Cluster string
	// Confirm is what a destructive step's operator types, and what it is.
	Confirm            steps.Confirmation
	Mode               Mode
	RunDir, ReportPath string
	Resume             *Resume

	// Artifacts lists the backups and files that exist now; it is called
	// off the UI goroutine after every engine run.
	Artifacts func() []Artifact
	// Next is what to do after a successful run (the runbook says it).
	Next []string
	// By names who approves in the journal (default "tui").
	By string
	// Drill, when the run's inventory is a running drill's, puts the
	// drill's clock and hint count in the header (never its scenario).
	Drill *Drill

	// Now is the clock (tests pin it).
	Now func() time.Time
	// NoColor drops every colour (NO_COLOR in the environment does too).
	NoColor bool
	// ProgramOptions are added to the program's (tests: input, output,
	// window size); NO_COLOR still wins over a colour profile given here.
	ProgramOptions []tea.ProgramOption
}

// Drill is what the header shows of a drill: its clock runs from Started
// (the page); Hints is called at each render (the trainee may ask for one
// in another terminal).
type Drill struct {
	Started time.Time
	Hints   func() int
}

// ErrNotStarted is returned when the operator leaves before the engine
// started (declining to resume an unfinished run): nothing was done.
var ErrNotStarted = errors.New("the run was not started; nothing was done")
