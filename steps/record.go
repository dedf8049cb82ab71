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
	// clk is the run's clock: what Env.Now reads and Env.After and
	// Env.Sleep wait on (nil: real time).
	clk timeSource
	// outage follows the outage window as records are written (EvOutage).
	outage outageTracker
	primed bool
}

// timeSource is the source of a run's time. A wait and its measurement read
// the same one: a kind that measures with Env.Now waits with Env.After or
// Env.Sleep, never with the time package. Production uses realClock; the
// kinds' tests run inside a testing/synctest bubble, where the real clock
// is the bubble's fake one and a ten-second wait takes no time.
type timeSource interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// realClock is the time package's clock.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (r *recorder) source() timeSource {
	if r.clk != nil {
		return r.clk
	}
	return realClock{}
}

func (r *recorder) clock() time.Time { return r.source().Now() }

// append writes one record. A journal that cannot be written stops the
// run: an unrecorded action could not be resumed or audited.
func (r *recorder) append(typ, step string, data any) error {
	_, err := r.appendRecord(typ, step, data)
	return err
}

// appendRecord is append that also returns the record as written (its
// Data the journaled bytes, redaction applied).
func (r *recorder) appendRecord(typ, step string, data any) (journal.Record, error) {
	r.mu.Lock()
	var rec journal.Record
	if r.j == nil {
		raw, err := json.Marshal(data)
		if err != nil {
			r.mu.Unlock()
			return journal.Record{}, fmt.Errorf("record %s: %w", typ, err)
		}
		rec = journal.Record{Seq: int64(len(r.recs) + 1), Time: r.clock().UTC(), Type: typ, Step: step, Data: raw}
	} else {
		var err error
		if rec, err = r.j.Append(typ, step, data); err != nil {
			r.mu.Unlock()
			return journal.Record{}, fmt.Errorf("journal %s: %w (the run stops: an unrecorded action could not be resumed)", r.j.Path(), err)
		}
	}
	r.recs = append(r.recs, rec)
	r.prime()
	changed := r.outage.feed(rec)
	after := r.after
	r.mu.Unlock()
	if changed != nil {
		r.emit(outageEvent(*changed, step, rec.Time))
	}
	if after != nil && r.j != nil {
		after(typ, step)
	}
	return rec, nil
}

// prime feeds the outage tracker the records an earlier attempt wrote
// (once; r.mu held).
func (r *recorder) prime() {
	if r.primed {
		return
	}
	r.primed = true
	for _, rec := range r.recs[:len(r.recs)-1] {
		r.outage.feed(rec)
	}
}

// openOutage is the outage window if it is open now (an earlier attempt
// left brokers down), else nil.
func (r *recorder) openOutage() *Outage {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.primed {
		r.primed = true
		for _, rec := range r.recs {
			r.outage.feed(rec)
		}
	}
	if o := r.outage.current(); o != nil && o.Open {
		return o
	}
	return nil
}

func outageEvent(o Outage, step string, at time.Time) Event {
	text := fmt.Sprintf("outage window opened: %d of %d brokers down", o.MaxDown, o.Total)
	if !o.Open {
		text = fmt.Sprintf("outage window closed after %s (up to %d of %d brokers down; the health gate passed)", o.Length().Round(100*time.Millisecond), o.MaxDown, o.Total)
	}
	return Event{Time: at, Kind: EvOutage, Step: step, Outage: &o, Text: text}
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
