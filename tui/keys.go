package tui

import "charm.land/bubbles/v2/key"

// KeyMap is every key the TUI answers. The model enables exactly the
// bindings that make sense at the moment, so the same values drive key
// handling, the help line and the ? screen.
type KeyMap struct {
	// Confirmation.
	Approve  key.Binding // y: apply a y/N plan; on a typed step, start typing
	Decline  key.Binding // n: do not apply; stop the run here (resumable)
	Skip     key.Binding // s: skip this step, with a reason
	Submit   key.Binding // enter: submit what was typed (never confirms alone)
	Back     key.Binding // esc: leave the text field
	Continue key.Binding // space: from the diagnosis to the first change

	// After a stop.
	Recheck key.Binding // c: re-check a failed gate
	Retry   key.Binding // r: retry the failed step, from the journal
	Resume  key.Binding // r: resume the unfinished run found in the run dir

	// Moving around.
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	NextPane, PrevPane                      key.Binding

	Help, Quit key.Binding
}

// DefaultKeyMap is kremedy's key map.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Approve:  key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "apply")),
		Decline:  key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "no, stop here")),
		Skip:     key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "skip…")),
		Submit:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "submit")),
		Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Continue: key.NewBinding(key.WithKeys("space"), key.WithHelp("space", "first change")),
		Recheck:  key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "re-check gate")),
		Retry:    key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "retry")),
		Resume:   key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "resume the run")),
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+d"), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("home/g", "top")),
		Bottom:   key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("end/G", "bottom, follow")),
		NextPane: key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "pane")),
		PrevPane: key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "prev pane")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}

// ShortHelp is the help line: the enabled decisions first.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Approve, k.Decline, k.Skip, k.Submit, k.Back, k.Continue, k.Resume, k.Retry, k.Recheck,
		k.Quit, k.Help, k.NextPane}
}

// FullHelp is the ? screen.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Approve, k.Decline, k.Skip, k.Submit, k.Back, k.Continue},
		{k.Resume, k.Retry, k.Recheck, k.Quit, k.Help},
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.NextPane, k.PrevPane},
	}
}

// all returns pointers to every binding, for enabling in bulk.
func (k *KeyMap) all() []*key.Binding {
	return []*key.Binding{&k.Approve, &k.Decline, &k.Skip, &k.Submit, &k.Back, &k.Continue, &k.Recheck, &k.Retry,
		&k.Resume, &k.Up, &k.Down, &k.PageUp, &k.PageDown, &k.Top, &k.Bottom, &k.NextPane, &k.PrevPane, &k.Help, &k.Quit}
}
