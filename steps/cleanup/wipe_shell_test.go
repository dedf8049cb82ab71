package cleanup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestMoveScriptRefusesAHeldLock runs one host's wipe script under dash:
// while a process (this test) holds the log dir's .lock, as a running
// broker does, nothing moves; once it is released the move happens. The
// log dir's path is compared as a string, never as a pattern (security
// review L4: for ".../k[1]" the glob found no holder and the guard failed
// open), and also as the kernel names it when the log dir is reached
// through a symbolic link. The log dirs here are made directly, past the
// inventory's rule, which refuses "[", "*" and "?".
func TestMoveScriptRefusesAHeldLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  string // the log dir the wipe is given, under a temp dir
		real string // where it really is ("": dir itself; else dir is a link to it)
	}{
		{name: "plain", dir: "data"},
		{name: "brackets", dir: "k[1]"},
		{name: "star", dir: "k*"},
		{name: "question mark", dir: "k?x"},
		{name: "backslash", dir: `k\x`},
		{name: "through a link", dir: "data", real: "disk1/data"},
		{name: "brackets through a link", dir: "k[1]", real: "disk[2]/data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			logDir := filepath.Join(base, tc.dir)
			if tc.real != "" {
				if err := os.MkdirAll(filepath.Join(base, tc.real), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(base, tc.real), logDir); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(filepath.Join(logDir, "orders-0"), 0o755); err != nil {
				t.Fatal(err)
			}
			lock, err := os.Create(filepath.Join(logDir, ".lock"))
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Close()
			mv := Move{From: filepath.Join(logDir, "orders-0"), To: filepath.Join(base, "kremedy-quarantine", "run", "data", "orders-0")}
			run := func() (string, error) {
				var out strings.Builder
				err := steptest.LocalShell{Shell: "/bin/sh"}.Run(context.Background(), 1, shell.Script(moveScript([]Move{mv}, false)), func(l ports.Line) { out.WriteString(l.Text + "\n") })
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
		})
	}
}

// TestMoveScriptLockIsNotAPattern: a .lock held in another log dir that
// the log dir's name would match as a pattern ("k[1]" matches "k1") does
// not stop the wipe of this one.
func TestMoveScriptLockIsNotAPattern(t *testing.T) {
	base := t.TempDir()
	logDir, other := filepath.Join(base, "k[1]"), filepath.Join(base, "k1")
	for _, d := range []string{filepath.Join(logDir, "orders-0"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := os.Create(filepath.Join(other, ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	mv := Move{From: filepath.Join(logDir, "orders-0"), To: filepath.Join(base, "kremedy-quarantine", "run", "k[1]", "orders-0")}
	var out strings.Builder
	err = steptest.LocalShell{Shell: "/bin/sh"}.Run(context.Background(), 1, shell.Script(moveScript([]Move{mv}, false)), func(l ports.Line) { out.WriteString(l.Text + "\n") })
	if err != nil || !strings.Contains(out.String(), "moved "+mv.From) {
		t.Fatalf("k1/.lock held, k[1] wiped: %v\n%s", err, out.String())
	}
}
