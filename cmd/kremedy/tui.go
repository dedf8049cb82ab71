package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/inventory/connect"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/tui"
)

// dial opens a cluster's connections. runTUI calls it behind the UI's
// first frame (the operator sees a spinner, not a frozen terminal), once,
// and closes what it returned.
type dial func(ctx context.Context) (*connect.Clients, error)

// dialer dials the cluster of an inventory for a run of runbook.
func dialer(runbook, inventory string) dial {
	return func(ctx context.Context) (*connect.Clients, error) { return connectRun(ctx, runbook, inventory) }
}

// runTUINew is `kremedy run` without --headless: the run directory is
// created (or the unfinished run it holds offered) before the first frame;
// the cluster is dialled behind it.
func runTUINew(cmd *cobra.Command, rb *steps.Runbook, meta steps.Meta, dir, inventory string, tc *teamConfig, breakLease bool) error {
	ctx, w := cmd.Context(), cmd.OutOrStdout()
	if !isTerminal(os.Stdin) || !isTerminal(w) {
		return usageErr(fmt.Errorf("the terminal UI needs a terminal on stdin and stdout: add --headless --yes (and --confirm %s for destructive steps); nothing was done, no run directory was created", rb.Confirm.Word))
	}
	if s, err := steps.Open(dir, rebind); err == nil {
		defer s.Close()
		if s.Finished() {
			return usageErr(fmt.Errorf("%s holds run %s, which finished; choose another --run-dir", dir, s.Meta().ID))
		}
		if breakLease {
			s.BreakLease()
		}
		return runTUI(ctx, w, s, dialer(s.Meta().Runbook, s.Meta().Inventory), true, tc)
	} else if !errors.Is(err, os.ErrNotExist) {
		return sessionErr(err)
	}
	s, err := steps.Create(dir, rb, meta)
	if err != nil {
		return sessionErr(err)
	}
	defer s.Close()
	if breakLease {
		s.BreakLease()
	}
	return runTUI(ctx, w, s, dialer(meta.Runbook, inventory), false, tc)
}

// runTUI walks a run in the terminal UI: the TUI is its Reporter and
// Approver. offer asks the operator before resuming (the run directory
// already held an unfinished run). After the UI closes it prints how the
// run ended, like the headless runner, with the resume command. tc is who
// else the run tells and asks (webhooks, a second approver; nil: nobody).
// opts are for tests; without them stdin and w must be terminals.
func runTUI(ctx context.Context, w io.Writer, s *steps.Session, d dial, offer bool, tc *teamConfig, opts ...tea.ProgramOption) error {
	meta, rb := s.Meta(), s.Runbook()
	if len(opts) == 0 {
		if !isTerminal(os.Stdin) || !isTerminal(w) {
			return usageErr(fmt.Errorf("the terminal UI needs a terminal on stdin and stdout: run `%s` instead; nothing was done", s.ResumeCommand(true)))
		}
		opts = []tea.ProgramOption{tea.WithOutput(w)}
	}
	by := "tui"
	if u, err := user.Current(); err == nil {
		by += " (" + u.Username + ")"
	}
	var resume *tui.Resume
	if p := s.Progress(); offer || s.Resumed() {
		resume = &tui.Resume{Ask: offer, ID: meta.ID, Started: meta.Started, Done: p.Done, Skipped: p.Skipped, Stopped: p.Stopped, Records: p.Records}
	}
	// start is called by the UI once, then again (never concurrently) for
	// every retry: each call continues from the journal, like `resume`.
	tm := tc.attach(s, false, w)
	var cl *connect.Clients
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	start := func(ctx context.Context, a steps.Approver, rep steps.Reporter) (steps.Outcome, error) {
		if cl == nil {
			c, err := d(ctx)
			if err != nil {
				if ctx.Err() != nil {
					// Stopped while connecting: resumable, not a failure.
					err = fmt.Errorf("stopped while connecting to %s (%v): %w", meta.Cluster, err, ctx.Err())
				} else {
					err = fmt.Errorf("connect to %s: %w", meta.Cluster, err)
				}
				if !errors.Is(err, steps.ErrNothingDone) {
					err = fmt.Errorf("%w; %w", err, steps.ErrNothingDone)
				}
				return steps.Outcome{Err: err}, err
			}
			cl = c
			s.Redact(cl.Secrets...)
		}
		defer journalSession(cl, s)()
		out := tm.run(ctx, a, rep, func(a steps.Approver, rep steps.Reporter) steps.Outcome { return s.Run(ctx, cl.Ports, a, rep) })
		return out, out.Err
	}
	o := tui.Options{
		Steps: rb.Infos(), Start: start, Runbook: rb.Name, Cluster: meta.Cluster, Confirm: rb.Confirm,
		Mode: tui.ModeOf(meta.Lab, meta.DryRun), RunDir: s.Dir(), ReportPath: s.ReportPath(), Resume: resume, By: by,
		Artifacts: func() []tui.Artifact {
			var out []tui.Artifact
			for _, a := range s.Artifacts() {
				if a.ID != "report" {
					out = append(out, tui.Artifact{What: a.What, Path: a.Path})
				}
			}
			return out
		},
		Next:           s.Next(),
		ProgramOptions: opts,
		Drill:          drillHeader(meta.Inventory),
	}
	out, err := tui.Run(ctx, o)
	tm.close()
	if errors.Is(err, tui.ErrNotStarted) {
		fmt.Fprintf(w, "run %s in %s was left as it was; nothing was done.\n  resume: %s\n", meta.ID, s.Dir(), s.ResumeCommand(false))
		return &exitError{exitInterrupted, err}
	}
	fmt.Fprintf(w, "run %s: %s on %s (%s), run directory %s\n", meta.ID, rb.Name, rb.Confirm.Subject(meta.Cluster),
		tui.ModeOf(meta.Lab, meta.DryRun), s.Dir())
	fmt.Fprintf(w, "done: %v; nothing to do: %v; skipped: %v\nreport: %s\n", out.Done, out.NoOp, out.Skipped, s.ReportPath())
	out.Err = err
	return exitFor(s.End(ctx, out, false))
}

func isTerminal(v any) bool {
	f, ok := v.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(f.Fd())
}
