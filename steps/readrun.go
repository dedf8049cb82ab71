package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
)

// RunView is one typed read of a run's journal: the run-start record, and
// per step its plans (with the bytes the journal keeps of each and the
// digest recomputed from them), its decisions, its actions and how it
// ended. `kremedy approve`, the report, the timings and drill scoring read
// a run through it, so that every reader decodes a record the same way
// (terraform's planfile reader; etcd's one WAL decoder).
type RunView struct {
	Dir     string
	Meta    Meta
	Records []journal.Record
	// Steps in the order the journal first names them.
	Steps []*StepView
	// Ended: the journal has a run-end record (the last attempt finished or
	// stopped with a word); OK: that record says every step was done.
	Ended, OK bool
}

// StepView is one step of a run as its journal tells it, every attempt.
type StepView struct {
	ID, Title, Kind, Risk string
	// Attempts counts the step's step-start records.
	Attempts int
	Started  time.Time // of the latest attempt
	Plans    []PlanView
	// Decisions are the operator's answers (and those given ahead of a
	// window), in journal order.
	Decisions []DecisionView
	Actions   []ActionRecord
	// State is the step's last word: "done", "skipped", "failed",
	// "interrupted", "started" (an attempt that left no word: killed), or
	// "" when the step never started.
	State string
	At    time.Time // of the last word
	Err   string    // a failed or interrupted step's error
	// Failures are every step-failed record of the step, every attempt.
	Failures []Failure
}

// Failure is one journaled failure of a step.
type Failure struct {
	Step string
	Seq  int64
	Time time.Time
	Err  string
}

// PlanView is one plan of a step as journaled.
type PlanView struct {
	Seq  int64
	Time time.Time
	Plan Plan
	// Raw is the plan record's data, as the journal keeps it.
	Raw json.RawMessage
	// Digest is the digest journaled with the plan (the one its approval
	// carries); Recomputed is DigestJSON of Raw. They differ only when the
	// journal's copy is not the plan that was made.
	Digest, Recomputed string
	Ahead              bool
}

// Intact reports whether the plan's journaled bytes digest as journaled.
func (p PlanView) Intact() bool { return p.Recomputed != "" && p.Recomputed == p.Digest }

// DecisionView is one journaled answer to a plan.
type DecisionView struct {
	Step     string
	Seq      int64
	Time     time.Time
	Decision string // approve, skip, abort, rejected
	By       string
	Digest   string
	Reason   string
	Signoffs []Signoff
	// Ahead: given before the step's window opened (a note's approval).
	Ahead bool
}

// ReadRun reads the run in dir without opening it (no lock: the run may be
// going on in another kremedy).
func ReadRun(dir string) (*RunView, error) {
	recs, err := journal.Read(filepath.Join(dir, JournalFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	v, err := ViewRecords(recs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	v.Dir = dir
	return v, nil
}

// decisionRecord is an approval as journaled (approval records, and the
// "approval" of a note for one given ahead).
type decisionRecord struct {
	approval
	Ahead bool `json:"ahead,omitempty"`
}

func (d decisionRecord) view(r journal.Record, ahead bool) DecisionView {
	return DecisionView{Step: r.Step, Seq: r.Seq, Time: r.Time, Decision: d.Decision, By: d.By, Digest: d.Digest, Reason: d.Reason, Signoffs: d.Signoffs, Ahead: ahead}
}

// ViewRecords builds the view of a run's records (the journal of a run in
// memory, as the report reads it). A record that does not decode as its
// type says is an error naming its sequence number.
func ViewRecords(recs []journal.Record) (*RunView, error) {
	meta, err := metaOf(recs)
	if err != nil {
		return nil, err
	}
	rr := &runReader{v: &RunView{Meta: meta, Records: recs}, by: map[string]*StepView{}}
	for _, r := range recs {
		if err := rr.read(r); err != nil {
			return nil, badRecord(r, err)
		}
	}
	for _, st := range rr.v.Steps {
		acts, err := foldActions(recs, st.ID, badRecord)
		if err != nil {
			return nil, err
		}
		st.Actions = acts
	}
	return rr.v, nil
}

// badRecord is err, a record r that does not decode, naming r.
func badRecord(r journal.Record, err error) error {
	return fmt.Errorf("journal record %d (%s of %q): %w", r.Seq, r.Type, r.Step, err)
}

// runReader is ViewRecords' reading of the records so far: the view, and
// its steps by id.
type runReader struct {
	v  *RunView
	by map[string]*StepView
}

// step is the view of the step with id, added to the run's steps the first
// time the journal names it.
func (rr *runReader) step(id string) *StepView {
	s := rr.by[id]
	if s == nil {
		s = &StepView{ID: id}
		rr.by[id] = s
		rr.v.Steps = append(rr.v.Steps, s)
	}
	return s
}

// read adds record r to the view: the run's end, a step's start, plan,
// decision (an approval, or a note's approval given ahead) and last word.
// Its error is r's data not decoding as its type says.
func (rr *runReader) read(r journal.Record) error {
	switch r.Type {
	case journal.RunEnd:
		d, err := journal.Decode[struct {
			OK bool `json:"ok"`
		}](r)
		if err != nil {
			return err
		}
		rr.v.Ended, rr.v.OK = true, d.OK
	case journal.StepStart:
		d, err := journal.Decode[struct{ Title, Kind, Risk string }](r)
		if err != nil {
			return err
		}
		s := rr.step(r.Step)
		s.Title, s.Kind, s.Risk = d.Title, d.Kind, d.Risk
		s.Attempts++
		s.Started, s.State, s.At, s.Err = r.Time, "started", r.Time, ""
	case journal.Plan:
		p, err := planViewOf(r)
		if err != nil {
			return err
		}
		s := rr.step(r.Step)
		s.Plans = append(s.Plans, p)
	case journal.Approval:
		d, err := journal.Decode[decisionRecord](r)
		if err != nil {
			return err
		}
		s := rr.step(r.Step)
		s.Decisions = append(s.Decisions, d.view(r, d.Ahead))
	case journal.Note:
		n, err := journal.Decode[struct {
			Approval *decisionRecord `json:"approval"`
		}](r)
		if err != nil || n.Approval == nil || r.Step == "" {
			return nil // a note of text, or of another shape: not a decision
		}
		s := rr.step(r.Step)
		s.Decisions = append(s.Decisions, n.Approval.view(r, true))
	case journal.StepDone:
		s := rr.step(r.Step)
		s.State, s.At = "done", r.Time
	case journal.StepSkipped:
		s := rr.step(r.Step)
		s.State, s.At = "skipped", r.Time
	case journal.StepFailed, journal.Interrupted:
		rr.stepStopped(r)
	}
	return nil
}

// planViewOf is the plan record r as a PlanView: the plan (its arguments'
// numbers kept exactly), the digest journaled with it and the one
// recomputed from r's bytes.
func planViewOf(r journal.Record) (PlanView, error) {
	var pr struct {
		Plan
		Digest string `json:"digest"`
		Ahead  bool   `json:"ahead"`
	}
	d := json.NewDecoder(bytes.NewReader(r.Data))
	d.UseNumber() // arguments keep their numbers exactly (an int64 is no float64)
	if err := d.Decode(&pr); err != nil {
		return PlanView{}, err
	}
	again, err := DigestJSON(r.Data)
	if err != nil {
		return PlanView{}, err
	}
	return PlanView{Seq: r.Seq, Time: r.Time, Plan: pr.Plan, Raw: r.Data, Digest: pr.Digest, Recomputed: again, Ahead: pr.Ahead}, nil
}

// stepStopped takes a step-failed or interrupted record r (one of no step
// is the run's, not read here): the step's last word, its error, and (a
// failure) one more of its Failures.
func (rr *runReader) stepStopped(r journal.Record) {
	if r.Step == "" {
		return
	}
	d, _ := journal.Decode[struct {
		Error string `json:"error"`
	}](r)
	s := rr.step(r.Step)
	s.State, s.At, s.Err = "failed", r.Time, d.Error
	if r.Type == journal.Interrupted {
		s.State = "interrupted"
	} else {
		s.Failures = append(s.Failures, Failure{Step: r.Step, Seq: r.Seq, Time: r.Time, Err: d.Error})
	}
}

// Step is the view of the step with id, nil when the journal never names
// it.
func (v *RunView) Step(id string) *StepView {
	for _, s := range v.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// LastPlan is the step's latest plan, nil when it has none.
func (s *StepView) LastPlan() *PlanView {
	if len(s.Plans) == 0 {
		return nil
	}
	return &s.Plans[len(s.Plans)-1]
}

// PlanWith is the latest plan of the step journaled with digest, nil when
// none was.
func (s *StepView) PlanWith(digest string) *PlanView {
	for i := len(s.Plans) - 1; i >= 0; i-- {
		if s.Plans[i].Digest == digest {
			return &s.Plans[i]
		}
	}
	return nil
}

// Approved is the latest decision of the step that approved a plan, nil
// when none did.
func (s *StepView) Approved() *DecisionView {
	for i := len(s.Decisions) - 1; i >= 0; i-- {
		if s.Decisions[i].Decision == Approve.String() {
			return &s.Decisions[i]
		}
	}
	return nil
}

// Tampered lists, for every approval of the run, the one whose plan the
// journal does not hold intact: no journaled plan of the step with the
// approved digest, or one whose bytes digest otherwise (edited after it was
// approved). The report says so; an empty list means every approved plan
// can be recomputed from the journal. A run whose digests are of another
// form (Meta.PlanDigest) cannot be checked: one line says so.
func (v *RunView) Tampered() []string {
	var out []string
	if v.Meta.PlanDigest != PlanDigestForm {
		for _, s := range v.Steps {
			if s.Approved() != nil {
				return []string{fmt.Sprintf("this run's plan digests are of an earlier kremedy's form (%q), which cannot be recomputed from the journal: its approvals are not checked", v.Meta.PlanDigest)}
			}
		}
		return nil
	}
	for _, s := range v.Steps {
		for _, d := range s.Decisions {
			if d.Decision != Approve.String() || d.Digest == "" {
				continue
			}
			p := s.PlanWith(d.Digest)
			switch {
			case p == nil:
				out = append(out, fmt.Sprintf("%s: approved digest %.12s (record %d), but the journal holds no plan of it with that digest", s.ID, d.Digest, d.Seq))
			case !p.Intact():
				out = append(out, fmt.Sprintf("%s: the plan approved as %.12s (record %d) digests as %.12s from the journal: it was changed after it was made", s.ID, d.Digest, p.Seq, p.Recomputed))
			}
		}
	}
	return out
}
