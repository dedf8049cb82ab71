package space

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMoveScriptRefusesBlind runs moveFunc under /bin/sh with a fake
// /proc: a move goes ahead when every process's fd directory can be read
// and none holds the log dir's .lock; it is refused (exit 5) when one
// does, and (exit 6, naming become: sudo) when a /proc/PID/fd cannot be
// read or /proc/1 is hidden (hidepid), where the probe used to pass
// blind. Refused moves leave the source in place.
func TestMoveScriptRefusesBlind(t *testing.T) {
	for _, c := range []struct {
		name  string
		procs func(proc, lock string)
		code  int
		say   string
	}{
		{"every fd readable, no holder", func(proc, lock string) {}, 0, "moved "},
		{"a process holds the lock", func(proc, lock string) { fd(t, proc, "42", "7", lock) }, 5, "process 42 holds"},
		{"a fd directory cannot be read", func(proc, lock string) {
			mkdir(t, filepath.Join(proc, "43"))
			must(t, os.Symlink(filepath.Join(proc, "nowhere"), filepath.Join(proc, "43", "fd")))
		}, 6, "become: sudo"},
		{"/proc/1 hidden (hidepid)", func(proc, lock string) { must(t, os.RemoveAll(filepath.Join(proc, "1"))) }, 6, "hidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			proc, logDir := filepath.Join(tmp, "proc"), filepath.Join(tmp, "data")
			src, dst := filepath.Join(logDir, "orders-0"), filepath.Join(tmp, "q", "run", "orders-0")
			mkdir(t, src)
			must(t, os.WriteFile(filepath.Join(logDir, ".lock"), nil, 0o644))
			fd(t, proc, "1", "0", os.DevNull)
			mkdir(t, filepath.Join(proc, "2", "fd")) // a kernel thread: no fd
			c.procs(proc, filepath.Join(logDir, ".lock"))
			script := strings.Replace(moveFunc, "proc=/proc", "proc='"+proc+"'", 1)
			if script == moveFunc {
				t.Fatal("moveFunc no longer sets proc=/proc: the test cannot fake /proc")
			}
			cmd := exec.Command("/bin/sh", "-c", script+"kremedy_quarantine \"$0\" \"$1\"", src, dst)
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code || !strings.Contains(string(out), c.say) {
				t.Fatalf("exit %d, want %d saying %q:\n%s", code, c.code, c.say, out)
			}
			if _, err := os.Stat(src); (err == nil) != (c.code != 0) {
				t.Errorf("source present %v after exit %d", err == nil, code)
			}
		})
	}
}

func fd(t *testing.T, proc, pid, n, target string) {
	t.Helper()
	mkdir(t, filepath.Join(proc, pid, "fd"))
	must(t, os.Symlink(target, filepath.Join(proc, pid, "fd", n)))
}

func mkdir(t *testing.T, d string) {
	t.Helper()
	must(t, os.MkdirAll(d, 0o755))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
