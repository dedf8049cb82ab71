package steptest

import (
	"path/filepath"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
)

// Ended lists, in journal order, the actions of step ("": of every step)
// that ended well in the run directory's journal.
func Ended(runDir, step string) ([]steps.Action, error) {
	recs, err := journal.Read(filepath.Join(runDir, steps.JournalFile))
	if err != nil {
		return nil, err
	}
	var out []steps.Action
	for _, r := range recs {
		if r.Type != journal.ActionEnd || step != "" && r.Step != step {
			continue
		}
		e, err := journal.Decode[struct {
			Action steps.Action `json:"action"`
			OK     bool         `json:"ok"`
		}](r)
		if err == nil && e.OK {
			out = append(out, e.Action)
		}
	}
	return out, nil
}

// EndedIDs is Ended's action IDs.
func EndedIDs(runDir, step string) ([]string, error) {
	acts, err := Ended(runDir, step)
	ids := make([]string, len(acts))
	for i, a := range acts {
		ids[i] = a.ID
	}
	return ids, err
}
