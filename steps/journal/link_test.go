package journal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestJournalIsNeverALink (review L8): a journal path that is a symbolic
// link — to another run's journal, to a file of someone else's choosing —
// is neither opened to resume (appended to) nor read, and Create makes no
// file through one, dangling or not; the target is left as it was.
func TestJournalIsNeverALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere.jsonl")
	j, err := Create(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(Note, "", map[string]string{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	before, _ := os.ReadFile(target)
	link := filepath.Join(dir, "journal.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if j, _, err := Open(link); !errors.Is(err, ErrLink) {
		if j != nil {
			j.Close()
		}
		t.Errorf("Open through a link: %v, want ErrLink", err)
	}
	if _, err := Read(link); !errors.Is(err, ErrLink) {
		t.Errorf("Read through a link: %v, want ErrLink", err)
	}
	dangling := filepath.Join(dir, "dangling.jsonl")
	if err := os.Symlink(filepath.Join(dir, "made-through-a-link"), dangling); err != nil {
		t.Fatal(err)
	}
	if j, err := Create(dangling); err == nil {
		j.Close()
		t.Error("Create made a journal through a dangling link")
	}
	if _, err := os.Lstat(filepath.Join(dir, "made-through-a-link")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was made through the link: %v", err)
	}
	if after, _ := os.ReadFile(target); string(after) != string(before) {
		t.Errorf("the link's target changed")
	}
}

// TestCreateMode: CreateMode gives the journal its mode whatever the
// umask (a shared run's 0640); Create's stays 0600.
func TestCreateMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	for name, want := range map[string]fs.FileMode{"shared.jsonl": 0o640, "private.jsonl": 0o600} {
		j, err := CreateMode(filepath.Join(dir, name), want)
		if err != nil {
			t.Fatal(err)
		}
		j.Close()
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want %v", name, fi.Mode(), err, want)
		}
	}
}
