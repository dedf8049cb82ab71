package steps_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/ports"
)

// TestReadMetaIsTheRunStartRecord: ReadMeta returns what Create journaled,
// while the run is open (it takes no lock), and refuses a directory that
// holds no run.
func TestReadMetaIsTheRunStartRecord(t *testing.T) {
	dir := t.TempDir()
	rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "word", Noun: "thing"}}
	want := steps.NewMeta(rb, "/etc/kremedy/prod.yaml", "prod", false, "v1", time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	s, err := steps.Create(dir, rb, want)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := steps.ReadMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.Inventory != want.Inventory || got.Cluster != want.Cluster || !got.Started.Equal(want.Started) {
		t.Errorf("ReadMeta = %+v, want %+v", got, want)
	}

	if _, err := steps.ReadMeta(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a directory without a journal: %v", err)
	}
	other := t.TempDir()
	j, err := journal.Create(filepath.Join(other, steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(journal.StepStart, "s", nil); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if _, err := steps.ReadMeta(other); !errors.Is(err, steps.ErrNotARun) {
		t.Errorf("a journal that does not start with run-start: %v", err)
	}
}

// TestResumeRefusesAnEditedJournal: a run whose journal's approved plan no
// longer digests as approved (edited after the fact) is not resumed, and
// the report of a run says every approved plan was recomputed.
func TestResumeRefusesAnEditedJournal(t *testing.T) {
	dir := t.TempDir()
	k := &fakeKind{plan: func() *steps.Plan {
		return &steps.Plan{Summary: "stop broker 1", Actions: []steps.Action{{ID: "a", Op: steps.OpSSH, Target: "b1", Detail: "systemctl stop kafka"}}}
	}}
	rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "word", Noun: "thing"},
		Steps: []steps.Step{step("stop", steps.Destructive, steps.ConfirmTyped, k), step("later", steps.Low, steps.ConfirmNone, &fakeKind{})}}
	s, err := steps.Create(dir, rb, steps.Meta{ID: "r", Runbook: "test"})
	if err != nil {
		t.Fatal(err)
	}
	k2 := rb.Steps[1].Kind.(*fakeKind)
	k2.apply = func(*steps.Env, *steps.Plan) error { return errors.New("stopped here") }
	if out := s.Run(context.Background(), ports.Cluster{}, approveAll, nil); out.Err == nil {
		t.Fatal("the run did not stop at its second step")
	}
	s.Close()
	report, _ := os.ReadFile(filepath.Join(dir, steps.ReportFile))
	if !strings.Contains(string(report), "every approved plan digests, recomputed from this journal, as approved (1 approvals checked)") {
		t.Errorf("the report does not say the approved plan was recomputed:\n%s", report)
	}
	bind := func(steps.Meta) (*steps.Runbook, error) { return rb, nil }
	again, err := steps.Open(dir, bind)
	if err != nil {
		t.Fatalf("an untouched journal: %v", err)
	}
	again.Close()

	path := filepath.Join(dir, steps.JournalFile)
	b, _ := os.ReadFile(path)
	edited := bytes.Replace(b, []byte("systemctl stop kafka"), []byte("systemctl stop kafka-other"), 1)
	if bytes.Equal(edited, b) {
		t.Fatal("the test's edit changed nothing")
	}
	if err := os.WriteFile(path, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := steps.Open(dir, bind); !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "stop: the plan approved as") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("resume of an edited journal: %v", err)
	}
}

// TestCreateRefusesARunDirThatIsNotOurs: an existing run directory others
// may write, or a link, is refused before anything is written (review L8).
func TestCreateRefusesARunDirThatIsNotOurs(t *testing.T) {
	rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "word", Noun: "thing"}}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"world-writable": open, "a link": link} {
		if s, err := steps.Create(dir, rb, steps.Meta{ID: "r"}); !errors.Is(err, steps.ErrRefused) || !errors.Is(err, steps.ErrNothingDone) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, steps.JournalFile)); err == nil {
			t.Errorf("%s: a journal was written", name)
		}
	}
	own := t.TempDir()
	s, err := steps.Create(own, rb, steps.Meta{ID: "r"})
	if err != nil {
		t.Fatalf("an existing private directory: %v", err)
	}
	s.Close()
}
