package steps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/ports"
)

// Outcome says how a walk of a runbook ended: what was and was not done.
type Outcome struct {
	Done, Skipped, NoOp []string
	// NotNeeded are the steps after one whose plan ended the run (the
	// runbook had nothing to do).
	NotNeeded []string
	// NotDone are the steps neither done nor skipped, in runbook order.
	NotDone     []string
	Failed      string // the step that failed, refused or was not approved
	Interrupted string // the step that was running when ctx ended
	Err         error
}

// engine walks a runbook's steps in order (see the package doc for the life
// of a step). It never prompts and never draws: it reports events and asks
// its Approver.
type engine struct {
	run      *run
	cluster  ports.Cluster
	approver Approver
	// maxReplans bounds re-planning after ErrStalePlan.
	maxReplans int
	// ahead holds, per step, the decision given before its window opened
	// (its plan's digest and who approved, or a skip); aheadDone the
	// windows whose steps were confirmed ahead in this walk.
	ahead     map[string]aheadApproval
	aheadDone map[string]bool
}

// aheadApproval is a decision given for a step before its window opened.
type aheadApproval struct {
	ap     Approval
	digest string
}

type stepResult int

const (
	resApplied stepResult = iota
	resNoOp
	resSkipped
	resEndsRun // a no-op whose plan says the runbook has nothing to do
)

func (e *engine) env(s Step, rechecking bool) *Env {
	return &Env{Cluster: e.cluster, run: e.run, info: s.Info, rechecking: rechecking}
}

// walk walks every step, continuing from the journal: a step an earlier
// attempt finished is re-checked, not re-done. The returned error wraps
// ErrCheckFailed, ErrRefused, ErrAborted, ErrNotApproved or ctx's error.
func (e *engine) walk(ctx context.Context) (Outcome, error) {
	var out Outcome
	steps := e.run.rb.Steps
	completed := History{e.run.rec.records()}.Completed()
	for i, s := range steps {
		env := e.env(s, false)
		if err := ctx.Err(); err != nil {
			out.Interrupted = s.Info.ID
			return e.stop(out, s.Info.ID, err)
		}
		if how, ok := completed[s.Info.ID]; ok {
			if how == "skipped" {
				env.emit(Event{Kind: EvState, State: Skipped, Text: "skipped in an earlier attempt"})
				out.Skipped = append(out.Skipped, s.Info.ID)
				continue
			}
			// A destructive step that a later completed step has undone on
			// purpose (starting the brokers undoes stopping them; the
			// restart and a recreated topic change what the znode and wipe
			// steps checked) is not checked again: its checks would fail
			// by design, and re-doing it would stop a healthy cluster again
			// or delete what this run has just made. The journal is the
			// proof it was done.
			if later := laterCompleted(steps[i+1:], completed); s.Info.Risk == Destructive && later != "" {
				env.Logf("done in an earlier attempt; %s completed after it, which changes what this step checked, so it is not checked again", later)
				env.emit(Event{Kind: EvState, State: Done, Text: "done earlier (" + later + " completed after it)"})
				out.Done = append(out.Done, s.Info.ID)
				continue
			}
			// Re-check, do not re-do.
			checks, err := s.Kind.Verify(ctx, e.env(s, true))
			if err == nil && AllOK(checks) {
				for _, c := range checks {
					env.Check(c)
				}
				env.Logf("done in an earlier attempt; re-checked")
				env.emit(Event{Kind: EvState, State: Done, Text: "done earlier, re-checked"})
				out.Done = append(out.Done, s.Info.ID)
				continue
			}
			env.Logf("done in an earlier attempt, but its checks no longer hold: running it again")
		}
		res, err := e.step(ctx, env, s)
		if err != nil {
			if ctx.Err() != nil {
				out.Interrupted = s.Info.ID
			} else if !errors.Is(err, ErrAborted) {
				out.Failed = s.Info.ID
			}
			return e.stop(out, s.Info.ID, err)
		}
		switch res {
		case resSkipped:
			out.Skipped = append(out.Skipped, s.Info.ID)
		case resNoOp, resEndsRun:
			out.NoOp = append(out.NoOp, s.Info.ID)
			out.Done = append(out.Done, s.Info.ID)
		default:
			out.Done = append(out.Done, s.Info.ID)
		}
		if res == resEndsRun {
			for _, rest := range steps[i+1:] {
				out.NotNeeded = append(out.NotNeeded, rest.Info.ID)
				e.env(rest, false).emit(Event{Kind: EvState, State: Skipped, Text: "not needed: " + s.Info.ID + " found nothing to do"})
			}
			if err := e.run.rec.append(journal.Note, s.Info.ID, map[string]string{"text": fmt.Sprintf("%s found nothing for the runbook to do: the run ends here; not needed: %v", s.Info.ID, out.NotNeeded)}); err != nil {
				out.Err = err
				return out, err
			}
			break
		}
	}
	if err := e.run.rec.append(journal.RunEnd, "", map[string]any{"ok": true}); err != nil {
		out.Err = err
		return out, err
	}
	return out, nil
}

func (e *engine) stop(out Outcome, step string, err error) (Outcome, error) {
	out.Err = err
	typ := journal.RunEnd
	if out.Interrupted != "" {
		typ = journal.Interrupted
	}
	// The run stops either way; a journal that cannot say so has already
	// said why in err.
	_ = e.run.rec.append(typ, step, map[string]any{"ok": false, "error": err.Error()})
	return out, err
}

// planRecord is a plan as the journal keeps it: with its digest, and
// whether it was made ahead (to confirm a window before it opens).
type planRecord struct {
	*Plan
	Digest string `json:"digest"`
	Ahead  bool   `json:"ahead,omitempty"`
}

func (e *engine) step(ctx context.Context, env *Env, s Step) (stepResult, error) {
	start := env.Now()
	if err := env.record(journal.StepStart, map[string]any{"title": s.Info.Title, "kind": s.Info.Kind, "risk": s.Info.Risk.String()}); err != nil {
		return 0, err
	}
	fail := func(err error) (stepResult, error) {
		err = fmt.Errorf("step %s: %w", s.Info.ID, err)
		env.emit(Event{Kind: EvState, State: Failed, Err: err})
		_ = env.record(journal.StepFailed, map[string]string{"error": err.Error()})
		return 0, err
	}
	maxReplans := e.maxReplans
	if maxReplans == 0 {
		maxReplans = 2
	}
	for attempt := 0; ; attempt++ {
		env.emit(Event{Kind: EvState, State: Planning})
		plan, digest, err := e.plan(ctx, env, s)
		if err != nil {
			return fail(err)
		}
		if plan.NoOp {
			if err := e.verify(ctx, env, s); err != nil {
				return fail(err)
			}
			if err := env.record(journal.StepDone, map[string]any{"took_ms": env.Now().Sub(start).Milliseconds(), "noop": true}); err != nil {
				return fail(err)
			}
			env.emit(Event{Kind: EvState, State: Done, Text: "nothing to do"})
			if plan.EndsRun {
				return resEndsRun, nil
			}
			return resNoOp, nil
		}
		if s.Info.Confirm != ConfirmNone {
			res, err := e.confirmOrAhead(ctx, env, s, plan, digest)
			if err != nil {
				return fail(err)
			}
			if res == resSkipped {
				return res, nil
			}
			// The rest of the window is planned and confirmed now, before
			// this step (the first to change the cluster) runs.
			if err := e.confirmWindow(ctx, s); err != nil {
				return fail(err)
			}
			// Apply exactly what was shown: a plan changed after its
			// approval (by anything in this process) is refused.
			if plan.Digest() != digest {
				return fail(fmt.Errorf("%w: the plan changed after it was approved (digest %.12s, approved %.12s); nothing of it was done", ErrNotApproved, plan.Digest(), digest))
			}
		}
		if err := e.run.checkLease(ctx, s.Info.ID, "nothing of it was done"); err != nil {
			return fail(err)
		}
		env.emit(Event{Kind: EvState, State: Running})
		err = e.apply(ctx, env, s, plan)
		if errors.Is(err, ErrStalePlan) && attempt < maxReplans && ctx.Err() == nil {
			env.Logf("stale plan: %v — planning again from the cluster as it is now", err)
			continue
		}
		if err != nil {
			return fail(err)
		}
		if err := env.record(journal.StepDone, map[string]any{"took_ms": env.Now().Sub(start).Milliseconds()}); err != nil {
			return fail(err)
		}
		env.emit(Event{Kind: EvState, State: Done, Text: fmt.Sprintf("done in %s", env.Now().Sub(start).Round(time.Millisecond))})
		return resApplied, nil
	}
}

// plan asks a step's kind for its plan, fills in the step, the kind and
// the rendered rollback note, journals it with its digest (marked ahead for
// a window's step planned before it opens) and shows it.
func (e *engine) plan(ctx context.Context, env *Env, s Step) (*Plan, string, error) {
	plan, err := s.Kind.Plan(ctx, env)
	if err != nil {
		return nil, "", err
	}
	plan.Step, plan.Kind = s.Info.ID, s.Info.Kind
	// The runbook's note first, then what the kind adds from this plan
	// (the backups it will make, by host).
	if plan.Rollback, err = e.run.rollback(s.Info.Rollback, plan.Rollback); err != nil {
		return nil, "", fmt.Errorf("rollback note: %w", err)
	}
	digest := plan.Digest()
	rec, err := e.run.rec.appendRecord(journal.Plan, s.Info.ID, planRecord{Plan: plan, Digest: digest, Ahead: env.ahead})
	if err != nil {
		return nil, "", err
	}
	// What a second approver reads is the journal's copy: it must digest
	// the same as the plan that runs, or nobody could check it.
	if again, err := DigestJSON(rec.Data); err != nil || again != digest {
		return nil, "", journaledDigestErr(s.Info.ID, digest, again, err, rec.Data)
	}
	env.emit(Event{Kind: EvPlan, Plan: plan})
	return plan, digest, nil
}

// journaledDigestErr says why a plan whose journaled copy does not digest
// as the plan itself cannot be confirmed: a secret the journal redacted
// (the plan would show it), or arguments that do not survive JSON.
func journaledDigestErr(step, digest, again string, err error, data []byte) error {
	why := fmt.Sprintf("its journaled copy digests as %.12s, the plan as %.12s", again, digest)
	if err != nil {
		why = fmt.Sprintf("its journaled copy cannot be read back: %v", err)
	}
	if bytes.Contains(data, []byte(journal.RedactedText)) {
		why = "it contains a secret, which the journal redacted: a plan is shown to the operator and every approver and must carry none"
	}
	return fmt.Errorf("%w: the plan of %s cannot be confirmed: %s; nothing of it was done — this is a bug in the step's kind: report it with the journal", ErrRefused, step, why)
}

// bounded is the context of a step's work: its timeout bounds Apply and
// Verify, never the time the operator takes to read the plan and confirm.
func bounded(ctx context.Context, s Step) (context.Context, context.CancelFunc) {
	if s.Info.Timeout > 0 {
		return context.WithTimeout(ctx, s.Info.Timeout)
	}
	return context.WithCancel(ctx)
}

// apply runs the kind's Apply on plan, then its Verify, within the step's
// timeout.
func (e *engine) apply(ctx context.Context, env *Env, s Step, plan *Plan) error {
	wctx, cancel := bounded(ctx, s)
	defer cancel()
	if err := s.Kind.Apply(wctx, env, plan); err != nil {
		if wctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			err = fmt.Errorf("%w (the step's %s timeout passed; what was done is in the journal)", err, s.Info.Timeout)
		}
		return err
	}
	return e.checked(wctx, env, s)
}

// verify checks a no-op step's postconditions within its timeout.
func (e *engine) verify(ctx context.Context, env *Env, s Step) error {
	wctx, cancel := bounded(ctx, s)
	defer cancel()
	return e.checked(wctx, env, s)
}

// checked runs the kind's Verify and reports its checks; a failed check is
// ErrCheckFailed.
func (e *engine) checked(ctx context.Context, env *Env, s Step) error {
	checks, err := s.Kind.Verify(ctx, env)
	for _, c := range checks {
		env.Check(c)
	}
	if err == nil && !AllOK(checks) {
		err = fmt.Errorf("%w: %s", ErrCheckFailed, failedNames(checks))
	}
	return err
}

// confirmOrAhead confirms a step: with the decision given before its window
// opened when its plan is still the one confirmed then, else by asking.
func (e *engine) confirmOrAhead(ctx context.Context, env *Env, s Step, plan *Plan, digest string) (stepResult, error) {
	a, ok := e.ahead[s.Info.ID]
	if !ok {
		return e.confirm(ctx, env, s, plan, digest)
	}
	delete(e.ahead, s.Info.ID)
	if a.ap.Decision == Skip {
		return e.answer(env, s, a.ap, digest)
	}
	if a.digest != digest {
		env.Logf("the plan of %s changed since it was confirmed before the window opened (digest %.12s, now %.12s): the window stops here and asks again", s.Info.ID, a.digest, digest)
		return e.confirm(ctx, env, s, plan, digest)
	}
	ap := a.ap
	ap.By += " (confirmed before the window opened)"
	env.Logf("%s: the plan confirmed before the window opened is unchanged (digest %.12s): it runs now without asking", s.Info.ID, digest)
	return e.answer(env, s, ap, digest)
}

// confirmWindow plans and confirms, ahead, the steps after s in s's window
// that have not run yet, once per window and walk. A step's plan made
// ahead is made as if the steps before it had run (Env.Preview); when the
// step is reached it is planned again, and runs without asking only if its
// plan is unchanged. An abort here stops the run before anything of the
// window was done.
func (e *engine) confirmWindow(ctx context.Context, s Step) error {
	w := s.Info.Window
	if w == "" || e.aheadDone[w] {
		return nil
	}
	if e.ahead == nil {
		e.ahead, e.aheadDone = map[string]aheadApproval{}, map[string]bool{}
	}
	e.aheadDone[w] = true
	completed := History{e.run.rec.records()}.Completed()
	after := false
	for _, o := range e.run.rb.Steps {
		if o.Info.ID == s.Info.ID {
			after = true
			continue
		}
		if !after || o.Info.Window != w || completed[o.Info.ID] != "" || o.Info.Confirm == ConfirmNone {
			continue
		}
		env := e.env(o, false)
		env.ahead = true
		env.emit(Event{Kind: EvState, State: Planning, Text: "planned ahead: confirmed before " + s.Info.ID + " runs"})
		plan, digest, err := e.plan(ctx, env, o)
		if err != nil {
			return fmt.Errorf("planning %s ahead (the window %q is confirmed as a whole before it opens; nothing of it was done): %w", o.Info.ID, w, err)
		}
		if plan.NoOp {
			env.emit(Event{Kind: EvState, State: Pending, Text: "nothing to do, as planned ahead"})
			continue
		}
		env.emit(Event{Kind: EvState, State: Confirming, Plan: plan})
		if e.approver == nil {
			return fmt.Errorf("%w: no approver for a step that needs confirmation", ErrNotApproved)
		}
		ap, err := e.approver.Approve(ctx, o.Info, plan)
		if err != nil {
			return err
		}
		if err := e.checkAnswer(env, o, ap, digest); err != nil {
			return err
		}
		rec := approvalRecord(ap)
		rec["ahead"] = true
		if err := env.record(journal.Note, map[string]any{"text": fmt.Sprintf("confirmed ahead, before %s runs: %s", s.Info.ID, ap.Decision), "approval": rec}); err != nil {
			return err
		}
		env.emit(Event{Kind: EvApproval, Approval: &ap, Text: fmt.Sprintf("%s ahead, before %s runs, by %s", ap.Decision, s.Info.ID, ap.By)})
		if ap.Decision == Abort {
			_ = env.record(journal.Approval, rec)
			return ErrAborted
		}
		e.ahead[o.Info.ID] = aheadApproval{ap: ap, digest: digest}
		env.emit(Event{Kind: EvState, State: Pending, Text: "confirmed; runs right after " + s.Info.ID})
	}
	return nil
}

// confirm asks the Approver and journals its answer; resApplied means go on.
func (e *engine) confirm(ctx context.Context, env *Env, s Step, plan *Plan, digest string) (stepResult, error) {
	env.emit(Event{Kind: EvState, State: Confirming, Plan: plan})
	if e.approver == nil {
		return 0, fmt.Errorf("%w: no approver for a step that needs confirmation", ErrNotApproved)
	}
	ap, err := e.approver.Approve(ctx, s.Info, plan)
	if err != nil {
		return 0, err
	}
	return e.answer(env, s, ap, digest)
}

// checkAnswer refuses an approval that does not match: a destructive step's
// word not typed exactly, another plan's digest, a skip without reason.
func (e *engine) checkAnswer(env *Env, s Step, ap Approval, digest string) error {
	switch ap.Decision {
	case Abort:
		return nil
	case Skip:
		if ap.Reason == "" {
			return fmt.Errorf("%w: skipping a step needs a reason", ErrNotApproved)
		}
		return nil
	}
	word := e.run.rb.Confirm
	if s.Info.Confirm == ConfirmTyped && (word.Word == "" || ap.Typed != word.Word) {
		_ = env.record(journal.Approval, map[string]any{"decision": "rejected", "by": ap.By})
		return fmt.Errorf("%w: step %s is destructive and needs the %s name %q typed exactly; nothing was done", ErrNotApproved, s.Info.ID, word.Noun, word.Word)
	}
	if ap.Digest != digest {
		_ = env.record(journal.Approval, map[string]any{"decision": "rejected", "by": ap.By, "digest": ap.Digest})
		return fmt.Errorf("%w: the approval is for another plan than this one (digest %.12s, approved %.12s); nothing was done", ErrNotApproved, digest, ap.Digest)
	}
	for _, so := range ap.Signoffs {
		if so.Digest != digest {
			_ = env.record(journal.Approval, map[string]any{"decision": "rejected", "by": ap.By, "digest": ap.Digest, "signoffs": ap.Signoffs})
			return fmt.Errorf("%w: %s signed another plan than this one (digest %.12s, signed %.12s); nothing was done", ErrNotApproved, so.By, digest, so.Digest)
		}
	}
	return nil
}

// approvalRecord is an approval as the journal keeps it: never what was
// typed, always the digest, and the signoffs a policy asked for.
func approvalRecord(ap Approval) map[string]any {
	rec := map[string]any{"decision": ap.Decision.String(), "by": ap.By, "digest": ap.Digest}
	if ap.Reason != "" {
		rec["reason"] = ap.Reason
	}
	if len(ap.Signoffs) > 0 {
		rec["signoffs"] = ap.Signoffs
	}
	return rec
}

// answer journals an operator's decision about a step's plan and says what
// follows from it.
func (e *engine) answer(env *Env, s Step, ap Approval, digest string) (stepResult, error) {
	if err := e.checkAnswer(env, s, ap, digest); err != nil {
		return 0, err
	}
	rec := approvalRecord(ap)
	journaled := func() error {
		if err := env.record(journal.Approval, rec); err != nil {
			return err
		}
		env.emit(Event{Kind: EvApproval, Approval: &ap, Text: fmt.Sprintf("%s by %s", ap.Decision, ap.By)})
		return nil
	}
	switch ap.Decision {
	case Abort:
		if err := journaled(); err != nil {
			return 0, err
		}
		return 0, ErrAborted
	case Skip:
		rec["reason"] = ap.Reason
		if err := journaled(); err != nil {
			return 0, err
		}
		if err := env.record(journal.StepSkipped, map[string]string{"reason": ap.Reason}); err != nil {
			return 0, err
		}
		env.emit(Event{Kind: EvState, State: Skipped, Text: ap.Reason})
		return resSkipped, nil
	}
	if err := journaled(); err != nil {
		return 0, err
	}
	return resApplied, nil
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

// rollback is a plan's rollback note: the runbook's note first, then what
// the kind adds from this plan (own: the backups it will make, by host).
func (r *run) rollback(note, own string) (string, error) {
	text, err := r.render(note)
	if err != nil || own == "" {
		return text, err
	}
	return strings.TrimRight(text, "\n") + "\n" + own, nil
}
