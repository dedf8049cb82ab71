package steps_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/lease"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// alice is another operator's run, holding the lease from another
// kremedy process (ZooKeeper session 0xa11ce).
var alice = ports.Holder{RunID: "20261205T101010Z-rolling-restart-prod", Runbook: "rolling-restart", Operator: "alice@bastion", Host: "bastion",
	PID: 4242, Since: time.Date(2026, 12, 5, 10, 10, 10, 0, time.UTC), Token: "a11ce"}

const aliceSession = 0xa11ce

func aliceHolds(t *testing.T, z *steptest.ZK) {
	t.Helper()
	if _, err := lease.NewZK(z.As(aliceSession), 10*time.Second).Acquire(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
}

// leaseRun is a one-step run with id, on the fake ZooKeeper z.
func leaseRun(t *testing.T, id string, k steps.Kind) *steps.Session {
	t.Helper()
	rb := &steps.Runbook{Name: "topic-cleanup", Steps: []steps.Step{step("act", steps.Destructive, steps.ConfirmTyped, k)}, Confirm: steps.Confirmation{Word: "word", Noun: "thing"}}
	s, err := steps.Create(t.TempDir(), rb, steps.Meta{ID: id, Runbook: "topic-cleanup"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// events records what the run reports.
type leaseEvents struct {
	mu    sync.Mutex
	texts []string
}

func (e *leaseEvents) Report(ev steps.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.Text != "" {
		e.texts = append(e.texts, ev.Text)
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func withLease(z *steptest.ZK) ports.Cluster {
	return ports.Cluster{ZK: z, Lease: lease.NewZK(z, 10*time.Second)}
}

// notes are the journal's run-level notes, and the index of its first
// step-start (-1: none).
func notes(t *testing.T, s *steps.Session) (texts []string, firstStep int) {
	t.Helper()
	recs, err := journal.Read(s.JournalPath())
	if err != nil {
		t.Fatal(err)
	}
	firstStep = -1
	for _, r := range recs {
		if r.Type == journal.StepStart && firstStep < 0 {
			firstStep = len(texts)
		}
		if r.Type == journal.Note {
			d, _ := journal.Decode[map[string]string](r)
			texts = append(texts, d["text"])
		}
	}
	return texts, firstStep
}

func noteWith(texts []string, sub string) int {
	return slices.IndexFunc(texts, func(s string) bool { return strings.Contains(s, sub) })
}

// TestLeaseHeldRefusesASecondRunNamingTheHolder: while another run holds
// the cluster's lease, a run is refused before its first step, naming that
// run, its runbook, operator, machine and since when, and the ways
// forward; the holder's lease is left alone.
func TestLeaseHeldRefusesASecondRunNamingTheHolder(t *testing.T) {
	z := steptest.NewZK(t, "/kafka")
	aliceHolds(t, z)
	k := &fakeKind{}
	s := leaseRun(t, "20261205T111111Z-topic-cleanup-orders", k)
	out := s.Run(context.Background(), withLease(z), approveAll, nil)
	var he *ports.LeaseHeldError
	if !errors.Is(out.Err, steps.ErrRefused) || !errors.Is(out.Err, steps.ErrNothingDone) || !errors.As(out.Err, &he) {
		t.Fatalf("run while alice holds the lease: %v, want a refusal (ErrRefused, ErrNothingDone, *LeaseHeldError)", out.Err)
	}
	for _, want := range []string{alice.RunID, "(rolling-restart)", "alice@bastion", "pid 4242 on bastion", "since 2026-12-05 10:10:10 UTC",
		"/kafka/kremedy/lease", "Wait for that run to end", "10s after its kremedy stopped", "--break-lease"} {
		if !strings.Contains(out.Err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, out.Err)
		}
	}
	if k.applied != 0 || s.Resumed() {
		t.Errorf("the refused run started its step (applied %d times)", k.applied)
	}
	if out.Ending(context.Background()) != steps.Stopped {
		t.Errorf("ending %v, want stopped", out.Ending(context.Background()))
	}
	if h, _ := lease.NewZK(z, 0).Read(context.Background()); h == nil || h.Token != alice.Token {
		t.Fatalf("alice's lease after the refusal: %+v", h)
	}
	if texts, _ := notes(t, s); noteWith(texts, "refused: run "+alice.RunID) < 0 {
		t.Errorf("the journal does not record the refusal: %q", texts)
	}
}

// TestLeaseIsHeldDuringTheWalkAndGivenBack: the run takes the lease before
// its first step (the journal names it), holds it while the step runs, and
// gives it back when the walk ends, a failed walk too.
func TestLeaseIsHeldDuringTheWalkAndGivenBack(t *testing.T) {
	for _, fail := range []bool{false, true} {
		z := steptest.NewZK(t, "/kafka")
		acl := []kafkazk.ACL{{Perms: 31, Scheme: "digest", ID: "kremedy:x"}, {Perms: 1, Scheme: "world", ID: "anyone"}}
		z.SetACL("/", acl)
		var during *ports.Holder
		k := &fakeKind{apply: func(env *steps.Env, _ *steps.Plan) error {
			during, _ = env.Lease.Read(context.Background())
			if fail {
				return errors.New("the step failed")
			}
			return nil
		}}
		s := leaseRun(t, "r1", k)
		rep := &leaseEvents{}
		out := s.Run(context.Background(), withLease(z), approveAll, rep)
		if (out.Err != nil) != fail {
			t.Fatalf("fail=%v: %v", fail, out.Err)
		}
		if during == nil || during.RunID != "r1" || during.Runbook != "topic-cleanup" || !strings.Contains(during.Operator, "@") || during.PID == 0 {
			t.Fatalf("fail=%v: the lease during the step: %+v, want this run's", fail, during)
		}
		if z.Has(lease.ZKPath) {
			t.Errorf("fail=%v: the lease was not given back", fail)
		}
		if got, _ := z.GetACL(context.Background(), lease.ZKParent); !slices.Equal(got, acl) {
			t.Errorf("%s has ACL %v, want the chroot's %v", lease.ZKParent, got, acl)
		}
		texts, first := notes(t, s)
		if took := noteWith(texts, "took the cluster's lease: run r1 (topic-cleanup)"); took < 0 || first < 0 || took >= first {
			t.Errorf("fail=%v: took at note %d, first step at %d: %q", fail, took, first, texts)
		}
		if last := rep.texts[len(rep.texts)-1]; last != "gave the cluster's lease back" {
			t.Errorf("fail=%v: the last event %q, want the lease given back", fail, last)
		}
	}
}

// TestLeaseOfAnEarlierAttemptOfTheSameRunIsTakenBack: a resume of a run
// whose killed attempt's lease has not lapsed yet takes it back (the
// journal's lock proves nobody else runs it).
func TestLeaseOfAnEarlierAttemptOfTheSameRunIsTakenBack(t *testing.T) {
	z := steptest.NewZK(t, "/kafka")
	k := &fakeKind{}
	s := leaseRun(t, "r1", k)
	// Another run started in the same second has the same id, in another
	// run directory: it is not this run.
	same := alice
	same.RunID, same.Host = "r1", hostname(t)
	same.Dir = filepath.Join(t.TempDir(), "other-run")
	if _, err := lease.NewZK(z.As(aliceSession), 0).Acquire(context.Background(), same); err != nil {
		t.Fatal(err)
	}
	if out := s.Run(context.Background(), withLease(z), approveAll, nil); !errors.Is(out.Err, steps.ErrRefused) {
		t.Fatalf("a lease of the same run id in another run directory: %v, want refused", out.Err)
	}
	z.Expire(aliceSession)
	// This run's killed attempt: its id, its directory, this machine.
	mine := same
	mine.Dir = s.Dir()
	if _, err := lease.NewZK(z.As(aliceSession), 0).Acquire(context.Background(), mine); err != nil {
		t.Fatal(err)
	}
	if out := s.Run(context.Background(), withLease(z), approveAll, nil); out.Err != nil {
		t.Fatal(out.Err)
	}
	if k.applied != 1 || z.Has(lease.ZKPath) {
		t.Fatalf("applied %d, lease left %v", k.applied, z.Has(lease.ZKPath))
	}
	if texts, _ := notes(t, s); noteWith(texts, "an earlier attempt of this run (run r1") < 0 {
		t.Errorf("the journal does not say the lease was taken back: %q", texts)
	}
}

// TestBreakLeaseIsJournaled: --break-lease breaks the holder's lease, the
// journal names whose, and the run goes on; a retry of the attempt does
// not break a lease taken since.
func TestBreakLeaseIsJournaled(t *testing.T) {
	z := steptest.NewZK(t, "/kafka")
	aliceHolds(t, z)
	fails := true
	k := &fakeKind{apply: func(*steps.Env, *steps.Plan) error {
		if fails {
			return errors.New("the step failed")
		}
		return nil
	}}
	s := leaseRun(t, "r2", k)
	s.BreakLease()
	if out := s.Run(context.Background(), withLease(z), approveAll, nil); out.Err == nil || errors.Is(out.Err, steps.ErrRefused) {
		t.Fatalf("first attempt: %v, want the step's failure (the lease broken and taken)", out.Err)
	}
	if texts, _ := notes(t, s); noteWith(texts, "--break-lease: broke the cluster's lease held by run "+alice.RunID+" (rolling-restart) by alice@bastion") < 0 {
		t.Errorf("the journal does not name the broken holder: %q", texts)
	}
	// Alice's kremedy takes the lease again; the retry is refused.
	aliceHolds(t, z)
	fails = false
	if out := s.Run(context.Background(), withLease(z), approveAll, nil); !errors.Is(out.Err, steps.ErrRefused) {
		t.Fatalf("retry: %v, want a refusal (--break-lease is for one attempt)", out.Err)
	}
}

// TestLeaseOfACrashedHolderLapsesWithItsSession: a crashed holder's
// ZooKeeper session expires, and with it the lease: the next run proceeds.
func TestLeaseOfACrashedHolderLapsesWithItsSession(t *testing.T) {
	z := steptest.NewZK(t, "/kafka")
	aliceHolds(t, z)
	k := &fakeKind{}
	s := leaseRun(t, "r3", k)
	if out := s.Run(context.Background(), withLease(z), approveAll, nil); !errors.Is(out.Err, steps.ErrRefused) {
		t.Fatalf("%v, want a refusal", out.Err)
	}
	z.Expire(aliceSession)
	if out := s.Run(context.Background(), withLease(z), approveAll, nil); out.Err != nil || k.applied != 1 {
		t.Fatalf("after alice's session expired: %v (applied %d)", out.Err, k.applied)
	}
}

// TestPreviewTakesNoLease: `kremedy plan` changes nothing, the lease
// included.
func TestPreviewTakesNoLease(t *testing.T) {
	z := steptest.NewZK(t, "/kafka")
	rb := &steps.Runbook{Name: "test", Steps: []steps.Step{step("act", steps.Low, steps.ConfirmYes, &fakeKind{})}}
	steps.Preview(context.Background(), rb, steps.Meta{ID: "p"}, withLease(z))
	if z.Has(lease.ZKParent) || len(z.Ops) != 0 {
		t.Fatalf("a preview wrote %v", z.Ops)
	}
}

// TestALeaseLostDuringTheRunStopsItBeforeTheNextChange: the run's
// ZooKeeper session expires after its first step. Nobody took the lease
// meanwhile: the run takes it again before its second step, and the
// journal says so. Alice's run took it meanwhile: the second step is not
// started, the run stops naming her run and the way forward, and her lease
// is left alone.
func TestALeaseLostDuringTheRunStopsItBeforeTheNextChange(t *testing.T) {
	for _, aliceTakes := range []bool{false, true} {
		z := steptest.NewZK(t, "/kafka")
		first := &fakeKind{apply: func(*steps.Env, *steps.Plan) error {
			z.Expire(steptest.Session) // this kremedy's session
			if aliceTakes {
				aliceHolds(t, z)
			}
			return nil
		}}
		second := &fakeKind{}
		rb := &steps.Runbook{Name: "topic-cleanup", Steps: []steps.Step{step("first", steps.Destructive, steps.ConfirmTyped, first),
			step("second", steps.Destructive, steps.ConfirmTyped, second)}, Confirm: steps.Confirmation{Word: "word", Noun: "thing"}}
		s, err := steps.Create(t.TempDir(), rb, steps.Meta{ID: "r5", Runbook: "topic-cleanup"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out := s.Run(context.Background(), withLease(z), approveAll, nil)
		texts, _ := notes(t, s)
		if !aliceTakes {
			if out.Err != nil || second.applied != 1 {
				t.Fatalf("nobody took the lapsed lease: %v (second applied %d), want the run to take it again and go on", out.Err, second.applied)
			}
			if noteWith(texts, "the cluster's lease had lapsed during the run") < 0 || noteWith(texts, "taken again in step second, before its next change") < 0 {
				t.Errorf("the journal does not say the lease was taken again: %q", texts)
			}
			if z.Has(lease.ZKPath) {
				t.Error("the lease taken again was not given back at the end")
			}
			continue
		}
		if !errors.Is(out.Err, steps.ErrRefused) || !errors.Is(out.Err, ports.ErrLeaseLost) || second.applied != 0 {
			t.Fatalf("alice took the lease: %v (second applied %d), want the run stopped before the second step", out.Err, second.applied)
		}
		for _, want := range []string{"now held by run " + alice.RunID, "step second goes no further: nothing of it was done", "kremedy resume " + s.Dir()} {
			if !strings.Contains(out.Err.Error(), want) {
				t.Errorf("the stop does not say %q:\n%v", want, out.Err)
			}
		}
		if noteWith(texts, "step second, before its next change:") < 0 {
			t.Errorf("the journal does not record why the second step did not start: %q", texts)
		}
		if h, _ := lease.NewZK(z, 0).Read(context.Background()); h == nil || h.Token != alice.Token {
			t.Fatalf("alice's lease after the run stopped: %+v", h)
		}
	}
}
