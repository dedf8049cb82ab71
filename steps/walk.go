package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
)

// Engine walks a runbook's steps in order. It never prompts and never
// draws: it reports events and asks its Approver.
//
// The life of one step: state Planning → Plan (read-only, journaled) → if the
// plan is a no-op, Verify and Done; otherwise Confirming (the Approver, never
// for a no-op; a typed confirmation must equal the topic) → Running: Apply
// with every action journaled before and after → Verify (postconditions) →
// Done. A stale plan (the cluster changed under it) is planned and confirmed
// again, at most MaxReplans times. On resume, a step the journal shows as
// done is only verified; if its postconditions no longer hold it is planned
// and applied again (every step is idempotent).
type Engine struct {
	Steps    []Step
	Approver Approver
	// MaxReplans bounds re-planning after ErrStalePlan (default 2).
	MaxReplans int
}

// Outcome summarises a finished or stopped run.
type Outcome struct {
	Done, Skipped, NoOp []string
	Failed              string
	Interrupted         string
	Err                 error
}

// Completed returns, from a journal, the steps that finished (done or
// skipped) in an earlier attempt of the same run.
func Completed(recs []journal.Record) map[string]string {
	out := map[string]string{}
	for _, rec := range recs {
		switch rec.Type {
		case journal.StepDone:
			out[rec.Step] = "done"
		case journal.StepSkipped:
			out[rec.Step] = "skipped"
		case journal.StepStart:
			delete(out, rec.Step)
		}
	}
	return out
}

// PriorFacts returns the facts the last preflight of an earlier attempt
// recorded (nil if none): what a resumed run cannot re-read from brokers
// that are now stopped — their log dirs and listener addresses.
func PriorFacts(recs []journal.Record) *Facts {
	var last *Facts
	for _, rec := range recs {
		if rec.Type != journal.Plan {
			continue
		}
		p, err := journal.Decode[Plan](rec)
		if err != nil || p.Kind != "preflight" || len(p.Payload) == 0 {
			continue
		}
		var f Facts
		if fromRaw(p.Payload, &f) == nil {
			last = &f
		}
	}
	return last
}

// Run walks every step. completed (from Completed) marks steps an earlier
// attempt finished. The returned error wraps ErrCheckFailed, ErrRefused,
// ErrAborted or ctx's error; the Outcome says what was and was not done.
func (e *Engine) Run(ctx context.Context, r *Run, completed map[string]string) (Outcome, error) {
	var out Outcome
	if completed == nil {
		completed = map[string]string{}
	}
	if r.Journal != nil && r.Prior == nil {
		if recs, err := journal.Read(r.Journal.Path()); err == nil {
			r.Prior = PriorFacts(recs)
		}
	}
	for i, s := range e.Steps {
		r.step = s.Info.ID
		if err := ctx.Err(); err != nil {
			out.Interrupted = s.Info.ID
			return e.stop(r, out, err)
		}
		if how, ok := completed[s.Info.ID]; ok {
			if how == "skipped" {
				r.emit(Event{Kind: EvState, State: Skipped, Text: "skipped in an earlier attempt"})
				out.Skipped = append(out.Skipped, s.Info.ID)
				continue
			}
			// A destructive step that a later completed step has undone on
			// purpose (start-brokers undoes stop-brokers; the restart and the
			// recreated topic change what the znode and wipe steps checked)
			// is not checked again: its checks would fail by design, and
			// re-doing it would stop a healthy cluster again or delete what
			// this run has just made. The journal is the proof it was done.
			if later := laterCompleted(e.Steps[i+1:], completed); s.Info.Risk == Destructive && later != "" {
				r.Logf("done in an earlier attempt; %s completed after it, which changes what this step checked, so it is not checked again", later)
				r.emit(Event{Kind: EvState, State: Done, Text: "done earlier (" + later + " completed after it)"})
				r.markDone(s.Info.Kind)
				out.Done = append(out.Done, s.Info.ID)
				continue
			}
			// Re-check, do not re-do.
			r.rechecking = true
			checks, err := s.Kind.Verify(ctx, r)
			r.rechecking = false
			if err == nil && allOK(checks) {
				for _, c := range checks {
					r.Check(c)
				}
				r.Logf("done in an earlier attempt; re-checked")
				r.emit(Event{Kind: EvState, State: Done, Text: "done earlier, re-checked"})
				r.markDone(s.Info.Kind)
				out.Done = append(out.Done, s.Info.ID)
				continue
			}
			r.Logf("done in an earlier attempt, but its checks no longer hold: running it again")
		}
		noop, err := e.step(ctx, r, s)
		if err != nil {
			if ctx.Err() != nil {
				out.Interrupted = s.Info.ID
			} else if !errors.Is(err, ErrAborted) {
				out.Failed = s.Info.ID
			}
			return e.stop(r, out, err)
		}
		if noop != skipped {
			r.markDone(s.Info.Kind)
		}
		switch {
		case noop == skipped:
			out.Skipped = append(out.Skipped, s.Info.ID)
		case noop == nothing:
			out.NoOp = append(out.NoOp, s.Info.ID)
			out.Done = append(out.Done, s.Info.ID)
		default:
			out.Done = append(out.Done, s.Info.ID)
		}
	}
	r.step = ""
	_ = r.journalled(journal.RunEnd, map[string]any{"ok": true})
	return out, nil
}

func (e *Engine) stop(r *Run, out Outcome, err error) (Outcome, error) {
	out.Err = err
	typ := journal.RunEnd
	if out.Interrupted != "" {
		typ = journal.Interrupted
	}
	_ = r.journalled(typ, map[string]any{"ok": false, "error": err.Error(), "step": r.step})
	return out, err
}

type stepResult int

const (
	applied stepResult = iota
	nothing
	skipped
)

func (e *Engine) step(ctx context.Context, r *Run, s Step) (stepResult, error) {
	start := r.now()
	if err := r.journalled(journal.StepStart, map[string]any{"title": s.Info.Title, "kind": s.Info.Kind, "risk": s.Info.Risk.String()}); err != nil {
		return 0, err
	}
	// The step's timeout bounds its work (Apply and Verify), never the time
	// the operator takes to read the plan and confirm it.
	bounded := func() (context.Context, context.CancelFunc) {
		if s.Info.Timeout > 0 {
			return context.WithTimeout(ctx, s.Info.Timeout)
		}
		return context.WithCancel(ctx)
	}
	fail := func(err error) (stepResult, error) {
		err = fmt.Errorf("step %s: %w", s.Info.ID, err)
		r.emit(Event{Kind: EvState, State: Failed, Err: err})
		_ = r.journalled(journal.StepFailed, map[string]string{"error": err.Error()})
		return 0, err
	}
	maxReplans := e.MaxReplans
	if maxReplans == 0 {
		maxReplans = 2
	}
	for attempt := 0; ; attempt++ {
		r.emit(Event{Kind: EvState, State: Planning})
		plan, err := s.Kind.Plan(ctx, r)
		if err != nil {
			return fail(err)
		}
		plan.Step, plan.Kind = s.Info.ID, s.Info.Kind
		if plan.Rollback, err = r.RenderRollback(s.Info.Rollback); err != nil {
			return fail(fmt.Errorf("rollback note: %w", err))
		}
		if err := r.journalled(journal.Plan, plan); err != nil {
			return fail(err)
		}
		r.emit(Event{Kind: EvPlan, Plan: plan})
		if plan.NoOp {
			wctx, cancel := bounded()
			checks, err := s.Kind.Verify(wctx, r)
			cancel()
			if err == nil && !allOK(checks) {
				err = fmt.Errorf("%w: %s", ErrCheckFailed, failedNames(checks))
			}
			for _, c := range checks {
				r.Check(c)
			}
			if err != nil {
				return fail(err)
			}
			_ = r.journalled(journal.StepDone, map[string]any{"took_ms": r.now().Sub(start).Milliseconds(), "noop": true})
			r.emit(Event{Kind: EvState, State: Done, Text: "nothing to do"})
			return nothing, nil
		}
		if s.Info.Confirm != ConfirmNone {
			r.emit(Event{Kind: EvState, State: Confirming, Plan: plan})
			if e.Approver == nil {
				return fail(fmt.Errorf("%w: no approver for a step that needs confirmation", ErrNotApproved))
			}
			ap, err := e.Approver.Approve(ctx, s.Info, plan)
			if err != nil {
				return fail(err)
			}
			rec := map[string]any{"decision": [...]string{"approve", "skip", "abort"}[ap.Decision], "by": ap.By}
			switch ap.Decision {
			case Abort:
				_ = r.journalled(journal.Approval, rec)
				return fail(ErrAborted)
			case Skip:
				if ap.Reason == "" {
					return fail(fmt.Errorf("%w: skipping a step needs a reason", ErrNotApproved))
				}
				rec["reason"] = ap.Reason
				_ = r.journalled(journal.Approval, rec)
				_ = r.journalled(journal.StepSkipped, map[string]string{"reason": ap.Reason})
				r.emit(Event{Kind: EvState, State: Skipped, Text: ap.Reason})
				return skipped, nil
			}
			if s.Info.Confirm == ConfirmTyped && (r.Meta.Topic == "" || ap.Typed != r.Meta.Topic) {
				_ = r.journalled(journal.Approval, map[string]any{"decision": "rejected", "by": ap.By})
				return fail(fmt.Errorf("%w: step %s is destructive and needs the topic name %q typed exactly; nothing was done", ErrNotApproved, s.Info.ID, r.Meta.Topic))
			}
			if err := r.journalled(journal.Approval, rec); err != nil {
				return fail(err)
			}
		}
		r.emit(Event{Kind: EvState, State: Running})
		wctx, cancel := bounded()
		err = s.Kind.Apply(wctx, r, plan)
		if errors.Is(err, ErrStalePlan) && attempt < maxReplans && ctx.Err() == nil {
			cancel()
			r.Logf("stale plan: %v — planning again from the cluster as it is now", err)
			continue
		}
		if err != nil {
			cancel()
			if wctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
				err = fmt.Errorf("%w (the step's %s timeout passed; what was done is in the journal)", err, s.Info.Timeout)
			}
			return fail(err)
		}
		checks, err := s.Kind.Verify(wctx, r)
		cancel()
		for _, c := range checks {
			r.Check(c)
		}
		if err == nil && !allOK(checks) {
			err = fmt.Errorf("%w: %s", ErrCheckFailed, failedNames(checks))
		}
		if err != nil {
			return fail(err)
		}
		_ = r.journalled(journal.StepDone, map[string]any{"took_ms": r.now().Sub(start).Milliseconds()})
		r.emit(Event{Kind: EvState, State: Done, Text: fmt.Sprintf("done in %s", r.now().Sub(start).Round(time.Millisecond))})
		return applied, nil
	}
}

func allOK(cs []Check) bool {
	for _, c := range cs {
		if !c.OK {
			return false
		}
	}
	return true
}

func failedNames(cs []Check) string {
	s := ""
	for _, c := range cs {
		if !c.OK {
			if s != "" {
				s += "; "
			}
			s += c.Name
			if c.Detail != "" {
				s += " (" + c.Detail + ")"
			}
		}
	}
	return s
}

// laterCompleted names the last of steps that an earlier attempt finished
// (done, not skipped), or "".
func laterCompleted(steps []Step, completed map[string]string) string {
	last := ""
	for _, s := range steps {
		if completed[s.Info.ID] == "done" {
			last = s.Info.ID
		}
	}
	return last
}
