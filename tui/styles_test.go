package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/kremedy/kremedy/steps"
)

// Every state has an icon, a label and a style, and so has a state this
// TUI does not know (an eighth, from a newer engine): it is drawn plainly
// under its number, never a panic.
func TestStateStylesCoverEveryState(t *testing.T) {
	known := []steps.State{steps.Pending, steps.Planning, steps.Confirming, steps.Running, steps.Done, steps.Failed, steps.Skipped}
	unknown := []steps.State{steps.Skipped + 1, steps.State(99), steps.State(-1)}
	icons := map[string]steps.State{}
	for _, s := range known {
		if prev, ok := icons[stateIcon(s)]; ok {
			t.Errorf("%v and %v share the icon %q: without colour they look alike", prev, s, stateIcon(s))
		}
		icons[stateIcon(s)] = s
	}
	for _, s := range unknown {
		if _, ok := icons[stateIcon(s)]; ok {
			t.Errorf("unknown %v looks like a known state: %q", s, stateIcon(s))
		}
		if got, want := stateLabel(s), s.String(); got != want {
			t.Errorf("stateLabel(%d) = %q, want %q", int(s), got, want)
		}
	}
	for _, st := range []Styles{NewStyles(true, true), NewStyles(false, true), NewStyles(false, false)} {
		for _, s := range append(known, unknown...) {
			if stateIcon(s) == "" || stateLabel(s) == "" {
				t.Errorf("%v: icon %q, label %q", s, stateIcon(s), stateLabel(s))
			}
			if got := ansi.Strip(st.State(s).Render("x")); got != "x" {
				t.Errorf("%v (no colour %v): renders %q", s, st.NoColor, got)
			}
		}
	}
}

// A step in an unknown state shows in the step list, the step pane and the
// final timeline.
func TestUnknownStateRenders(t *testing.T) {
	const odd = steps.State(99)
	for _, color := range []bool{false, true} {
		s := newScene(t, 120, 40, !color, nil)
		s.send(s.state("detach-clients", odd, "a state of a newer engine"))
		s.m.selectStep(1)
		if c := s.screen(); !strings.Contains(c, "○ detach-clients") || !strings.Contains(c, "State(99)") {
			t.Fatalf("colour %v: the unknown state is not on screen:\n%s", color, c)
		}
		s.finish(&engineResult{out: steps.Outcome{Done: []string{"preflight"}}})
		if c := s.screen(); !strings.Contains(c, "○ detach-clients State(99)") {
			t.Fatalf("colour %v: the timeline lacks the unknown state:\n%s", color, c)
		}
	}
}
