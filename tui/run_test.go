package tui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/kremedy/kremedy/steps"
)

// screenBuf is the program's output, safe to read while it is written.
type screenBuf struct {
	mu    sync.Mutex
	b     bytes.Buffer
	first time.Time // first non-empty write
	wrote chan struct{}
}

func newScreenBuf() *screenBuf { return &screenBuf{wrote: make(chan struct{})} }

func (s *screenBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p) > 0 && s.first.IsZero() {
		s.first = time.Now()
		close(s.wrote)
	}
	return s.b.Write(p)
}

func (s *screenBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *screenBuf) waitFor(t *testing.T, sub string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(ansi.Strip(s.String()), sub) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the screen never showed %q", sub)
}

func programOpts(out io.Writer, in io.Reader) []tea.ProgramOption {
	return []tea.ProgramOption{tea.WithInput(in), tea.WithOutput(out), tea.WithWindowSize(120, 40),
		tea.WithEnvironment([]string{"TERM=xterm-256color"})}
}

// The whole program: Run starts the engine behind the first frame, keys
// arrive through the terminal input, and Run returns the engine's outcome.
func TestTUIRunProgram(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	f := newFixture(t, "preflight", "detach-clients")
	f.kinds["detach-clients"].wantApply = true
	in, keys := io.Pipe()
	defer keys.Close()
	screen := newScreenBuf()
	o := f.options()
	o.ProgramOptions = programOpts(screen, in)
	type result struct {
		out steps.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := Run(context.Background(), o)
		done <- result{out, err}
	}()
	screen.waitFor(t, "NOTHING HAS CHANGED YET")
	io.WriteString(keys, " ")
	screen.waitFor(t, "Apply this plan?")
	io.WriteString(keys, "\r") // Enter: never confirms
	screen.waitFor(t, "Enter alone never confirms")
	io.WriteString(keys, "y")
	screen.waitFor(t, "FINISHED")
	io.WriteString(keys, "q")
	select {
	case r := <-done:
		if r.err != nil || !slices.Contains(r.out.Done, "detach-clients") {
			t.Fatalf("Run = %+v, %v", r.out, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after q")
	}
	if got := decisions(f.rec.answers()); got != "approve" {
		t.Fatalf("answers = %s", got)
	}
}

// Leaving an offered resume starts nothing.
func TestTUIRunDeclinedResume(t *testing.T) {
	f := newFixture(t)
	in, keys := io.Pipe()
	defer keys.Close()
	screen := newScreenBuf()
	o := f.options()
	o.Resume = &Resume{Ask: true, ID: "test-run", Done: []string{"preflight"}}
	o.ProgramOptions = programOpts(screen, in)
	done := make(chan error, 1)
	go func() { _, err := Run(context.Background(), o); done <- err }()
	screen.waitFor(t, "UNFINISHED RUN")
	io.WriteString(keys, "q")
	if err := <-done; !errors.Is(err, ErrNotStarted) || f.starts.Load() != 0 {
		t.Fatalf("err %v, starts %d", err, f.starts.Load())
	}
}

// NO_COLOR with any non-empty value drops every colour, even when the
// terminal would take 24-bit colour.
func TestTUINoColor(t *testing.T) {
	for _, tc := range []struct {
		env    string
		colour bool
	}{{"", true}, {"yes", false}, {"1", false}} {
		t.Run("NO_COLOR="+tc.env, func(t *testing.T) {
			t.Setenv("NO_COLOR", tc.env)
			f := newFixture(t, "preflight", "detach-clients")
			in, keys := io.Pipe()
			defer keys.Close()
			screen := newScreenBuf()
			o := f.options()
			o.ProgramOptions = append(programOpts(screen, in), tea.WithColorProfile(colorprofile.TrueColor))
			done := make(chan error, 1)
			go func() { _, err := Run(context.Background(), o); done <- err }()
			screen.waitFor(t, "NOTHING HAS CHANGED YET")
			io.WriteString(keys, "\x03") // ctrl+c: stop
			screen.waitFor(t, "INTERRUPTED AT detach-clients")
			io.WriteString(keys, "q")
			<-done
			out := screen.String()
			if has := strings.Contains(out, "38;2;") || strings.Contains(out, "48;2;"); has != tc.colour {
				t.Fatalf("colour in the output: %v, want %v", has, tc.colour)
			}
		})
	}
}

// The first frame comes before any connection: Start blocks here like a
// slow ZooKeeper, and the frame must not wait for it.
func TestTUIFirstFrame(t *testing.T) {
	f := newFixture(t, "preflight")
	connected := make(chan struct{})
	o := f.options()
	o.Start = func(ctx context.Context, a steps.Approver, r steps.Reporter) (steps.Outcome, error) {
		<-ctx.Done() // a cluster that never answers
		close(connected)
		return steps.Outcome{Interrupted: "preflight", Err: ctx.Err()}, ctx.Err()
	}
	screen := newScreenBuf()
	o.ProgramOptions = programOpts(screen, nil)
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	done := make(chan error, 1)
	go func() { _, err := Run(ctx, o); done <- err }()
	select {
	case <-screen.wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("no frame")
	}
	t.Logf("time to first frame: %v", screen.first.Sub(start))
	screen.waitFor(t, "Connecting to lab")
	if d := screen.first.Sub(start); d > time.Second {
		t.Errorf("first frame after %v", d)
	}
	cancel() // SIGINT/SIGTERM: stop the step, then leave by itself
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	<-connected
}
