package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
)

// layout is the geometry of one frame.
type layout struct {
	w, h           int
	small          bool
	bar            []string
	bodyH          int
	leftW, rightW  int // rightW includes the separator's trailing space
	detailH, outH  int
	twoRowsPerStep bool
}

func (l layout) contentW() int { return l.rightW - 1 }

func (l layout) pageFor(p pane) int {
	switch p {
	case paneDetail:
		return l.detailH
	case paneOutput:
		return l.outH
	default:
		return l.bodyH
	}
}

func (m *Model) size() (int, int) { return screenSize(m.w, m.h) }

// screenSize is w×h, or 80×24 before the terminal said its size.
func screenSize(w, h int) (int, int) {
	if w <= 0 {
		w = 80
	}
	if h <= 0 {
		h = 24
	}
	return w, h
}

// Fixed rows: two of header, the pane titles, the rule above the bar, the
// help line.
const fixedRows = 5

func (m *Model) layout() layout {
	w, h := m.size()
	l := layout{w: w, h: h, small: m.tooSmall()}
	if l.small {
		return l
	}
	l.bar = m.barLines(w, h)
	if maxBar := h - fixedRows - 6; len(l.bar) > maxBar {
		l.bar = l.bar[:maxBar]
	}
	l.bodyH = h - fixedRows - len(l.bar)
	if m.status != "" {
		l.bodyH-- // the status line under the header
	}
	l.leftW = clamp(w/3, 24, 34)
	l.rightW = w - l.leftW - 1
	l.twoRowsPerStep = l.bodyH >= 2*len(m.steps)
	rest := l.bodyH - 1 // the output pane's title
	switch {
	case m.selected().out.len() == 0:
		l.outH = 1 // nothing to show: the detail gets the room
	case m.ask != nil && m.diagnosisSeen:
		l.outH = clamp(rest/4, 2, 8) // the plan is what matters now
	case m.phase == phaseRunning && m.selected().state == steps.Running:
		l.outH = rest * 3 / 5
	default:
		l.outH = rest / 2
	}
	l.detailH = rest - l.outH
	return l
}

func (m *Model) selected() *stepView {
	if len(m.steps) == 0 {
		return &stepView{out: newRing(1)}
	}
	return m.steps[clamp(m.sel, 0, len(m.steps)-1)]
}

// View implements tea.Model: the only tea.View in the program.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = fmt.Sprintf("kremedy · %s · %s", m.o.Mode, m.o.Confirm.Word)
	return v
}

func (m *Model) render() string {
	l := m.layout()
	lines := m.headerLines(l.w)
	if l.small {
		lines = append(lines, "")
		lines = append(lines, wrap(fmt.Sprintf("The terminal is %d×%d: kremedy needs at least 60×16 (80×24 or more is best). "+
			"Confirming is off until the plan fits on screen; n says no, q stops (resumable).", l.w, l.h), l.w, "", "")...)
		// The confirmation's message, or the model's: while a question is
		// open the model has none.
		if f := cmp.Or(m.confirm.noteView(), m.flashLine()); f != "" {
			lines = append(lines, f)
		}
		return frame(lines, l.w, l.h)
	}
	switch {
	case m.showHelp:
		lines = append(lines, m.titleRule("KEYS", l.w, true))
		lines = append(lines, window(m.helpLines(l.w), 0, l.bodyH)...)
	case m.phase == phaseFinished && m.focus == paneSummary:
		sum := m.summaryLines(l.w)
		lines = append(lines, m.titleRule("SUMMARY"+more(len(sum), m.summaryTop, l.bodyH)+" · tab shows the steps", l.w, true))
		lines = append(lines, window(sum, m.summaryTop, l.bodyH)...)
	default:
		lines = append(lines, m.panes(l)...)
	}
	for len(lines) < l.h-len(l.bar)-2 {
		lines = append(lines, "")
	}
	lines = append(lines, m.st.Rule.Render(strings.Repeat("─", l.w)))
	lines = append(lines, l.bar...)
	lines = append(lines, m.shortHelp(l.w))
	return frame(lines, l.w, l.h)
}

// frame cuts every line to the width and the frame to the height, so a
// long line never wraps and the screen never scrolls.
func frame(lines []string, w, h int) string {
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, s := range lines {
		if ansi.StringWidth(s) > w {
			lines[i] = ansi.Truncate(s, w, "…")
		}
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

func window(lines []string, top, h int) []string {
	top = clamp(top, 0, len(lines)-h)
	end := min(len(lines), top+h)
	if top >= end {
		return nil
	}
	return lines[top:end]
}

// more marks a pane with more lines than it shows.
func more(n, top, h int) string {
	top = clamp(top, 0, n-h)
	switch {
	case n <= h:
		return ""
	case top == 0:
		return " · ↓ more"
	case top+h >= n:
		return " · ↑ more"
	default:
		return " · ↑↓ more"
	}
}

func pad(s string, w int) string {
	n := ansi.StringWidth(s)
	if n > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-n)
}

func (m *Model) titleRule(title string, w int, active bool) string {
	st := m.st.PaneTitle
	if active {
		st = m.st.PaneActive
	}
	t := st.Render(" " + title + " ")
	n := ansi.StringWidth(t)
	if n+1 > w {
		return ansi.Truncate(t, w, "…")
	}
	return m.st.Rule.Render("─") + t + m.st.Rule.Render(strings.Repeat("─", w-n-1))
}

func (m *Model) headerLines(w int) []string {
	st := m.st
	badge := st.Badge(m.o.Mode).Render(" " + strings.ToUpper(m.o.Mode.String()) + " ")
	left := badge + " " + st.Header.Render(m.o.Cluster)
	if c := m.o.Confirm; !(c.Noun == "cluster" && c.Word == m.o.Cluster) {
		left += st.HeaderFaint.Render(" · "+c.Noun+" ") + st.Header.Render(c.Word)
	}
	if m.o.Runbook != "" {
		left += st.HeaderFaint.Render(" · " + m.o.Runbook)
	}
	right := st.HeaderFaint.Render("elapsed ") + fmtClock(m.now().Sub(m.began))
	if d := m.o.Drill; d != nil {
		hints := 0
		if d.Hints != nil {
			hints = d.Hints()
		}
		right = st.Badge(Lab).Render(" DRILL ") + fmtClock(m.now().Sub(d.Started)) +
			st.HeaderFaint.Render(fmt.Sprintf(" · hints %d · ", hints)) + right
	}
	if gap := w - ansi.StringWidth(left) - ansi.StringWidth(right); gap >= 1 {
		left += strings.Repeat(" ", gap) + right
	}
	dir := st.HeaderFaint.Render("run dir ")
	if m.down > 0 {
		// The outage leads the second line, where nothing can push it out.
		what := fmt.Sprintf("%d of %d brokers down", m.down, m.total)
		if m.down == m.total {
			what = "ALL BROKERS DOWN"
		}
		d := max(m.now().Sub(m.downSince), 0).Truncate(time.Second)
		dir = st.Danger.Render(fmt.Sprintf(" %s %02d:%02d ", what, int(d.Minutes()), int(d.Seconds())%60)) + " " + dir
	}
	tail := ""
	if m.o.Resume != nil {
		tail = st.HeaderFaint.Render(" · resumed run")
	}
	room := w - ansi.StringWidth(dir) - ansi.StringWidth(tail)
	path := m.o.RunDir
	if ansi.StringWidth(path) > room {
		path = ansi.TruncateLeft(path, ansi.StringWidth(path)-room+1, "…")
	}
	lines := []string{left, dir + path + tail}
	if m.status != "" {
		lines = append(lines, ansi.Truncate(st.Warn.Render(m.status), w, "…"))
	}
	return lines
}

func fmtClock(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return ""
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

func (m *Model) duration(sv *stepView) string {
	if sv.started.IsZero() {
		return ""
	}
	end := sv.ended
	if end.IsZero() {
		end = m.now()
	}
	return fmtDur(end.Sub(sv.started))
}

func stopped(err error) bool {
	return errors.Is(err, steps.ErrAborted) || errors.Is(err, context.Canceled)
}

func (m *Model) stateWord(sv *stepView, long bool) string {
	switch {
	case sv.state == steps.Failed && stopped(sv.err):
		return "stopped"
	case sv.earlier && (sv.state == steps.Done || sv.state == steps.Skipped) && sv.started.IsZero():
		return sv.state.String() + " earlier"
	case sv.state == steps.Confirming && sv.progress != "":
		return "waiting for an approval" // confirmed; a policy waits for another person
	case long:
		return sv.state.String()
	}
	return stateLabel(sv.state)
}

func (m *Model) icon(sv *stepView) string {
	if (sv.state == steps.Planning || sv.state == steps.Running) && m.engineRunning {
		return m.spin.View()
	}
	return m.st.State(sv.state).Render(plainIcon(sv))
}

func plainIcon(sv *stepView) string {
	if sv.state == steps.Failed && stopped(sv.err) {
		return "■"
	}
	return stateIcon(sv.state)
}

// panes draws the step list beside the step detail and its output.
func (m *Model) panes(l layout) []string {
	st := m.st
	sv := m.selected()
	title := fmt.Sprintf("STEP %d/%d · %s", m.sel+1, len(m.steps), sv.info.ID)
	if m.sel == 0 && sv.info.Risk == steps.ReadOnly {
		title = "DIAGNOSIS · " + sv.info.ID
	}
	all := m.detailLines(sv, l.contentW())
	title += more(len(all), m.detailTop, l.detailH)
	rows := []string{m.titleRule("STEPS", l.leftW, m.focus == paneSteps) + st.Rule.Render("┬") +
		m.titleRule(title, l.rightW, m.focus == paneDetail)}
	left := m.stepRows(l)
	detail := window(all, m.detailTop, l.detailH)
	out := m.outputRows(sv, l)
	sep := st.Rule.Render("│")
	for i := 0; i < l.bodyH; i++ {
		var lft, rgt string
		if i < len(left) {
			lft = left[i]
		}
		switch {
		case i < l.detailH:
			if i < len(detail) {
				rgt = " " + detail[i]
			}
		case i == l.detailH:
			rows = append(rows, pad(lft, l.leftW)+st.Rule.Render("├")+m.outputTitle(sv, l))
			continue
		default:
			if j := i - l.detailH - 1; j < len(out) {
				rgt = " " + out[j]
			}
		}
		rows = append(rows, pad(lft, l.leftW)+sep+rgt)
	}
	return rows
}

func (m *Model) stepRows(l layout) []string {
	st := m.st
	var rows []string
	selRow := 0
	for i, sv := range m.steps {
		if i == m.sel {
			selRow = len(rows)
		}
		marker := "  "
		id := sv.info.ID
		if i == m.sel {
			marker = st.Selected.Render("›") + " "
			id = st.Selected.Render(id)
		}
		word := st.State(sv.state).Render(m.stateWord(sv, false))
		dur := m.duration(sv)
		if l.twoRowsPerStep {
			rows = append(rows, marker+m.icon(sv)+" "+id, "    "+word+" "+st.Faint.Render(dur))
			continue
		}
		row := marker + m.icon(sv) + " " + id
		if gap := l.leftW - ansi.StringWidth(row) - ansi.StringWidth(dur) - 1; gap > 0 {
			row += strings.Repeat(" ", gap) + st.Faint.Render(dur)
		}
		rows = append(rows, row)
	}
	if len(rows) > l.bodyH {
		per := 1
		if l.twoRowsPerStep {
			per = 2
		}
		start := clamp(selRow-l.bodyH/2, 0, len(rows)-l.bodyH)
		start -= start % per
		rows = rows[start:min(len(rows), start+l.bodyH)]
	}
	return rows
}

// reflow joins a runbook's hard-wrapped lines into paragraphs; blank
// lines and indented lines (commands) keep their own lines.
func reflow(text string) []string {
	var out []string
	join := false
	for _, ln := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		plain := ln != "" && !strings.HasPrefix(ln, " ") && !strings.HasPrefix(ln, "\t")
		if join && plain {
			out[len(out)-1] += " " + strings.TrimSpace(ln)
		} else {
			out = append(out, ln)
		}
		join = plain
	}
	return out
}

// wrap word-wraps plain text to w columns with a hanging indent.
func wrap(text string, w int, first, rest string) []string {
	var out []string
	for _, para := range reflow(text) {
		indent := para[:len(para)-len(strings.TrimLeft(para, " "))]
		body := strings.TrimLeft(para, " ")
		lead := first + indent
		width := max(8, w-max(ansi.StringWidth(first), ansi.StringWidth(rest))-len(indent))
		for j, ln := range wordwrap(body, width) {
			if j > 0 {
				lead = rest + indent
			}
			out = append(out, lead+ln)
		}
		first = rest
	}
	return out
}

// wordwrap breaks plain text at spaces only (never inside a path, a
// command or --an-option), and hard-breaks a word longer than a line.
func wordwrap(s string, w int) []string {
	var lines []string
	cur, curW := "", 0
	for _, word := range strings.Fields(s) {
		ww := ansi.StringWidth(word)
		if curW > 0 && curW+1+ww <= w {
			cur, curW = cur+" "+word, curW+1+ww
			continue
		}
		if curW > 0 {
			lines = append(lines, cur)
		}
		for ww > w {
			lines = append(lines, ansi.Cut(word, 0, w))
			word = ansi.Cut(word, w, ww)
			ww = ansi.StringWidth(word)
		}
		cur, curW = word, ww
	}
	return append(lines, cur)
}

func styled(st lipgloss.Style, lines []string) []string {
	for i, s := range lines {
		lines[i] = st.Render(s)
	}
	return lines
}

func (m *Model) confirmWord(c steps.Confirm) string {
	switch c {
	case steps.ConfirmYes:
		return "y/N"
	case steps.ConfirmTyped:
		return "type the " + m.o.Confirm.Noun + " name"
	}
	return "none"
}

// detailLines is a step's detail: what and why, the concrete plan, checks,
// the rollback note with this run's paths, and what went wrong.
func (m *Model) detailLines(sv *stepView, w int) []string {
	d := &detailWriter{m: m, w: w}
	d.head(sv)
	switch {
	case sv.plan != nil:
		d.plan(sv)
	case sv.state == steps.Pending && !sv.earlier:
		d.add("", m.st.Faint.Render("Not planned yet: each step is planned from the cluster as it is when it starts."))
		d.checks(sv)
	case sv.state == steps.Planning:
		d.add("", m.spin.View()+" Reading the cluster (read-only)…")
		d.checks(sv)
	default:
		d.checks(sv)
	}
	if strings.TrimSpace(sv.info.Why) != "" {
		d.section("WHY")
		d.add(wrap(strings.TrimSpace(sv.info.Why), d.w, "", "")...)
	}
	return d.out
}

// detailWriter collects the lines of a step's detail, w columns wide.
type detailWriter struct {
	m   *Model
	w   int
	out []string
}

// add appends lines to the detail.
func (d *detailWriter) add(ls ...string) { d.out = append(d.out, ls...) }

// section starts a titled section, after a blank line when the screen is
// tall enough for it.
func (d *detailWriter) section(s string) {
	if d.m.h >= 30 {
		d.add("")
	}
	d.add(d.m.st.Section.Render(s))
}

// head writes the detail's top: the step's title, its id, risk,
// confirmation and state, a destructive step's warning, its note, what a
// running step waits for, and what went wrong.
func (d *detailWriter) head(sv *stepView) {
	m, st, w := d.m, d.m.st, d.w
	d.add(styled(st.Title, wrap(sv.info.Title, w, "", ""))...)
	meta := fmt.Sprintf("%s · risk %s · confirm %s · %s", sv.info.ID, sv.info.Risk, m.confirmWord(sv.info.Confirm), m.stateWord(sv, true))
	if dur := m.duration(sv); dur != "" {
		meta += " " + dur
	}
	d.add(styled(st.Faint, wrap(meta, w, "", ""))...)
	if sv.info.Risk == steps.Destructive {
		d.add(styled(st.Warn, wrap("Destructive: confirming it takes the "+m.o.Confirm.Noun+" name, typed.", w, "", ""))...)
	}
	if sv.note != "" && sv.err == nil && !(sv.plan != nil && sv.plan.NoOp) {
		d.add(wrap("Note: "+sv.note, w, "", "  ")...)
	}
	if sv.progress != "" && (sv.state == steps.Running || sv.state == steps.Confirming) {
		d.add(styled(st.Warn, wrap("Waiting: "+sv.progress, w, "", "  "))...)
	}
	if sv.err != nil {
		d.section("WHAT WENT WRONG")
		d.add(styled(st.Fail, wrap(sv.err.Error(), w, "", ""))...)
	}
}

// checks writes the step's CHECKS section, passed and failed, if it has
// any.
func (d *detailWriter) checks(sv *stepView) {
	st, w := d.m.st, d.w
	if len(sv.checks) == 0 {
		return
	}
	d.section("CHECKS")
	for _, c := range sv.checks {
		text := c.Name
		if c.Detail != "" {
			text += " — " + c.Detail
		}
		if c.OK {
			d.add(styled(st.OK, wrap(text, w, "✓ ", "  "))...)
		} else {
			d.add(styled(st.Fail, wrap(text, w, "✗ ", "  "))...)
		}
	}
}

// plan writes a planned step's plan: its summary, the actions (what will
// be done comes first: it is what a confirmation is about), its notes, the
// checks, what it saw on the cluster and how to undo it.
func (d *detailWriter) plan(sv *stepView) {
	st, w := d.m.st, d.w
	p := sv.plan
	d.section("PLAN")
	d.add(wrap(p.Summary, w, "", "")...)
	if p.NoOp && sv.info.Risk != steps.ReadOnly {
		d.add(st.OK.Render("Nothing to do: already as wanted."))
	}
	if len(p.Actions) > 0 {
		head := "WILL DO"
		if sv.applied || sv.ran {
			head = "ACTIONS"
		}
		d.section(head)
		for _, a := range p.Actions {
			d.add(styled(st.Action, wrap(a.String(), w, "→ ", "  "))...)
		}
	}
	for _, n := range p.Notes {
		d.add(styled(st.Note, wrap(n, w, "! ", "  "))...)
	}
	d.checks(sv)
	if len(p.Facts) > 0 {
		d.section("SEEN ON THE CLUSTER")
		for _, f := range p.Facts {
			d.add(wrap(f, w, "· ", "  ")...)
		}
	}
	if p.Rollback != "" && !p.NoOp {
		d.section("IF YOU NEED TO UNDO")
		d.add(wrap(p.Rollback, w, "", "")...)
	}
}

func (m *Model) outputTitle(sv *stepView, l layout) string {
	n := sv.out.len()
	t := fmt.Sprintf("OUTPUT · %s · %d lines", sv.info.ID, n)
	if n > l.outH {
		if m.outFollow {
			t += " · following"
		} else {
			top := clamp(m.outTop, 0, n-l.outH)
			t += fmt.Sprintf(" · %d-%d, end follows", top+1, min(n, top+l.outH))
		}
	}
	return m.titleRule(t, l.rightW, m.focus == paneOutput)
}

// outputRows draws only the visible window of the ring, so a step with
// 100,000 lines costs as much as one with 20.
func (m *Model) outputRows(sv *stepView, l layout) []string {
	r := sv.out
	n := r.len()
	if n == 0 {
		return []string{m.st.Faint.Render("(no output yet)")}
	}
	w := l.contentW()
	srcW := clamp(w/4, 6, 18)
	bottom := max(0, n-l.outH)
	top := bottom
	if !m.outFollow {
		top = clamp(m.outTop, 0, bottom)
	}
	rows := make([]string, 0, l.outH)
	for i := top; i < min(n, top+l.outH); i++ {
		ln := r.at(i)
		src := ln.src
		if ansi.StringWidth(src) > srcW {
			src = ansi.Truncate(src, srcW, "…")
		}
		text := ln.text
		if room := w - srcW - 1; ansi.StringWidth(text) > room {
			text = ansi.Truncate(text, room, "…")
		}
		rows = append(rows, m.st.Source.Render(pad(src, srcW))+" "+text)
	}
	if r.dropped > 0 && top == 0 {
		rows[0] = m.st.Faint.Render(fmt.Sprintf("(%d older lines are only in the journal)", r.dropped))
	}
	return rows
}

func (m *Model) flashLine() string { return noteLine(&m.st, m.flash, m.flashErr) }

// barLines is the area above the help line: what kremedy needs from the
// operator now.
func (m *Model) barLines(w, h int) []string {
	st := m.st
	var out []string
	add := func(ls ...string) { out = append(out, ls...) }
	cur := m.currentStep()
	switch m.phase {
	case phaseOffer:
		r := m.o.Resume
		add(st.Confirm.Render(" UNFINISHED RUN ") + " " + r.ID + " in this run directory")
		var parts []string
		if !r.Started.IsZero() {
			parts = append(parts, "started "+r.Started.UTC().Format("2006-01-02 15:04")+" UTC")
		}
		parts = append(parts, "done: "+list(r.Done), "skipped: "+list(r.Skipped))
		if r.Stopped != "" {
			parts = append(parts, "stopped at: "+r.Stopped)
		}
		add(wrap(strings.Join(parts, "; ")+".", w, "", "")...)
		add("Press r to resume it (done steps are re-checked, not re-done), or q to leave it untouched.")
	case phaseRunning:
		switch {
		case m.showHelp && m.ask != nil:
			add(fmt.Sprintf("Help is open: ? or esc returns to the confirmation of %s.", m.ask.info.ID))
		case m.ask != nil && m.diagnosisSeen:
			add(strings.Split(m.confirm.View(), "\n")...)
		case m.ask != nil:
			what := "Nothing has changed yet."
			if m.o.Resume != nil {
				what = "Nothing has changed in this session yet."
			}
			add(st.Confirm.Render(" "+strings.ToUpper(what)+" "),
				fmt.Sprintf("Read what kremedy sees above; space shows the first change: %s.", m.ask.info.ID))
		case cur == nil:
			add(m.spin.View() + fmt.Sprintf(" Connecting to %s; nothing changes until you confirm.", m.o.Cluster))
		default:
			add(m.activity(cur))
		}
		if m.flash != "" && !(m.ask != nil && m.diagnosisSeen) {
			add(m.flashLine())
		}
	case phaseStopping:
		id := "the run"
		if cur != nil {
			id = cur.info.ID
		}
		add(m.spin.View() + fmt.Sprintf(" Stopping %s cleanly; the journal records where it stopped.", id))
		if m.flash != "" {
			add(m.flashLine())
		}
	case phaseFinished:
		add(m.endBanner(w)...)
	}
	return out
}

func list(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

func (m *Model) activity(sv *stepView) string {
	switch sv.state {
	case steps.Planning:
		return m.spin.View() + fmt.Sprintf(" Planning %s: reading the cluster (read-only)…", sv.info.ID)
	case steps.Running:
		if sv.progress != "" {
			return m.spin.View() + fmt.Sprintf(" Running %s · %s · %s — q stops it cleanly.", sv.info.ID, m.duration(sv), sv.progress)
		}
		return m.spin.View() + fmt.Sprintf(" Running %s · %s — q stops it cleanly (resumable).", sv.info.ID, m.duration(sv))
	case steps.Confirming:
		if sv.progress != "" { // confirmed; a policy waits for another person
			return m.spin.View() + fmt.Sprintf(" %s — q stops it cleanly (resumable).", sv.progress)
		}
		return m.spin.View() + fmt.Sprintf(" Preparing the confirmation of %s…", sv.info.ID)
	default:
		return m.spin.View() + " Working…"
	}
}

func (m *Model) endBanner(w int) []string {
	st := m.st
	res := m.result
	report := ""
	if m.o.ReportPath != "" {
		report = " Report: " + m.o.ReportPath
	}
	if res == nil || res.err == nil {
		out := []string{st.State(steps.Done).Render("✓ FINISHED") + " — every step is done, a no-op, or skipped with a reason."}
		if report != "" {
			out = append(out, wrap(strings.TrimSpace(report), w, "", "  ")...)
		}
		return out
	}
	sv := m.failedStep()
	id := "the start"
	if sv != nil {
		id = sv.info.ID
	}
	var out []string
	switch {
	case errors.Is(res.err, steps.ErrAborted):
		out = append(out, st.Warn.Render("■ STOPPED AT "+id)+" — you said no; nothing of it was done.")
	case res.out.Interrupted != "" || errors.Is(res.err, context.Canceled):
		out = append(out, st.Warn.Render("■ INTERRUPTED AT "+id)+" — stopped cleanly; the journal has every action.")
	default:
		out = append(out, st.Fail.Render("✗ STOPPED AT "+id)+" — "+firstLine(res.err.Error()))
	}
	out = append(out, "r resumes here; after q, the resume command is printed in your shell.")
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func (m *Model) resumeCommand() string {
	return "kremedy resume " + shell.Quote(m.o.RunDir)
}

// shortHelp is the help line from the key map's enabled bindings, in
// order, dropping what does not fit (never cutting an item in half).
func (m *Model) shortHelp(w int) string {
	st := m.st.Help
	sep := st.ShortSeparator.Render(" • ")
	var b strings.Builder
	used := 0
	for _, kb := range m.keys.ShortHelp() {
		if !kb.Enabled() {
			continue
		}
		item := st.ShortKey.Render(kb.Help().Key) + " " + st.ShortDesc.Render(kb.Help().Desc)
		if used > 0 {
			item = sep + item
		}
		iw := ansi.StringWidth(item)
		if used+iw > w {
			if used+2 <= w {
				b.WriteString(st.Ellipsis.Render(" …"))
			}
			break
		}
		b.WriteString(item)
		used += iw
	}
	return b.String()
}

func (m *Model) helpLines(w int) []string {
	k := m.keys
	for _, b := range k.all() {
		b.SetEnabled(true)
	}
	k.Quit.SetHelp("q/ctrl+c", "stop (resumable); quit")
	h := m.help
	h.ShowAll = true
	h.FullSeparator = "   "
	var out []string
	out = append(out, wrap("Nothing changes without your confirmation. y/N steps need y; destructive steps need the "+m.o.Confirm.Noun+" name typed; Enter alone never confirms. Skipping asks for a reason, written to the journal.", w, "", "")...)
	out = append(out, wrap("q stops the running step cleanly: every action is journaled before and after, and `kremedy resume RUN_DIR` continues where it stopped.", w, "", "")...)
	out = append(out, "")
	out = append(out, strings.Split(h.FullHelpView(k.FullHelp()), "\n")...)
	out = append(out, "", m.st.Faint.Render("? or esc closes this screen."))
	return out
}
