package brokers

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogLinesScriptOnARealShell runs the script /bin/sh would run on a
// host: the last n lines holding the string, read from the file's end; a
// file that is not there exits 3; a hostile path is a path, never code.
func TestLogLinesScriptOnARealShell(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "it's $(touch pwned) `x`.log")
	log := "[1] INFO start\n[2] ERROR append failed (No space left on device)\n[3] INFO x\n[4] ERROR flush failed (No space left on device)\n[5] FATAL halt (No space left on device)\n[6] INFO stopped\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(p string) (string, error) {
		out, err := exec.Command("/bin/sh", "-c", LogLinesScript(p, ENOSPC, 2)).Output()
		return string(out), err
	}
	out, err := run(path)
	if err != nil || out != "[4] ERROR flush failed (No space left on device)\n[5] FATAL halt (No space left on device)\n" {
		t.Fatalf("got %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("the path ran as code")
	}
	_, err = run(filepath.Join(dir, "none.log"))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(ee.Stderr), "not there") {
		t.Fatalf("a missing file: %v", err)
	}
}
