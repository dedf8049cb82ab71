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
}
