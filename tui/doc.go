// Package tui is kremedy's terminal app: a bubbletea v2 program that shows
// the engine's events and answers its confirmations, one more Reporter and
// Approver beside the headless printer. Events reach the model through a
// queue read by a re-armed tea.Cmd; the engine's Approve blocks its own
// goroutine until the operator answers (or its context ends). The first
// screen is the diagnosis (what preflight sees, before anything changes);
// then every step shows its plan, checks, rollback note and live output;
// y/N steps need y, destructive steps need the runbook's confirmation word
// (the topic, the cluster's name) typed, and Enter
// alone never confirms. Quitting cancels the running step, waits for the
// engine to journal the stop, then shows the final screen with the resume
// command. Run is the entry point; the root Model is the only tea.Model
// and the only one returning a tea.View. It keeps the panes, scrolling and
// help; its child confirm (confirm.go: Update, View() string, SetSize) owns
// answering a question, and the root turns the child's answer into the
// Approval, with who answered and the plan's digest.
package tui
