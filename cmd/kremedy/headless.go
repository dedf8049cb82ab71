package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/inventory/connect"
	"github.com/kremedy/kremedy/steps"
)

// headless walks a run without a terminal: every event printed, the
// confirmations answered by --yes and --confirm, and how it ended said.
func headless(cmd *cobra.Command, s *steps.Session, cl *connect.Clients, f runFlags, tc *teamConfig) error {
	ctx, w := cmd.Context(), cmd.OutOrStdout()
	meta, rb := s.Meta(), s.Runbook()
	s.Redact(cl.Secrets...)
	p := &printer{w: w, infos: map[string]steps.Info{}}
	for _, info := range rb.Infos() {
		p.infos[info.ID] = info
		p.index = append(p.index, info.ID)
	}
	var rep steps.Reporter = p
	var jl *jsonLines
	if f.output == "jsonl" {
		// stdout carries only JSON lines; what a person reads goes to stderr.
		jl = &jsonLines{enc: json.NewEncoder(w)}
		rep, w = s.Redacting(jl), cmd.ErrOrStderr()
		jl.line(map[string]any{"kind": "run-start", "run": meta.ID, "runbook": rb.Name, "cluster": meta.Cluster, "lab": meta.Lab, "dir": s.Dir(), "kremedy": version, "time": time.Now().UTC()})
	}
	if fs, err := faultsFor(meta.Lab); err != nil {
		return err
	} else if fs != nil {
		fs.log, fs.ctx = os.Stderr, ctx
		s.AfterRecord(fs.after)
		fmt.Fprintf(w, "KREMEDY_FAULT=%s: faults will be injected into this lab run\n", os.Getenv(faultEnv))
	}
	defer journalSession(cl, s)()
	fmt.Fprintf(w, "run %s: %s on %s (%s)\nrun directory: %s\n", meta.ID, rb.Name, rb.Confirm.Subject(meta.Cluster), modeName(meta.Lab), s.Dir())
	start := time.Now()
	if f.stopBefore != "" && !slices.Contains(p.index, f.stopBefore) {
		return usageErr(fmt.Errorf("--stop-before %s: %s has no such step; its steps are %s", f.stopBefore, rb.Name, strings.Join(p.index, ", ")))
	}
	tm := tc.attach(s, true, w)
	out := tm.run(ctx, headlessApprover{w: w, yes: f.yes, confirm: f.confirm, stopBefore: f.stopBefore}, rep, func(a steps.Approver, rep steps.Reporter) steps.Outcome {
		return s.Run(ctx, cl.Ports, a, rep)
	})
	fmt.Fprintf(w, "\ndone: %v; nothing to do: %v; skipped: %v", out.Done, out.NoOp, out.Skipped)
	if len(out.NotNeeded) > 0 {
		fmt.Fprintf(w, "; not needed: %v", out.NotNeeded)
	}
	fmt.Fprintf(w, " (%.1fs)\nreport: %s\n", time.Since(start).Seconds(), s.ReportPath())
	tm.close() // the last notifications: at most a second more
	end := exitFor(s.End(ctx, out, true))
	if jl != nil {
		e := map[string]any{"kind": "run-end", "ending": out.Ending(ctx).String(), "done": out.Done, "no_op": out.NoOp, "skipped": out.Skipped,
			"not_needed": out.NotNeeded, "not_done": out.NotDone, "report": s.ReportPath(), "exit": exitCode(ctx, end), "time": time.Now().UTC()}
		if end != nil {
			e["error"] = end.Error()
			e["resume"] = s.ResumeCommand(true)
		}
		jl.line(e)
	}
	return end
}

// jsonLines is the `--output jsonl` Reporter: one JSON object per line.
type jsonLines struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (j *jsonLines) Report(e steps.Event) { j.line(e) }

func (j *jsonLines) line(v any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.enc.Encode(v)
}

// journalSession journals the run's ZooKeeper session and, as they happen,
// what befalls it (lost, re-established, expired, replaced): a step that ran
// across an expiry must say so. It returns the function that stops it.
func journalSession(cl *connect.Clients, s *steps.Session) func() {
	if cl.ZK == nil {
		return func() {}
	}
	s.Notef("zookeeper", "ZooKeeper: session %s", cl.ZK.Session())
	cl.ZK.OnSession(func(msg string) { s.Notef("zookeeper", "%s", msg) })
	return func() { cl.ZK.OnSession(nil) }
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
	case steps.EvAction:
		fmt.Fprintf(p.w, "%s [%s] → %s\n", ts, e.Step, e.Text)
	case steps.EvBrokers:
		fmt.Fprintf(p.w, "%s [%s] %s\n", ts, e.Step, e.Text)
	case steps.EvStatus:
		fmt.Fprintf(p.w, "%s [%s] STATUS %s\n", ts, e.Step, e.Text)
	case steps.EvProgress, steps.EvWaiting:
		fmt.Fprintf(p.w, "%s [%s] … %s\n", ts, e.Step, e.Text)
	case steps.EvOutage:
		fmt.Fprintf(p.w, "%s [%s] %s\n", ts, e.Step, e.Text)
	case steps.EvApproval:
		if a := e.Approval; a != nil && len(a.Signoffs) > 0 {
			fmt.Fprintf(p.w, "%s [%s] approved (digest %.12s), signed off by %s\n", ts, e.Step, a.Digest, signoffNames(a.Signoffs))
		}
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

// headlessApprover answers confirmations from --yes and --confirm: it
// approves the plan it was shown (its digest) and nothing else.
type headlessApprover struct {
	w          io.Writer
	yes        bool
	confirm    string
	stopBefore string
}

func (a headlessApprover) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	by := "headless --yes"
	if u, err := user.Current(); err == nil {
		by += " (" + u.Username + ")"
	}
	if info.ID == a.stopBefore {
		fmt.Fprintf(a.w, "stopping before %s (--stop-before): nothing of it was done; `kremedy resume` goes on from here\n", info.ID)
		return steps.Approval{Decision: steps.Abort, Reason: "--stop-before " + info.ID, By: by, Digest: p.Digest()}, nil
	}
	if info.Confirm == steps.ConfirmTyped {
		if a.confirm == "" {
			fmt.Fprintf(a.w, "step %s is destructive: pass --confirm WORD to approve it\n", info.ID)
		}
		return steps.Approval{Decision: steps.Approve, Typed: a.confirm, By: by + " --confirm", Digest: p.Digest()}, nil
	}
	fmt.Fprintf(a.w, "approved %s (%s)\n", info.ID, by)
	return steps.Approval{Decision: steps.Approve, By: by, Digest: p.Digest()}, nil
}

func signoffNames(ss []steps.Signoff) string {
	var out []string
	for _, s := range ss {
		n := s.By
		if s.Operator {
			n += " (operator)"
		}
		out = append(out, n)
	}
	return strings.Join(out, ", ")
}
