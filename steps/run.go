package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
)

// Params are a run's bound runbook parameters.
type Params map[string]string

func (p Params) String(k string) string { return p[k] }
func (p Params) Bool(k string) bool     { b, _ := strconv.ParseBool(p[k]); return b }
func (p Params) Int(k string) int       { n, _ := strconv.Atoi(p[k]); return n }
func (p Params) Duration(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(p[k]); err == nil && d > 0 {
		return d
	}
	return def
}

// Meta is the run-start record: enough to resume the run from its directory.
type Meta struct {
	ID        string `json:"id"`
	Runbook   string `json:"runbook"`
	Topic     string `json:"topic"`
	Params    Params `json:"params"`
	Inventory string `json:"inventory"`
	Cluster   string `json:"cluster"`
	Lab       bool   `json:"lab"`
	DryRun    bool   `json:"dry_run,omitempty"`
	Version   string `json:"kremedy_version"`
	Started   time.Time
}

// Run is one execution of a runbook against one cluster: its ports, its
// directory, its journal and the facts its steps share.
type Run struct {
	Meta     Meta
	Dir      string
	Target   Target
	ZK       Coordinator
	Kafka    Cluster
	Remote   Remote
	Journal  *journal.Journal
	Reporter Reporter
	Facts    Facts
	// Now is the clock (tests pin it).
	Now func() time.Time
	// Prior are the facts an earlier attempt's preflight recorded (resume).
	Prior *Facts
	// Preview plans every step against the cluster as it is now, without
	// the refusals that depend on earlier steps (`kremedy plan`).
	Preview bool
	// AfterRecord, when set, is called after each journal record is on
	// disk (fault injection on a lab: cmd/kremedy's KREMEDY_FAULT).
	AfterRecord func(typ, step string)

	step string
	done map[string]bool // step kinds completed in this run
	// rechecking: Verify is asked whether a step an earlier attempt
	// finished still holds now (resume), not to wait for it to hold.
	rechecking bool
}

func (r *Run) markDone(kind string) {
	if r.done == nil {
		r.done = map[string]bool{}
	}
	r.done[kind] = true
}

// deletedZnodes reports whether this run already deleted the topic's znodes.
func (r *Run) deletedZnodes() bool { return r.done["delete-znodes"] }

// Facts are what preflight learned and later steps use.
type Facts struct {
	// ClusterID is /cluster/id's id: a resumed run refuses another cluster.
	ClusterID  string             `json:"cluster_id,omitempty"`
	Controller int32              `json:"controller"`
	Registered []int32            `json:"registered"`
	LogDirs    map[int32][]string `json:"log_dirs"`
	// Addrs are the brokers' Kafka listeners, read from their registrations
	// while they ran: the wipe proves each port closed before moving.
	Addrs      map[int32]string  `json:"addrs,omitempty"`
	TopicID    string            `json:"topic_id,omitempty"`
	OldIDs     []string          `json:"old_topic_ids,omitempty"` // ids seen on disk or in metadata
	Partitions map[int32][]int32 `json:"assignment,omitempty"`
	Configs    map[string]string `json:"configs,omitempty"`
	AutoCreate map[int32]bool    `json:"auto_create,omitempty"`
	Clean      bool              `json:"clean"` // the topic is already consistent everywhere
	// UnhealthyBefore are other topics' partitions ("topic-p") that were
	// already offline or under-replicated, in every broker's view, when the
	// run's first preflight looked (Baseline says it looked). After the
	// grace, the health gate names them and does not fail on them as long
	// as they are no worse: the restart did not cause them. A resume keeps
	// the first attempt's list, never one read after the restart.
	UnhealthyBefore map[string]Unhealthy `json:"unhealthy_before"`
	Baseline        bool                 `json:"baseline"`
}

// Unhealthy is how bad a partition was: offline (no leader, or a replica
// offline) and the most in-sync replicas any broker reported.
type Unhealthy struct {
	Offline bool `json:"offline"`
	ISR     int  `json:"isr"`
}

// Topic is the run's topic.
func (r *Run) Topic() string { return r.Meta.Topic }

// Paths inside the run directory.
func (r *Run) BackupPath() string   { return filepath.Join(r.Dir, "backup", "znodes.json") }
func (r *Run) ManifestPath() string { return filepath.Join(r.Dir, "quarantine-manifest.json") }
func (r *Run) OffsetsPath() string  { return filepath.Join(r.Dir, "offsets.json") }
func (r *Run) ReportPath() string   { return filepath.Join(r.Dir, "report.md") }

// QuarantineDir is where a log dir's moved partition directories go on the
// broker host: beside the log dir, never inside any log dir.
func (r *Run) QuarantineDir(logDir string) string {
	return filepath.Join(filepath.Dir(logDir), "kremedy-quarantine", r.Meta.ID, filepath.Base(logDir))
}

func (r *Run) templateData() map[string]string {
	return map[string]string{
		"RunDir": r.Dir, "Topic": r.Meta.Topic, "Backup": r.BackupPath(), "Manifest": r.ManifestPath(),
		"Offsets": r.OffsetsPath(), "Inventory": r.Meta.Inventory, "Report": r.ReportPath(),
		"Quarantine": filepath.Join("<log dir parent>", "kremedy-quarantine", r.Meta.ID),
	}
}

func (r *Run) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Run) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = r.now()
	}
	if e.Step == "" {
		e.Step = r.step
	}
	if r.Reporter != nil {
		r.Reporter.Report(e)
	}
}

// journalled writes a record; a journal that cannot be written stops the
// run, since an unrecorded action could not be resumed or audited.
func (r *Run) journalled(typ string, data any) error {
	if r.Journal == nil {
		return nil
	}
	if _, err := r.Journal.Append(typ, r.step, data); err != nil {
		return fmt.Errorf("journal %s: %w (the run stops: an unrecorded action could not be resumed)", r.Journal.Path(), err)
	}
	if r.AfterRecord != nil {
		r.AfterRecord(typ, r.step)
	}
	return nil
}

// Logf reports a line from kremedy and journals it.
func (r *Run) Logf(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	r.emit(Event{Kind: EvLog, Text: s})
	_ = r.journalled(journal.Note, map[string]string{"text": s})
}

// Output reports and journals one line of a host's output.
func (r *Run) Output(host string, l Line) {
	r.emit(Event{Kind: EvOutput, Host: host, Text: l.Text})
	_ = r.journalled(journal.Output, map[string]any{"host": host, "stderr": l.Stderr, "text": l.Text})
}

// Check reports and journals a check result.
func (r *Run) Check(c Check) {
	r.emit(Event{Kind: EvCheck, Check: &c})
	_ = r.journalled(journal.Check, c)
}

// Do journals an action before and after performing it.
func (r *Run) Do(a Action, f func() error) error {
	if err := r.journalled(journal.ActionStart, a); err != nil {
		return err
	}
	r.emit(Event{Kind: EvLog, Text: "→ " + a.String()})
	start := r.now()
	err := f()
	end := map[string]any{"action": a, "ok": err == nil, "took_ms": r.now().Sub(start).Milliseconds()}
	if err != nil {
		end["error"] = err.Error()
		if errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			end["outcome"] = "unknown: it may have happened in part or in full; resume re-checks before doing anything"
		}
	}
	if jerr := r.journalled(journal.ActionEnd, end); jerr != nil && err == nil {
		err = jerr
	}
	return err
}

// RunOn runs a command on a broker host, streaming and journaling its output.
func (r *Run) RunOn(ctx context.Context, broker int32, cmd string) error {
	h, _ := r.Target.Host(broker)
	host := fmt.Sprintf("broker %d (%s)", broker, h.Host)
	return r.Remote.Run(ctx, broker, cmd, func(l Line) { r.Output(host, l) })
}

// WriteFileDurably writes data to path (0600, parent 0700) and fsyncs both.
func WriteFileDurably(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// WriteJSON writes v as indented JSON, durably.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileDurably(path, append(b, '\n'))
}

// exitStatus extracts a remote command's exit status, if err carries one.
func exitStatus(err error) (int, bool) {
	var es interface{ ExitStatus() int }
	if errors.As(err, &es) {
		return es.ExitStatus(), true
	}
	return 0, false
}
