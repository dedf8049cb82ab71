package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kremedy/kremedy/steps"
)

// The confirmation child on its own: keys go straight into its Update, and
// its View() string and its answer are checked. The root model's tests
// (confirm_test.go, the goldens) show the same through the whole program.

// childFixture is a child with the tests' runbook (the word is "orders")
// and an open question: detach-clients (y/N) or delete-znodes (typed).
type childFixture struct {
	t    *testing.T
	keys KeyMap
	st   Styles
	c    confirm
	got  []answer
}

func newChild(t *testing.T, step string) *childFixture {
	t.Helper()
	f := &childFixture{t: t, keys: DefaultKeyMap(), st: NewStyles(true, true)}
	f.c = newConfirm(&f.keys, &f.st, testRunbook().Confirm, "")
	f.c.SetSize(80, 24)
	var info steps.Info
	for _, i := range testInfos() {
		if i.ID == step {
			info = i
		}
	}
	if info.ID == "" {
		t.Fatalf("no step %s", step)
	}
	plan := testPlans()[step]
	plan.Rollback = info.Rollback
	f.c.Open(info, &plan)
	return f
}

// do drives the child: a key name (as keyMsg knows them), "type:TEXT" to
// type TEXT key by key, or "paste:TEXT" for a bracketed paste.
func (f *childFixture) do(inputs ...string) *childFixture {
	f.t.Helper()
	for _, in := range inputs {
		var msgs []tea.Msg
		switch {
		case strings.HasPrefix(in, "type:"):
			for _, r := range strings.TrimPrefix(in, "type:") {
				msgs = append(msgs, tea.KeyPressMsg{Code: r, Text: string(r)})
			}
		case strings.HasPrefix(in, "paste:"):
			msgs = append(msgs, tea.PasteMsg{Content: strings.TrimPrefix(in, "paste:")})
		default:
			msgs = append(msgs, keyMsg(in))
		}
		for _, msg := range msgs {
			if a, _ := f.c.Update(msg); a != nil {
				f.got = append(f.got, *a)
			}
		}
	}
	return f
}

func (f *childFixture) view() string { return ansi.Strip(f.c.View()) }

func (f *childFixture) wantView(subs ...string) {
	f.t.Helper()
	v := f.view()
	for _, s := range subs {
		if !strings.Contains(v, s) {
			f.t.Fatalf("the confirmation lacks %q:\n%s", s, v)
		}
	}
}

func (a answer) String() string {
	s := [...]string{"approve", "skip", "abort"}[a.decision]
	if a.typed != "" {
		s += fmt.Sprintf(" typed=%q", a.typed)
	}
	if a.reason != "" {
		s += fmt.Sprintf(" reason=%q", a.reason)
	}
	return s
}

// Nothing here answers: Enter alone, a wrong word, an empty reason, esc.
// Each leaves the question open and says why.
func TestConfirmChildDoesNotAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, step string
		inputs     []string
		want       []string // on the child's view
		mode       inputMode
	}{
		{"y/N: Enter alone", "detach-clients", []string{"enter", "enter", "enter"},
			[]string{"Apply this plan? y yes", "✗ Enter alone never confirms: y applies, n stops here, s skips."}, inputNone},
		{"typed: Enter on the empty field", "delete-znodes", []string{"enter"},
			[]string{"Type the topic name orders to apply:", "✗ Enter alone never confirms: type the topic name orders, then Enter."}, inputTyped},
		{"typed: a prefix", "delete-znodes", []string{"type:order", "enter"},
			[]string{`✗ "order" is not the topic name "orders". Nothing was done; type it exactly.`}, inputTyped},
		{"typed: another case", "delete-znodes", []string{"type:Orders", "enter"}, []string{`"Orders" is not the topic name`}, inputTyped},
		{"typed: a trailing space", "delete-znodes", []string{"type:orders ", "enter"}, []string{`"orders " is not the topic name`}, inputTyped},
		{"typed: a leading space", "delete-znodes", []string{"type: orders", "enter"}, []string{`" orders" is not the topic name`}, inputTyped},
		{"typed: another topic", "delete-znodes", []string{"type:orders-v2", "enter"}, []string{`"orders-v2" is not the topic name`}, inputTyped},
		{"typed: y typed", "delete-znodes", []string{"type:y", "enter"}, []string{`"y" is not the topic name`}, inputTyped},
		{"typed: a pasted wrong word", "delete-znodes", []string{"paste:orders\n", "enter"}, []string{"is not the topic name"}, inputTyped},
		{"typed: esc leaves the field, unanswered", "delete-znodes", []string{"type:ord", "esc"},
			[]string{"Not confirmed. y type the topic name · n no, stop here · s skip…", "Not confirmed. y types the topic name, n stops here, s skips."}, inputNone},
		{"typed: Enter after esc", "delete-znodes", []string{"esc", "enter"},
			[]string{"✗ Enter alone never confirms: y, then type orders; n stops here; s skips."}, inputNone},
		{"typed: y opens the field again", "delete-znodes", []string{"esc", "y"}, []string{"Type the topic name orders to apply:"}, inputTyped},
		{"y/N: esc from the reason", "detach-clients", []string{"s", "type:because", "esc"},
			[]string{"Apply this plan?", "Not confirmed. y applies, n stops here, s skips."}, inputNone},
		{"typed: esc from the reason goes back to the word", "delete-znodes", []string{"esc", "s", "esc"},
			[]string{"Type the topic name orders to apply:"}, inputTyped},
		{"y/N: a skip without a reason", "detach-clients", []string{"s", "enter"},
			[]string{"Reason to skip (journaled):", "✗ A skip needs a reason: it is written to the journal."}, inputReason},
		{"y/N: a reason of spaces", "detach-clients", []string{"s", "type:   ", "enter"}, []string{"A skip needs a reason"}, inputReason},
		{"typed: a skip without a reason", "delete-znodes", []string{"esc", "s", "enter"}, []string{"A skip needs a reason"}, inputReason},
		{"esc and other keys do nothing with no field open", "detach-clients", []string{"esc", "q", "x", "tab", "space"},
			[]string{"Apply this plan?"}, inputNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newChild(t, tc.step).do(tc.inputs...)
			if len(f.got) != 0 {
				t.Fatalf("answered: %v", f.got)
			}
			if !f.c.isOpen() || f.c.mode != tc.mode {
				t.Fatalf("open %v, mode %d, want mode %d", f.c.isOpen(), f.c.mode, tc.mode)
			}
			f.wantView(tc.want...)
			if tc.mode == inputTyped && strings.Contains(f.view(), "is not the topic name") && f.c.input.Value() != "" {
				t.Fatalf("the field kept the wrong word %q", f.c.input.Value())
			}
		})
	}
}

// What does answer, and with what.
func TestConfirmChildAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, step string
		inputs     []string
		want       answer
	}{
		{"y/N: y applies", "detach-clients", []string{"y"}, answer{decision: steps.Approve}},
		{"y/N: y after Enter", "detach-clients", []string{"enter", "y"}, answer{decision: steps.Approve}},
		{"y/N: n says no", "detach-clients", []string{"n"}, answer{decision: steps.Abort}},
		{"y/N: n after a skip given up", "detach-clients", []string{"s", "esc", "n"}, answer{decision: steps.Abort}},
		{"y/N: a skip with a reason", "detach-clients", []string{"s", "type:clients stopped by hand", "enter"},
			answer{decision: steps.Skip, reason: "clients stopped by hand"}},
		{"y/N: the reason is trimmed", "detach-clients", []string{"s", "type:  by hand  ", "enter"},
			answer{decision: steps.Skip, reason: "by hand"}},
		{"y/N: the reason after an empty one", "detach-clients", []string{"s", "enter", "type:by hand", "enter"},
			answer{decision: steps.Skip, reason: "by hand"}},
		{"typed: the word", "delete-znodes", []string{"type:orders", "enter"}, answer{decision: steps.Approve, typed: "orders"}},
		{"typed: the word after a wrong one", "delete-znodes", []string{"enter", "type:order", "enter", "type:orders", "enter"},
			answer{decision: steps.Approve, typed: "orders"}},
		{"typed: the word pasted", "delete-znodes", []string{"paste:orders", "enter"}, answer{decision: steps.Approve, typed: "orders"}},
		{"typed: the word after esc and y", "delete-znodes", []string{"esc", "y", "type:orders", "enter"},
			answer{decision: steps.Approve, typed: "orders"}},
		{"typed: q is a letter, then backspace", "delete-znodes", []string{"type:ordersq", "backspace", "enter"},
			answer{decision: steps.Approve, typed: "orders"}},
		{"typed: n after esc", "delete-znodes", []string{"esc", "n"}, answer{decision: steps.Abort}},
		{"typed: n in the field is typed, not a no", "delete-znodes", []string{"type:n", "enter", "esc", "n"}, answer{decision: steps.Abort}},
		{"typed: a skip with a reason", "delete-znodes", []string{"esc", "s", "type:done by hand", "enter"},
			answer{decision: steps.Skip, reason: "done by hand"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newChild(t, tc.step).do(tc.inputs...)
			if len(f.got) != 1 || f.got[0] != tc.want {
				t.Fatalf("answers %v, want [%v]", f.got, tc.want)
			}
			if f.c.isOpen() || f.c.typing() || f.c.View() != "" || f.c.input.Value() != "" {
				t.Fatalf("the question stayed open after its answer: view %q, field %q", f.c.View(), f.c.input.Value())
			}
			if f.do("y", "n", "type:orders", "enter"); len(f.got) != 1 {
				t.Fatalf("a closed question answered again: %v", f.got)
			}
		})
	}
}

// The child matches only the bindings the root enabled: under the help
// screen, or on a terminal too small for the plan, y and s do nothing, and
// n still says no.
func TestConfirmChildHonoursDisabledKeys(t *testing.T) {
	f := newChild(t, "detach-clients")
	f.keys.Approve.SetEnabled(false)
	f.keys.Skip.SetEnabled(false)
	f.do("y", "s", "enter")
	if len(f.got) != 0 || f.c.typing() {
		t.Fatalf("a disabled key acted: answers %v, typing %v", f.got, f.c.typing())
	}
	f.do("n")
	if len(f.got) != 1 || f.got[0].decision != steps.Abort {
		t.Fatalf("answers %v, want abort", f.got)
	}
}

// A terminal too small to show the plan cannot take the typed word; once
// it fits, Enter submits what was typed.
func TestConfirmChildTooSmallCannotConfirm(t *testing.T) {
	f := newChild(t, "delete-znodes")
	f.c.SetSize(50, 12)
	f.do("type:orders", "enter")
	if len(f.got) != 0 {
		t.Fatalf("confirmed on a terminal too small for the plan: %v", f.got)
	}
	f.wantView("✗ The terminal is too small") // the line is cut at 50 columns
	if f.c.note != "The terminal is too small to show the plan: enlarge it to confirm." {
		t.Fatalf("note %q", f.c.note)
	}
	f.c.SetSize(80, 24)
	f.do("enter")
	if len(f.got) != 1 || f.got[0] != (answer{decision: steps.Approve, typed: "orders"}) {
		t.Fatalf("answers %v", f.got)
	}
}

// What the child shows: the kind of question, the step, where, the undo
// note (cut to a few lines), and the field or the keys.
func TestConfirmChildView(t *testing.T) {
	f := newChild(t, "detach-clients")
	f.wantView(" CONFIRM  detach-clients · risk low", "Undo: Nothing was deleted.", "Apply this plan? y yes · n no, stop here · s skip…   (Enter alone does nothing)")
	if strings.Contains(f.view(), "LIVE") || strings.Count(f.c.View(), "\n") != 3 {
		t.Fatalf("view:\n%s", f.view())
	}

	f = newChild(t, "delete-znodes")
	f.wantView(" DESTRUCTIVE  delete-znodes · risk destructive", "Undo: Recreate the znodes exactly as they were", "Type the topic name orders to apply: ")

	live := newChild(t, "delete-znodes")
	live.c.where = " on the LIVE cluster prod-eu-1"
	live.wantView("delete-znodes on the LIVE cluster prod-eu-1 · risk destructive")

	long := newChild(t, "detach-clients")
	long.c.plan = &steps.Plan{Rollback: strings.Repeat("Start the clients again, one by one, and watch their lag. ", 20)}
	long.wantView("… the whole note is in the step pane (tab, then ↓)")
	if n := strings.Count(long.view(), "Undo: "); n != 1 {
		t.Fatalf("%d undo notes", n)
	}
	// At 24 rows the note takes at most 24/6 = 4 lines, the last saying where the rest is.
	if lines := strings.Split(long.view(), "\n"); len(lines) != 1+4+1 {
		t.Fatalf("the undo note is not cut to 4 lines: %d lines\n%s", len(lines), long.view())
	}
}

// A closed child draws nothing and takes no key.
func TestConfirmChildClosed(t *testing.T) {
	k, st := DefaultKeyMap(), NewStyles(true, true)
	c := newConfirm(&k, &st, testRunbook().Confirm, "")
	for _, msg := range []tea.Msg{keyMsg("y"), keyMsg("n"), keyMsg("enter"), tea.PasteMsg{Content: "orders"}} {
		if a, _ := c.Update(msg); a != nil {
			t.Fatalf("a closed child answered %v", *a)
		}
	}
	if c.View() != "" || c.isOpen() || c.typing() {
		t.Fatalf("closed child: view %q", c.View())
	}
	f := newChild(t, "delete-znodes").do("type:ord")
	f.c.Close()
	if f.c.View() != "" || f.c.typing() || f.c.input.Value() != "" {
		t.Fatalf("after Close: view %q, field %q", f.c.View(), f.c.input.Value())
	}
}

// SetSize narrows the rendering: at any width down to one column every
// line fits, in every mode, and the keys still work.
func TestConfirmChildNarrow(t *testing.T) {
	for _, tc := range []struct {
		step   string
		inputs []string
	}{
		{"detach-clients", nil},
		{"detach-clients", []string{"enter"}},
		{"detach-clients", []string{"s", "type:clients stopped by hand at 09:20"}},
		{"delete-znodes", nil},
		{"delete-znodes", []string{"type:order", "enter"}},
		{"delete-znodes", []string{"type:orders", "enter"}}, // too small: refused
		{"delete-znodes", []string{"esc"}},
	} {
		for w := 1; w <= 20; w++ {
			for _, h := range []int{1, 5, 12, 24} {
				name := fmt.Sprintf("%s %v at %dx%d", tc.step, tc.inputs, w, h)
				f := newChild(t, tc.step)
				f.c.SetSize(w, h)
				f.do(tc.inputs...)
				if len(f.got) != 0 {
					t.Fatalf("%s: answered %v on a terminal too small for the plan", name, f.got)
				}
				v := f.c.View()
				if v == "" {
					t.Fatalf("%s: nothing drawn", name)
				}
				for i, l := range strings.Split(v, "\n") {
					if n := ansi.StringWidth(l); n > w {
						t.Fatalf("%s: line %d is %d wide: %q", name, i, n, ansi.Strip(l))
					}
				}
			}
		}
	}
	// Before the terminal says its size, the child draws 80 columns.
	f := newChild(t, "delete-znodes")
	f.c.SetSize(0, 0)
	for _, l := range strings.Split(f.c.View(), "\n") {
		if n := ansi.StringWidth(l); n > 80 {
			t.Fatalf("line %d wide at size 0×0", n)
		}
	}
}
