package signoff_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/signoff"
)

// keys are ed25519 keys made for the test, and an allowed_signers file:
// alice (the operator) and bob and dave may approve; eve's key is allowed
// for git signatures only; carol's is in no file; alice2 (alice's second
// key) and wild are in none, for the tests that write their own.
type keys struct {
	dir, allowed string
}

func newKeys(t *testing.T) keys {
	t.Helper()
	if err := (signoff.Keygen{}).Check(context.Background()); err != nil {
		t.Fatal(err) // the machine needs OpenSSH's ssh-keygen: not a skip
	}
	k := keys{dir: t.TempDir()}
	var lines []string
	for _, name := range []string{"alice", "bob", "carol", "dave", "eve", "alice2", "wild"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", k.key(name)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		pub, err := os.ReadFile(k.key(name) + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(pub))
		switch name {
		case "alice", "dave":
			lines = append(lines, fmt.Sprintf("%s@example.com %s %s", name, f[0], f[1]))
		case "bob":
			lines = append(lines, fmt.Sprintf("bob@example.com,bob namespaces=%q %s %s", signoff.Namespace, f[0], f[1]))
		case "eve":
			lines = append(lines, fmt.Sprintf("eve@example.com namespaces=\"git\" %s %s", f[0], f[1]))
		}
	}
	k.allowed = filepath.Join(k.dir, "allowed_signers")
	if err := os.WriteFile(k.allowed, []byte("# who approves\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k keys) key(name string) string { return filepath.Join(k.dir, name) }

// pub is name's public key as allowed_signers writes it: type and blob.
func (k keys) pub(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(k.key(name) + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	return f[0] + " " + f[1]
}

// signers writes an allowed_signers file of lines, where {name} stands
// for name's public key.
func (k keys) signers(t *testing.T, lines ...string) string {
	t.Helper()
	text := strings.Join(lines, "\n") + "\n"
	for _, name := range []string{"alice2", "alice", "bob", "carol", "dave", "eve", "wild"} {
		text = strings.ReplaceAll(text, "{"+name+"}", k.pub(t, name))
	}
	path := filepath.Join(t.TempDir(), "allowed_signers")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// strictApprover is the operator: it expects exactly the steps in want to
// be asked, in order, and answers each with answer.
type strictApprover struct {
	t      *testing.T
	mu     sync.Mutex
	want   []string
	asked  []string
	answer func(steps.Info, *steps.Plan) steps.Approval
}

func (s *strictApprover) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.asked) >= len(s.want) || s.want[len(s.asked)] != info.ID {
		s.t.Errorf("unexpected question about %s (asked %v, want %v)", info.ID, s.asked, s.want)
	}
	s.asked = append(s.asked, info.ID)
	if s.answer != nil {
		return s.answer(info, p), nil
	}
	return steps.Approval{Decision: steps.Approve, Typed: "word", By: "tui (alice)", Digest: p.Digest()}, nil
}

func (s *strictApprover) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.asked) != len(s.want) {
		s.t.Errorf("asked %v, want %v", s.asked, s.want)
	}
}

// lines keeps what the approver journals and shows.
type lines struct {
	mu  sync.Mutex
	all []string
	evs []steps.Event
}

func (l *lines) log(step, text string) {
	l.mu.Lock()
	l.all = append(l.all, step+": "+text)
	l.mu.Unlock()
}
func (l *lines) Report(e steps.Event) { l.mu.Lock(); l.evs = append(l.evs, e); l.mu.Unlock() }
func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// signing is one approver's signature, made once the run waits: by key,
// of the plan's digest (or another), in this run (or another).
type signing struct {
	key, digest, run string
}

var plan = &steps.Plan{Step: "stop-brokers", Kind: "stop", Summary: "stop 3 brokers", Actions: []steps.Action{{ID: "stop-1", Op: steps.OpSSH, Target: "b1"}}}

// approveWhenAsked signs, in order, once the run's request appears.
func approveWhenAsked(t *testing.T, k keys, dir string, ss []signing) {
	t.Helper()
	if len(ss) == 0 {
		return // nobody signs: nothing to wait for (an Error after the test would panic)
	}
	go func() {
		var req signoff.Request
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			rs, err := signoff.Requests(dir, "")
			if err == nil {
				req = rs[0]
				break
			}
			if time.Now().After(end) {
				t.Error("the run never asked for an approval")
				return
			}
		}
		for i, s := range ss {
			digest, run := req.Digest, req.Run
			if s.digest != "" {
				digest = s.digest
			}
			if s.run != "" {
				run = s.run
			}
			sig, err := (signoff.Keygen{}).Sign(context.Background(), k.key(s.key), signoff.Message(run, req.Step, digest, req.Nonce), false)
			if err != nil {
				t.Error(err)
				return
			}
			r := req
			r.Digest = digest
			if _, err := signoff.WriteSignature(dir, r, fmt.Sprintf("%s-%d", s.key, i), sig); err != nil {
				t.Error(err)
			}
		}
	}()
}

// TestApprover: a destructive step's plan is approved when another allowed
// signer signs its digest in this run; every other signature is refused
// with a reason, and the run keeps waiting.
func TestApprover(t *testing.T) {
	k := newKeys(t)
	other := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name      string
		approvals int
		risk      steps.Risk
		operator  string // the operator's key (default alice)
		sign      []signing
		timeout   time.Duration
		answer    func(steps.Info, *steps.Plan) steps.Approval
		wantBy    []string // signoffs, operator first; nil: none
		wantErr   error
		wantLog   []string
	}{
		{name: "bob approves", approvals: 2, sign: []signing{{key: "bob"}},
			wantBy: []string{"alice@example.com", "bob@example.com"}, wantLog: []string{"waits for a second approval", "approved by bob@example.com", "(2 of 2 approvals)"}},
		{name: "a key in no allowed_signers, then bob", approvals: 2, sign: []signing{{key: "carol"}, {key: "bob"}},
			wantBy: []string{"alice@example.com", "bob@example.com"}, wantLog: []string{"not an allowed signer: key SHA256:", "approved by bob@example.com"}},
		{name: "the operator's own key does not count twice", approvals: 2, sign: []signing{{key: "alice"}}, timeout: 2 * time.Second,
			wantErr: steps.ErrNotApproved, wantLog: []string{"signed by the operator (alice@example.com", "a second approval of stop-brokers did not come within 2s (the policy's timeout; 1 of 2 approvals counted)"}},
		{name: "a stale digest, then the plan's", approvals: 2, sign: []signing{{key: "bob", digest: other}, {key: "bob"}},
			wantBy: []string{"alice@example.com", "bob@example.com"}, wantLog: []string{"refused bob@example.com's approval", "is for digest ababababab", "a re-planned step needs a new approval"}},
		{name: "another run's signature of the same plan", approvals: 2, sign: []signing{{key: "bob", run: "another-run"}, {key: "dave"}},
			wantBy: []string{"alice@example.com", "dave@example.com"}, wantLog: []string{"it is not a signature of stop-brokers's plan"}},
		{name: "a key allowed for git only", approvals: 2, sign: []signing{{key: "eve"}, {key: "bob"}},
			wantBy: []string{"alice@example.com", "bob@example.com"}, wantLog: []string{"eve-0.sig: it is not a signature"}},
		{name: "three approvals: bob twice counts once", approvals: 3, sign: []signing{{key: "bob"}, {key: "bob"}, {key: "dave"}},
			wantBy: []string{"alice@example.com", "bob@example.com", "dave@example.com"}, wantLog: []string{"waits for 2 more approvals", "already approved stop-brokers (the same key as bob@example.com's); one person counts once"}},
		{name: "nobody approves: the timeout", approvals: 2, timeout: 500 * time.Millisecond,
			wantErr: steps.ErrNotApproved, wantLog: []string{"waits for a second approval"}},
		{name: "the operator's key is not allowed", approvals: 2, operator: "carol",
			wantErr: steps.ErrNotApproved},
		{name: "a step that is not destructive", approvals: 2, risk: steps.Low},
		{name: "approvals: 1", approvals: 1},
		{name: "a skip is the operator's alone", approvals: 2, answer: func(_ steps.Info, p *steps.Plan) steps.Approval {
			return steps.Approval{Decision: steps.Skip, Reason: "done by hand", By: "tui", Digest: p.Digest()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			risk := steps.Destructive
			if tc.risk != 0 {
				risk = tc.risk
			}
			op := "alice"
			if tc.operator != "" {
				op = tc.operator
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 20 * time.Second
			}
			inner := &strictApprover{t: t, want: []string{"stop-brokers"}, answer: tc.answer}
			var l lines
			a := &signoff.Approver{Inner: inner, Policy: signoff.Policy{Approvals: tc.approvals, AllowedSigners: k.allowed, Timeout: timeout},
				Run: "run-1", Dir: dir, Key: k.key(op), Signer: signoff.Keygen{}, Report: &l, Log: l.log, Poll: 20 * time.Millisecond}
			approveWhenAsked(t, k, dir, tc.sign)
			ap, err := a.Approve(context.Background(), steps.Info{ID: "stop-brokers", Risk: risk}, plan)
			inner.done()
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v\n%s", err, tc.wantErr, l.text())
			}
			var by []string
			for _, so := range ap.Signoffs {
				by = append(by, so.By)
				if so.Digest != plan.Digest() || !strings.HasPrefix(so.Key, "SHA256:") || so.At.IsZero() {
					t.Errorf("signoff %+v", so)
				}
			}
			if err == nil && strings.Join(by, " ") != strings.Join(tc.wantBy, " ") {
				t.Errorf("signed off by %v, want %v\n%s", by, tc.wantBy, l.text())
			}
			if err == nil && len(ap.Signoffs) > 0 && !ap.Signoffs[0].Operator {
				t.Errorf("the first signoff is not the operator's: %+v", ap.Signoffs)
			}
			logs := l.text()
			if err != nil {
				logs += "\n" + err.Error()
			}
			for _, w := range tc.wantLog {
				if !strings.Contains(logs, w) {
					t.Errorf("nothing says %q:\n%s", w, logs)
				}
			}
			if _, err := os.Stat(signoff.RequestPath(dir, "stop-brokers")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the request is still there after the wait: %v", err)
			}
			if len(tc.wantBy) > 0 {
				var waiting bool
				for _, e := range l.evs {
					waiting = waiting || e.Kind == steps.EvWaiting && e.Step == "stop-brokers" && strings.Contains(e.Text, "waiting for") && strings.Contains(e.Text, "kremedy approve")
				}
				if !waiting {
					t.Errorf("no waiting event: %+v", l.evs)
				}
			}
		})
	}
}

// TestApproverStopsOnCtrlC: an interrupted wait ends at once, resumable,
// with the context's error.
func TestApproverStopsOnCtrlC(t *testing.T) {
	k := newKeys(t)
	ctx, cancel := context.WithCancel(context.Background())
	a := &signoff.Approver{Inner: &strictApprover{t: t, want: []string{"stop-brokers"}}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: k.allowed},
		Run: "run-1", Dir: t.TempDir(), Key: k.key("alice"), Signer: signoff.Keygen{}, Poll: 20 * time.Millisecond}
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := a.Approve(ctx, steps.Info{ID: "stop-brokers", Risk: steps.Destructive}, plan)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing of it was done") || time.Since(start) > 2*time.Second {
		t.Fatalf("%v after %s", err, time.Since(start))
	}
}

// stopKind is a destructive step that counts its applies; its plan's
// summary is the plan's version, and its first apply finds the plan
// stale (the cluster changed under it) when stale is set.
type stopKind struct {
	mu      sync.Mutex
	applies int
	version int
	stale   bool
}

func (k *stopKind) Plan(context.Context, *steps.Env) (*steps.Plan, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.version++
	return &steps.Plan{Summary: fmt.Sprintf("stop 3 brokers (plan %d)", k.version), Actions: []steps.Action{{ID: "stop-1", Op: steps.OpSSH, Target: "b1"}}}, nil
}

func (k *stopKind) Apply(context.Context, *steps.Env, *steps.Plan) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.applies++
	if k.stale && k.applies == 1 {
		return fmt.Errorf("%w: broker 1 moved", steps.ErrStalePlan)
	}
	return nil
}

func (k *stopKind) Verify(context.Context, *steps.Env) ([]steps.Check, error) {
	return []steps.Check{{Name: "stopped", OK: true}}, nil
}

func (k *stopKind) count() int { k.mu.Lock(); defer k.mu.Unlock(); return k.applies }

// TestARunWaitsForTheSecondApproval: under the policy, a run does nothing
// of a destructive step until another person approved its plan; the
// journal and the report say who approved which digest; a re-planned step
// (a stale plan) needs a new approval, and the old one is refused.
func TestARunWaitsForTheSecondApproval(t *testing.T) {
	k := newKeys(t)
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%v", stale), func(t *testing.T) {
			dir := t.TempDir()
			kind := &stopKind{stale: stale}
			rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "word", Noun: "cluster"}, Steps: []steps.Step{
				{Info: steps.Info{ID: "stop-brokers", Kind: "stop", Title: "Stop", Risk: steps.Destructive, Confirm: steps.ConfirmTyped}, Kind: kind}}}
			s, err := steps.Create(dir, rb, steps.Meta{ID: "run-1", Runbook: "test"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			want := []string{"stop-brokers"}
			if stale {
				want = append(want, "stop-brokers")
			}
			inner := &strictApprover{t: t, want: want}
			var l lines
			a := &signoff.Approver{Inner: inner, Policy: signoff.Policy{Approvals: 2, AllowedSigners: k.allowed, Timeout: 20 * time.Second},
				Run: "run-1", Dir: dir, Key: k.key("alice"), Signer: signoff.Keygen{}, Report: &l,
				Log: func(step, text string) { s.Notef(step, "%s", text) }, Poll: 20 * time.Millisecond}
			done := make(chan steps.Outcome)
			go func() { done <- s.Run(context.Background(), ports.Cluster{}, a, &l) }()

			sign := func(prev string) signoff.Request {
				t.Helper()
				var req signoff.Request
				for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if rs, err := signoff.Requests(dir, "stop-brokers"); err == nil && rs[0].Digest != prev {
						req = rs[0]
						break
					}
					if time.Now().After(end) {
						t.Fatal("the run never asked for the approval")
					}
				}
				time.Sleep(200 * time.Millisecond) // it waits: nothing is done meanwhile
				wantApplies := 0                   // nothing of the step before its approval
				if prev != "" {
					wantApplies = 1 // the apply that found the plan stale
				}
				if n := kind.count(); n != wantApplies {
					t.Fatalf("%d applies while waiting for the approval, want %d", n, wantApplies)
				}
				sig, err := (signoff.Keygen{}).Sign(context.Background(), k.key("bob"), signoff.Message(req.Run, req.Step, req.Digest, req.Nonce), false)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := signoff.WriteSignature(dir, req, "bob", sig); err != nil {
					t.Fatal(err)
				}
				return req
			}
			first := sign("")
			if stale {
				sign(first.Digest) // the re-planned step asks again, for its new digest
			}
			out := <-done
			inner.done()
			if out.Err != nil {
				t.Fatalf("run: %v\n%s", out.Err, l.text())
			}
			if n := kind.count(); n != len(want) {
				t.Errorf("%d applies, want %d", n, len(want))
			}
			report, err := os.ReadFile(s.ReportPath())
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"## Approvals", "| stop-brokers | approve | tui (alice) |", "alice@example.com (operator), key SHA256:", "; bob@example.com, key SHA256:",
				"confirmation: approve by tui (alice); signed off by alice@example.com (operator) (SHA256:"} {
				if !strings.Contains(string(report), w) {
					t.Errorf("report lacks %q:\n%s", w, report)
				}
			}
			journal, _ := os.ReadFile(s.JournalPath())
			if !strings.Contains(string(journal), `"signoffs":[{"by":"alice@example.com"`) {
				t.Errorf("the journal's approval has no signoffs:\n%s", journal)
			}
			if stale && !strings.Contains(string(journal), "an earlier plan of stop-brokers") {
				t.Errorf("the first approval was not refused for the re-planned step:\n%s", journal)
			}
		})
	}
}

// TestEngineRefusesASignoffOfAnotherPlan: an Approver (a buggy policy)
// that returns a signoff of another digest is refused by the engine.
func TestEngineRefusesASignoffOfAnotherPlan(t *testing.T) {
	kind := &stopKind{}
	rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "word", Noun: "cluster"}, Steps: []steps.Step{
		{Info: steps.Info{ID: "stop-brokers", Kind: "stop", Title: "Stop", Risk: steps.Destructive, Confirm: steps.ConfirmTyped}, Kind: kind}}}
	s, err := steps.Create(t.TempDir(), rb, steps.Meta{ID: "run-1", Runbook: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inner := &strictApprover{t: t, want: []string{"stop-brokers"}, answer: func(_ steps.Info, p *steps.Plan) steps.Approval {
		return steps.Approval{Decision: steps.Approve, Typed: "word", By: "tui", Digest: p.Digest(), Signoffs: []steps.Signoff{{By: "bob", Digest: "0123"}}}
	}}
	out := s.Run(context.Background(), ports.Cluster{}, inner, nil)
	if !errors.Is(out.Err, steps.ErrNotApproved) || !strings.Contains(out.Err.Error(), "bob signed another plan") || kind.count() != 0 {
		t.Fatalf("%v, %d applies", out.Err, kind.count())
	}
}

// waitFor polls l's lines until one holds want (10 s at most).
func (l *lines) waitFor(t *testing.T, want string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !strings.Contains(l.text(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("nothing says %q:\n%s", want, l.text())
		}
	}
}

// request waits for the run's request of stop-brokers other than prev's.
func request(t *testing.T, dir, prevNonce string) signoff.Request {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if rs, err := signoff.Requests(dir, "stop-brokers"); err == nil && rs[0].Nonce != prevNonce {
			return rs[0]
		}
		if time.Now().After(end) {
			t.Fatal("the run never asked for the approval")
		}
	}
}

// sign writes key's signature of req (as `kremedy approve` does) under
// the name who.
func sign(t *testing.T, k keys, dir string, req signoff.Request, key, who string) string {
	t.Helper()
	sig, err := (signoff.Keygen{}).Sign(context.Background(), k.key(key), signoff.Message(req.Run, req.Step, req.Digest, req.Nonce), false)
	if err != nil {
		t.Fatal(err)
	}
	path, err := signoff.WriteSignature(dir, req, who, sig)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

type approved struct {
	ap  steps.Approval
	err error
}

func approveAsync(a *signoff.Approver) <-chan approved {
	done := make(chan approved, 1)
	go func() {
		ap, err := a.Approve(context.Background(), steps.Info{ID: "stop-brokers", Risk: steps.Destructive}, plan)
		done <- approved{ap, err}
	}()
	return done
}

func wait(t *testing.T, done <-chan approved, l *lines) approved {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("the approval did not end:\n%s", l.text())
	}
	return approved{}
}

// TestSignatureReusedOnLaterAttempt (review M2): a second request for the
// same run, step and plan — an attempt resumed later, a step re-run — has
// a new nonce, so bob's signature of the first request is refused, with
// the reason, and the step waits until bob signs the new request.
func TestSignatureReusedOnLaterAttempt(t *testing.T) {
	k := newKeys(t)
	dir := t.TempDir()
	var l lines
	a := &signoff.Approver{Inner: &strictApprover{t: t, want: []string{"stop-brokers", "stop-brokers"}}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: k.allowed, Timeout: 20 * time.Second},
		Run: "run-1", Dir: dir, Key: k.key("alice"), Signer: signoff.Keygen{}, Log: l.log, Poll: 20 * time.Millisecond}

	done := approveAsync(a)
	first := request(t, dir, "")
	oldSig := sign(t, k, dir, first, "bob", "bob@example.com")
	r := wait(t, done, &l)
	if r.err != nil || len(r.ap.Signoffs) != 2 || r.ap.Signoffs[1].Nonce != first.Nonce || r.ap.Signoffs[0].Nonce != first.Nonce {
		t.Fatalf("first approval: %v %+v\n%s", r.err, r.ap.Signoffs, l.text())
	}

	done = approveAsync(a) // the same run, step and plan, asked again
	second := request(t, dir, first.Nonce)
	if second.Digest != first.Digest {
		t.Fatalf("the plan changed: %s, %s", first.Digest, second.Digest)
	}
	l.waitFor(t, "it answers an earlier request for this plan of stop-brokers (nonce "+first.Nonce[:8])
	select {
	case r := <-done:
		t.Fatalf("the second request passed with the first one's signature: %v %+v\n%s", r.err, r.ap.Signoffs, l.text())
	default:
	}
	newSig := sign(t, k, dir, second, "bob", "bob@example.com")
	r = wait(t, done, &l)
	if r.err != nil || len(r.ap.Signoffs) != 2 {
		t.Fatalf("second approval: %v %+v\n%s", r.err, r.ap.Signoffs, l.text())
	}
	if so := r.ap.Signoffs[1]; so.File != newSig || so.File == oldSig || so.Nonce != second.Nonce || so.By != "bob@example.com" {
		t.Errorf("the second approval counted %+v, want bob's new signature %s (nonce %s)", so, newSig, second.Nonce)
	}
	if !strings.Contains(l.text(), "request nonce "+second.Nonce) {
		t.Errorf("the journal does not name the request's nonce:\n%s", l.text())
	}
}

// TestSamePersonTwoPrincipalSpellings (review M3): a person whose keys
// allowed_signers names under two spellings — on one line with two
// principals, or a key on two lines (ssh-keygen's find-principals prints
// only the first) — is one approver: the second key does not meet
// approvals: 2, and another person does.
func TestSamePersonTwoPrincipalSpellings(t *testing.T) {
	k := newKeys(t)
	for _, tc := range []struct {
		name    string
		signers []string
	}{
		{"one line, two principals", []string{"alice@example.com,alice {alice}", "alice {alice2}", "bob@example.com {bob}"}},
		{"one key on two lines", []string{"alice@example.com {alice}", "alice {alice}", "alice {alice2}", "bob@example.com {bob}"}},
		{"the same name in another case", []string{"alice@example.com {alice}", "Alice@Example.com {alice2}", "bob@example.com {bob}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var l lines
			a := &signoff.Approver{Inner: &strictApprover{t: t, want: []string{"stop-brokers"}}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: k.signers(t, tc.signers...), Timeout: 20 * time.Second},
				Run: "run-1", Dir: dir, Key: k.key("alice"), Signer: signoff.Keygen{}, Log: l.log, Poll: 20 * time.Millisecond}
			done := approveAsync(a)
			req := request(t, dir, "")
			sign(t, k, dir, req, "alice2", "alice")
			l.waitFor(t, "it is signed by the operator")
			select {
			case r := <-done:
				t.Fatalf("alice's second key met approvals: 2: %v %+v\n%s", r.err, r.ap.Signoffs, l.text())
			default:
			}
			sign(t, k, dir, req, "bob", "bob@example.com")
			r := wait(t, done, &l)
			if r.err != nil || len(r.ap.Signoffs) != 2 || r.ap.Signoffs[1].By != "bob@example.com" {
				t.Fatalf("%v %+v\n%s", r.err, r.ap.Signoffs, l.text())
			}
			if !strings.Contains(l.text(), "for both keys") {
				t.Errorf("the refusal does not say which name both keys share:\n%s", l.text())
			}
		})
	}
}

// TestPatternPrincipalsRefused (review M3): an allowed_signers line that
// names principals by a pattern is refused at the run's start
// (CheckSigners, naming the line) and its key's approval does not count.
func TestPatternPrincipalsRefused(t *testing.T) {
	k := newKeys(t)
	for _, pattern := range []string{"*@example.com", "ops-?", `"carol@example.com,!mallory@example.com"`} {
		signers := k.signers(t, "# who approves", "alice@example.com {alice}", pattern+" {wild}", "bob@example.com {bob}")
		err := signoff.CheckSigners(signers)
		if !errors.Is(err, signoff.ErrPattern) || !strings.Contains(err.Error(), signers+" line 3") {
			t.Errorf("%s: CheckSigners: %v", pattern, err)
		}
	}
	if err := signoff.CheckSigners(k.allowed); err != nil {
		t.Errorf("CheckSigners of a file without patterns: %v", err)
	}
	signers := k.signers(t, "alice@example.com {alice}", "*@example.com {wild}", "bob@example.com {bob}")
	dir := t.TempDir()
	var l lines
	a := &signoff.Approver{Inner: &strictApprover{t: t, want: []string{"stop-brokers"}}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: signers, Timeout: 20 * time.Second},
		Run: "run-1", Dir: dir, Key: k.key("alice"), Signer: signoff.Keygen{}, Log: l.log, Poll: 20 * time.Millisecond}
	done := approveAsync(a)
	req := request(t, dir, "")
	sign(t, k, dir, req, "wild", "wild")
	l.waitFor(t, "line 2 (*@example.com)")
	sign(t, k, dir, req, "bob", "bob@example.com")
	if r := wait(t, done, &l); r.err != nil || len(r.ap.Signoffs) != 2 || r.ap.Signoffs[1].By != "bob@example.com" {
		t.Fatalf("%v %+v\n%s", r.err, r.ap.Signoffs, l.text())
	}
	if n := strings.Count(l.text(), "line 2 (*@example.com)"); n != 1 {
		t.Errorf("the pattern's refusal was said %d times, want once:\n%s", n, l.text())
	}
}

// TestTransientRefusalIsNotFinal (review L1, its TestTransientRefusalIsFinal
// scenario): a signature refused because allowed_signers was briefly
// missing (a config-management rewrite) is judged again and counts once
// the file is back; one refused as not a signature counts once re-signed
// in the same file.
func TestTransientRefusalIsNotFinal(t *testing.T) {
	k := newKeys(t)
	sum, err := signoff.SignersDigest(k.allowed)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		sha256    string
		gone      bool // allowed_signers is away while bob signs
		wantFirst string
	}{
		{name: "allowed_signers missing", gone: true, wantFirst: "allowed signers: stat"},
		{name: "allowed_signers missing, its sha256 journaled", sha256: sum, gone: true, wantFirst: "the run cannot read the allowed signers it started with"},
		{name: "allowed_signers changed, its sha256 journaled", sha256: sum, wantFirst: "changed since the run started (sha256 " + sum[:12]},
		{name: "not a signature, then re-signed", wantFirst: "it is not a signature of stop-brokers's plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each case has its own allowed_signers: it moves it.
			orig, _ := os.ReadFile(k.allowed)
			signers := filepath.Join(t.TempDir(), "allowed_signers")
			if err := os.WriteFile(signers, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			var l lines
			a := &signoff.Approver{Inner: &strictApprover{t: t, want: []string{"stop-brokers"}}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: signers, SignersSHA256: tc.sha256, Timeout: 20 * time.Second},
				Run: "run-1", Dir: dir, Key: k.key("alice"), Signer: signoff.Keygen{}, Log: l.log, Poll: 20 * time.Millisecond}
			done := approveAsync(a)
			req := request(t, dir, "")
			var path string
			switch {
			case tc.gone:
				if err := os.Rename(signers, signers+".new"); err != nil {
					t.Fatal(err)
				}
				path = sign(t, k, dir, req, "bob", "bob@example.com")
			case tc.sha256 != "":
				if err := os.WriteFile(signers, append(orig, "# rewritten\n"...), 0o600); err != nil {
					t.Fatal(err)
				}
				path = sign(t, k, dir, req, "bob", "bob@example.com")
			default:
				var err error
				if path, err = signoff.WriteSignature(dir, req, "bob@example.com", []byte("not a signature")); err != nil {
					t.Fatal(err)
				}
			}
			l.waitFor(t, tc.wantFirst)
			select {
			case r := <-done:
				t.Fatalf("the approval ended: %v %+v\n%s", r.err, r.ap.Signoffs, l.text())
			default:
			}
			switch {
			case tc.gone:
				if err := os.Rename(signers+".new", signers); err != nil {
					t.Fatal(err)
				}
			case tc.sha256 != "":
				if err := os.WriteFile(signers, orig, 0o600); err != nil {
					t.Fatal(err)
				}
			default:
				if p := sign(t, k, dir, req, "bob", "bob@example.com"); p != path {
					t.Fatalf("re-signed in %s, not %s", p, path)
				}
			}
			r := wait(t, done, &l)
			if r.err != nil || len(r.ap.Signoffs) != 2 || r.ap.Signoffs[1].By != "bob@example.com" || r.ap.Signoffs[1].File != path {
				t.Fatalf("%v %+v\n%s", r.err, r.ap.Signoffs, l.text())
			}
			if n := strings.Count(l.text(), tc.wantFirst); n != 1 {
				t.Errorf("the refusal was said %d times, want once:\n%s", n, l.text())
			}
		})
	}
}

// TestApprovalFilesMustBeRegular (review L6): a FIFO or a link to a
// device among the signatures is refused without reading it (the wait is
// not blocked), and a request file that is not regular, too large, or
// names a step outside approvals/ is an error.
func TestApprovalFilesMustBeRegular(t *testing.T) {
	k := newKeys(t)
	dir := t.TempDir()
	var l lines
	a := &signoff.Approver{Inner: &strictApprover{t: t, want: []string{"stop-brokers"}}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: k.allowed, Timeout: 20 * time.Second},
		Run: "run-1", Dir: dir, Key: k.key("alice"), Signer: signoff.Keygen{}, Log: l.log, Poll: 20 * time.Millisecond}
	done := approveAsync(a)
	req := request(t, dir, "")
	base := filepath.Join(dir, signoff.Dir, "stop-brokers."+req.Digest+"."+req.Nonce)
	if err := syscall.Mkfifo(base+".fifo.sig", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", base+".zero.sig"); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "fifo.sig is not a regular file")
	l.waitFor(t, "zero.sig is not a regular file")
	sign(t, k, dir, req, "bob", "bob@example.com")
	if r := wait(t, done, &l); r.err != nil || len(r.ap.Signoffs) != 2 {
		t.Fatalf("%v %+v\n%s", r.err, r.ap.Signoffs, l.text())
	}

	// Requests: a link, an oversized file, a hostile step.
	run := t.TempDir()
	ok := signoff.Request{Run: "run-1", Step: "roll", Digest: strings.Repeat("a", 64), Nonce: strings.Repeat("b", 32)}
	write := func(name string, b []byte) {
		t.Helper()
		os.RemoveAll(filepath.Join(run, signoff.Dir))
		if err := os.MkdirAll(filepath.Join(run, signoff.Dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, signoff.Dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	js := func(r signoff.Request) []byte { b, _ := json.Marshal(r); return b }
	write("roll.request.json", js(ok))
	if rs, err := signoff.Requests(run, ""); err != nil || rs[0].Nonce != ok.Nonce || rs[0].Step != ok.Step {
		t.Fatalf("a good request: %v %+v", err, rs)
	}
	hostile := ok
	hostile.Step = "../../x"
	bigPlan := ok
	bigPlan.Title = strings.Repeat("x", 70<<10)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"roll.request.json", js(hostile), "is not a step id"},
		{"roll.request.json", js(bigPlan), "larger than 64 KiB"},
		{"other.request.json", js(ok), "it is for step roll"},
	} {
		write(tc.name, tc.b)
		if _, err := signoff.Requests(run, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.want, err, tc.want)
		}
	}
	write("x", nil)
	if err := os.Symlink("/dev/zero", signoff.RequestPath(run, "roll")); err != nil {
		t.Fatal(err)
	}
	if _, err := signoff.Requests(run, "roll"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a request linked to /dev/zero: %v", err)
	}
}

// TestRequestCheck (review L5): a request's step, digest and nonce name
// files in approvals/: only what a run writes passes, and WriteSignature
// writes nothing for another.
func TestRequestCheck(t *testing.T) {
	ok := signoff.Request{Run: "run-1", Step: "stop-brokers.1_a-b", Digest: strings.Repeat("0a", 32), Nonce: strings.Repeat("f1", 16)}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*signoff.Request)
		want string
	}{
		{func(r *signoff.Request) { r.Step = "../../x" }, "not a step id"},
		{func(r *signoff.Request) { r.Step = "a..b" }, "not a step id"},
		{func(r *signoff.Request) { r.Step = "a/b" }, "not a step id"},
		{func(r *signoff.Request) { r.Step = "" }, "not a step id"},
		{func(r *signoff.Request) { r.Digest = strings.Repeat("0A", 32) }, "not a sha256"},
		{func(r *signoff.Request) { r.Digest = "../" + strings.Repeat("0", 61) }, "not a sha256"},
		{func(r *signoff.Request) { r.Nonce = "" }, "nonce \"\" is not 32 hex digits"},
		{func(r *signoff.Request) { r.Nonce = strings.Repeat("g", 32) }, "not 32 hex digits"},
		{func(r *signoff.Request) { r.Run = "" }, "names no run"},
	} {
		r := ok
		tc.edit(&r)
		err := r.Check()
		if !errors.Is(err, signoff.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", r, err, tc.want)
		}
		dir := t.TempDir()
		if _, err := signoff.WriteSignature(filepath.Join(dir, "run"), r, "bob", []byte("sig")); !errors.Is(err, signoff.ErrBadRequest) {
			t.Errorf("WriteSignature of %+v: %v", r, err)
		}
		if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
			t.Errorf("WriteSignature of %+v wrote %v", r, files)
		}
	}
}
