package tui

import (
	"errors"
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/kremedy/kremedy/steps"
)

// summaryLines is the final screen: where the cluster is, the timeline,
// what changed, where the backups and the report are, what to do next.
func (m *Model) summaryLines(w int) []string {
	st := m.st
	var out []string
	add := func(ls ...string) { out = append(out, ls...) }
	section := func(s string) { add("", st.Section.Render(s)) }
	res := m.result
	if res == nil {
		return nil
	}

	add(st.Section.Render("WHERE THE CLUSTER IS"))
	add(m.whereLines(w)...)
	section("TIMELINE (UTC)")
	add(m.timelineLines()...)
	section("WHAT CHANGED")
	add(m.changedLines(w)...)
	section("BACKUPS AND REPORT")
	add(m.fileLines(w)...)
	section("NEXT")
	for _, n := range m.next() {
		add(wrap(n, w, "- ", "  ")...)
	}
	return out
}

// whereLines is the summary's WHERE THE CLUSTER IS: the cluster's state
// and, after a failure, how to resume.
func (m *Model) whereLines(w int) []string {
	st := m.st
	out := wrap(m.clusterState(), w, "", "")
	if m.result.err != nil {
		out = append(out, "")
		out = append(out, wrap("Resume (done steps are re-checked, not re-done; the stopped step is planned again from the cluster as it is then):", w, "", "")...)
		out = append(out, styled(st.Command, wrap(m.resumeCommand(), w, "  ", "  "))...)
	}
	return out
}

// timelineLines is the summary's TIMELINE: one row per step, when it
// started, its state and duration, and a note on how it ended.
func (m *Model) timelineLines() []string {
	st := m.st
	var out []string
	idW := 0
	for _, sv := range m.steps {
		idW = max(idW, len(sv.info.ID))
	}
	for _, sv := range m.steps {
		at := "--:--:--"
		if !sv.started.IsZero() {
			at = sv.started.UTC().Format("15:04:05")
		}
		word := m.stateWord(sv, false)
		row := fmt.Sprintf("%s %s %-*s %-15s %7s", at, plainIcon(sv), idW, sv.info.ID, word, m.duration(sv))
		row = st.State(sv.state).Render(row)
		if extra := m.timelineNote(sv); extra != "" {
			row += "  " + st.Faint.Render(extra)
		}
		out = append(out, row)
	}
	return out
}

// changedLines is the summary's WHAT CHANGED: every changing action of an
// applied step, every step stopped part-way, or that nothing changed; and
// where an earlier attempt's changes are.
func (m *Model) changedLines(w int) []string {
	st := m.st
	var out []string
	add := func(ls ...string) { out = append(out, ls...) }
	changed := 0
	for _, sv := range m.steps {
		switch {
		case sv.applied && sv.plan != nil:
			for _, a := range sv.plan.Actions {
				if !a.Op.Changes() {
					continue
				}
				add(wrap(a.String(), w, "→ ", "  ")...)
				changed++
			}
		case sv.ran && sv.state != steps.Done && sv.plan != nil:
			last := "no action had started"
			if sv.lastAction != "" {
				last = "the last action it started: " + strings.TrimPrefix(sv.lastAction, "→ ")
			}
			add(styled(st.Warn, wrap(fmt.Sprintf("%s stopped part-way (%s); the journal records each action before and after.", sv.info.ID, last), w, "! ", "  "))...)
			changed++
		}
	}
	if changed == 0 {
		add("Nothing was changed in this session.")
	}
	if m.o.Resume != nil && len(m.o.Resume.Done) > 0 {
		add(st.Faint.Render("Changes of the earlier attempt (" + strings.Join(m.o.Resume.Done, ", ") + ") are in the report."))
	}
	return out
}

// fileLines is the summary's BACKUPS AND REPORT: each backup and the
// report with its path, aligned when the width allows, wrapped below its
// name otherwise.
func (m *Model) fileLines(w int) []string {
	st := m.st
	var out []string
	add := func(ls ...string) { out = append(out, ls...) }
	var files []Artifact
	files = append(files, m.result.artifacts...)
	if m.o.ReportPath != "" {
		files = append(files, Artifact{What: "report", Path: m.o.ReportPath})
	}
	if len(files) == 0 {
		add("No backup was needed.")
	}
	whatW := 0
	for _, f := range files {
		whatW = max(whatW, ansi.StringWidth(f.What))
	}
	whatW = min(whatW, w/2)
	for _, f := range files {
		if whatW+2+ansi.StringWidth(f.Path) <= w {
			add(pad(f.What, whatW) + "  " + st.Command.Render(f.Path))
			continue
		}
		add(f.What + ":")
		add(styled(st.Command, wrap(f.Path, w, "  ", "  "))...)
	}
	return out
}

func (m *Model) timelineNote(sv *stepView) string {
	switch {
	case errors.Is(sv.err, steps.ErrAborted):
		return "you said no"
	case stopped(sv.err):
		return "stopped by the operator"
	case sv.err != nil:
		return firstLine(sv.err.Error())
	case sv.state == steps.Skipped || sv.note != "" && !strings.HasPrefix(sv.note, "done in "):
		return sv.note
	}
	return ""
}

func (m *Model) clusterState() string {
	res := m.result
	done := func() string {
		var d, not []string
		for _, sv := range m.steps {
			if sv.state == steps.Done || sv.state == steps.Skipped {
				d = append(d, sv.info.ID)
			} else {
				not = append(not, sv.info.ID)
			}
		}
		return fmt.Sprintf("Done or skipped: %s. Not done: %s.", list(d), list(not))
	}
	if res.err == nil {
		return "The run finished: every step is done, had nothing to do, or was skipped with a reason."
	}
	if m.current < 0 {
		msg := fmt.Sprintf("kremedy could not start: %v.", res.err)
		if !errors.Is(res.err, steps.ErrNothingDone) {
			msg += " Nothing was done on the cluster."
		}
		return msg + " Fix the cause, then press r to try again."
	}
	sv := m.failedStep()
	if sv == nil {
		return fmt.Sprintf("The run stopped: %v. %s", res.err, done())
	}
	var what string
	switch {
	case errors.Is(res.err, steps.ErrAborted):
		what = fmt.Sprintf("You said no at %s: nothing of that step was done.", sv.info.ID)
	case sv.ran:
		last := "before its first action"
		if sv.lastAction != "" {
			last = "the last action it started being: " + strings.TrimPrefix(sv.lastAction, "→ ")
		}
		verb := "was cancelled while it ran"
		if res.out.Failed != "" {
			verb = "failed while it ran"
		}
		what = fmt.Sprintf("%s %s, %s. The cluster is as that left it: every action is journaled before and after, and the report lists exactly what completed.", sv.info.ID, verb, last)
	case res.out.Failed != "":
		what = fmt.Sprintf("%s failed before changing anything.", sv.info.ID)
	default:
		what = fmt.Sprintf("%s was stopped before it changed anything.", sv.info.ID)
	}
	return what + " " + done()
}

func (m *Model) next() []string {
	if m.result != nil && m.result.err != nil {
		return []string{
			"Fix the cause shown above (the step pane has the details and the output), then press r to retry here, or run " + m.resumeCommand() + " later.",
			"Read the report for the timeline and how to undo what was done.",
		}
	}
	if len(m.o.Next) == 0 {
		return []string{"Nothing more to do."}
	}
	return m.o.Next
}
