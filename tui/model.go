package tui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"

	"github.com/kremedy/kremedy/steps"
)

type phase int

const (
	phaseOffer    phase = iota // an unfinished run was found: resume it?
	phaseRunning               // the engine runs
	phaseStopping              // the operator quit: the engine is stopping
	phaseFinished              // the engine returned
)

type pane int

const (
	paneSteps pane = iota
	paneDetail
	paneOutput
	paneSummary
)

// stepView is what the TUI knows about one step.
type stepView struct {
	info           steps.Info
	state          steps.State
	started, ended time.Time
	plan           *steps.Plan
	checks         []steps.Check
	err            error
	note           string // the last state event's text (skip reason, "nothing to do")
	ran            bool   // reached Running in the current attempt
	applied        bool   // applied a plan in this session
	earlier        bool   // done or skipped in an earlier attempt
	lastAction     string
	progress       string // what the running step waits for now
	out            *ring
}

type tickMsg time.Time

type ctxDoneMsg struct{}

// Model is the root model, the only one that returns a tea.View. It keeps
// the panes, scrolling and help, and talks to the engine; answering a
// question is its confirmation child's.
type Model struct {
	o    Options
	keys KeyMap
	st   Styles
	dark bool
	help help.Model
	spin spinner.Model
	// confirm is the confirmation child, a named field (not embedded): the
	// model and the tests reach its mode and input as m.confirm.mode and
	// m.confirm.input.
	confirm confirm // the open question, if any: its own Update and View
	b       *bridge
	parent  context.Context
	now     func() time.Time
	began   time.Time
	// status is where the cluster stands (EvStatus), shown in the header.
	status string
	// down of total brokers are stopped now, since downSince (EvBrokers).
	down, total int
	downSince   time.Time

	w, h int

	phase         phase
	steps         []*stepView
	index         map[string]int
	sel           int
	follow        bool // the selection follows the engine
	current       int  // the step the engine is on (-1 before the first event)
	focus         pane
	detailTop     int
	outTop        int
	outFollow     bool
	summaryTop    int
	showHelp      bool
	ask           *ask
	diagnosisSeen bool
	flash         string
	flashErr      bool

	engineRunning bool
	cancel        context.CancelFunc
	finished      chan struct{} // closed when the current engine run returned
	runs          int
	result        *engineResult
	external      bool // the process was asked to stop (signal)
	spinning      bool
	quitting      bool
}

func newModel(ctx context.Context, o Options, st Styles) *Model {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.By == "" {
		o.By = "tui"
	}
	m := &Model{
		o: o, keys: DefaultKeyMap(), st: st, dark: true, parent: ctx, now: o.Now, began: o.Now(),
		w: 80, h: 24, index: map[string]int{}, current: -1, follow: true, outFollow: true, focus: paneDetail,
		b: newBridge(o.By), cancel: func() {},
	}
	for i, info := range o.Steps {
		m.steps = append(m.steps, &stepView{info: info, out: newRing(maxOutputLines)})
		m.index[info.ID] = i
	}
	m.help = help.New()
	m.spin = spinner.New(spinner.WithSpinner(spinner.MiniDot))
	where := ""
	if o.Mode == Live {
		where = " on the LIVE cluster " + o.Cluster
	}
	m.confirm = newConfirm(&m.keys, &m.st, o.Confirm, where)
	m.confirm.SetSize(m.w, m.h)
	m.setStyles(st)
	if o.Resume != nil {
		for _, id := range o.Resume.Done {
			if i, ok := m.index[id]; ok {
				m.steps[i].earlier, m.steps[i].state = true, steps.Done
			}
		}
		for _, id := range o.Resume.Skipped {
			if i, ok := m.index[id]; ok {
				m.steps[i].earlier, m.steps[i].state = true, steps.Skipped
			}
		}
	}
	m.phase = phaseRunning
	if o.Resume != nil && o.Resume.Ask {
		m.phase = phaseOffer
	}
	m.syncKeys()
	return m
}

func (m *Model) setStyles(st Styles) {
	m.st = st
	m.help.Styles = st.Help
	m.spin.Style = st.State(steps.Running)
	m.confirm.restyle()
}

// Init starts the engine (unless a resume is offered) behind the first
// frame: connections and preflight happen while the spinner turns.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.b.wait, m.tick(), tea.RequestBackgroundColor, m.watchContext()}
	if m.phase == phaseRunning {
		cmds = append(cmds, m.startEngine())
	}
	return tea.Batch(cmds...)
}

func (m *Model) tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

func (m *Model) watchContext() tea.Cmd {
	ctx, stop := m.parent, m.b.stop
	return func() tea.Msg {
		select {
		case <-ctx.Done():
			return ctxDoneMsg{}
		case <-stop:
			return nil
		}
	}
}

// startEngine runs the engine in a tea.Cmd; its news arrive through the
// bridge.
func (m *Model) startEngine() tea.Cmd {
	ctx, cancel := context.WithCancel(m.parent)
	m.cancel = cancel
	m.engineRunning = true
	m.phase = phaseRunning
	m.runs++
	finished := make(chan struct{})
	m.finished = finished
	b, start, arts := m.b, m.o.Start, m.o.Artifacts
	cmds := []tea.Cmd{func() tea.Msg { b.run(ctx, start, arts, finished); return nil }}
	if !m.spinning {
		m.spinning = true
		cmds = append(cmds, m.spin.Tick)
	}
	return tea.Batch(cmds...)
}

func (m *Model) busy() bool { return m.phase == phaseRunning || m.phase == phaseStopping }

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		m.confirm.SetSize(m.w, m.h)
	case tea.BackgroundColorMsg:
		if dark := msg.IsDark(); dark != m.dark && !m.st.NoColor {
			m.dark = dark
			m.setStyles(NewStyles(false, dark))
		}
	case spinner.TickMsg:
		if m.busy() {
			m.spin, cmd = m.spin.Update(msg)
		} else {
			m.spinning = false
		}
	case tickMsg:
		cmd = m.tick()
	case ctxDoneMsg:
		m.external = true
		switch m.phase {
		case phaseRunning:
			m.stop()
		case phaseOffer, phaseFinished:
			m.quitting = true
			cmd = tea.Quit
		}
	case engineMsg:
		cmd = tea.Batch(m.onEngine(msg), m.b.wait)
	case tea.PasteMsg:
		cmd = m.updateConfirm(msg)
	case tea.KeyPressMsg:
		cmd = m.onKey(msg)
	}
	m.syncKeys()
	return m, cmd
}

func (m *Model) onEngine(msg engineMsg) tea.Cmd {
	for _, e := range msg.events {
		m.apply(e)
	}
	var cmd tea.Cmd
	if msg.ask != nil {
		m.ask = msg.ask
		if m.phase != phaseRunning {
			// Quit raced the question: the engine's context is cancelled and
			// it answers Abort by itself.
			m.ask = nil
		} else if m.diagnosisSeen {
			cmd = m.showAsk()
		}
	}
	if msg.done != nil {
		return m.finish(msg.done)
	}
	return cmd
}

// apply folds one engine event into the step views.
func (m *Model) apply(e steps.Event) {
	if e.Kind == steps.EvStatus {
		m.status = e.Text
		return
	}
	if e.Kind == steps.EvBrokers { // the cluster's, whatever the step
		if e.Down > 0 && m.down == 0 {
			m.downSince = e.Time
		}
		m.down, m.total = e.Down, e.Total
		return
	}
	i, ok := m.index[e.Step]
	if !ok {
		// Run-level lines (a ZooKeeper session lost or expired) go with the
		// step running now: that is the step they happened under.
		i = m.current
		if i < 0 || i >= len(m.steps) {
			return
		}
	}
	sv := m.steps[i]
	switch e.Kind {
	case steps.EvState:
		m.current = i
		switch e.State {
		case steps.Planning:
			if sv.state != steps.Planning && sv.state != steps.Confirming && sv.state != steps.Running || sv.started.IsZero() {
				sv.started = e.Time
			}
			sv.ended, sv.err, sv.note, sv.ran = time.Time{}, nil, "", false
		case steps.Running:
			sv.ran = true
		case steps.Confirming:
			if e.Plan != nil {
				sv.plan = e.Plan
			}
		case steps.Done, steps.Failed, steps.Skipped:
			if !m.flashErr {
				m.flash = ""
			}
			m.confirm.fade()
			switch sv.state {
			case steps.Planning, steps.Confirming, steps.Running:
				sv.ended = e.Time
			default:
				// Re-checked from the journal (done earlier): it keeps the
				// timing it had, or none.
			}
			sv.note, sv.err = e.Text, e.Err
			if e.State == steps.Done && sv.ran {
				sv.applied = true
			}
		}
		sv.state, sv.progress = e.State, ""
		if m.follow && m.diagnosisSeen && m.sel != i {
			m.selectStep(i)
		}
	case steps.EvPlan:
		sv.plan, sv.checks = e.Plan, nil
	case steps.EvCheck:
		if e.Check != nil {
			sv.checks = append(sv.checks, *e.Check)
		}
	case steps.EvProgress, steps.EvWaiting:
		// A waiting step: what it waits for (brokers, a second approval).
		sv.progress = sanitize(e.Text)

	case steps.EvAction:
		text := "→ " + sanitize(e.Text)
		sv.lastAction = text
		sv.out.push(outLine{src: "kremedy", text: text})
	case steps.EvLog:
		sv.out.push(outLine{src: "kremedy", text: sanitize(e.Text)})
	case steps.EvOutput:
		sv.out.push(outLine{src: sanitize(e.Host), text: sanitize(e.Text)})
	}
}

func (m *Model) selectStep(i int) {
	if i < 0 || i >= len(m.steps) {
		return
	}
	if i != m.sel {
		m.sel, m.detailTop, m.outFollow = i, 0, true
	}
}

// showAsk puts the pending confirmation in front of the operator.
func (m *Model) showAsk() tea.Cmd {
	a := m.ask
	m.follow = true
	m.showHelp = false // a question needs the plan on screen
	if i, ok := m.index[a.info.ID]; ok {
		m.selectStep(i)
	}
	m.detailTop = 0
	if m.focus == paneSummary || m.focus == paneSteps {
		m.focus = paneDetail
	}
	m.flash, m.flashErr = "", false
	return m.confirm.Open(a.info, a.plan)
}

func (m *Model) setFlash(err bool, format string, a ...any) {
	m.flash, m.flashErr = fmt.Sprintf(format, a...), err
}

// updateConfirm hands a key or a paste to the confirmation child and sends
// the engine its answer, once there is one.
func (m *Model) updateConfirm(msg tea.Msg) tea.Cmd {
	a, cmd := m.confirm.Update(msg)
	if a != nil {
		m.reply(*a)
	}
	return cmd
}

// reply answers the engine and forgets the question: the approval carries
// who answered and the digest of the plan shown.
func (m *Model) reply(a answer) {
	if m.ask == nil {
		return
	}
	ap := steps.Approval{Decision: a.decision, Typed: a.typed, Reason: a.reason, By: m.o.By, Digest: m.ask.digest}
	m.ask.reply <- ap // capacity 1, one answer per question: never blocks
	id := m.ask.info.ID
	m.ask = nil
	switch ap.Decision {
	case steps.Approve:
		m.setFlash(false, "Confirmed: applying %s.", id)
	case steps.Skip:
		m.setFlash(false, "Skipped %s: %s", id, ap.Reason)
	case steps.Abort:
		m.setFlash(false, "You said no: nothing of %s is done, and the run stops here.", id)
	}
}

// stop cancels the running step; the final screen comes when the engine
// has returned (and journaled the stop).
func (m *Model) stop() {
	if !m.engineRunning {
		return
	}
	m.cancel()
	m.phase = phaseStopping
	m.ask = nil
	m.confirm.Close()
	m.flash = ""
}

func (m *Model) finish(res *engineResult) tea.Cmd {
	m.result = res
	m.engineRunning = false
	m.cancel()
	m.phase = phaseFinished
	m.ask = nil
	m.confirm.Close()
	m.focus, m.summaryTop = paneSummary, 0
	m.flash = ""
	if m.external {
		m.quitting = true
		return tea.Quit
	}
	return nil
}

func (m *Model) failedStep() *stepView {
	if m.result == nil {
		return nil
	}
	id := m.result.out.Failed
	if id == "" {
		id = m.result.out.Interrupted
	}
	if i, ok := m.index[id]; ok {
		return m.steps[i]
	}
	for _, sv := range m.steps {
		if sv.state == steps.Failed {
			return sv
		}
	}
	if m.current >= 0 {
		return m.steps[m.current]
	}
	return nil
}

func (m *Model) onKey(k tea.KeyPressMsg) tea.Cmd {
	if m.confirm.typing() {
		// The field takes every key but ctrl+c and paging: q is typed.
		switch {
		case k.Text == "" && key.Matches(k, m.keys.Quit):
			return m.quit()
		case k.Text == "" && key.Matches(k, m.keys.PageUp, m.keys.PageDown):
			m.scroll(k)
			return nil
		}
		return m.updateConfirm(k)
	}
	if m.showHelp && key.Matches(k, m.keys.Help, m.keys.Back) {
		m.showHelp = false
		return nil
	}
	switch {
	case key.Matches(k, m.keys.Quit):
		return m.quit()
	case key.Matches(k, m.keys.Help):
		m.showHelp = true
	case key.Matches(k, m.keys.Resume):
		m.flash = ""
		return m.startEngine()
	case key.Matches(k, m.keys.Continue):
		m.diagnosisSeen = true
		return m.showAsk()
	case key.Matches(k, m.keys.Approve, m.keys.Decline, m.keys.Skip):
		return m.updateConfirm(k)
	case key.Matches(k, m.keys.Retry, m.keys.Recheck):
		return m.restart(key.Matches(k, m.keys.Recheck))
	case key.Matches(k, m.keys.NextPane, m.keys.PrevPane):
		m.cycleFocus(key.Matches(k, m.keys.PrevPane))
	case key.Matches(k, m.keys.Up, m.keys.Down, m.keys.PageUp, m.keys.PageDown, m.keys.Top, m.keys.Bottom):
		m.scroll(k)
	case k.String() == "enter":
		switch {
		case m.confirm.isOpen():
			return m.updateConfirm(k) // it says why Enter alone does nothing
		case m.ask != nil:
			m.setFlash(false, "Press space to review the first change.")
		}
	}
	return nil
}

func (m *Model) quit() tea.Cmd {
	switch m.phase {
	case phaseRunning:
		m.stop()
	case phaseStopping:
		id := ""
		if sv := m.currentStep(); sv != nil {
			id = sv.info.ID + " "
		}
		m.setFlash(false, "Still stopping %scleanly; the journal is being written. One moment.", id)
	default:
		m.quitting = true
		return tea.Quit
	}
	return nil
}

func (m *Model) currentStep() *stepView {
	if m.current < 0 || m.current >= len(m.steps) {
		return nil
	}
	return m.steps[m.current]
}

// restart runs the engine again from the journal: done steps are
// re-checked, the stopped one is planned again from the cluster as it is.
func (m *Model) restart(recheck bool) tea.Cmd {
	if sv := m.failedStep(); sv != nil {
		what := "retry"
		if recheck {
			what = "re-check"
		}
		sv.out.push(outLine{src: "kremedy", text: fmt.Sprintf("── %s at %s ──", what, m.now().Format("15:04:05"))})
		m.selectStep(m.index[sv.info.ID])
	}
	m.focus = paneDetail
	m.follow = true
	m.diagnosisSeen = true
	m.flash = ""
	return m.startEngine()
}

func (m *Model) focusOrder() []pane {
	if m.phase == phaseFinished {
		return []pane{paneSummary, paneSteps, paneDetail, paneOutput}
	}
	return []pane{paneSteps, paneDetail, paneOutput}
}

func (m *Model) cycleFocus(back bool) {
	ps := m.focusOrder()
	at := 0
	for i, p := range ps {
		if p == m.focus {
			at = i
		}
	}
	if back {
		at = (at + len(ps) - 1) % len(ps)
	} else {
		at = (at + 1) % len(ps)
	}
	m.focus = ps[at]
}

// scroll moves the focused pane.
func (m *Model) scroll(k tea.KeyPressMsg) {
	l := m.layout()
	delta := 0
	switch {
	case key.Matches(k, m.keys.Up):
		delta = -1
	case key.Matches(k, m.keys.Down):
		delta = 1
	case key.Matches(k, m.keys.PageUp):
		delta = -max(1, l.pageFor(m.focus)-1)
	case key.Matches(k, m.keys.PageDown):
		delta = max(1, l.pageFor(m.focus)-1)
	case key.Matches(k, m.keys.Top):
		delta = -1 << 30
	case key.Matches(k, m.keys.Bottom):
		delta = 1 << 30
	}
	focus := m.focus
	if m.confirm.typing() {
		focus = paneDetail // paging while typing reads the plan
	}
	switch focus {
	case paneSteps:
		m.follow = false
		m.selectStep(min(max(m.sel+delta, 0), len(m.steps)-1))
	case paneDetail:
		n := len(m.detailLines(m.steps[m.sel], l.rightW))
		m.detailTop = clamp(m.detailTop+delta, 0, n-l.detailH)
	case paneOutput:
		r := m.steps[m.sel].out
		bottom := max(0, r.len()-l.outH)
		top := m.outTop
		if m.outFollow {
			top = bottom
		}
		top = clamp(top+delta, 0, bottom)
		m.outTop, m.outFollow = top, top >= bottom
	case paneSummary:
		n := len(m.summaryLines(l.w))
		m.summaryTop = clamp(m.summaryTop+delta, 0, n-l.bodyH)
	}
}

func clamp(v, lo, hi int) int {
	if hi < lo {
		hi = lo
	}
	return min(max(v, lo), hi)
}

// syncKeys enables exactly the bindings that make sense now: handling and
// help read the same key map.
func (m *Model) syncKeys() {
	k := &m.keys
	for _, b := range k.all() {
		b.SetEnabled(false)
	}
	small := m.tooSmall()
	typing := m.confirm.typing()
	asking := m.phase == phaseRunning && m.ask != nil && m.diagnosisSeen
	k.Quit.SetEnabled(true)
	k.Help.SetEnabled(!typing)
	switch m.phase {
	case phaseOffer:
		k.Quit.SetHelp("q", "leave it untouched")
	case phaseRunning:
		k.Quit.SetHelp("q", "stop (resumable)")
		if typing {
			k.Quit.SetHelp("ctrl+c", "stop (resumable)")
		}
	case phaseStopping:
		k.Quit.SetHelp("q", "stopping…")
	case phaseFinished:
		k.Quit.SetHelp("q", "quit")
	}
	nav := !small && m.phase != phaseOffer && !m.showHelp
	for _, b := range []*key.Binding{&k.Up, &k.Down, &k.Top, &k.Bottom, &k.NextPane, &k.PrevPane} {
		b.SetEnabled(nav && !typing)
	}
	k.PageUp.SetEnabled(nav)
	k.PageDown.SetEnabled(nav)
	k.Resume.SetEnabled(m.phase == phaseOffer)
	k.Continue.SetEnabled(m.phase == phaseRunning && m.ask != nil && !m.diagnosisSeen && !m.showHelp)
	// Confirming needs the plan on screen: not on a terminal too small to
	// show it. Saying no is always possible.
	k.Approve.SetEnabled(asking && !typing && !small && !m.showHelp)
	k.Decline.SetEnabled(asking && !typing)
	k.Skip.SetEnabled(asking && !typing && !small && !m.showHelp)
	if asking && m.ask.info.Confirm == steps.ConfirmTyped {
		k.Approve.SetHelp("y", "type the name")
	} else {
		k.Approve.SetHelp("y", "apply")
	}
	k.Submit.SetEnabled(typing)
	k.Back.SetEnabled(typing || m.showHelp)
	failed := m.phase == phaseFinished && m.result != nil && m.result.err != nil
	k.Retry.SetEnabled(failed && !m.showHelp)
	k.Recheck.SetEnabled(failed && errors.Is(m.result.err, steps.ErrCheckFailed) && !m.showHelp)
}

func (m *Model) tooSmall() bool { return tooSmallFor(m.w, m.h) }

// tooSmallFor says whether a terminal of w×h is too small to show a plan:
// it cannot confirm one.
func tooSmallFor(w, h int) bool { return w < 60 || h < 16 }
