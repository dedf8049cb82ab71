package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kremedy/kremedy/steps"
)

type inputMode int

const (
	inputNone   inputMode = iota
	inputTyped            // typing the runbook's confirmation word
	inputReason           // typing why a step is skipped
)

// answer is the operator's decision on the open question. The root model
// turns it into the steps.Approval it sends the engine, adding who answered
// and the digest of the plan that was shown.
type answer struct {
	decision steps.Decision
	typed    string // ConfirmTyped: the word, exactly as typed
	reason   string // Skip: why, trimmed (never empty)
}

// confirm is the confirmation child: everything about answering one step's
// approval. It owns the keys y, n, s and Enter while a question is open, the
// field for the confirmation word and the one for a skip's reason, the rule
// that Enter alone never confirms (and that a destructive step takes the
// word typed exactly), and its own messages. It draws the confirmation bar
// as a string; the root model places it, keeps scrolling, panes and help,
// and alone talks to the engine.
//
// The key map is the root's: the root enables the bindings that make sense
// now (no y on a terminal too small for the plan, none under the help
// screen) and the child matches only enabled ones, so one KeyMap drives
// handling and the help line.
type confirm struct {
	keys  *KeyMap
	st    *Styles
	word  steps.Confirmation // the runbook's confirmation word and what it names
	where string             // " on the LIVE cluster NAME" on a live cluster, else ""

	open bool // a question is in front of the operator
	info steps.Info
	plan *steps.Plan

	mode    inputMode
	input   textinput.Model
	note    string // the child's last message (what Enter, a wrong word, esc… did)
	noteErr bool
	w, h    int // the terminal's, as the last WindowSizeMsg said
}

func newConfirm(keys *KeyMap, st *Styles, word steps.Confirmation, where string) confirm {
	c := confirm{keys: keys, st: st, word: word, where: where, input: textinput.New()}
	c.input.CharLimit = 300
	c.restyle()
	return c
}

// restyle applies the (shared) styles again, after the root rebuilt them.
func (c *confirm) restyle() { c.input.SetStyles(c.st.Input) }

// SetSize is the terminal's size; the field scrolls within the line, and a
// terminal too small to show the plan cannot confirm it.
func (c *confirm) SetSize(w, h int) {
	c.w, c.h = w, h
	c.fit()
}

func (c *confirm) fit() {
	w, _ := screenSize(c.w, c.h)
	c.input.SetWidth(max(8, w-ansi.StringWidth(c.input.Prompt)-2))
}

func (c *confirm) small() bool { return tooSmallFor(c.w, c.h) }

// isOpen says whether a question is in front of the operator.
func (c *confirm) isOpen() bool { return c.open }

// typing says whether a field takes the keys (q is then a letter).
func (c *confirm) typing() bool { return c.open && c.mode != inputNone }

// Open puts a step's question in front of the operator: a destructive
// (typed) step opens the field for the confirmation word at once.
func (c *confirm) Open(info steps.Info, plan *steps.Plan) tea.Cmd {
	c.open, c.info, c.plan = true, info, plan
	c.note, c.noteErr = "", false
	if info.Confirm == steps.ConfirmTyped {
		return c.startTyping(inputTyped)
	}
	c.mode = inputNone
	return nil
}

// Close forgets the question unanswered (the run stops or ended).
func (c *confirm) Close() {
	c.open, c.info, c.plan = false, steps.Info{}, nil
	c.stopTyping()
	c.note, c.noteErr = "", false
}

// fade drops a message that is not an error, as a step ending does to the
// root's.
func (c *confirm) fade() {
	if !c.noteErr {
		c.note = ""
	}
}

func (c *confirm) say(err bool, format string, a ...any) {
	c.note, c.noteErr = fmt.Sprintf(format, a...), err
}

func (c *confirm) startTyping(mode inputMode) tea.Cmd {
	c.mode = mode
	c.input.Reset()
	switch mode {
	case inputTyped:
		c.input.Prompt = fmt.Sprintf("Type the %s name %s to apply: ", c.word.Noun, c.word.Word)
	case inputReason:
		c.input.Prompt = "Reason to skip (journaled): "
	}
	c.fit()
	return c.input.Focus()
}

func (c *confirm) stopTyping() {
	c.mode = inputNone
	c.input.Blur()
	c.input.Reset()
}

// decide closes the question with the operator's answer.
func (c *confirm) decide(a answer) *answer {
	c.Close()
	return &a
}

// Update takes a key (or a paste) while a question is open. It returns the
// operator's answer once there is one, and nil until then; the question is
// then closed.
func (c *confirm) Update(msg tea.Msg) (*answer, tea.Cmd) {
	if !c.open {
		return nil, nil
	}
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.PasteMsg:
		if c.typing() {
			c.input, cmd = c.input.Update(msg)
		}
	case tea.KeyPressMsg:
		if c.typing() {
			return c.typingKey(msg)
		}
		return c.press(msg)
	}
	return nil, cmd
}

// press is y, n, s or Enter with no field open.
func (c *confirm) press(k tea.KeyPressMsg) (*answer, tea.Cmd) {
	typed := c.info.Confirm == steps.ConfirmTyped
	switch {
	case key.Matches(k, c.keys.Approve):
		if typed {
			return nil, c.startTyping(inputTyped) // y opens the field; it does not confirm
		}
		return c.decide(answer{decision: steps.Approve}), nil
	case key.Matches(k, c.keys.Decline):
		return c.decide(answer{decision: steps.Abort}), nil
	case key.Matches(k, c.keys.Skip):
		c.note = ""
		return nil, c.startTyping(inputReason)
	case k.String() == "enter":
		if typed {
			c.say(true, "Enter alone never confirms: y, then type %s; n stops here; s skips.", c.word.Word)
		} else {
			c.say(true, "Enter alone never confirms: y applies, n stops here, s skips.")
		}
	}
	return nil, nil
}

// typingKey is a key while a field is open: Enter submits, esc goes back,
// every other key is typed.
func (c *confirm) typingKey(k tea.KeyPressMsg) (*answer, tea.Cmd) {
	switch {
	case key.Matches(k, c.keys.Submit):
		return c.submit(), nil
	case key.Matches(k, c.keys.Back):
		return nil, c.back()
	}
	var cmd tea.Cmd
	c.input, cmd = c.input.Update(k)
	return nil, cmd
}

func (c *confirm) submit() *answer {
	v := c.input.Value()
	switch c.mode {
	case inputTyped:
		switch {
		case v == "":
			c.say(true, "Enter alone never confirms: type the %s name %s, then Enter.", c.word.Noun, c.word.Word)
		case v != c.word.Word:
			c.say(true, "%q is not the %s name %q. Nothing was done; type it exactly.", v, c.word.Noun, c.word.Word)
			c.input.Reset()
		case c.small():
			c.say(true, "The terminal is too small to show the plan: enlarge it to confirm.")
		default:
			return c.decide(answer{decision: steps.Approve, typed: v})
		}
	case inputReason:
		r := strings.TrimSpace(v)
		if r == "" {
			c.say(true, "A skip needs a reason: it is written to the journal. Type why, or esc to go back.")
			return nil
		}
		return c.decide(answer{decision: steps.Skip, reason: r})
	}
	return nil
}

// back leaves the field: from a skip's reason on a destructive step, back to
// the confirmation word; otherwise to the keys, unanswered.
func (c *confirm) back() tea.Cmd {
	if c.mode == inputReason && c.info.Confirm == steps.ConfirmTyped {
		c.note = ""
		return c.startTyping(inputTyped)
	}
	c.stopTyping()
	if c.info.Confirm == steps.ConfirmTyped {
		c.say(false, "Not confirmed. y types the %s name, n stops here, s skips.", c.word.Noun)
	} else {
		c.say(false, "Not confirmed. y applies, n stops here, s skips.")
	}
	return nil
}

// noteView is the child's last message, drawn; "" if none.
func (c *confirm) noteView() string {
	if !c.open {
		return ""
	}
	return noteLine(c.st, c.note, c.noteErr)
}

// View is the confirmation bar: what is asked, on which cluster, how to
// undo it, the field or the keys, and the last message. Every line fits
// the width; nothing is drawn when no question is open.
func (c *confirm) View() string {
	if !c.open {
		return ""
	}
	st := c.st
	w, h := screenSize(c.w, c.h)
	var out []string
	if c.info.Confirm == steps.ConfirmTyped {
		out = append(out, st.Danger.Render(" DESTRUCTIVE ")+" "+st.Title.Render(c.info.ID)+c.where+" · risk "+c.info.Risk.String())
	} else {
		out = append(out, st.Confirm.Render(" CONFIRM ")+" "+st.Title.Render(c.info.ID)+c.where+" · risk "+c.info.Risk.String())
	}
	undo := "No rollback note: nothing to undo."
	if c.plan != nil && c.plan.Rollback != "" {
		undo = c.plan.Rollback
	}
	ls := wrap(undo, w, "Undo: ", "      ")
	if maxUndo := clamp(h/6, 2, 8); len(ls) > maxUndo {
		ls = append(ls[:maxUndo-1], st.Faint.Render("      … the whole note is in the step pane (tab, then ↓)"))
	}
	out = append(out, ls...)
	key := st.Command.Render
	switch {
	case c.mode == inputTyped || c.mode == inputReason:
		out = append(out, c.input.View())
	case c.info.Confirm == steps.ConfirmTyped:
		out = append(out, "Not confirmed. "+key("y")+" type the "+c.word.Noun+" name · "+key("n")+" no, stop here · "+key("s")+" skip…")
	default:
		out = append(out, "Apply this plan? "+key("y")+" yes · "+key("n")+" no, stop here · "+key("s")+" skip…   (Enter alone does nothing)")
	}
	if n := c.noteView(); n != "" {
		out = append(out, n)
	}
	for i, s := range out {
		if ansi.StringWidth(s) > w {
			out[i] = ansi.Truncate(s, w, "…")
		}
	}
	return strings.Join(out, "\n")
}

// noteLine draws a message: an error with a cross, so it reads without
// colour too.
func noteLine(st *Styles, text string, isErr bool) string {
	switch {
	case text == "":
		return ""
	case isErr:
		return st.ErrMsg.Render("✗ " + text)
	default:
		return st.InfoMsg.Render(text)
	}
}
