package steps

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/ports"
)

// run is what every step of one run shares: its identity, runbook,
// directory and recorder. Kinds never see it; they get an Env.
type run struct {
	meta    Meta
	rb      *Runbook
	dir     string
	rec     *recorder
	preview bool
	// held is the cluster's lease while an attempt holds it (nil: none).
	held ports.Held
}

// Env is a step kind's whole world while the engine runs it: the cluster's
// ports, the run's identity and files, the journal (through Do, Logf,
// Check, Output and Save), the run's history, the clock, and whether the
// engine asks for a plan, an application or a re-check. It is built by the
// engine for each step; a kind keeps nothing of the engine's.
type Env struct {
	ports.Cluster
	run        *run
	info       Info
	rechecking bool
	// ahead: the step is planned before the steps ahead of it in its
	// window have run (see Preview).
	ahead bool
}

// Step is the step being run.
func (e *Env) Step() Info { return e.info }

// CheckLease makes sure the run still holds the cluster's lease, as the
// engine does before every step: a kind whose one step makes many changes
// over a long time (a roll stopping broker after broker) calls it before
// each of them. A lost lease is an error wrapping ErrRefused and
// ports.ErrLeaseLost that names the holder and the way forward; a run that
// holds none (a dry run, a cluster without a lease) has nothing to check.
func (e *Env) CheckLease(ctx context.Context) error {
	return e.run.checkLease(ctx, e.info.ID, "what it did is in the journal")
}

// RunID is the run's id (names the quarantine of a wipe, the canary).
func (e *Env) RunID() string { return e.run.meta.ID }

// RunDir is the run's directory on this machine.
func (e *Env) RunDir() string { return e.run.dir }

// Inventory is the path of the inventory the run uses (for the commands a
// message tells the operator to run).
func (e *Env) Inventory() string { return e.run.meta.Inventory }

// Artifact is the path of one of the runbook's artifacts (a backup, a
// manifest), by id. The runbook loader checks that a runbook declares every
// artifact its kinds use.
func (e *Env) Artifact(id string) string {
	for _, a := range e.run.rb.Artifacts {
		if a.ID == id {
			return filepath.Join(e.run.dir, a.Path)
		}
	}
	panic(fmt.Sprintf("steps: runbook %s declares no artifact %q (the loader should have refused it)", e.run.rb.Name, id))
}

// Preview: the plan is made ahead of the steps before it — for `kremedy
// plan`, or to confirm a window's steps before the first of them runs —
// against the cluster as it is now, without the refusals that depend on
// earlier steps having run. Such a plan is never applied as it is: before
// it runs, the step is planned again and its digest compared.
func (e *Env) Preview() bool { return e.run.preview || e.ahead }

// Rechecking: Verify is asked whether a step an earlier attempt finished
// still holds now (resume), not to wait for it to hold.
func (e *Env) Rechecking() bool { return e.rechecking }

// Now is the run's clock.
func (e *Env) Now() time.Time { return e.run.rec.clock() }

// After sends the run's clock's time once d has passed on it (Now's clock:
// a kind waits with After or Sleep, never with the time package, so that
// one clock governs a wait and its measurement).
func (e *Env) After(d time.Duration) <-chan time.Time { return e.run.rec.source().After(d) }

// Sleep waits d on the run's clock, or until ctx ends (then ctx's error).
func (e *Env) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-e.After(d):
		return nil
	}
}

// History is the run's journal so far, every attempt.
func (e *Env) History() History { return History{e.run.rec.records()} }

func (e *Env) emit(ev Event) {
	if ev.Step == "" {
		ev.Step = e.info.ID
	}
	e.run.rec.emit(ev)
}

func (e *Env) record(typ string, data any) error { return e.run.rec.append(typ, e.info.ID, data) }

// Logf reports a line from kremedy and journals it.
func (e *Env) Logf(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	e.emit(Event{Kind: EvLog, Text: s})
	_ = e.record(journal.Note, map[string]string{"text": s})
}

// Progress says what a running step is waiting for now (which brokers,
// which partitions), for the operator watching: a progress line in the TUI,
// a line every few seconds headless. It is not journaled (the checks that
// end the wait are).
func (e *Env) Progress(format string, a ...any) {
	e.emit(Event{Kind: EvProgress, Text: fmt.Sprintf(format, a...)})
}

// BrokersDown says how many of the cluster's brokers are stopped now (the
// TUI's header, the report's outage window); it is journaled.
func (e *Env) BrokersDown(down, total int) {
	e.emit(Event{Kind: EvBrokers, Down: down, Total: total, Text: fmt.Sprintf("%d of %d brokers down", down, total)})
	_ = e.record(journal.Note, map[string]any{"text": fmt.Sprintf("%d of %d brokers down", down, total), "brokers_down": down, "brokers": total})
}

// Status says where the cluster stands, in a line the TUI keeps in its
// header until the next one (a migration's phase and whether it can still
// be reverted); it is journaled.
func (e *Env) Status(text string) {
	e.emit(Event{Kind: EvStatus, Text: text})
	_ = e.record(journal.Note, map[string]any{"text": text, "status": true})
}

// ProgressEvery reports text() as progress every period until the
// returned stop is called: for waits that block on a watch.
func (e *Env) ProgressEvery(period time.Duration, text func() string) (stop func()) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-e.After(period):
				e.Progress("%s", text())
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// Output reports and journals one line of a host's output.
func (e *Env) Output(host string, l ports.Line) {
	e.emit(Event{Kind: EvOutput, Host: host, Text: l.Text})
	_ = e.record(journal.Output, map[string]any{"host": host, "stderr": l.Stderr, "text": l.Text})
}

// Check reports and journals a check result.
func (e *Env) Check(c Check) {
	e.emit(Event{Kind: EvCheck, Check: &c})
	_ = e.record(journal.Check, c)
}

// Save journals a fact under key for later steps and later attempts of the
// run (Load). In a preview it is kept in memory.
func (e *Env) Save(key string, v any) error {
	raw, err := jsonRaw(v)
	if err != nil {
		return fmt.Errorf("save %s: %w", key, err)
	}
	return e.record(Fact, factRecord{Key: key, Value: raw})
}

// Load reads the latest fact saved under key into v; false when none was.
func (e *Env) Load(key string, v any) (bool, error) { return e.History().load(key, v) }

// Begin journals that action a starts and returns the function that
// journals how it ended. Do is Begin and end around one function; Begin is
// for actions that end out of order (one command that moves many
// directories, each journaled as the host reports it).
func (e *Env) Begin(a Action) (end func(error) error, err error) {
	if err := e.record(journal.ActionStart, a); err != nil {
		return nil, err
	}
	e.emit(Event{Kind: EvAction, Text: a.String(), Action: &a})
	start := e.Now()
	return func(err error) error {
		end := actionEnd{Action: a, OK: err == nil, TookMS: e.Now().Sub(start).Milliseconds()}
		if err != nil {
			end.Error = err.Error()
			if errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				end.Outcome = "unknown: it may have happened in part or in full; resume re-checks before doing anything"
			}
		}
		if jerr := e.record(journal.ActionEnd, end); jerr != nil && err == nil {
			err = jerr
		}
		return err
	}, nil
}

// Do journals an action before and after performing it.
func (e *Env) Do(a Action, f func() error) error {
	end, err := e.Begin(a)
	if err != nil {
		return err
	}
	return end(f())
}
