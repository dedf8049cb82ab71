package steps

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
)

// recorder is a run's memory: the journal on disk (none for a preview),
// every record of the run in memory (the history kinds read), the reporter
// of the attempt now running, and the fault hook.
type recorder struct {
	mu    sync.Mutex
	j     *journal.Journal // nil: a preview, kept in memory only
	recs  []journal.Record
	rep   Reporter
	after func(typ, step string)
	now   func() time.Time
}

func (r *recorder) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// append writes one record. A journal that cannot be written stops the
// run: an unrecorded action could not be resumed or audited.
func (r *recorder) append(typ, step string, data any) error {
	r.mu.Lock()
	var rec journal.Record
	if r.j == nil {
		raw, err := json.Marshal(data)
		if err != nil {
			r.mu.Unlock()
			return fmt.Errorf("record %s: %w", typ, err)
		}
		rec = journal.Record{Seq: int64(len(r.recs) + 1), Time: r.clock().UTC(), Type: typ, Step: step, Data: raw}
	} else {
		var err error
		if rec, err = r.j.Append(typ, step, data); err != nil {
			r.mu.Unlock()
			return fmt.Errorf("journal %s: %w (the run stops: an unrecorded action could not be resumed)", r.j.Path(), err)
		}
	}
	r.recs = append(r.recs, rec)
	after := r.after
	r.mu.Unlock()
	if after != nil && r.j != nil {
		after(typ, step)
	}
	return nil
}

// records returns the records so far (the slice is never modified).
func (r *recorder) records() []journal.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recs[:len(r.recs):len(r.recs)]
}

func (r *recorder) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = r.clock()
	}
	r.mu.Lock()
	rep := r.rep
	r.mu.Unlock()
	if rep != nil {
		rep.Report(e)
	}
}

func (r *recorder) setReporter(rep Reporter) {
	r.mu.Lock()
	r.rep = rep
	r.mu.Unlock()
}
