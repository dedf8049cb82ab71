package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
)

type runFlags struct {
	inventory string
	set       []string
	runDir    string
	headless  bool
	yes       bool
	confirm   string
}

func addRunFlags(c *cobra.Command, f *runFlags, full bool) {
	if full {
		c.Flags().StringVar(&f.inventory, "inventory", "", "inventory file describing the cluster (required)")
		c.Flags().StringArrayVar(&f.set, "set", nil, "runbook parameter name=value (repeatable), e.g. --set topic=orders")
		_ = c.MarkFlagRequired("inventory")
	}
	c.Flags().StringVar(&f.runDir, "run-dir", "", "run directory (default: a new one under ~/.local/state/kremedy/runs)")
	c.Flags().BoolVar(&f.headless, "headless", false, "run without a terminal UI, printing every event")
	c.Flags().BoolVar(&f.yes, "yes", false, "headless: approve every step that asks y/N")
	c.Flags().StringVar(&f.confirm, "confirm", "", "headless: the topic name, typed to approve destructive steps")
}

// loadRunbook resolves a runbook and binds --set values.
func loadRunbook(name string, set []string) (*runbooks.Runbook, runbooks.Values, error) {
	rb, err := runbooks.Get(name, steps.KindNames())
	if err != nil {
		return nil, nil, usageErr(err)
	}
	kv, err := runbooks.ParseSet(set)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	vals, err := rb.Bind(kv)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	if t := vals.String("topic"); steps.IsInternalTopic(t) {
		return nil, nil, usageErr(fmt.Errorf("topic %q is internal to Kafka; kremedy refuses to clean it up; nothing was done", t))
	}
	return rb, vals, nil
}

func newPlanCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "plan RUNBOOK",
		Short: "Print the full concrete plan of a runbook against a cluster; changes nothing anywhere",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rb, vals, err := loadRunbook(args[0], f.set)
			if err != nil {
				return err
			}
			ss, err := buildSteps(rb)
			if err != nil {
				return err
			}
			cl, err := connect(cmd.Context(), f.inventory)
			if err != nil {
				return err
			}
			defer cl.Close()
			r := &steps.Run{Meta: steps.Meta{ID: "plan", Runbook: rb.Name, Topic: vals.String("topic"), Params: steps.Params(vals),
				Inventory: cl.inv.Path, Cluster: cl.inv.Name, Lab: cl.inv.Lab}, Dir: "<run dir>",
				Target: cl.target, ZK: cl.zk, Kafka: cl.kafka, Remote: cl.fleet, Preview: true}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "plan of %s for topic %q on %s (%s) — nothing is changed\n", rb.Name, r.Topic(), cl.inv.Name, modeName(cl.inv.Lab))
			for i, s := range ss {
				p, err := s.Kind.Plan(cmd.Context(), r)
				if err != nil {
					fmt.Fprintf(w, "\n%d. %s [%s]\n   cannot plan now: %v\n", i, s.Info.Title, s.Info.ID, err)
					if errors.Is(err, steps.ErrRefused) && i == 0 {
						return failedErr(err)
					}
					continue
				}
				p.Rollback, _ = r.RenderRollback(s.Info.Rollback)
				printPlan(w, i, s.Info, p)
			}
			return nil
		},
	}
	addRunFlags(c, &f, true)
	c.Flags().Lookup("run-dir").Hidden = true
	return c
}

func modeName(lab bool) string {
	if lab {
		return "LAB"
	}
	return "LIVE cluster"
}

func printPlan(w io.Writer, i int, info steps.Info, p *steps.Plan) {
	fmt.Fprintf(w, "\n%d. %s [%s, %s, confirm: %s]\n   %s\n", i, info.Title, info.ID, info.Risk, info.Confirm, p.Summary)
	for _, f := range p.Facts {
		fmt.Fprintf(w, "   · %s\n", f)
	}
	for _, a := range p.Actions {
		fmt.Fprintf(w, "   → %s\n", a)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "   ! %s\n", n)
	}
	if p.NoOp {
		fmt.Fprintf(w, "   (nothing to do)\n")
	} else if p.Rollback != "" {
		fmt.Fprintf(w, "   rollback: %s\n", strings.ReplaceAll(p.Rollback, "\n", "\n             "))
	}
}

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run RUNBOOK",
		Short: "Run a runbook step by step (headless with --headless --yes --confirm TOPIC)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkHeadless(f); err != nil {
				return err
			}
			rb, vals, err := loadRunbook(args[0], f.set)
			if err != nil {
				return err
			}
			if !f.headless {
				return runTUICmd(cmd, rb, vals, f)
			}
			if f.confirm != "" && f.confirm != vals.String("topic") {
				return usageErr(fmt.Errorf("--confirm %q does not match the topic %q; nothing was done", f.confirm, vals.String("topic")))
			}
			cl, err := connect(cmd.Context(), f.inventory)
			if err != nil {
				return err
			}
			defer cl.Close()
			if _, err := faultsFor(cl.inv.Lab); err != nil {
				return err
			}
			id := time.Now().UTC().Format("20060102T150405Z") + "-" + rb.Name + "-" + vals.String("topic")
			dir := f.runDir
			if dir == "" {
				dir = filepath.Join(stateDir(), "runs", id)
			}
			if recs, err := journal.Read(filepath.Join(dir, "journal.jsonl")); err == nil && len(recs) > 0 {
				return usageErr(fmt.Errorf("%s already holds a run; continue it with `kremedy resume %s`, or choose another --run-dir", dir, dir))
			}
			j, err := journal.Create(filepath.Join(dir, "journal.jsonl"))
			if err != nil {
				return failedErr(fmt.Errorf("create run directory: %w; nothing was done", err))
			}
			meta := steps.Meta{ID: id, Runbook: rb.Name, Topic: vals.String("topic"), Params: steps.Params(vals),
				Inventory: cl.inv.Path, Cluster: cl.inv.Name, Lab: cl.inv.Lab, Version: version, Started: time.Now().UTC()}
			if _, err := j.Append(journal.RunStart, "", meta); err != nil {
				return failedErr(err)
			}
			return execute(cmd.Context(), cmd.OutOrStdout(), rb, meta, dir, j, nil, cl, f)
		},
	}
	addRunFlags(c, &f, true)
	return c
}

func newResumeCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "resume RUN_DIR",
		Short: "Continue an interrupted run from its journal (completed steps are re-checked, not re-done)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkHeadless(f); err != nil {
				return err
			}
			dir := args[0]
			j, recs, meta, finished, err := openRun(dir)
			if err != nil {
				return err
			}
			defer j.Close()
			if finished {
				fmt.Fprintf(cmd.OutOrStdout(), "run %s already finished; see %s\n", meta.ID, filepath.Join(dir, "report.md"))
				return nil
			}
			if f.confirm != "" && f.confirm != meta.Topic {
				return usageErr(fmt.Errorf("--confirm %q does not match the run's topic %q; nothing was done", f.confirm, meta.Topic))
			}
			rb, err := runbooks.Get(meta.Runbook, steps.KindNames())
			if err != nil {
				return usageErr(err)
			}
			if !f.headless {
				ss, err := buildSteps(rb)
				if err != nil {
					return err
				}
				_, _ = j.Append(journal.Note, "", map[string]string{"text": "resumed"})
				return runTUI(cmd.Context(), cmd.OutOrStdout(), rb, meta, dir, j, steps.Completed(recs),
					func(ctx context.Context) (*cluster, error) { return connect(ctx, meta.Inventory) }, ss, false)
			}
			if _, err := faultsFor(meta.Lab); err != nil {
				return err
			}
			cl, err := connect(cmd.Context(), meta.Inventory)
			if err != nil {
				return err
			}
			defer cl.Close()
			_, _ = j.Append(journal.Note, "", map[string]string{"text": "resumed"})
			fmt.Fprintf(cmd.OutOrStdout(), "resuming run %s from %s (%d journal records)\n", meta.ID, dir, len(recs))
			return execute(cmd.Context(), cmd.OutOrStdout(), rb, meta, dir, j, steps.Completed(recs), cl, f)
		},
	}
	addRunFlags(c, &f, false)
	c.Flags().Lookup("run-dir").Hidden = true
	return c
}

// openRun opens (and locks) the journal of a run directory for resuming:
// its records, the run-start metadata, and whether the run already
// finished. Errors are usage errors (exit 2).
func openRun(dir string) (*journal.Journal, []journal.Record, steps.Meta, bool, error) {
	var meta steps.Meta
	j, recs, err := journal.Open(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		return nil, nil, meta, false, usageErr(fmt.Errorf("%s: %w", dir, err))
	}
	if len(recs) == 0 || recs[0].Type != journal.RunStart {
		j.Close()
		return nil, nil, meta, false, usageErr(fmt.Errorf("%s: the journal has no run-start record; it is not a kremedy run", dir))
	}
	if meta, err = journal.Decode[steps.Meta](recs[0]); err != nil {
		j.Close()
		return nil, nil, meta, false, usageErr(err)
	}
	finished := false
	if last := recs[len(recs)-1]; last.Type == journal.RunEnd {
		d, _ := journal.Decode[map[string]any](last)
		finished = d["ok"] == true
	}
	return j, recs, meta, finished, nil
}

func checkHeadless(f runFlags) error {
	if !f.headless {
		if f.yes || f.confirm != "" {
			return usageErr(errors.New("--yes and --confirm are for --headless; in the terminal UI you confirm each step yourself"))
		}
		return nil
	}
	if !f.yes {
		return usageErr(errors.New("--headless needs --yes: without a terminal nobody can answer a confirmation"))
	}
	return nil
}

func stateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "kremedy")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "kremedy")
	}
	return filepath.Join(os.TempDir(), "kremedy")
}

// execute walks the runbook headless and explains how it ended.
func execute(ctx context.Context, w io.Writer, rb *runbooks.Runbook, meta steps.Meta, dir string, j *journal.Journal,
	completed map[string]string, cl *cluster, f runFlags) error {
	ss, err := buildSteps(rb)
	if err != nil {
		return err
	}
	j.Redact(cl.secrets...)
	p := &printer{w: w, infos: map[string]steps.Info{}}
	for _, s := range ss {
		p.infos[s.Info.ID] = s.Info
		p.index = append(p.index, s.Info.ID)
	}
	r := &steps.Run{Meta: meta, Dir: dir, Target: cl.target, ZK: cl.zk, Kafka: cl.kafka, Remote: cl.fleet, Journal: j, Reporter: p}
	if fs, err := faultsFor(meta.Lab); err != nil {
		return err
	} else if fs != nil {
		fs.log, fs.ctx = os.Stderr, ctx
		r.AfterRecord = fs.after
		fmt.Fprintf(w, "KREMEDY_FAULT=%s: faults will be injected into this lab run\n", os.Getenv(faultEnv))
	}
	defer journalSession(cl, j, p)()
	e := &steps.Engine{Steps: ss, Approver: headlessApprover{w: w, yes: f.yes, confirm: f.confirm}}
	fmt.Fprintf(w, "run %s: %s on topic %q, cluster %s (%s)\nrun directory: %s\n", meta.ID, rb.Name, meta.Topic, meta.Cluster, modeName(meta.Lab), dir)
	start := time.Now()
	out, err := e.Run(ctx, r, completed)
	if rerr := steps.WriteReport(r, out); rerr != nil {
		fmt.Fprintf(w, "warning: could not write %s: %v\n", r.ReportPath(), rerr)
	}
	fmt.Fprintf(w, "\ndone: %v; nothing to do: %v; skipped: %v (%.1fs)\nreport: %s\n", out.Done, out.NoOp, out.Skipped, time.Since(start).Seconds(), r.ReportPath())
	if err == nil {
		return nil
	}
	var notDone []string
	seen := map[string]bool{}
	for _, s := range append(append(out.Done, out.Skipped...), out.NoOp...) {
		seen[s] = true
	}
	for _, s := range ss {
		if !seen[s.Info.ID] {
			notDone = append(notDone, s.Info.ID)
		}
	}
	resume := fmt.Sprintf("kremedy resume %s --headless --yes --confirm %s", dir, meta.Topic)
	switch {
	case out.Interrupted != "" || ctx.Err() != nil:
		return &exitError{exitInterrupted, fmt.Errorf("interrupted during step %s: %v.\n  not done: %v\n  the journal and report are in %s; the cluster is as the last completed action left it (see the report).\n  resume: %s", out.Interrupted, err, notDone, dir, resume)}
	case errors.Is(err, steps.ErrNotApproved):
		return &exitError{exitFailed, fmt.Errorf("%v\n  not done: %v\n  resume: %s", err, notDone, resume)}
	default:
		return &exitError{exitFailed, fmt.Errorf("%v\n  not done: %v\n  after fixing the cause, resume: %s", err, notDone, resume)}
	}
}

// journalSession journals the run's ZooKeeper session and, as they happen,
// what befalls it (lost, re-established, expired, replaced): a step that ran
// across an expiry must say so. It returns the function that stops it.
func journalSession(cl *cluster, j *journal.Journal, rep steps.Reporter) func() {
	_, _ = j.Append(journal.Note, "", map[string]string{"text": "ZooKeeper: session " + cl.zk.Session()})
	cl.zk.OnSession(func(msg string) {
		_, _ = j.Append(journal.Note, "", map[string]string{"text": msg})
		rep.Report(steps.Event{Time: time.Now(), Step: "zookeeper", Kind: steps.EvLog, Text: msg})
	})
	return func() { cl.zk.OnSession(nil) }
}

// printer is the headless Reporter: one line per event.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	infos map[string]steps.Info
	index []string
}

func (p *printer) Report(e steps.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := e.Time.Format("15:04:05")
	switch e.Kind {
	case steps.EvState:
		switch e.State {
		case steps.Planning:
			fmt.Fprintf(p.w, "\n%s [%s] planning\n", ts, e.Step)
		case steps.Done, steps.Skipped:
			fmt.Fprintf(p.w, "%s [%s] %s %s\n", ts, e.Step, e.State, e.Text)
		case steps.Failed:
			fmt.Fprintf(p.w, "%s [%s] FAILED: %v\n", ts, e.Step, e.Err)
		}
	case steps.EvPlan:
		printPlan(p.w, slices.Index(p.index, e.Step), p.infos[e.Step], e.Plan)
	case steps.EvLog:
		fmt.Fprintf(p.w, "%s [%s] %s\n", ts, e.Step, e.Text)
	case steps.EvOutput:
		fmt.Fprintf(p.w, "%s [%s]   %s | %s\n", ts, e.Step, e.Host, e.Text)
	case steps.EvCheck:
		mark := "ok  "
		if !e.Check.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(p.w, "%s [%s] check %s %s (%s)\n", ts, e.Step, mark, e.Check.Name, e.Check.Detail)
	}
}

// headlessApprover answers confirmations from --yes and --confirm.
type headlessApprover struct {
	w       io.Writer
	yes     bool
	confirm string
}

func (a headlessApprover) Approve(_ context.Context, info steps.Info, _ *steps.Plan) (steps.Approval, error) {
	by := "headless --yes"
	if u, err := user.Current(); err == nil {
		by += " (" + u.Username + ")"
	}
	if info.Confirm == steps.ConfirmTyped {
		if a.confirm == "" {
			fmt.Fprintf(a.w, "step %s is destructive: pass --confirm TOPIC to approve it\n", info.ID)
		}
		return steps.Approval{Decision: steps.Approve, Typed: a.confirm, By: by + " --confirm"}, nil
	}
	fmt.Fprintf(a.w, "approved %s (%s)\n", info.ID, by)
	return steps.Approval{Decision: steps.Approve, By: by}, nil
}

// runTUICmd is `kremedy run` without --headless: the run directory is
// created (or its unfinished run offered) before the first frame; the
// cluster is dialled behind it.
func runTUICmd(cmd *cobra.Command, rb *runbooks.Runbook, vals runbooks.Values, f runFlags) error {
	inv, err := inventory.Load(f.inventory)
	if err != nil {
		return usageErr(err)
	}
	id := time.Now().UTC().Format("20060102T150405Z") + "-" + rb.Name + "-" + vals.String("topic")
	dir := f.runDir
	if dir == "" {
		dir = filepath.Join(stateDir(), "runs", id)
	}
	jpath := filepath.Join(dir, "journal.jsonl")
	if recs, err := journal.Read(jpath); err == nil && len(recs) > 0 {
		j, recs, meta, finished, err := openRun(dir)
		if err != nil {
			return err
		}
		defer j.Close()
		if finished {
			return usageErr(fmt.Errorf("%s holds run %s, which finished; choose another --run-dir", dir, meta.ID))
		}
		prb, err := runbooks.Get(meta.Runbook, steps.KindNames())
		if err != nil {
			return usageErr(err)
		}
		ss, err := buildSteps(prb)
		if err != nil {
			return err
		}
		return runTUI(cmd.Context(), cmd.OutOrStdout(), prb, meta, dir, j, steps.Completed(recs),
			func(ctx context.Context) (*cluster, error) { return connect(ctx, meta.Inventory) }, ss, true)
	}
	ss, err := buildSteps(rb)
	if err != nil {
		return err
	}
	j, err := journal.Create(jpath)
	if err != nil {
		return failedErr(fmt.Errorf("create run directory: %w; nothing was done", err))
	}
	defer j.Close()
	meta := steps.Meta{ID: id, Runbook: rb.Name, Topic: vals.String("topic"), Params: steps.Params(vals),
		Inventory: inv.Path, Cluster: inv.Name, Lab: inv.Lab, Version: version, Started: time.Now().UTC()}
	if _, err := j.Append(journal.RunStart, "", meta); err != nil {
		return failedErr(err)
	}
	return runTUI(cmd.Context(), cmd.OutOrStdout(), rb, meta, dir, j, nil,
		func(ctx context.Context) (*cluster, error) { return connect(ctx, f.inventory) }, ss, false)
}
