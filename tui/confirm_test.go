package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// The diagnosis comes first: the first confirmation waits until the
// operator has seen what kremedy sees, and no key but space moves on.
func TestTUIDiagnosisIsTheFirstScreen(t *testing.T) {
	f := newFixture(t, "preflight", "detach-clients")
	h := newHarness(t, f.options())
	h.wantScreen("Connecting to lab", "DIAGNOSIS · preflight")
	h.until("the first question", func(m *Model) bool { return m.ask != nil })
	h.wantScreen("NOTHING HAS CHANGED YET", "space shows the first change: detach-clients",
		"SEEN ON THE CLUSTER", "OLD topic ID", "✓ chroot /kafka")
	h.press("y", "enter", "s", "n")
	if h.m.ask == nil || len(f.rec.answers()) != 0 || h.m.confirm.mode != inputNone {
		t.Fatalf("a key other than space answered the question under the diagnosis: answers %v", decisions(f.rec.answers()))
	}
	h.press("space")
	h.wantScreen("CONFIRM", "detach-clients · risk low", "Apply this plan?")
	h.press("n")
	h.until("the end", finished)
}

// y/N: Enter alone never confirms; y does.
func TestTUIConfirmYesEnterDoesNotConfirm(t *testing.T) {
	f := newFixture(t, "preflight", "detach-clients")
	f.kinds["detach-clients"].wantApply = true
	h := newHarness(t, f.options())
	h.until("the question", h.asked("detach-clients"))
	h.press("space")
	for range 3 {
		h.press("enter")
	}
	h.settle(50 * time.Millisecond)
	if h.m.ask == nil || len(f.rec.answers()) != 0 {
		t.Fatalf("Enter answered the question: %v", decisions(f.rec.answers()))
	}
	if _, applied := f.kinds["detach-clients"].counts(); applied != 0 {
		t.Fatal("Enter applied the plan")
	}
	h.wantScreen("Enter alone never confirms")
	h.press("y")
	h.until("the end", finished)
	if got := decisions(f.rec.answers()); got != "approve" {
		t.Fatalf("answers = %s, want approve", got)
	}
	if h.m.result.err != nil || !slices.Contains(h.m.result.out.Done, "detach-clients") {
		t.Fatalf("outcome %+v, err %v", h.m.result.out, h.m.result.err)
	}
	if d := f.recordData("approval", "detach-clients"); d["decision"] != "approve" || d["by"] != "tui (test)" {
		t.Fatalf("journaled approval %v", d)
	}
	h.wantScreen("FINISHED", "WHAT CHANGED", "systemctl stop billing", "Reattach producers and consumers of orders")
}

// y/N defaults to No: n stops the run and nothing of the step is done.
func TestTUIConfirmNoStopsTheRun(t *testing.T) {
	f := newFixture(t)
	h := newHarness(t, f.options())
	h.until("the question", h.asked("detach-clients"))
	h.press("space", "n")
	h.until("the end", finished)
	if got := decisions(f.rec.answers()); got != "abort" {
		t.Fatalf("answers = %s, want abort", got)
	}
	if !errors.Is(h.m.result.err, steps.ErrAborted) {
		t.Fatalf("err = %v, want ErrAborted", h.m.result.err)
	}
	if p, _ := f.kinds["delete-znodes"].counts(); p != 0 {
		t.Fatal("the run went on after a no")
	}
	h.wantScreen("STOPPED AT detach-clients — you said no", "You said no at detach-clients: nothing of that step was done",
		"kremedy resume "+f.dir)
}

// Typed confirmation: Enter alone, a wrong name, or y do not confirm; the
// exact topic name does.
func TestTUITypedConfirmation(t *testing.T) {
	f := newFixture(t)
	f.kinds["detach-clients"].wantApply = true
	f.kinds["delete-znodes"].wantApply = true
	h := newHarness(t, f.options())
	h.until("detach", h.asked("detach-clients"))
	h.press("space", "y")
	h.until("delete", h.asked("delete-znodes"))
	if h.m.confirm.mode != inputTyped {
		t.Fatal("a destructive step did not open the topic-name field")
	}
	h.wantScreen("DESTRUCTIVE", "Type the topic name orders to apply",
		"Undo: Recreate the znodes exactly as they were", "kremedy znodes restore "+f.dir+"/backup/znodes.json --inventory lab/inventory.yaml")

	h.press("enter")
	h.wantScreen("Enter alone never confirms: type the topic name orders")

	for _, wrong := range []string{"order", "Orders", "orders ", " orders", "orders-v2", "y"} {
		h.typeText(wrong)
		h.press("enter")
		h.wantScreen(fmt.Sprintf("%q is not the topic name", wrong))
		if h.m.confirm.input.Value() != "" {
			t.Fatalf("the field kept the wrong name %q", h.m.confirm.input.Value())
		}
	}
	// esc leaves the field; y opens it again, it does not confirm.
	h.press("esc")
	h.wantScreen("Not confirmed. y type the topic name")
	h.press("enter")
	h.wantScreen("Enter alone never confirms")
	h.press("y")
	if h.m.confirm.mode != inputTyped || h.m.ask == nil {
		t.Fatal("y on a destructive step did something other than open the field")
	}
	h.settle(50 * time.Millisecond)
	if got := decisions(f.rec.answers()); got != "approve" { // detach only
		t.Fatalf("answers before the name = %s", got)
	}
	if _, applied := f.kinds["delete-znodes"].counts(); applied != 0 {
		t.Fatal("applied before the topic name was typed")
	}
	h.typeText("orders")
	h.press("enter")
	h.until("the end", finished)
	if got := decisions(f.rec.answers()); got != `approve; approve typed="orders"` {
		t.Fatalf("answers = %s", got)
	}
	if h.m.result.err != nil {
		t.Fatal(h.m.result.err)
	}
}

// A skip needs a reason, and the reason is journaled.
func TestTUISkipNeedsAReason(t *testing.T) {
	for _, tc := range []struct {
		name, step string
		before     []string
	}{
		{"y/N step", "detach-clients", nil},
		{"typed step", "delete-znodes", []string{"esc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			h := newHarness(t, f.options())
			h.until("detach", h.asked("detach-clients"))
			h.press("space")
			if tc.step == "delete-znodes" {
				f.kinds["detach-clients"].wantApply = true
				h.press("y")
				h.until("delete", h.asked(tc.step))
			}
			h.press(tc.before...)
			h.press("s")
			h.wantScreen("Reason to skip (journaled):")
			h.press("enter")
			h.wantScreen("A skip needs a reason")
			h.typeText("   ")
			h.press("enter")
			h.wantScreen("A skip needs a reason")
			h.press("esc") // back out, then skip again
			if tc.step == "delete-znodes" {
				h.press("esc")
			}
			h.press("s")
			h.settle(50 * time.Millisecond)
			if n := len(f.rec.answers()); (tc.step == "detach-clients" && n != 0) || (tc.step == "delete-znodes" && n != 1) {
				t.Fatalf("answered without a reason: %s", decisions(f.rec.answers()))
			}
			h.typeText("clients stopped by hand")
			h.press("enter")
			if tc.step == "detach-clients" {
				h.until("delete", h.asked("delete-znodes"))
				h.press("esc", "n")
			}
			h.until("the end", finished)
			got := f.rec.answers()
			last := got[len(got)-1]
			if tc.step == "detach-clients" {
				last = got[0]
			}
			if last.Decision != steps.Skip || last.Reason != "clients stopped by hand" {
				t.Fatalf("answers = %s", decisions(got))
			}
			if d := f.recordData("step-skipped", tc.step); d["reason"] != "clients stopped by hand" {
				t.Fatalf("journaled skip %v", d)
			}
			if !slices.Contains(h.m.result.out.Skipped, tc.step) {
				t.Fatalf("outcome %+v", h.m.result.out)
			}
		})
	}
}

// Quitting mid-step cancels that step, waits for the engine to journal
// the stop, says where the cluster is and how to resume; the journal keeps
// everything.
func TestTUIQuitMidStepCancelsAndKeepsJournal(t *testing.T) {
	for _, quitKey := range []string{"q", "ctrl+c"} {
		t.Run(quitKey, func(t *testing.T) {
			f := newFixture(t)
			k := f.kinds["detach-clients"]
			k.wantApply = true
			k.apply = func(ctx context.Context, env *steps.Env, _ int) error {
				if err := env.Do(steps.Action{ID: "offsets", Op: steps.OpSave, Target: "offsets.json"}, func() error { return nil }); err != nil {
					return err
				}
				for i := range 3 {
					env.Output("app-1", ports.Line{Text: fmt.Sprintf("stopping billing %d", i)})
				}
				<-ctx.Done() // the gate waits for clients, until cancelled
				return ctx.Err()
			}
			h := newHarness(t, f.options())
			h.until("detach", h.asked("detach-clients"))
			h.press("space", "y")
			h.until("output", func(m *Model) bool {
				return m.steps[1].state == steps.Running && m.steps[1].out.len() >= 4
			})
			h.wantScreen("Running detach-clients", "stopping billing 2")
			h.press(quitKey)
			if h.m.phase != phaseStopping && h.m.phase != phaseFinished {
				t.Fatalf("quit did not stop the step: phase %d", h.m.phase)
			}
			if h.quit {
				t.Fatal("the program quit before the engine stopped")
			}
			h.until("the end", finished)
			out, err := h.m.result.out, h.m.result.err
			if out.Interrupted != "detach-clients" || !errors.Is(err, context.Canceled) {
				t.Fatalf("outcome %+v, err %v", out, err)
			}
			if p, _ := f.kinds["delete-znodes"].counts(); p != 0 {
				t.Fatal("a step started after the quit")
			}
			recs := f.records()
			for _, want := range []string{"step-start detach-clients", "approval detach-clients", "action-start detach-clients",
				"action-end detach-clients", "output detach-clients", "step-failed detach-clients"} {
				if !slices.Contains(recs, want) {
					t.Fatalf("journal lacks %q: %v", want, recs)
				}
			}
			if last := recs[len(recs)-1]; last != "interrupted detach-clients" {
				t.Fatalf("journal ends with %q, want the interruption: %v", last, recs)
			}
			h.wantScreen("INTERRUPTED AT detach-clients", "detach-clients was cancelled while it ran, the last action it started being: save offsets.json",
				"  kremedy resume "+f.dir, "Not done: detach-clients, delete-znodes")
			h.press(quitKey)
			h.until("quit", func(*Model) bool { return h.quit })
		})
	}
}

// Ctrl-C at the topic-name field stops the run (q there is just a letter).
func TestTUIQuitWhileConfirming(t *testing.T) {
	f := newFixture(t)
	f.kinds["detach-clients"].wantApply = true
	h := newHarness(t, f.options())
	h.until("detach", h.asked("detach-clients"))
	h.press("space", "y")
	h.until("delete", h.asked("delete-znodes"))
	h.press("q")
	if h.m.phase != phaseRunning || h.m.confirm.input.Value() != "q" {
		t.Fatalf("q in the topic-name field did not type: phase %d, value %q", h.m.phase, h.m.confirm.input.Value())
	}
	h.press("ctrl+c")
	h.until("the end", finished)
	if h.m.result.out.Interrupted != "delete-znodes" {
		t.Fatalf("outcome %+v", h.m.result.out)
	}
	if last := f.records()[len(f.records())-1]; last != "interrupted delete-znodes" {
		t.Fatalf("journal ends with %q", last)
	}
	h.wantScreen("delete-znodes was stopped before it changed anything")
}

// SIGINT/SIGTERM (main's context) stop the step like q, then leave.
func TestTUIExternalStop(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	h := newHarnessCtx(t, ctx, f.options())
	h.until("detach", h.asked("detach-clients"))
	cancel()
	h.until("quit", func(*Model) bool { return h.quit })
	if h.m.result == nil || h.m.result.out.Interrupted != "detach-clients" {
		t.Fatalf("result %+v", h.m.result)
	}
}

// An unfinished run in the run directory is offered, not started.
func TestTUIResumeOffer(t *testing.T) {
	opts := func(f *fixture) Options {
		o := f.options()
		o.Resume = &Resume{Ask: true, ID: "test-run", Done: []string{"preflight"}, Stopped: "detach-clients", Records: 12}
		return o
	}
	t.Run("declined", func(t *testing.T) {
		f := newFixture(t)
		h := newHarness(t, opts(f))
		h.settle(100 * time.Millisecond)
		h.wantScreen("UNFINISHED RUN", "done: preflight", "stopped at: detach-clients", "r to resume it")
		h.press("y", "space", "enter")
		if f.starts.Load() != 0 {
			t.Fatal("the engine started without r")
		}
		h.press("q")
		h.until("quit", func(*Model) bool { return h.quit })
		if f.starts.Load() != 0 {
			t.Fatal("the engine started")
		}
	})
	t.Run("accepted", func(t *testing.T) {
		f := newFixture(t)
		h := newHarness(t, opts(f))
		h.press("r")
		h.until("detach", h.asked("detach-clients"))
		h.press("space", "n")
		h.until("the end", finished)
		if f.starts.Load() != 1 {
			t.Fatalf("starts = %d", f.starts.Load())
		}
	})
}

// A failed gate is re-checked (or retried) from the journal: done steps
// are re-checked, not re-done.
func TestTUIRecheckAndRetry(t *testing.T) {
	for _, k := range []string{"c", "r"} {
		t.Run(k, func(t *testing.T) {
			f := newFixture(t, "preflight", "detach-clients")
			d := f.kinds["detach-clients"]
			d.wantApply = true
			d.apply = func(_ context.Context, _ *steps.Env, call int) error {
				if call == 1 {
					return fmt.Errorf("%w: clients still attached to %q: [group billing: 2 members]", steps.ErrCheckFailed, topic)
				}
				return nil
			}
			h := newHarness(t, f.options())
			h.until("detach", h.asked("detach-clients"))
			h.press("space", "y")
			h.until("the failure", finished)
			if !errors.Is(h.m.result.err, steps.ErrCheckFailed) || h.m.result.out.Failed != "detach-clients" {
				t.Fatalf("outcome %+v err %v", h.m.result.out, h.m.result.err)
			}
			h.wantScreen("STOPPED AT detach-clients", "clients still attached", "r retry", "c re-check gate")
			h.press(k)
			h.until("asked again", h.asked("detach-clients"))
			if !h.m.diagnosisSeen {
				t.Fatal("the retry showed the diagnosis gate again")
			}
			h.press("y")
			h.until("the end", finished)
			if h.m.result.err != nil || f.starts.Load() != 2 {
				t.Fatalf("err %v, starts %d", h.m.result.err, f.starts.Load())
			}
			if p, _ := f.kinds["preflight"].counts(); p != 1 {
				t.Fatalf("preflight planned %d times; done steps must be re-checked, not re-done", p)
			}
			want := map[string]string{"c": "── re-check at", "r": "── retry at"}[k]
			found := false
			for i, out := 0, h.m.steps[1].out; i < out.len(); i++ {
				found = found || strings.HasPrefix(out.at(i).text, want)
			}
			if !found {
				t.Fatalf("the step's output does not mark the %s", want)
			}
		})
	}
}

// The Approver the engine gets blocks until answered, and answers Abort
// when its context ends.
func TestTUIApproverUnblocksOnCancel(t *testing.T) {
	b := newBridge("tui")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var ap steps.Approval
	var err error
	go func() {
		ap, err = b.Approve(ctx, steps.Info{ID: "x"}, &steps.Plan{})
		close(done)
	}()
	msg := b.wait().(engineMsg)
	if msg.ask == nil || msg.ask.info.ID != "x" {
		t.Fatalf("no question: %+v", msg)
	}
	select {
	case <-done:
		t.Fatal("Approve returned before an answer")
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	<-done
	if ap.Decision != steps.Abort || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %+v, %v", ap, err)
	}
	msg.ask.reply <- steps.Approval{} // a late answer never blocks
}

func TestTUIOutputRing(t *testing.T) {
	r := newRing(3)
	for i := range 5 {
		r.push(outLine{text: fmt.Sprint(i)})
	}
	var got []string
	for i := range r.len() {
		got = append(got, r.at(i).text)
	}
	if strings.Join(got, ",") != "2,3,4" || r.dropped != 2 {
		t.Fatalf("ring = %v, dropped %d", got, r.dropped)
	}
}

func TestTUISanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                      "plain",
		"\x1b[31mred\x1b[0m":         "red",
		"a\tb":                       "a    b",
		"50%\r100%":                  "100%",
		"title\x1b]0;pwned\x07 ok":   "title ok",
		"bell\x07 and \x1b[2J clear": "bell and  clear",
		"ünïcode ✓":                  "ünïcode ✓",
		"trailing cr\r":              "trailing cr",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// A run against a drill's inventory shows the drill's clock and hints in
// the header, beside the run's own clock.
func TestTUIDrillHeader(t *testing.T) {
	f := newFixture(t, "preflight", "detach-clients")
	o := f.options()
	hints := 2
	o.Drill = &Drill{Started: time.Now().Add(-95 * time.Second), Hints: func() int { return hints }}
	h := newHarness(t, o)
	h.wantScreen("DRILL 00:01:3", "· hints 2 · elapsed ")
	hints = 3
	h.wantScreen("· hints 3 · elapsed")
	h.until("the first question", func(m *Model) bool { return m.ask != nil })
	h.press("space", "n")
	h.until("the end", finished)
}
