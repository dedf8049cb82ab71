package tui

import (
	"context"
	"errors"
	"fmt"
	"os"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/kremedy/kremedy/steps"
)

// Run shows the TUI until the operator leaves, and returns how the last
// engine run ended (ErrNotStarted if the operator left before starting
// it). It never returns while the engine still runs: if the program ends
// any other way, the engine's context is cancelled and Run waits for it to
// journal where it stopped.
func Run(ctx context.Context, o Options) (steps.Outcome, error) {
	if o.Start == nil {
		return steps.Outcome{}, errors.New("tui: Options.Start is nil")
	}
	if len(o.Steps) == 0 {
		return steps.Outcome{}, errors.New("tui: the runbook has no steps")
	}
	noColor := o.NoColor || os.Getenv("NO_COLOR") != ""
	m := newModel(ctx, o, NewStyles(noColor, true))
	// Signals are ours: main's context turns SIGINT/SIGTERM into a clean
	// stop of the running step instead of an abrupt exit.
	opts := append([]tea.ProgramOption{tea.WithoutSignalHandler()}, o.ProgramOptions...)
	if noColor {
		// colorprofile only honours bool-like NO_COLOR values; any
		// non-empty value means no colour (no-color.org). Last, so it wins.
		opts = append(opts, tea.WithColorProfile(colorprofile.ASCII))
	}
	_, perr := tea.NewProgram(m, opts...).Run()
	m.b.close()
	// The event loop has ended: m is ours again.
	if m.engineRunning {
		m.cancel()
		<-m.finished
		if res := m.b.lastResult(); res != nil {
			m.result = res
		}
	}
	if m.result == nil {
		if perr != nil {
			return steps.Outcome{}, fmt.Errorf("terminal UI: %w; nothing was done", perr)
		}
		return steps.Outcome{}, ErrNotStarted
	}
	if perr != nil && m.result.err == nil {
		return m.result.out, fmt.Errorf("terminal UI: %w", perr)
	}
	return m.result.out, m.result.err
}
