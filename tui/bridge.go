package tui

import (
	"context"
	"fmt"
	"sync"

	tea "charm.land/bubbletea/v2"

	"github.com/kremedy/kremedy/steps"
)

// ask is one confirmation the engine is blocked on.
type ask struct {
	info steps.Info
	plan *steps.Plan
	// digest is the plan's as it was when it reached the UI: the approval
	// carries it, so the engine applies only what the operator was shown.
	digest string
	reply  chan steps.Approval // capacity 1: answering never blocks
}

// engineResult is how one engine run ended.
type engineResult struct {
	out       steps.Outcome
	err       error
	artifacts []Artifact
}

// engineMsg carries, in order, what the engine did since the last one:
// its events, then the confirmation it now waits for, then its end.
type engineMsg struct {
	events []steps.Event
	ask    *ask
	done   *engineResult
}

// bridge is the TUI's Reporter and Approver. The engine's goroutine queues
// events (never blocking) and blocks in Approve; the model reads the queue
// through wait, a tea.Cmd it re-arms after every message.
type bridge struct {
	by string

	mu     sync.Mutex
	events []steps.Event
	ask    *ask
	done   *engineResult
	last   *engineResult // the latest result, never taken by wait

	wake chan struct{} // capacity 1
	stop chan struct{} // closed when the program has ended
	once sync.Once
}

func newBridge(by string) *bridge {
	return &bridge{by: by, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (b *bridge) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Report implements steps.Reporter.
func (b *bridge) Report(e steps.Event) {
	b.mu.Lock()
	b.events = append(b.events, e)
	b.mu.Unlock()
	b.signal()
}

// Approve implements steps.Approver: it blocks the engine until the
// operator answers or ctx ends (then it answers Abort).
func (b *bridge) Approve(ctx context.Context, info steps.Info, plan *steps.Plan) (steps.Approval, error) {
	a := &ask{info: info, plan: plan, digest: plan.Digest(), reply: make(chan steps.Approval, 1)}
	b.mu.Lock()
	b.ask = a
	b.mu.Unlock()
	b.signal()
	select {
	case ap := <-a.reply:
		return ap, nil
	case <-ctx.Done():
		b.mu.Lock()
		if b.ask == a {
			b.ask = nil
		}
		b.mu.Unlock()
		return steps.Approval{Decision: steps.Abort, By: b.by},
			fmt.Errorf("stopped while waiting for the operator's confirmation of %s: %w", info.ID, ctx.Err())
	}
}

// run calls start and queues its end; a panic in the engine is an error,
// not a dead terminal.
func (b *bridge) run(ctx context.Context, start StartFunc, artifacts func() []Artifact, finished chan<- struct{}) {
	res := &engineResult{}
	defer func() {
		if p := recover(); p != nil {
			res.err = fmt.Errorf("internal error in the engine: %v (the journal keeps every action that completed)", p)
			res.out.Err = res.err
		}
		if artifacts != nil {
			res.artifacts = artifacts()
		}
		b.mu.Lock()
		b.done, b.last = res, res
		b.mu.Unlock()
		b.signal()
		close(finished)
	}()
	res.out, res.err = start(ctx, b, b)
}

// wait is the re-armed tea.Cmd: it returns the next batch of engine news,
// or nil once the program has ended.
func (b *bridge) wait() tea.Msg {
	for {
		select {
		case <-b.wake:
		case <-b.stop:
			return nil
		}
		b.mu.Lock()
		m := engineMsg{events: b.events, ask: b.ask, done: b.done}
		b.events, b.ask, b.done = nil, nil, nil
		b.mu.Unlock()
		if len(m.events) > 0 || m.ask != nil || m.done != nil {
			return m
		}
	}
}

func (b *bridge) lastResult() *engineResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

func (b *bridge) close() { b.once.Do(func() { close(b.stop) }) }
