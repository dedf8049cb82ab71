package steps

import (
	"encoding/json"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
)

// Fact is the journal record type of a kind's saved fact (Env.Save).
const Fact = "fact"

type factRecord struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// History is a read-only view of a run's journal: every attempt so far,
// this one included. Kinds use it to learn what an earlier attempt did
// (resume) instead of reading the engine's state.
type History struct{ recs []journal.Record }

// Completed maps the steps an earlier attempt (or this one) finished to
// "done" or "skipped". A step started again since is not in it.
func (h History) Completed() map[string]string {
	out := map[string]string{}
	for _, rec := range h.recs {
		switch rec.Type {
		case journal.StepDone:
			out[rec.Step] = "done"
		case journal.StepSkipped:
			out[rec.Step] = "skipped"
		case journal.StepStart:
			delete(out, rec.Step)
		}
	}
	return out
}

// Done reports whether a step of the given kind completed (done, not
// skipped) in this run.
func (h History) Done(kind string) bool {
	kinds := map[string]string{}
	for _, rec := range h.recs {
		if rec.Type == journal.StepStart {
			if d, err := journal.Decode[struct{ Kind string }](rec); err == nil {
				kinds[rec.Step] = d.Kind
			}
		}
	}
	for step, how := range h.Completed() {
		if how == "done" && kinds[step] == kind {
			return true
		}
	}
	return false
}

// ActionRecord is one action of a step as the journal has it.
type ActionRecord struct {
	Action  Action // Args as decoded from JSON
	Started time.Time
	Ended   bool
	OK      bool
	Err     string
	// Outcome is set when the action may have happened in part or in full
	// although it did not end well (a dropped session, an interrupt).
	Outcome string
}

type actionEnd struct {
	Action  Action `json:"action"`
	OK      bool   `json:"ok"`
	TookMS  int64  `json:"took_ms"`
	Error   string `json:"error,omitempty"`
	Outcome string `json:"outcome,omitempty"`
}

// Actions lists step's actions in the order they started, in every
// attempt, each with how it ended (if it did). A record that does not
// decode is passed over.
func (h History) Actions(step string) []ActionRecord {
	out, _ := foldActions(h.recs, step, func(journal.Record, error) error { return nil })
	return out
}

// foldActions pairs step's action-start and action-end records into
// ActionRecords, in the order the actions started; bad says what a record
// that does not decode does (nil: pass it over).
func foldActions(recs []journal.Record, step string, bad func(journal.Record, error) error) ([]ActionRecord, error) {
	var out []ActionRecord
	open := map[string]int{} // action id -> index of its latest start
	for _, rec := range recs {
		if rec.Step != step {
			continue
		}
		switch rec.Type {
		case journal.ActionStart:
			a, err := journal.Decode[Action](rec)
			if err != nil {
				if err := bad(rec, err); err != nil {
					return nil, err
				}
				continue
			}
			open[a.ID] = len(out)
			out = append(out, ActionRecord{Action: a, Started: rec.Time})
		case journal.ActionEnd:
			e, err := journal.Decode[actionEnd](rec)
			if err != nil {
				if err := bad(rec, err); err != nil {
					return nil, err
				}
				continue
			}
			if i, ok := open[e.Action.ID]; ok {
				out[i].Ended, out[i].OK, out[i].Err, out[i].Outcome = true, e.OK, e.Error, e.Outcome
				delete(open, e.Action.ID)
			}
		}
	}
	return out, nil
}

// load finds the latest value saved under key.
func (h History) load(key string, v any) (bool, error) {
	for i := len(h.recs) - 1; i >= 0; i-- {
		rec := h.recs[i]
		if rec.Type != Fact {
			continue
		}
		f, err := journal.Decode[factRecord](rec)
		if err != nil || f.Key != key {
			continue
		}
		return true, json.Unmarshal(f.Value, v)
	}
	return false, nil
}
