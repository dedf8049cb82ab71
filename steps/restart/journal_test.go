package restart_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/steptest"
)

// readJournal lists the ids of the roll's actions that ended well so far.
func readJournal(f *fixture) ([]string, error) { return steptest.EndedIDs(f.s.Dir(), "roll") }

func journalText(t *testing.T, f *fixture) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.s.Dir(), steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
