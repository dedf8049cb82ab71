package drill

import (
	"time"

	"github.com/kremedy/kremedy/steps"
)

// Invocation is a kremedy command as its caller names it for a drill's
// record: what the trainee typed and what it acts on.
type Invocation struct {
	Verb      string   // the command after "kremedy": diagnose, plan, run, resume, drill end…
	Args      []string // the command line after "kremedy" (RedactArgs hides secrets when recorded)
	Inventory string   // the inventory it acts on ("" none)
	RunDir    string   // its run directory ("" none)
	Runbook   string   // of plan and run
	// OfRun: the command goes on the run in RunDir (resume); the run's
	// journal names its inventory and runbook.
	OfRun bool
}

// Recorder records one command run against a running drill's inventory,
// for the debrief (the trainee does nothing special): once as it starts,
// so that a command killed later (SIGPIPE into `| head`, a kill) still
// counts as run, and once as it ends. A nil Recorder records nothing.
type Recorder struct {
	dir string
	c   Command
}

// NewRecorder is the recorder of in, started at start: nil when in does
// not act on a running drill's inventory.
func NewRecorder(in Invocation, start time.Time) *Recorder {
	inv, runbook := in.Inventory, in.Runbook
	if in.OfRun {
		runbook = ""
		if m, err := steps.ReadMeta(in.RunDir); err == nil {
			inv, runbook = m.Inventory, m.Runbook
		}
	}
	dir := DirOfInventory(inv)
	if dir == "" {
		return nil
	}
	return &Recorder{dir: dir, c: Command{At: start, Args: in.Args, Exit: -1, RunDir: in.RunDir, Verb: in.Verb, Runbook: runbook}}
}

// Started records the command as it starts (exit -1).
func (r *Recorder) Started() error {
	if r == nil {
		return nil
	}
	c := r.c
	c.TookS = time.Since(c.At).Seconds()
	return Record(r.dir, c)
}

// Ended records the command's end: its exit code and error (the record
// replaces the start's).
func (r *Recorder) Ended(err error, code int) error {
	if r == nil {
		return nil
	}
	c := r.c
	c.Exit, c.TookS = code, time.Since(c.At).Seconds()
	if err != nil {
		c.Error = err.Error()
	}
	return Record(r.dir, c)
}
