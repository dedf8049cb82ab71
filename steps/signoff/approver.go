package signoff

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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
	// SignersSHA256 is the allowed signers' sha256 (SignersDigest) the run
	// journaled at its start: while the file differs, no approval counts
	// (the run waits, saying why). "" checks nothing.
	SignersSHA256 string
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
	// Shared: the run directory is shared with the approvers' group (the
	// journaled policy.group): approvals/ is made 3770 (setgid, sticky:
	// each person adds files, none removes or replaces another's) and the
	// request and the operator's signature 0640, for the approvers'
	// `kremedy approve` from their own accounts. Otherwise 0700 and 0600.
	Shared bool
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

// fileMode is the mode of the request and the operator's signature.
func (a *Approver) fileMode() os.FileMode {
	if a.Shared {
		return steps.SharedFileMode
	}
	return 0o600
}

// MakeDir makes the approvals folder of the run directory runDir, or
// gives one that exists the mode it should have: 3770 and the run
// directory's group when the run is shared with its approvers' group (its
// files take the group; a member adds files, and removes or replaces only
// their own), 0700 otherwise. A folder that is not a directory (a link)
// is refused.
func MakeDir(runDir string, shared bool) error {
	dir := filepath.Join(runDir, Dir)
	if !shared {
		return os.MkdirAll(dir, 0o700)
	}
	parent, err := os.Stat(runDir)
	if err != nil {
		return err
	}
	st, ok := parent.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner and group to share approvals/ with", runDir)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (%v): approvals are not kept there", dir, fi.Mode().Type())
	}
	if err := os.Lchown(dir, -1, int(st.Gid)); err != nil {
		return fmt.Errorf("give %s the run directory's group: %w", dir, err)
	}
	return os.Chmod(dir, steps.SharedDropMode)
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
	// Each request has its own nonce, signed with the digest: a signature
	// made for an earlier request of the same plan never counts again.
	nonce, err := NewNonce()
	if err != nil {
		return ap, fmt.Errorf("%w: %w; nothing of %s was done", steps.ErrNotApproved, err, info.ID)
	}
	if why := a.signersChanged(); why != "" {
		return ap, fmt.Errorf("%w: %s; nothing of %s was done", steps.ErrNotApproved, why, info.ID)
	}
	msg := Message(a.Run, info.ID, digest, nonce)
	// The operator's approval is their signature: it says who they are, so
	// their key and names cannot count a second time.
	sig, err := a.Signer.Sign(ctx, a.Key, msg, false)
	if err != nil {
		return ap, fmt.Errorf("%w: the policy needs the operator's signature of %s's plan and signing failed: %w; nothing of it was done", steps.ErrNotApproved, info.ID, err)
	}
	op, err := a.Signer.Verify(ctx, a.Policy.AllowedSigners, msg, sig)
	if err != nil {
		return ap, fmt.Errorf("%w: the operator's key %s does not sign approvals under the policy (%w); add it to %s or use your key there; nothing of %s was done", steps.ErrNotApproved, a.Key, err, a.Policy.AllowedSigners, info.ID)
	}
	if err := MakeDir(a.Dir, a.Shared); err != nil {
		return ap, fmt.Errorf("%w: %w; nothing of %s was done", steps.ErrNotApproved, err, info.ID)
	}
	opFile := filepath.Join(a.Dir, Dir, operatorName(info.ID, digest, nonce))
	if err := atomicfile.WriteFileMode(opFile, sig, a.fileMode()); err != nil {
		return ap, fmt.Errorf("%w: keep the operator's signature: %w; nothing of %s was done", steps.ErrNotApproved, err, info.ID)
	}
	ap.Signoffs = []steps.Signoff{{By: op.Principal, Key: op.Key, Digest: digest, Nonce: nonce, At: a.now().UTC(), Operator: true, File: opFile}}
	others, err := a.wait(ctx, info, plan, digest, nonce, op)
	if err != nil {
		return ap, err
	}
	ap.Signoffs = append(ap.Signoffs, others...)
	return ap, nil
}

// signersChanged says why no approval counts now when the allowed
// signers are not the ones the run started with ("" when they are, or
// when the policy has no journaled sha256).
func (a *Approver) signersChanged() string {
	want := a.Policy.SignersSHA256
	if want == "" {
		return ""
	}
	got, err := SignersDigest(a.Policy.AllowedSigners)
	if err != nil {
		return fmt.Sprintf("the run cannot read the allowed signers it started with (%v)", err)
	}
	if got != want {
		return fmt.Sprintf("%s changed since the run started (sha256 %.12s then, %.12s now): no approval counts until it is restored as it was; or stop the run and start a new one under the file as it is", a.Policy.AllowedSigners, want, got)
	}
	return ""
}

// stamp is a signature file as it was judged: re-signed (a new size or
// modification time), it is judged again.
type stamp struct {
	size  int64
	mtime time.Time
}

// wait writes the request and waits for Policy.Approvals-1 signoffs of
// digest, in answer to the request with nonce, by people other than the
// operator and each other.
func (a *Approver) wait(ctx context.Context, info steps.Info, plan *steps.Plan, digest, nonce string, op Identity) ([]steps.Signoff, error) {
	need := a.Policy.Approvals - 1
	timeout, poll, every := a.waitTimes()
	start := a.now()
	req := Request{Run: a.Run, Runbook: a.Runbook, Cluster: a.Cluster, Lab: a.Lab, Step: info.ID, Title: info.Title, Risk: info.Risk.String(),
		Digest: digest, Nonce: nonce, Plan: plan, Operator: op, Need: need, AllowedSigners: a.Policy.AllowedSigners, Since: start.UTC(), Until: start.Add(timeout).UTC()}
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w; nothing of %s was done", steps.ErrNotApproved, err, info.ID)
	}
	reqPath := RequestPath(a.Dir, info.ID)
	if err := atomicfile.WriteJSONMode(reqPath, req, a.fileMode()); err != nil {
		return nil, fmt.Errorf("%w: write the approval request: %w; nothing of %s was done", steps.ErrNotApproved, err, info.ID)
	}
	defer os.Remove(reqPath)
	w := &waiting{a: a, step: info.ID, digest: digest, nonce: nonce, op: op, judged: map[string]stamp{}, said: map[string]string{}}
	what := "a second approval"
	if need > 1 {
		what = fmt.Sprintf("%d more approvals", need)
	}
	how := fmt.Sprintf("another allowed signer runs `kremedy approve %s --step %s --key THEIR_KEY`", shell.Quote(a.Dir), info.ID)
	a.emit(steps.Event{Step: info.ID, Kind: steps.EvWaiting, Plan: plan,
		Text: fmt.Sprintf("waiting for %s of %s, digest %.12s (confirmed by %s): %s; up to %s", what, info.ID, digest, op.Principal, how, timeout)})
	a.log(info.ID, fmt.Sprintf("%s confirmed by %s (key %s); the policy (approvals: %d) waits for %s of digest %.12s, request nonce %s: %s", info.ID, op.Principal, op.Key, a.Policy.Approvals, what, digest, nonce, how))

	tick := time.NewTicker(poll)
	defer tick.Stop()
	lastSaid := start
	for {
		if err := w.look(ctx); err != nil {
			return nil, err
		}
		if len(w.got) >= need {
			return w.got, nil
		}
		now := a.now()
		left := start.Add(timeout).Sub(now)
		if left <= 0 {
			return nil, fmt.Errorf("%w: %s of %s did not come within %s (the policy's timeout; %d of %d approvals counted); nothing of it was done — resume the run to ask again", steps.ErrNotApproved, what, info.ID, timeout, len(w.got)+1, a.Policy.Approvals)
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

// waitTimes are how long wait waits for the approvals (the policy's
// timeout, else 30 minutes), how often it looks for them (Poll, else a
// second) and how often it says it still waits (ProgressEvery, else 15 s).
func (a *Approver) waitTimes() (timeout, poll, every time.Duration) {
	timeout, poll, every = a.Policy.Timeout, a.Poll, a.ProgressEvery
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	if poll <= 0 {
		poll = time.Second
	}
	if every <= 0 {
		every = 15 * time.Second
	}
	return timeout, poll, every
}

// waiting is one wait for the other signers' approvals of step's plan
// (digest), in answer to the request with nonce, the operator op's
// confirmation given.
type waiting struct {
	a             *Approver
	step          string
	digest, nonce string
	op            Identity
	// judged: signature files with a verdict, as they were then; a file
	// refused for a passing reason (the allowed signers missing,
	// ssh-keygen too slow) is judged again at each look, and said again
	// (said holds what was said of each) only when its reason changes.
	judged map[string]stamp
	said   map[string]string
	// got are the approvals that count, ids their signers.
	got []steps.Signoff
	ids []Identity
}

// look judges the step's signature files new or changed since the last
// look, logging each verdict and counting each approval. An interruption
// (ctx) stops it, the files not judged yet judged at a later look; its
// error is the approvals that cannot be read.
func (w *waiting) look(ctx context.Context) error {
	a := w.a
	files, err := signatures(a.Dir, w.step)
	if err != nil {
		return fmt.Errorf("%w: read the approvals: %w; nothing of %s was done", steps.ErrNotApproved, err, w.step)
	}
	for _, f := range files {
		if f.operator {
			continue
		}
		fi, err := os.Lstat(f.path)
		if err != nil {
			continue // gone meanwhile
		}
		st := stamp{fi.Size(), fi.ModTime()}
		if was, ok := w.judged[f.path]; ok && was == st {
			continue
		}
		so, id, why, final := a.judge(ctx, w.step, w.digest, w.nonce, f, w.op, w.ids)
		if ctx.Err() != nil {
			break // judged again after the interruption, if ever
		}
		if final {
			w.judged[f.path] = st
		}
		if why != "" {
			if final || w.said[f.path] != why {
				a.log(w.step, why)
			}
			w.said[f.path] = why
			continue
		}
		w.got, w.ids = append(w.got, so), append(w.ids, id)
		a.log(w.step, fmt.Sprintf("%s approved by %s (key %s), digest %.12s, request nonce %s (%d of %d approvals)", w.step, so.By, so.Key, w.digest, w.nonce, len(w.got)+1, a.Policy.Approvals))
	}
	return nil
}

// judge verifies one signature file: a Signoff and its signer, or why it
// does not count, and whether that is final for the file as it is (a
// verdict on the signature) or may pass (the allowed signers unreadable or
// changed, ssh-keygen too slow).
func (a *Approver) judge(ctx context.Context, step, digest, nonce string, f sigFile, op Identity, counted []Identity) (steps.Signoff, Identity, string, bool) {
	name := filepath.Base(f.path)
	refuse := func(final bool, format string, args ...any) (steps.Signoff, Identity, string, bool) {
		return steps.Signoff{}, Identity{}, fmt.Sprintf(format, args...), final
	}
	if f.old {
		return refuse(true, "refused the approval in %s: it is named the way a kremedy without request nonces named approvals, and answers no request; the approver signs again with this kremedy's `kremedy approve`", name)
	}
	if why := a.signersChanged(); why != "" {
		return refuse(false, "the approval in %s is not judged: %s", name, why)
	}
	sig, err := readRegular(f.path, maxApprovalFile)
	if err != nil {
		return refuse(!errors.Is(err, os.ErrNotExist), "refused the approval in %s: %v", name, err)
	}
	id, err := a.Signer.Verify(ctx, a.Policy.AllowedSigners, Message(a.Run, step, f.digest, f.nonce), sig)
	who := "the"
	if err == nil {
		who = id.Principal + "'s"
	}
	switch {
	case f.digest != digest:
		if err != nil && !verdict(err) {
			err = nil // it never counts, whatever ssh-keygen says later
		}
		if err == nil {
			return refuse(true, "refused %s approval in %s: it is for digest %.12s, an earlier plan of %s; the plan now is %.12s — a re-planned step needs a new approval", who, name, f.digest, step, digest)
		}
		return refuse(true, "refused the approval in %s: it is for digest %.12s, not the plan of %s now (%.12s), and does not verify either (%v)", name, f.digest, step, digest, err)
	case f.nonce != nonce:
		return refuse(true, "refused %s approval in %s: it answers an earlier request for this plan of %s (nonce %.8s…), not the one the run waits for now (nonce %.8s…) — an approval counts for the request it was made for only: the approver runs `kremedy approve` again", who, name, step, f.nonce, nonce)
	case errors.Is(err, ErrNotAllowed):
		return refuse(true, "refused the approval in %s: %v — only the allowed signers in %s approve", name, err, a.Policy.AllowedSigners)
	case errors.Is(err, ErrBadSignature):
		return refuse(true, "refused the approval in %s: it is not a signature of %s's plan, digest %.12s, in this run by an allowed signer: %v", name, step, digest, err)
	case err != nil:
		return refuse(false, "the approval in %s does not count now: %v — it is judged again at the next look", name, err)
	}
	if same := SamePerson(id, op); same != "" {
		return refuse(true, "refused the approval in %s: it is signed by the operator (%s, key %s: %s), whose approval already counts once; another person must approve", name, id.Principal, id.Key, same)
	}
	for _, c := range counted {
		if same := SamePerson(id, c); same != "" {
			return refuse(true, "%s: %s (key %s) already approved %s (%s); one person counts once", name, id.Principal, id.Key, step, same)
		}
	}
	return steps.Signoff{By: id.Principal, Key: id.Key, Digest: digest, Nonce: nonce, At: a.now().UTC(), File: f.path}, id, "", true
}

// verdict: err judges the signature (it does not verify, or its key is not
// allowed), rather than saying it could not be judged now.
func verdict(err error) bool {
	return errors.Is(err, ErrNotAllowed) || errors.Is(err, ErrBadSignature)
}

// SamePerson says why two signers are one person under the allowed
// signers — the same key, or a name allowed_signers gives both keys (the
// sets of every principal of each must be disjoint) — or "" when they are
// two.
func SamePerson(id, o Identity) string {
	switch same := overlap(append([]string{id.Principal}, id.Principals...), append([]string{o.Principal}, o.Principals...)); {
	case id.Key != "" && id.Key == o.Key:
		return fmt.Sprintf("the same key as %s's", o.Principal)
	case same != "":
		return fmt.Sprintf("allowed_signers names %q for both keys, %s's %s and %s", same, o.Principal, o.Key, id.Key)
	}
	return ""
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
