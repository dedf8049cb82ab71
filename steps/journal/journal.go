package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Record is one journal line.
type Record struct {
	Seq  int64           `json:"seq"`            // 1, 2, 3 … in file order
	Time time.Time       `json:"time"`           // UTC, RFC3339Nano
	Type string          `json:"type"`           // see the Type constants
	Step string          `json:"step,omitempty"` // step id, "" for run-level records
	Data json.RawMessage `json:"data,omitempty"`
}

// Record types.
const (
	RunStart    = "run-start"
	RunEnd      = "run-end"
	StepStart   = "step-start"
	Plan        = "plan"
	Approval    = "approval"
	ActionStart = "action-start"
	ActionEnd   = "action-end"
	Output      = "output"
	Check       = "check"
	StepDone    = "step-done"
	StepFailed  = "step-failed"
	StepSkipped = "step-skipped"
	Note        = "note"
	Interrupted = "interrupted"
)

// ErrCorrupt is wrapped by every error Open and Read return for a journal
// whose damage a crash cannot explain: a bad line that is not the last one, a
// Seq that skips or repeats, a complete line that is not a record. The error
// starts with "<path>:<line>:" and the file is left unchanged.
var ErrCorrupt = errors.New("journal is corrupt")

// maxLineSize is the largest line, newline included, that Append writes and
// Open and Read accept.
const maxLineSize = 1 << 20

// Journal is an open journal file. Its methods are safe for concurrent use.
type Journal struct {
	path string

	mu       sync.Mutex
	f        *os.File // nil once closed
	seq      int64    // Seq of the last record in the file, 0 if none
	size     int64    // bytes of complete records in the file
	err      error    // set by a failed write or fsync; every later Append returns it
	secrets  []string // registered by Redact, longest first
	redacted bool     // secrets is not empty
}

// Create creates a new, empty journal at path. Missing parent directories are
// created with mode 0700; the file is created with mode 0600 and must not
// exist yet (nor be a symbolic link, even a dangling one). The file and its
// directory entries are fsynced before Create returns.
func Create(path string) (*Journal, error) { return CreateMode(path, 0o600) }

// CreateMode is Create with the file's mode perm, set whatever the umask
// (a run shared with its approvers' group: 0640, taking the group of its
// setgid directory).
func CreateMode(path string, perm fs.FileMode) (*Journal, error) {
	dir := filepath.Dir(path)
	made, err := mkdirAll(dir)
	if err != nil {
		return nil, fmt.Errorf("create journal %s: %w; nothing was written", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create journal %s: the file already exists and was not touched; "+
			"resume that run from it or start the new run with another journal path: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("create journal: %w", err)
	}
	if perm != 0o600 {
		if err := f.Chmod(perm); err != nil {
			_ = f.Close()
			_ = os.Remove(path)
			return nil, fmt.Errorf("create journal %s: set its mode %#o: %w; the journal was removed again, nothing was written", path, perm, err)
		}
	}
	// The new file's entry lives in dir; each directory mkdirAll made has its
	// entry in its own parent.
	syncs := []string{dir}
	for _, d := range made {
		syncs = append(syncs, filepath.Dir(d))
	}
	err = f.Sync()
	for _, d := range syncs {
		if err != nil {
			break
		}
		err = syncDir(d)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("create journal %s: fsync: %w; the journal was removed again, nothing was written", path, err)
	}
	if err := lock(f, path); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &Journal{path: path, f: f}, nil
}

// mkdirAll is os.MkdirAll(dir, 0o700) that also returns the directories it
// created, deepest first.
func mkdirAll(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return missing, nil
}

func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for fsync there
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ErrInUse means another process holds the journal: two engines must never
// drive one run (they would both act on the cluster and corrupt the journal).
var ErrInUse = errors.New("the run is in use by another kremedy process")

// lock takes an exclusive, non-blocking flock on the journal for as long as
// the file stays open; it is released when the process ends, even by kill -9.
func lock(f *os.File, path string) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s: %w; wait for it to finish or stop it, then resume", path, ErrInUse)
		}
		return fmt.Errorf("lock journal %s: %w", path, err)
	}
	return nil
}

// Open opens an existing journal to resume a run. It reads every record; a
// torn last line (no newline, or not valid JSON) is cut off the file, which
// is fsynced, and is not among the returned records. Appends continue the
// Seq after the last returned record. On error nothing was changed.
func Open(path string) (*Journal, []Record, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", linkErr(path, err))
	}
	if err := checkRegular(f, path); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if err := lock(f, path); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	recs, good, end, err := scan(f, path)
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if end > good {
		err := f.Truncate(good)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			_ = f.Close()
			return nil, nil, fmt.Errorf("open journal %s: cut the torn last line (bytes %d to %d): %w; "+
				"nothing was appended, opening it again retries", path, good, end, err)
		}
	}
	j := &Journal{path: path, f: f, size: good}
	if n := len(recs); n > 0 {
		j.seq = recs[n-1].Seq
	}
	return j, recs, nil
}

// Read returns every record of the journal at path without changing the
// file. A torn last line is ignored, as Open would cut it off.
func Read(path string) ([]Record, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", linkErr(path, err))
	}
	defer f.Close()
	if err := checkRegular(f, path); err != nil {
		return nil, err
	}
	recs, _, _, err := scan(f, path)
	return recs, err
}

// ErrLink: a journal path that is a symbolic link. A run's journal is the
// file in its directory: a link could make a resume append to, or an
// approver read, a file the run never wrote.
var ErrLink = errors.New("the journal is a symbolic link")

// linkErr names an open refused by O_NOFOLLOW (ELOOP) as ErrLink.
func linkErr(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: %w (not followed); nothing was read or changed: %w", path, ErrLink, err)
		}
	}
	return err
}

// checkRegular refuses devices, pipes and directories, which would make the
// scan block, never end or fail obscurely.
func checkRegular(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("journal %s is not a regular file (%v); nothing was read or changed", path, fi.Mode().Type())
	}
	return nil
}

// Append writes one record of type typ for step ("" for the run) with data
// marshalled as JSON (nil for none) and fsyncs the file before it returns the
// record as written. Data must marshal to less than 1 MiB; keep bulky output
// in a file of its own and journal its path. After a failed write or fsync
// the journal refuses every further Append: stop the run and resume it with
// Open once the disk is fixed.
func (j *Journal) Append(typ, step string, data any) (Record, error) {
	if typ == "" {
		return Record{}, fmt.Errorf("journal %s: append: the record type is empty; nothing was written", j.path)
	}
	var raw json.RawMessage
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return Record{}, fmt.Errorf("journal %s: append %s record for step %q: encode data: %w; nothing was written",
				j.path, typ, step, err)
		}
		if !bytes.Equal(b, []byte("null")) {
			raw = b
		}
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return Record{}, fmt.Errorf("journal %s: append %s record: %w; nothing was written", j.path, typ, os.ErrClosed)
	}
	if j.err != nil {
		return Record{}, j.err
	}
	if j.redacted {
		step = redactString(step, j.secrets)
		if raw != nil {
			var err error
			if raw, err = redactJSON(raw, j.secrets); err != nil {
				return Record{}, fmt.Errorf("journal %s: append %s record for step %q: redact data: %w; nothing was written",
					j.path, typ, step, err)
			}
		}
	}
	rec := Record{Seq: j.seq + 1, Time: time.Now().UTC().Round(0), Type: typ, Step: step, Data: raw}
	line, err := json.Marshal(rec)
	if err != nil {
		return Record{}, fmt.Errorf("journal %s: append %s record for step %q: %w; nothing was written", j.path, typ, step, err)
	}
	if len(line)+1 > maxLineSize {
		return Record{}, fmt.Errorf("journal %s: append %s record for step %q: the record is %d bytes, "+
			"a journal line holds at most %d (1 MiB); nothing was written. "+
			"Keep bulky output in a file of its own and journal its path", j.path, typ, step, len(line)+1, maxLineSize)
	}
	line = append(line, '\n')
	if _, err := j.f.Write(line); err != nil {
		// Best effort: take a partial line back off so that Open finds a
		// clean end; Open also copes if this fails.
		_ = j.f.Truncate(j.size)
		j.err = fmt.Errorf("journal %s: write %s record %d: %w; the record was not saved and this journal "+
			"accepts no more records. Stop the run, check the disk (df -h, dmesg) and resume from the journal", j.path, typ, rec.Seq, err)
		return Record{}, j.err
	}
	if err := j.f.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the dirty pages
		// and a second fsync can wrongly succeed: never write again.
		j.err = fmt.Errorf("journal %s: fsync %s record %d: %w; the record may or may not be on disk and this "+
			"journal accepts no more records. Stop the run, check the disk (df -h, dmesg) and resume from the journal", j.path, typ, rec.Seq, err)
		return Record{}, j.err
	}
	j.seq = rec.Seq
	j.size += int64(len(line))
	return rec, nil
}

// Path returns the path the journal was created or opened with.
func (j *Journal) Path() string { return j.path }

// Close closes the file. Every record was already fsynced by Append. Append
// after Close fails; a second Close returns nil.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	if err != nil {
		return fmt.Errorf("close journal %s: %w", j.path, err)
	}
	return nil
}

// Decode unmarshals r.Data into a T. A record without data is an error.
func Decode[T any](r Record) (T, error) {
	var v T
	if len(r.Data) == 0 {
		return v, fmt.Errorf("journal: decode %s record %d (step %q): the record has no data", r.Type, r.Seq, r.Step)
	}
	if err := json.Unmarshal(r.Data, &v); err != nil {
		return v, fmt.Errorf("journal: decode %s record %d (step %q) as %T: %w", r.Type, r.Seq, r.Step, v, err)
	}
	return v, nil
}
