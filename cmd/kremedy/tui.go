package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/term"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/tui"
)

// dialer opens the cluster's connections. runTUI calls it behind the
// UI's first frame (the operator sees a spinner, not a frozen terminal),
// once, and closes what it returned.
type dialer func(ctx context.Context) (*cluster, error)

// connected is a dialer for a cluster that is already open.
func connected(cl *cluster) dialer {
	return func(context.Context) (*cluster, error) { return cl, nil }
}

// runTUI walks the runbook in the terminal UI: the engine of execute, with
// the TUI as its Reporter and Approver. completed is nil for a new run and
// steps.Completed(records) for a resumed one; offer asks the operator
// before resuming (the run directory already held an unfinished run).
// After the UI closes it prints how the run ended, like execute, with the
// resume command. opts are for tests; without them stdin and w must be
// terminals.
func runTUI(ctx context.Context, w io.Writer, rb *runbooks.Runbook, meta steps.Meta, dir string, j *journal.Journal,
	completed map[string]string, dial dialer, ss []steps.Step, offer bool, opts ...tea.ProgramOption) error {
	if len(opts) == 0 {
		if !isTerminal(os.Stdin) || !isTerminal(w) {
			return usageErr(fmt.Errorf("the terminal UI needs a terminal on stdin and stdout: run `kremedy resume %s --headless --yes` (and --confirm %s for destructive steps) instead; nothing was done",
				steps.ShQuote(dir), steps.ShQuote(meta.Topic)))
		}
		opts = []tea.ProgramOption{tea.WithOutput(w)}
	}
	by := "tui"
	if u, err := user.Current(); err == nil {
		by += " (" + u.Username + ")"
	}
	var resume *tui.Resume
	if completed != nil || offer {
		resume = resumeInfo(meta, ss, j, offer)
	}

	// start is called by the UI once, then again (never concurrently) for
	// every retry: each call continues from the journal, like `resume`.
	var cl *cluster
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	calls := 0
	start := func(ctx context.Context, a steps.Approver, rep steps.Reporter) (steps.Outcome, error) {
		calls++
		if cl == nil {
			c, err := dial(ctx)
			if err != nil {
				if ctx.Err() != nil {
					// Stopped while connecting: resumable, not a failure.
					err = fmt.Errorf("stopped while connecting to %s (%v): %w", meta.Cluster, err, ctx.Err())
				} else {
					err = fmt.Errorf("connect to %s: %w", meta.Cluster, err)
				}
				if !strings.Contains(err.Error(), "nothing was done") {
					err = fmt.Errorf("%w; nothing was done", err)
				}
				return steps.Outcome{Err: err}, err
			}
			cl = c
			j.Redact(cl.secrets...)
		}
		comp := completed
		if calls > 1 || offer {
			recs, err := journal.Read(j.Path())
			if err != nil {
				return steps.Outcome{Err: err}, err
			}
			comp = steps.Completed(recs)
			_, _ = j.Append(journal.Note, "", map[string]string{"text": "resumed from the terminal UI"})
		}
		r := &steps.Run{Meta: meta, Dir: dir, Target: cl.target, ZK: cl.zk, Kafka: cl.kafka, Remote: cl.fleet, Journal: j, Reporter: rep}
		defer journalSession(cl, j, rep)()
		e := &steps.Engine{Steps: ss, Approver: a}
		out, err := e.Run(ctx, r, comp)
		if rerr := steps.WriteReport(r, out); rerr != nil {
			rep.Report(steps.Event{Kind: steps.EvLog, Text: fmt.Sprintf("warning: could not write %s: %v", r.ReportPath(), rerr)})
		}
		return out, err
	}

	paths := &steps.Run{Meta: meta, Dir: dir}
	o := tui.Options{
		Steps: ss, Start: start, Runbook: rb.Name, Cluster: meta.Cluster, Topic: meta.Topic,
		Mode: tui.ModeOf(meta.Lab, meta.DryRun), RunDir: dir, ReportPath: paths.ReportPath(), Resume: resume, By: by,
		Artifacts: func() []tui.Artifact {
			var out []tui.Artifact
			for _, a := range []tui.Artifact{
				{What: "journal", Path: j.Path()},
				{What: "znode backup (data, ACLs, versions)", Path: paths.BackupPath()},
				{What: "quarantine manifest (moved segment directories)", Path: paths.ManifestPath()},
				{What: "consumer group offsets", Path: paths.OffsetsPath()},
			} {
				if _, err := os.Stat(a.Path); err == nil {
					out = append(out, a)
				}
			}
			return out
		},
		ProgramOptions: opts,
	}
	out, err := tui.Run(ctx, o)
	return explainEnd(ctx, w, meta, dir, ss, out, err)
}

// explainEnd prints, in the shell the UI left, how the run ended and how
// to resume it, and maps the end to an exit code.
func explainEnd(ctx context.Context, w io.Writer, meta steps.Meta, dir string, ss []steps.Step, out steps.Outcome, err error) error {
	resume := "kremedy resume " + steps.ShQuote(dir)
	if errors.Is(err, tui.ErrNotStarted) {
		fmt.Fprintf(w, "run %s in %s was left as it was; nothing was done.\n  resume: %s\n", meta.ID, dir, resume)
		return &exitError{exitInterrupted, err}
	}
	fmt.Fprintf(w, "run %s: topic %q, cluster %s (%s), run directory %s\n", meta.ID, meta.Topic, meta.Cluster,
		tui.ModeOf(meta.Lab, meta.DryRun), dir)
	fmt.Fprintf(w, "done: %v; nothing to do: %v; skipped: %v\nreport: %s\n", out.Done, out.NoOp, out.Skipped,
		(&steps.Run{Dir: dir}).ReportPath())
	if err == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, s := range append(append(out.Done, out.Skipped...), out.NoOp...) {
		seen[s] = true
	}
	var notDone []string
	for _, s := range ss {
		if !seen[s.Info.ID] {
			notDone = append(notDone, s.Info.ID)
		}
	}
	switch {
	case out.Interrupted != "" || ctx.Err() != nil || errors.Is(err, context.Canceled):
		return &exitError{exitInterrupted, fmt.Errorf("interrupted during step %s: %w.\n  not done: %v\n  the journal and report are in %s; the cluster is as the last completed action left it (see the report).\n  resume: %s", out.Interrupted, err, notDone, dir, resume)}
	case errors.Is(err, steps.ErrAborted):
		return &exitError{exitInterrupted, fmt.Errorf("%w\n  not done: %v\n  resume: %s", err, notDone, resume)}
	default:
		var ee *exitError
		if errors.As(err, &ee) {
			return &exitError{ee.code, fmt.Errorf("%w\n  not done: %v\n  after fixing the cause, resume: %s", err, notDone, resume)}
		}
		return &exitError{exitFailed, fmt.Errorf("%w\n  not done: %v\n  after fixing the cause, resume: %s", err, notDone, resume)}
	}
}

// resumeInfo summarises the unfinished run in the journal for the first
// screen.
func resumeInfo(meta steps.Meta, ss []steps.Step, j *journal.Journal, offer bool) *tui.Resume {
	res := &tui.Resume{Ask: offer, ID: meta.ID, Started: meta.Started}
	recs, err := journal.Read(j.Path())
	if err != nil {
		return res
	}
	res.Records = len(recs)
	done := steps.Completed(recs)
	for _, s := range ss {
		switch done[s.Info.ID] {
		case "done":
			res.Done = append(res.Done, s.Info.ID)
		case "skipped":
			res.Skipped = append(res.Skipped, s.Info.ID)
		}
	}
	for _, rec := range recs {
		if rec.Type == journal.StepFailed || rec.Type == journal.Interrupted {
			if rec.Step != "" {
				res.Stopped = rec.Step
			}
		}
	}
	return res
}

func isTerminal(v any) bool {
	f, ok := v.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(f.Fd())
}
