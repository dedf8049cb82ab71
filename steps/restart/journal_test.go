package restart_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
)

// readJournal lists the ids of the roll's actions that ended well so far.
func readJournal(f *fixture) ([]string, error) {
	recs, err := journal.Read(f.s.JournalPath())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		if r.Type != journal.ActionEnd || r.Step != "roll" {
			continue
		}
		e, err := journal.Decode[struct {
			Action steps.Action `json:"action"`
			OK     bool         `json:"ok"`
		}](r)
		if err == nil && e.OK {
			out = append(out, e.Action.ID)
		}
	}
	return out, nil
}

func journalText(t *testing.T, f *fixture) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.s.Dir(), steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
