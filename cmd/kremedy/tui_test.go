package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kremedy/kremedy/inventory/connect"
	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
)

// tuiScreen is a terminal's output, readable while the program writes it.
type tuiScreen struct {
	mu    sync.Mutex
	b     bytes.Buffer
	first time.Time
	wrote chan struct{}
}

func newTUIScreen() *tuiScreen { return &tuiScreen{wrote: make(chan struct{})} }

func (s *tuiScreen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p) > 0 && s.first.IsZero() {
		s.first = time.Now()
		close(s.wrote)
	}
	return s.b.Write(p)
}

func (s *tuiScreen) waitFor(t *testing.T, sub string) { t.Helper(); s.waitForSince(t, 0, sub) }

// mark is how much the screen has been written so far (waitForSince).
func (s *tuiScreen) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// waitForSince waits for sub in what was written to the screen after mark.
func (s *tuiScreen) waitForSince(t *testing.T, mark int, sub string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		ok := strings.Contains(ansi.Strip(string(s.b.Bytes()[mark:])), sub)
		s.mu.Unlock()
		if ok {
			return
		}
	}
	t.Fatalf("the screen never showed %q", sub)
}

// tuiRun is a new run of the built-in runbook in a fresh run directory.
func tuiRun(t *testing.T) (*steps.Session, string) {
	t.Helper()
	rb, err := runbooks.Get("topic-cleanup")
	if err != nil {
		t.Fatal(err)
	}
	b, err := rb.Bind(map[string]string{"topic": "orders"}, "lab")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	meta := steps.Meta{ID: "20260314T092653Z-topic-cleanup-orders", Runbook: rb.Name, Params: b.Params, Cluster: "lab", Lab: true,
		Inventory: "lab/inventory.yaml", Started: time.Now().UTC()}
	s, err := steps.Create(dir, b, meta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func tuiOpts(screen io.Writer, in io.Reader) []tea.ProgramOption {
	return []tea.ProgramOption{tea.WithInput(in), tea.WithOutput(screen), tea.WithWindowSize(120, 40)}
}

// Without a terminal the TUI refuses before touching anything.
func TestTUINeedsATerminal(t *testing.T) {
	s, _ := tuiRun(t)
	var w bytes.Buffer
	err := runTUI(context.Background(), &w, s, func(context.Context) (*connect.Clients, error) {
		t.Fatal("dialled without a terminal")
		return nil, nil
	}, false, nil)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), "--headless") {
		t.Fatalf("err = %v", err)
	}
}

// The first frame does not wait for the cluster: dialling happens behind
// the spinner. A signal (main's context) stops it and runTUI explains.
func TestTUIFirstFrameBeforeConnecting(t *testing.T) {
	s, dir := tuiRun(t)
	screen := newTUIScreen()
	ctx, cancel := context.WithCancel(context.Background())
	var w bytes.Buffer
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- runTUI(ctx, &w, s, func(ctx context.Context) (*connect.Clients, error) {
			<-ctx.Done() // ZooKeeper never answers
			return nil, ctx.Err()
		}, false, nil, tuiOpts(screen, nil)...)
	}()
	select {
	case <-screen.wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("no first frame while connecting")
	}
	t.Logf("runTUI to first frame: %v", screen.first.Sub(start))
	screen.waitFor(t, "Connecting to lab")
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("runTUI did not return after its context ended")
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitInterrupted || !strings.Contains(err.Error(), "resume: kremedy resume "+dir) {
		t.Fatalf("err = %v", err)
	}
}

// A cluster that cannot be reached ends on the final screen, says nothing
// was done, and keeps the run resumable.
func TestTUIConnectFailure(t *testing.T) {
	s, dir := tuiRun(t)
	in, keys := io.Pipe()
	defer keys.Close()
	screen := newTUIScreen()
	dialErr := failedErr(errors.New("zookeeper 127.0.0.1:1: connection refused"))
	// Each dial says it began and fails only when the test lets it: the
	// screen shows the connecting state, then the failure, each drawn anew.
	dialled, fail := make(chan struct{}, 10), make(chan struct{})
	var w bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runTUI(context.Background(), &w, s, func(context.Context) (*connect.Clients, error) {
			dialled <- struct{}{}
			<-fail
			return nil, dialErr
		}, false, nil, tuiOpts(screen, in)...)
	}()
	dialAndFail := func(which string) {
		t.Helper()
		mark := screen.mark()
		select {
		case <-dialled:
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s dial within 10s", which)
		}
		screen.waitForSince(t, mark, "Connecting to lab")
		mark = screen.mark()
		fail <- struct{}{}
		screen.waitForSince(t, mark, "kremedy could not start")
	}
	dialAndFail("first")
	io.WriteString(keys, "r") // retry: dials again
	dialAndFail("retry's")
	io.WriteString(keys, "q")
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("runTUI did not return within 10s of q (%d more dials)", len(dialled))
	}
	var ee *exitError
	if !errors.Is(err, dialErr) || !errors.As(err, &ee) || ee.code != exitFailed {
		t.Fatalf("err = %v", err)
	}
	if n := 2 + len(dialled); n != 2 {
		t.Fatalf("dialled %d times, want 2 (start, retry)", n)
	}
	if !strings.Contains(err.Error(), "resume: kremedy resume "+dir) || !strings.Contains(w.String(), "report: "+filepath.Join(dir, "report.md")) {
		t.Fatalf("err = %v\nprinted:\n%s", err, w.String())
	}
	if recs, err := journal.Read(s.JournalPath()); err != nil || len(recs) == 0 || recs[0].Type != journal.RunStart {
		t.Fatalf("journal: %v %v", recs, err)
	}
}

// An unfinished run is offered with what its journal says.
func TestTUIResumeInfo(t *testing.T) {
	s, dir := tuiRun(t)
	meta := s.Meta()
	s.Close()
	j, _, err := journal.Open(filepath.Join(dir, steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ typ, step string }{
		{journal.StepStart, "preflight"}, {journal.StepDone, "preflight"},
		{journal.StepStart, "detach-clients"}, {journal.StepSkipped, "detach-clients"},
		{journal.StepStart, "delete-znodes"}, {journal.StepFailed, "delete-znodes"}, {journal.Interrupted, "delete-znodes"},
	} {
		if _, err := j.Append(r.typ, r.step, map[string]string{}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	s, err = steps.Open(dir, rebind)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.Progress()
	if s.Meta().ID != meta.ID || strings.Join(got.Done, ",") != "preflight" || strings.Join(got.Skipped, ",") != "detach-clients" ||
		got.Stopped != "delete-znodes" || got.Records != 8 {
		t.Fatalf("progress %+v", got)
	}
}
