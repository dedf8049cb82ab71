package tui

import (
	"image/color"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/textinput"
	"charm.land/lipgloss/v2"

	"github.com/kremedy/kremedy/steps"
)

// Styles is every style the TUI draws with, built once (and again only if
// the terminal reports another background). Without colour, meaning is
// carried by words, icons, bold and reverse video, never by colour alone.
type Styles struct {
	NoColor bool

	Badges                BadgeStyles // by Mode: Badge
	Header, HeaderFaint   lipgloss.Style
	Rule                  lipgloss.Style
	PaneTitle, PaneActive lipgloss.Style
	Section               lipgloss.Style
	Title                 lipgloss.Style
	Faint                 lipgloss.Style
	Selected              lipgloss.Style
	States                StateStyles // by steps.State: see State
	OK, Fail, Warn        lipgloss.Style
	Action, Note          lipgloss.Style
	Source                lipgloss.Style
	Danger, Confirm       lipgloss.Style // the confirmation bar's banner
	ErrMsg, InfoMsg       lipgloss.Style
	Command               lipgloss.Style
	Help                  help.Styles
	Input                 textinput.Styles
}

// StateStyles styles a step by its state; Styles.State picks one.
type StateStyles struct {
	Pending, Planning, Confirming, Running, Done, Failed, Skipped lipgloss.Style
	// Unknown is a state this TUI was not built with (a newer engine's):
	// drawn plainly, never an index out of range.
	Unknown lipgloss.Style
}

// State is the style of a step in state s.
func (st *Styles) State(s steps.State) lipgloss.Style {
	switch s {
	case steps.Pending:
		return st.States.Pending
	case steps.Planning:
		return st.States.Planning
	case steps.Confirming:
		return st.States.Confirming
	case steps.Running:
		return st.States.Running
	case steps.Done:
		return st.States.Done
	case steps.Failed:
		return st.States.Failed
	case steps.Skipped:
		return st.States.Skipped
	default:
		return st.States.Unknown
	}
}

// stateIcon carries a state without colour.
func stateIcon(s steps.State) string {
	switch s {
	case steps.Pending:
		return "·"
	case steps.Planning:
		return "…"
	case steps.Confirming:
		return "?"
	case steps.Running:
		return "▶"
	case steps.Done:
		return "✓"
	case steps.Failed:
		return "✗"
	case steps.Skipped:
		return "↷"
	default:
		return "○"
	}
}

// stateLabel is the state as the step list says it (short enough for 80
// columns); the detail pane uses steps.State.String, which is also what an
// unknown state is called.
func stateLabel(s steps.State) string {
	switch s {
	case steps.Pending:
		return "pending"
	case steps.Planning:
		return "planning"
	case steps.Confirming:
		return "waiting for you"
	case steps.Running:
		return "running"
	case steps.Done:
		return "done"
	case steps.Failed:
		return "failed"
	case steps.Skipped:
		return "skipped"
	default:
		return s.String()
	}
}

// NewStyles builds the styles for a dark or light background.
func NewStyles(noColor, isDark bool) Styles {
	ld := lipgloss.LightDark(isDark)
	c := func(light, dark string) color.Color { return ld(lipgloss.Color(light), lipgloss.Color(dark)) }
	n := lipgloss.NewStyle
	s := Styles{NoColor: noColor}
	if noColor {
		s.Badges = BadgeStyles{Live: n().Bold(true).Reverse(true), Lab: n().Reverse(true), DryRun: n().Reverse(true)}
		s.Header = n().Bold(true)
		s.HeaderFaint = n()
		s.Rule = n()
		s.PaneTitle = n()
		s.PaneActive = n().Bold(true).Reverse(true)
		s.Section = n().Bold(true)
		s.Title = n().Bold(true)
		s.Faint = n()
		s.Selected = n().Bold(true)
		s.States = StateStyles{Pending: n(), Planning: n(), Confirming: n().Bold(true), Running: n(), Done: n(),
			Failed: n().Bold(true), Skipped: n(), Unknown: n()}
		s.OK, s.Fail, s.Warn = n(), n().Bold(true), n().Bold(true)
		s.Action, s.Note = n(), n()
		s.Source = n()
		s.Danger = n().Bold(true).Reverse(true)
		s.Confirm = n().Bold(true).Reverse(true)
		s.ErrMsg = n().Bold(true)
		s.InfoMsg = n()
		s.Command = n().Bold(true)
		s.Help = help.Styles{ShortKey: n().Bold(true), ShortDesc: n(), ShortSeparator: n(), Ellipsis: n(),
			FullKey: n().Bold(true), FullDesc: n(), FullSeparator: n()}
		s.Input = textinput.DefaultStyles(isDark)
		s.Input.Focused = textinput.StyleState{Text: n(), Placeholder: n(), Suggestion: n(), Prompt: n().Bold(true)}
		s.Input.Blurred = s.Input.Focused
		s.Input.Cursor.Color = nil
		s.Input.Cursor.Blink = false
		return s
	}
	red, green, yellow, blue := c("#af0000", "#ff6b6b"), c("#006f00", "#6bd66b"), c("#875f00", "#ffd75f"), c("#005fd7", "#87afff")
	faint := c("#6c6c6c", "#9e9e9e")
	white, black := lipgloss.Color("#ffffff"), lipgloss.Color("#000000")
	s.Badges = BadgeStyles{
		Live:   n().Bold(true).Foreground(white).Background(lipgloss.Color("#c00000")),
		Lab:    n().Bold(true).Foreground(black).Background(lipgloss.Color("#5fd75f")),
		DryRun: n().Bold(true).Foreground(black).Background(lipgloss.Color("#ffd75f")),
	}
	s.Header = n().Bold(true)
	s.HeaderFaint = n().Foreground(faint)
	s.Rule = n().Foreground(faint)
	s.PaneTitle = n().Bold(true).Foreground(faint)
	s.PaneActive = n().Bold(true).Foreground(blue).Reverse(true)
	s.Section = n().Bold(true).Foreground(blue)
	s.Title = n().Bold(true)
	s.Faint = n().Foreground(faint)
	s.Selected = n().Bold(true)
	s.States = StateStyles{
		Pending: n().Foreground(faint), Planning: n().Foreground(blue), Confirming: n().Bold(true).Foreground(yellow),
		Running: n().Bold(true).Foreground(blue), Done: n().Foreground(green), Failed: n().Bold(true).Foreground(red),
		Skipped: n().Foreground(faint), Unknown: n(),
	}
	s.OK, s.Fail, s.Warn = n().Foreground(green), n().Bold(true).Foreground(red), n().Foreground(yellow)
	s.Action, s.Note = n(), n().Foreground(yellow)
	s.Source = n().Foreground(faint)
	s.Danger = n().Bold(true).Foreground(white).Background(lipgloss.Color("#c00000"))
	s.Confirm = n().Bold(true).Foreground(black).Background(lipgloss.Color("#ffd75f"))
	s.ErrMsg = n().Bold(true).Foreground(red)
	s.InfoMsg = n().Foreground(blue)
	s.Command = n().Bold(true)
	s.Help = help.DefaultStyles(isDark)
	s.Help.ShortKey = s.Help.ShortKey.Bold(true).Foreground(c("#303030", "#d0d0d0"))
	s.Help.FullKey = s.Help.ShortKey
	s.Help.ShortDesc = s.Help.ShortDesc.Foreground(faint)
	s.Help.FullDesc = s.Help.ShortDesc
	s.Input = textinput.DefaultStyles(isDark)
	s.Input.Focused.Prompt = n().Bold(true)
	s.Input.Cursor.Blink = false
	return s
}

// BadgeStyles are the header badge's styles, one per Mode.
type BadgeStyles struct{ Live, Lab, DryRun lipgloss.Style }

// Badge is mode's badge style; an unknown mode gets the live one (the
// loudest: when in doubt, the TUI says it acts on a real cluster).
func (s *Styles) Badge(m Mode) lipgloss.Style {
	switch m {
	case Lab:
		return s.Badges.Lab
	case DryRun:
		return s.Badges.DryRun
	}
	return s.Badges.Live
}
