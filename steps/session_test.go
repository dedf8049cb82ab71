package steps_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
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
