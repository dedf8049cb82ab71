package tui

import (
	"context"
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/kremedy/kremedy/steps"
)

// scene100k is the running screen with 100,000 lines in the output pane.
func scene100k(b *testing.B, w, h int) *scene {
	s := newScene(b, w, h, false, nil)
	s.confirmYes().keys("y")
	s.send(s.state("detach-clients", steps.Running, ""))
	const n = 100_000
	const batch = 10_000
	for i := 0; i < n; i += batch {
		evs := make([]steps.Event, 0, batch)
		for j := i; j < i+batch; j++ {
			evs = append(evs, steps.Event{Time: s.c.t, Step: "detach-clients", Kind: steps.EvOutput,
				Host: "broker 2 (kafka-2.prod-eu-1.internal)", Text: fmt.Sprintf("line %06d: moved /data/k1/orders-%d to quarantine", j, j%12)})
		}
		s.send(evs...)
	}
	if got := s.m.steps[1].out.len(); got != n {
		b.Fatalf("output holds %d lines", got)
	}
	return s
}

// View with 100,000 lines in the output pane: only the visible window is
// drawn. Aim: under 16 ms (one frame at 60 Hz).
func BenchmarkViewOutput100k(b *testing.B) {
	for _, size := range [][2]int{{80, 24}, {120, 40}, {250, 80}} {
		for _, follow := range []bool{true, false} {
			name := fmt.Sprintf("%dx%d/following", size[0], size[1])
			if !follow {
				name = fmt.Sprintf("%dx%d/scrolled-to-middle", size[0], size[1])
			}
			b.Run(name, func(b *testing.B) {
				s := scene100k(b, size[0], size[1])
				s.m.focus = paneOutput
				if !follow {
					s.m.outFollow, s.m.outTop = false, 50_000
				}
				b.ReportAllocs()
				for b.Loop() {
					_ = s.m.View()
				}
			})
		}
	}
}

// Folding 100,000 output events into the model (one engine message).
func BenchmarkUpdateOutput100k(b *testing.B) {
	evs := make([]steps.Event, 100_000)
	for i := range evs {
		evs[i] = steps.Event{Step: "detach-clients", Kind: steps.EvOutput, Host: "broker 2", Text: fmt.Sprintf("line %06d", i)}
	}
	b.ReportAllocs()
	for b.Loop() {
		s := newScene(b, 120, 40, false, nil)
		s.m.Update(engineMsg{events: evs})
	}
}

// Time from tea.NewProgram(...).Run to the first byte of the first frame,
// with the engine's Start blocked (connections happen behind the spinner).
// Aim: under 100 ms.
func BenchmarkTUIFirstFrame(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		o := Options{Steps: testInfos()[:1], Cluster: "lab", Confirm: testRunbook().Confirm, RunDir: "/tmp/x",
			Start: func(ctx context.Context, _ steps.Approver, _ steps.Reporter) (steps.Outcome, error) {
				<-ctx.Done()
				return steps.Outcome{Err: ctx.Err()}, ctx.Err()
			}}
		screen := newScreenBuf()
		o.ProgramOptions = []tea.ProgramOption{tea.WithInput(nil), tea.WithOutput(screen), tea.WithWindowSize(80, 24)}
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		done := make(chan struct{})
		go func() { _, _ = Run(ctx, o); close(done) }()
		<-screen.wrote
		total += screen.first.Sub(start)
		cancel()
		<-done
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms-to-first-frame")
}
