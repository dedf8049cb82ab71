package cleanup

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/segments"
)

// loginShell runs commands the way sshd does: `SHELL -c CMD` on the
// local machine, so the scripts kremedy writes meet a real shell.
type loginShell struct{ shell string }

func (s loginShell) Run(ctx context.Context, _ int32, cmd string, out func(Line)) error {
	c := exec.CommandContext(ctx, s.shell, "-c", cmd)
	stdout, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		out(Line{Text: sc.Text()})
	}
	return c.Wait()
}
func (loginShell) Check(context.Context, int32) error { return nil }
func (loginShell) RunClient(context.Context, Client, string, func(Line)) error {
	return nil
}

// TestListLogDirsRealShell runs the log-dir listing under dash and bash on
// a real directory with the awkward cases a log dir can hold.
func TestListLogDirsRealShell(t *testing.T) {
	dir := t.TempDir()
	mk := func(name, meta string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if meta != "" {
			if err := os.WriteFile(filepath.Join(dir, name, "partition.metadata"), []byte(meta), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("orders-0", "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
	mk("orders-1", "version: 0\ntopic_id:   BBBBBBBBBBBBBBBBBBBBBB") // no newline, extra spaces
	mk("orders-2", "")                                               // no partition.metadata
	mk("orders-v2-0", "topic_id: CCCCCCCCCCCCCCCCCCCCCC\ntopic_id: second\n")
	mk("orders-0.0123456789abcdef0123456789abcdef-delete", "version: 0\ntopic_id: DDDDDDDDDDDDDDDDDDDDDD\n")
	mk(".hidden-0", "")
	mk("..dots", "")
	mk("with space-0", "topic_id: EEEEEEEEEEEEEEEEEEEEEE\n")
	mk("quote'd-0", "")
	if err := os.WriteFile(filepath.Join(dir, "recovery-point-offset-checkpoint"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	want := []segments.Entry{
		{Name: "..dots", IsDir: true},
		{Name: ".hidden-0", IsDir: true},
		{Name: "dangling"},
		{Name: "orders-0", IsDir: true, TopicID: "AAAAAAAAAAAAAAAAAAAAAA"},
		{Name: "orders-0.0123456789abcdef0123456789abcdef-delete", IsDir: true, TopicID: "DDDDDDDDDDDDDDDDDDDDDD"},
		{Name: "orders-1", IsDir: true, TopicID: "BBBBBBBBBBBBBBBBBBBBBB"},
		{Name: "orders-2", IsDir: true},
		{Name: "orders-v2-0", IsDir: true, TopicID: "CCCCCCCCCCCCCCCCCCCCCC"},
		{Name: "quote'd-0", IsDir: true},
		{Name: "recovery-point-offset-checkpoint"},
		{Name: "with space-0", IsDir: true, TopicID: "EEEEEEEEEEEEEEEEEEEEEE"},
	}
	missing := filepath.Join(dir, "no such dir")
	for _, sh := range []string{"/bin/sh", "/bin/bash"} {
		t.Run(sh, func(t *testing.T) {
			r := &Run{Remote: loginShell{sh}, Facts: Facts{LogDirs: map[int32][]string{1: {dir}}}}
			got, err := r.listLogDirs(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			l := got[dir]
			slices.SortFunc(l, func(a, b segments.Entry) int { return strings.Compare(a.Name, b.Name) })
			if !slices.Equal(l, want) {
				t.Errorf("listing under %s:\n got %+v\nwant %+v", sh, l, want)
			}
			r.Facts.LogDirs[1] = []string{dir, missing}
			if _, err := r.listLogDirs(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "no such dir") {
				t.Errorf("a missing log dir: %v", err)
			}
		})
	}
}

// TestMoveScriptRefusesAHeldLock runs one host's wipe script under dash:
// while a process (this test) holds the log dir's .lock, as a running
// broker does, nothing moves; once it is released the move happens.
func TestMoveScriptRefusesAHeldLock(t *testing.T) {
	base := t.TempDir()
	logDir := filepath.Join(base, "data")
	if err := os.MkdirAll(filepath.Join(logDir, "orders-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.Create(filepath.Join(logDir, ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	mv := Move{From: filepath.Join(logDir, "orders-0"), To: filepath.Join(base, "kremedy-quarantine", "run", "data", "orders-0")}
	run := func() (string, error) {
		var out strings.Builder
		err := loginShell{"/bin/sh"}.Run(context.Background(), 1, Script(moveScript([]Move{mv})), func(l Line) { out.WriteString(l.Text + "\n") })
		return out.String(), err
	}
	out, err := run()
	if err == nil {
		t.Fatalf("the wipe moved under a held .lock:\n%s", out)
	}
	if _, serr := os.Stat(mv.From); serr != nil {
		t.Fatalf("%s moved while its log dir's .lock was held: %v", mv.From, serr)
	}
	lock.Close()
	if out, err := run(); err != nil || !strings.Contains(out, "moved "+mv.From) {
		t.Fatalf("after the lock was released: %v\n%s", err, out)
	}
	if _, err := os.Stat(mv.To); err != nil {
		t.Fatal(err)
	}
}
