package steps

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/ports"
)

// Files of a run directory.
const (
	JournalFile = "journal.jsonl"
	ReportFile  = "report.md"
)

// Meta is the run-start record: enough to resume the run from its
// directory.
type Meta struct {
	ID      string `json:"id"`
	Runbook string `json:"runbook"`
	// Params are the runbook's bound parameters, as text.
	Params    map[string]string `json:"params"`
	Inventory string            `json:"inventory"`
	Cluster   string            `json:"cluster"`
	Lab       bool              `json:"lab"`
	DryRun    bool              `json:"dry_run,omitempty"`
	Version   string            `json:"kremedy_version"`
	Started   time.Time         `json:"started"`
	// Policy is the approval policy the run started under; a resume under
	// a weaker one is refused. Nil: a run of a kremedy that did not record
	// it.
	Policy *PolicyRecord `json:"policy,omitempty"`
	// PlanDigest is the form of the plan digests the run journals
	// (Create sets it): a run of a kremedy that hashed plans otherwise
	// ("": v1) cannot have its approvals recomputed.
	PlanDigest string `json:"plan_digest,omitempty"`
}

// PlanDigestForm is the plan digest this kremedy computes (Plan.Digest).
const PlanDigestForm = "v2"

// PolicyRecord is an approval policy as a run's start record keeps it.
type PolicyRecord struct {
	// Approvals is how many people approve a destructive step's plan, the
	// operator included (1: the operator's confirmation alone).
	Approvals int `json:"approvals"`
	// AllowedSigners is the allowed_signers file, and SignersSHA256 its
	// sha256 when the run started.
	AllowedSigners string `json:"allowed_signers,omitempty"`
	SignersSHA256  string `json:"allowed_signers_sha256,omitempty"`
	// Enforced: the run enforces it (not waived on a lab, not a dry run).
	Enforced bool `json:"enforced"`
	// Why says why a policy of 2 or more approvals is waived, or why a lab
	// inventory's is enforced.
	Why string `json:"why,omitempty"`
	// Group is the Unix group the run directory is shared with (the
	// inventory's policy.group): its members read the journal and the
	// requests and add their signatures to approvals/. "": the directory
	// is the operator's alone.
	Group string `json:"group,omitempty"`
}

func (p *PolicyRecord) String() string {
	switch {
	case p == nil:
		return "not recorded"
	case p.Approvals < 2:
		return "none: the operator's confirmation alone"
	}
	s := fmt.Sprintf("%d approvals of each destructive step, allowed signers %s (sha256 %s)", p.Approvals, p.AllowedSigners, p.SignersSHA256)
	if p.Enforced {
		s += ", enforced"
	} else {
		s += ", NOT enforced"
	}
	if p.Why != "" {
		s += ": " + p.Why
	}
	if p.Group != "" {
		s += "; the run directory is shared with group " + p.Group + " (it reads the journal and adds signatures to approvals/)"
	}
	return s
}

// shareGroup is the group a new run's directory is shared with ("": none).
func (p *PolicyRecord) shareGroup() string {
	if p == nil || !p.Enforced {
		return ""
	}
	return p.Group
}

// NewMeta is the metadata of a new run of rb on the inventory's cluster,
// started now; its id names the time, the runbook and its confirmation word.
func NewMeta(rb *Runbook, inventory, cluster string, lab bool, version string, now time.Time) Meta {
	id := now.UTC().Format("20060102T150405Z") + "-" + rb.Name
	if w := unsafeID.ReplaceAllString(rb.Confirm.Word, "_"); w != "" {
		id += "-" + w
	}
	return Meta{ID: id, Runbook: rb.Name, Params: rb.Params, Inventory: inventory, Cluster: cluster, Lab: lab,
		Version: version, Started: now.UTC()}
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Session is one run's whole life: its directory and journal, walking the
// runbook (a new run and every resume alike continue from the journal),
// the report, and how it ended. The headless runner, the TUI and the tests
// all drive runs through it.
type Session struct {
	run  *run
	j    *journal.Journal
	mu   sync.Mutex
	busy bool
	// breakLease: the next attempt breaks the cluster's lease (BreakLease).
	breakLease bool
}

// Create makes the run directory dir (0700) and its journal (0600), and
// journals the run-start record. A directory that already holds a run is
// refused (ErrRunExists): resume it with Open.
//
// A run whose policy names a group (meta.Policy.Group, enforced) shares
// its directory with it: dir, and every directory made above it, mode
// 2750 and that group; the journal 0640 (the approvers read the plan
// they sign). Everything else the run writes stays the operator's alone
// (0600; approvals/ is the approval policy's). A group that does not
// exist or the operator is not in is refused (ErrShare) before anything
// is made.
func Create(dir string, rb *Runbook, meta Meta) (*Session, error) {
	path := filepath.Join(dir, JournalFile)
	if recs, err := journal.Read(path); err == nil && len(recs) > 0 {
		return nil, fmt.Errorf("%w: %s; continue it with `kremedy resume %s`, or choose another run directory", ErrRunExists, dir, shell.Quote(dir))
	}
	if err := checkRunDir(dir); err != nil {
		return nil, fmt.Errorf("%w; %w", err, ErrNothingDone)
	}
	perm := fs.FileMode(0o600)
	if g := meta.Policy.shareGroup(); g != "" {
		gid, err := ShareGroup(g)
		if err != nil {
			return nil, err
		}
		if err := makeShared(dir, gid); err != nil {
			return nil, fmt.Errorf("share the run directory %s with group %s (policy.group): %w; %w", dir, g, err, ErrNothingDone)
		}
		perm = SharedFileMode
	}
	j, err := journal.CreateMode(path, perm)
	if err != nil {
		return nil, fmt.Errorf("create run directory: %w; %w", err, ErrNothingDone)
	}
	meta.PlanDigest = PlanDigestForm
	s := &Session{j: j, run: &run{meta: meta, rb: rb, dir: dir, rec: &recorder{j: j}}}
	if err := s.run.rec.append(journal.RunStart, "", meta); err != nil {
		j.Close()
		return nil, fmt.Errorf("%w; %w", err, ErrNothingDone)
	}
	return s, nil
}

// checkRunDir refuses a run directory that exists but is not this user's
// own: a link, another user's, or one others may write (they could plant
// or swap its files). A missing one is made 0700 by the journal.
func checkRunDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run directory %s: %w", dir, err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: run directory %s is a symbolic link: name the directory itself", ErrRefused, dir)
	case !fi.IsDir():
		return fmt.Errorf("%w: run directory %s is not a directory", ErrRefused, dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%w: run directory %s can be written by others (mode %04o): they could plant or swap the run's files; use a new directory (kremedy makes it 0700) or chmod go-w it", ErrRefused, dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: run directory %s belongs to uid %d, not to you (uid %d): use a directory of your own", ErrRefused, dir, st.Uid, os.Geteuid())
	}
	return nil
}

// Open reopens the run in dir (locking its journal against a second
// kremedy) and binds its runbook again with bind, from the run-start
// record's metadata.
func Open(dir string, bind func(Meta) (*Runbook, error)) (*Session, error) {
	j, recs, err := journal.Open(filepath.Join(dir, JournalFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	v, err := ViewRecords(recs)
	if err != nil {
		j.Close()
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	// A journal whose approved plans no longer digest as approved was
	// edited: what it says was done and approved cannot be trusted.
	if bad := v.Tampered(); len(bad) > 0 && v.Meta.PlanDigest == PlanDigestForm {
		j.Close()
		return nil, fmt.Errorf("%w: %s: the journal was changed after it was written: %s; kremedy does not continue a run whose record it cannot trust, and changed nothing — find out who edited it, then start a new run (kremedy plan shows what it would do now)", ErrRefused, dir, strings.Join(bad, "; "))
	}
	meta := v.Meta
	rb, err := bind(meta)
	if err != nil {
		j.Close()
		return nil, err
	}
	return &Session{j: j, run: &run{meta: meta, rb: rb, dir: dir, rec: &recorder{j: j, recs: recs}}}, nil
}

// ReadMeta reads the run-start record of the run in dir, without opening
// the run: no lock is taken, so the run may be going on (or be stopped) in
// another kremedy. A directory whose journal is missing or has no run-start
// record is an error (ErrNotARun for the latter).
func ReadMeta(dir string) (Meta, error) {
	recs, err := journal.Read(filepath.Join(dir, JournalFile))
	if err != nil {
		return Meta{}, fmt.Errorf("%s: %w", dir, err)
	}
	meta, err := metaOf(recs)
	if err != nil {
		return Meta{}, fmt.Errorf("%s: %w", dir, err)
	}
	return meta, nil
}

// metaOf decodes the run-start record, a run journal's first.
func metaOf(recs []journal.Record) (Meta, error) {
	if len(recs) == 0 || recs[0].Type != journal.RunStart {
		return Meta{}, fmt.Errorf("%w: the journal has no run-start record", ErrNotARun)
	}
	meta, err := journal.Decode[Meta](recs[0])
	if err != nil {
		return Meta{}, fmt.Errorf("%w: %v", ErrNotARun, err)
	}
	return meta, nil
}

// Close releases the journal.
func (s *Session) Close() error { return s.j.Close() }

// Meta is the run-start record.
func (s *Session) Meta() Meta { return s.run.meta }

// Runbook is the bound runbook.
func (s *Session) Runbook() *Runbook { return s.run.rb }

// Dir is the run directory.
func (s *Session) Dir() string { return s.run.dir }

// ReportPath is where the report is written.
func (s *Session) ReportPath() string { return filepath.Join(s.run.dir, ReportFile) }

// JournalPath is the journal's path.
func (s *Session) JournalPath() string { return s.j.Path() }

// Redact keeps secrets (passwords) out of every later journal record, and
// out of what a Redacting reporter passes on.
func (s *Session) Redact(secrets ...string) { s.j.Redact(secrets...) }

// Redacting wraps a reporter that sends events outside this process (the
// --output jsonl stream, webhooks): each event's texts (its text, error,
// check detail and action detail) reach it with the secrets the journal
// redacts replaced, as the journal has them.
func (s *Session) Redacting(rep Reporter) Reporter {
	if rep == nil {
		return nil
	}
	return ReporterFunc(func(e Event) { rep.Report(redactEvent(e, s.j.RedactText)) })
}

// redactedErr is an error whose text had secrets replaced; it still
// unwraps to the original, so errors.Is keeps working.
type redactedErr struct {
	text string
	err  error
}

func (r redactedErr) Error() string { return r.text }
func (r redactedErr) Unwrap() error { return r.err }

func redactEvent(e Event, red func(string) string) Event {
	e.Text, e.Host = red(e.Text), red(e.Host)
	if e.Err != nil {
		if t := red(e.Err.Error()); t != e.Err.Error() {
			e.Err = redactedErr{t, e.Err}
		}
	}
	if e.Check != nil {
		c := *e.Check
		c.Detail = red(c.Detail)
		e.Check = &c
	}
	if e.Action != nil {
		a := *e.Action
		a.Detail, a.Target = red(a.Detail), red(a.Target)
		e.Action = &a
	}
	return e
}

// AfterRecord sets a hook called after each journal record is on disk
// (fault injection on a lab: cmd/kremedy's KREMEDY_FAULT).
func (s *Session) AfterRecord(f func(typ, step string)) { s.run.rec.after = f }

// Finished reports whether the run ended with every step done. Notes
// journaled after the run's end (the notifications' last word) do not
// change how it ended.
func (s *Session) Finished() bool {
	recs := s.run.rec.records()
	i := len(recs) - 1
	for i >= 0 && recs[i].Type == journal.Note {
		i--
	}
	if i < 0 || recs[i].Type != journal.RunEnd {
		return false
	}
	d, _ := journal.Decode[map[string]any](recs[i])
	return d["ok"] == true
}

// Progress is what the journal says an unfinished run has done so far.
type Progress struct {
	Done, Skipped []string // in runbook order
	Stopped       string   // the step the last attempt stopped at, if known
	Records       int
}

// Progress reads the journal's account of the run so far.
func (s *Session) Progress() Progress {
	recs := s.run.rec.records()
	p := Progress{Records: len(recs)}
	done := History{recs}.Completed()
	for _, st := range s.run.rb.Steps {
		switch done[st.Info.ID] {
		case "done":
			p.Done = append(p.Done, st.Info.ID)
		case "skipped":
			p.Skipped = append(p.Skipped, st.Info.ID)
		}
	}
	for _, rec := range recs {
		if (rec.Type == journal.StepFailed || rec.Type == journal.Interrupted) && rec.Step != "" {
			p.Stopped = rec.Step
		}
	}
	return p
}

// Notef journals a run-level note from source (the ZooKeeper session's
// fate, say) and reports it to the attempt now running, if any.
func (s *Session) Notef(source, format string, a ...any) { s.run.notef(source, format, a...) }

// notef is Notef on the run (the engine and Env have the run only).
func (r *run) notef(source, format string, a ...any) {
	text := fmt.Sprintf(format, a...)
	_ = r.rec.append(journal.Note, "", map[string]string{"text": text})
	r.rec.emit(Event{Step: source, Kind: EvLog, Text: text})
}

// Artifacts lists the run's files that exist now: the journal, every
// artifact of the runbook, then the report; paths absolute.
func (s *Session) Artifacts() []Artifact {
	all := []Artifact{{ID: "journal", What: "journal", Path: s.j.Path()}}
	for _, a := range s.run.rb.Artifacts {
		all = append(all, Artifact{ID: a.ID, What: a.What, Path: filepath.Join(s.run.dir, a.Path)})
	}
	all = append(all, Artifact{ID: "report", What: "report", Path: s.ReportPath()})
	var out []Artifact
	for _, a := range all {
		if _, err := os.Stat(a.Path); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// Next is what to do after a successful run, filled with this run's paths.
func (s *Session) Next() []string { return s.run.renderAll(s.run.rb.Next) }

// Run walks the runbook against c, continuing from the journal (a step an
// earlier attempt finished is re-checked, not re-done), asks a for every
// confirmation and reports every event to rep; then it rewrites the report.
// A later call (the TUI's retry) continues from where this one stopped.
// Calls never overlap.
func (s *Session) Run(ctx context.Context, c ports.Cluster, a Approver, rep Reporter) Outcome {
	s.mu.Lock()
	if s.busy {
		s.mu.Unlock()
		err := errors.New("the run is already running in this process")
		return Outcome{Err: err}
	}
	s.busy = true
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.busy = false; s.mu.Unlock() }()

	s.run.rec.setReporter(rep)
	defer s.run.rec.setReporter(nil)
	if s.Resumed() {
		_ = s.run.rec.append(journal.Note, "", map[string]string{"text": fmt.Sprintf("continuing from the journal (%d records): finished steps are re-checked, not re-done", len(s.run.rec.records()))})
	}
	if o := s.run.rec.openOutage(); o != nil {
		// An earlier attempt left brokers down: the window is still open.
		ev := outageEvent(*o, "", s.run.rec.clock())
		ev.Text = fmt.Sprintf("the outage window opened at %s UTC by an earlier attempt is still open: %d of %d brokers were down at most", o.Start.UTC().Format("15:04:05"), o.MaxDown, o.Total)
		s.run.rec.emit(ev)
	}
	e := &engine{run: s.run, cluster: c, approver: a}
	// One run per cluster: the lease is taken before the walk's first
	// change and given back when the walk ends, however it ends.
	var out Outcome
	release, err := s.takeLease(ctx, c)
	defer release()
	if err == nil {
		out, err = e.walk(ctx)
		release()
	}
	out.Err = err
	out.NotDone = s.notDone(out)
	if rerr := s.writeReport(out); rerr != nil {
		s.run.rec.emit(Event{Kind: EvLog, Text: fmt.Sprintf("warning: could not write %s: %v", s.ReportPath(), rerr)})
	}
	return out
}

// Resumed reports whether an earlier attempt of the run started a step
// (it may have been killed without a word in the journal).
func (s *Session) Resumed() bool {
	for _, rec := range s.run.rec.records() {
		if rec.Type == journal.StepStart {
			return true
		}
	}
	return false
}

func (s *Session) notDone(out Outcome) []string {
	seen := map[string]bool{}
	for _, id := range slices.Concat(out.Done, out.Skipped, out.NoOp, out.NotNeeded) {
		seen[id] = true
	}
	var not []string
	for _, st := range s.run.rb.Steps {
		if !seen[st.Info.ID] {
			not = append(not, st.Info.ID)
		}
	}
	return not
}

// ResumeCommand is the command that continues this run; headless adds the
// flags a run without a terminal needs.
func (s *Session) ResumeCommand(headless bool) string {
	c := "kremedy resume " + shell.Quote(s.run.dir)
	if headless {
		c += " --headless --yes --confirm " + shell.Quote(s.run.rb.Confirm.Word)
	}
	return c
}

// Ending classifies how a run ended.
type Ending int

const (
	Finished    Ending = iota // every step done, nothing to do, or skipped with a reason
	Stopped                   // a failed check, a refusal, a confirmation that did not match
	Interrupted               // Ctrl-C, or the operator said no: resumable, nothing broke
)

var endingNames = [...]string{"finished", "stopped", "interrupted"}

func (e Ending) String() string {
	if e < 0 || int(e) >= len(endingNames) {
		return fmt.Sprintf("Ending(%d)", int(e))
	}
	return endingNames[e]
}

// Ending says how the run ended.
func (o Outcome) Ending(ctx context.Context) Ending {
	switch {
	case o.Err == nil:
		return Finished
	case o.Interrupted != "" || ctx.Err() != nil || errors.Is(o.Err, context.Canceled) || errors.Is(o.Err, ErrAborted):
		return Interrupted
	default:
		return Stopped
	}
}

// EndError is how a run that did not finish ended, said for the shell it
// leaves: what was not done, where the journal and report are, how to
// resume. It wraps the run's error.
type EndError struct {
	Ending Ending
	Text   string
	Err    error
}

func (e *EndError) Error() string { return e.Text }
func (e *EndError) Unwrap() error { return e.Err }

// End is nil for a finished run, else an *EndError explaining the end;
// headless resume commands carry the flags a run without a terminal needs.
func (s *Session) End(ctx context.Context, o Outcome, headless bool) error {
	resume := s.ResumeCommand(headless)
	if o.NotDone == nil {
		o.NotDone = s.notDone(o)
	}
	end := &EndError{Ending: o.Ending(ctx), Err: o.Err}
	switch {
	case end.Ending == Finished:
		return nil
	case end.Ending == Interrupted && !errors.Is(o.Err, ErrAborted):
		end.Text = fmt.Sprintf("interrupted during step %s: %v.\n  not done: %v\n  the journal and report are in %s; the cluster is as the last completed action left it (see the report).\n  resume: %s",
			o.Interrupted, o.Err, o.NotDone, s.run.dir, resume)
	case end.Ending == Interrupted || errors.Is(o.Err, ErrNotApproved):
		end.Text = fmt.Sprintf("%v\n  not done: %v\n  resume: %s", o.Err, o.NotDone, resume)
	default:
		end.Text = fmt.Sprintf("%v\n  not done: %v\n  after fixing the cause, resume: %s", o.Err, o.NotDone, resume)
	}
	return end
}

// render fills one of the runbook's templates with this run's values.
func (r *run) render(tmpl string) (string, error) {
	return Render(tmpl, r.rb.TemplateData(r.dir, r.meta.Inventory, r.meta.Cluster))
}

func (r *run) renderAll(tmpls []string) []string {
	var out []string
	for _, t := range tmpls {
		s, err := r.render(t)
		if err != nil {
			s = fmt.Sprintf("%s (%v)", t, err)
		}
		out = append(out, s)
	}
	return out
}

// PreviewStep is one step of a preview: its plan, or why it cannot be
// planned now.
type PreviewStep struct {
	Info Info
	Plan *Plan
	Err  error
}

// Preview plans every step of rb against c as the cluster is now, changing
// nothing and writing nothing (`kremedy plan`). A step that cannot be
// planned says why and the others are still planned; a refusal of the
// first step stops the preview.
func Preview(ctx context.Context, rb *Runbook, meta Meta, c ports.Cluster) []PreviewStep {
	r := &run{meta: meta, rb: rb, dir: "<run dir>", rec: &recorder{}, preview: true}
	e := &engine{run: r, cluster: c}
	var out []PreviewStep
	for i, s := range rb.Steps {
		p, err := s.Kind.Plan(ctx, e.env(s, false))
		if err == nil {
			p.Step, p.Kind = s.Info.ID, s.Info.Kind
			p.Rollback, _ = r.rollback(s.Info.Rollback, p.Rollback)
		}
		out = append(out, PreviewStep{Info: s.Info, Plan: p, Err: err})
		if err != nil && i == 0 && errors.Is(err, ErrRefused) {
			break
		}
	}
	return out
}
