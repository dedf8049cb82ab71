package signoff

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
)

// Policy is an approval policy as a run enforces it.
type Policy struct {
	// Approvals is how many people approve a destructive step's plan, the
	// operator included: 2 is the operator and one other person.
	Approvals int
	// AllowedSigners is an OpenSSH allowed_signers file: who may approve.
	AllowedSigners string
	// Timeout bounds the wait for the other approvals (default 30m).
	Timeout time.Duration
}

// Approver enforces a Policy around the operator's Approver: for a
// destructive step it asks the operator first (Inner), signs the plan's
// digest with the operator's key (the operator's approval, verified
// against the allowed signers), then waits — with progress, bounded by the
// policy's timeout, until ctx ends — for signatures of the same digest by
// other allowed signers (`kremedy approve`), refusing, and saying so once,
// every signature that does not count: another plan's digest, a key not
// allowed, the operator's own key or principal, one that does not verify.
// The approval it returns carries every signoff; the engine journals them
// with the approval and refuses them for another digest.
type Approver struct {
	Inner  steps.Approver
	Policy Policy
	// Run is the run's id and Dir its directory (requests and signatures
	// live in Dir/approvals); Runbook, Cluster and Lab are for the request.
	Run, Dir, Runbook, Cluster string
	Lab                        bool
	// Key is the operator's signing key.
	Key    string
	Signer Signer
	// Report gets the waiting (EvWaiting once, then EvProgress); Log
	// journals and shows one line about step.
	Report steps.Reporter
	Log    func(step, text string)
	// Poll is how often the run looks for signatures (default 1s);
	// ProgressEvery how often it says it still waits (default 15s).
	Poll, ProgressEvery time.Duration
	Now                 func() time.Time
}

func (a *Approver) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Approve implements steps.Approver.
func (a *Approver) Approve(ctx context.Context, info steps.Info, plan *steps.Plan) (steps.Approval, error) {
	ap, err := a.Inner.Approve(ctx, info, plan)
	digest := plan.Digest()
	if err != nil || ap.Decision != steps.Approve || info.Risk != steps.Destructive || a.Policy.Approvals < 2 || ap.Digest != digest {
		// Not ours to add to: a skip, an abort, a step the policy does not
		// cover, or an answer the engine refuses by itself.
		return ap, err
	}
	msg := Message(a.Run, info.ID, digest)
	// The operator's approval is their signature: it says who they are, so
	// their key cannot count a second time.
	sig, err := a.Signer.Sign(ctx, a.Key, msg, false)
	if err != nil {
		return ap, fmt.Errorf("%w: the policy needs the operator's signature of %s's plan and signing failed: %w; nothing of it was done", steps.ErrNotApproved, info.ID, err)
	}
	op, err := a.Signer.Verify(ctx, a.Policy.AllowedSigners, msg, sig)
	if err != nil {
		return ap, fmt.Errorf("%w: the operator's key %s does not sign approvals under the policy (%w); add it to %s or use your key there; nothing of %s was done", steps.ErrNotApproved, a.Key, err, a.Policy.AllowedSigners, info.ID)
	}
	if err := os.MkdirAll(filepath.Join(a.Dir, Dir), 0o700); err != nil {
		return ap, fmt.Errorf("%w: %w; nothing of %s was done", steps.ErrNotApproved, err, info.ID)
	}
	opFile := filepath.Join(a.Dir, Dir, info.ID+"."+digest+"."+operatorSig)
	if err := atomicfile.WriteFile(opFile, sig); err != nil {
		return ap, fmt.Errorf("%w: keep the operator's signature: %w; nothing of %s was done", steps.ErrNotApproved, err, info.ID)
	}
	ap.Signoffs = []steps.Signoff{{By: op.Principal, Key: op.Key, Digest: digest, At: a.now().UTC(), Operator: true, File: opFile}}
	others, err := a.wait(ctx, info, plan, digest, op)
	if err != nil {
		return ap, err
	}
	ap.Signoffs = append(ap.Signoffs, others...)
	return ap, nil
}

// wait writes the request and waits for Policy.Approvals-1 signoffs of
// digest by people other than the operator.
func (a *Approver) wait(ctx context.Context, info steps.Info, plan *steps.Plan, digest string, op Identity) ([]steps.Signoff, error) {
	need := a.Policy.Approvals - 1
	timeout := a.Policy.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	poll, every := a.Poll, a.ProgressEvery
	if poll <= 0 {
		poll = time.Second
	}
	if every <= 0 {
		every = 15 * time.Second
	}
	start := a.now()
	req := Request{Run: a.Run, Runbook: a.Runbook, Cluster: a.Cluster, Lab: a.Lab, Step: info.ID, Title: info.Title, Risk: info.Risk.String(),
		Digest: digest, Plan: plan, Operator: op, Need: need, AllowedSigners: a.Policy.AllowedSigners, Since: start.UTC(), Until: start.Add(timeout).UTC()}
	reqPath := RequestPath(a.Dir, info.ID)
	if err := atomicfile.WriteJSON(reqPath, req); err != nil {
		return nil, fmt.Errorf("%w: write the approval request: %w; nothing of %s was done", steps.ErrNotApproved, err, info.ID)
	}
	defer os.Remove(reqPath)
	what := "a second approval"
	if need > 1 {
		what = fmt.Sprintf("%d more approvals", need)
	}
	how := fmt.Sprintf("another allowed signer runs `kremedy approve %s --step %s --key THEIR_KEY`", shell.Quote(a.Dir), info.ID)
	a.emit(steps.Event{Step: info.ID, Kind: steps.EvWaiting, Plan: plan,
		Text: fmt.Sprintf("waiting for %s of %s, digest %.12s (confirmed by %s): %s; up to %s", what, info.ID, digest, op.Principal, how, timeout)})
	a.log(info.ID, fmt.Sprintf("%s confirmed by %s (key %s); the policy (approvals: %d) waits for %s of digest %.12s: %s", info.ID, op.Principal, op.Key, a.Policy.Approvals, what, digest, how))

	seen := map[string]bool{} // signature files judged, counted or not
	var got []steps.Signoff
	tick := time.NewTicker(poll)
	defer tick.Stop()
	lastSaid := start
	for {
		files, err := signatures(a.Dir, info.ID)
		if err != nil {
			return nil, fmt.Errorf("%w: read the approvals: %w; nothing of %s was done", steps.ErrNotApproved, err, info.ID)
		}
		for _, f := range files {
			if seen[f.path] || f.operator {
				continue
			}
			seen[f.path] = true
			so, why := a.judge(ctx, info.ID, digest, f, op, got)
			if ctx.Err() != nil {
				break // judged again after the interruption, if ever
			}
			if why != "" {
				a.log(info.ID, why)
				continue
			}
			got = append(got, so)
			a.log(info.ID, fmt.Sprintf("%s approved by %s (key %s), digest %.12s (%d of %d approvals)", info.ID, so.By, so.Key, digest, len(got)+1, a.Policy.Approvals))
		}
		if len(got) >= need {
			return got, nil
		}
		now := a.now()
		left := start.Add(timeout).Sub(now)
		if left <= 0 {
			return nil, fmt.Errorf("%w: no %s of %s within %s (the policy's timeout); nothing of it was done", steps.ErrNotApproved, what, info.ID, timeout)
		}
		if now.Sub(lastSaid) >= every {
			lastSaid = now
			a.emit(steps.Event{Step: info.ID, Kind: steps.EvProgress,
				Text: fmt.Sprintf("waiting for %s of %s, digest %.12s — %s waited, %s left: %s", what, info.ID, digest, now.Sub(start).Round(time.Second), left.Round(time.Second), how)})
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped while waiting for %s of %s (nothing of it was done): %w", what, info.ID, ctx.Err())
		case <-tick.C:
		}
	}
}

// judge verifies one signature file: a Signoff, or why it does not count.
func (a *Approver) judge(ctx context.Context, step, digest string, f sigFile, op Identity, got []steps.Signoff) (steps.Signoff, string) {
	name := filepath.Base(f.path)
	sig, err := os.ReadFile(f.path)
	if err != nil {
		return steps.Signoff{}, fmt.Sprintf("refused the approval in %s: %v", name, err)
	}
	id, err := a.Signer.Verify(ctx, a.Policy.AllowedSigners, Message(a.Run, step, f.digest), sig)
	switch {
	case f.digest != digest && err == nil:
		return steps.Signoff{}, fmt.Sprintf("refused %s's approval in %s: it is for digest %.12s, an earlier plan of %s; the plan now is %.12s — a re-planned step needs a new approval", id.Principal, name, f.digest, step, digest)
	case f.digest != digest:
		return steps.Signoff{}, fmt.Sprintf("refused the approval in %s: it is for digest %.12s, not the plan of %s now (%.12s), and does not verify either (%v)", name, f.digest, step, digest, err)
	case errors.Is(err, ErrNotAllowed):
		return steps.Signoff{}, fmt.Sprintf("refused the approval in %s: %v — only the allowed signers in %s approve", name, err, a.Policy.AllowedSigners)
	case err != nil:
		return steps.Signoff{}, fmt.Sprintf("refused the approval in %s: it is not a signature of %s's plan, digest %.12s, in this run by an allowed signer: %v", name, step, digest, err)
	case id.Key == op.Key || id.Principal == op.Principal:
		return steps.Signoff{}, fmt.Sprintf("refused the approval in %s: it is signed by the operator (%s, key %s), whose approval already counts once; another person must approve", name, id.Principal, id.Key)
	}
	for _, g := range got {
		if g.Key == id.Key || g.By == id.Principal {
			return steps.Signoff{}, fmt.Sprintf("%s: %s (key %s) already approved %s; it counts once", name, id.Principal, id.Key, step)
		}
	}
	return steps.Signoff{By: id.Principal, Key: id.Key, Digest: digest, At: a.now().UTC(), File: f.path}, ""
}

func (a *Approver) emit(e steps.Event) {
	if a.Report == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = a.now()
	}
	a.Report.Report(e)
}

func (a *Approver) log(step, text string) {
	if a.Log != nil {
		a.Log(step, text)
	}
}
