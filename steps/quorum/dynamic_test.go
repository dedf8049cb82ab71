package quorum

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// TestAppendScript: the records are appended once, only to a segment of
// the size the backup read; a second run finds them there; a segment
// that changed, or bytes that came damaged, are refused with nothing
// written.
func TestAppendScript(t *testing.T) {
	seg := filepath.Join(t.TempDir(), "00000000000000000000.log")
	orig := []byte("whole batches")
	os.WriteFile(seg, orig, 0o644)
	add := []byte("the voters records")
	running := false
	run := func(size int64, in []byte) (string, int) {
		cmd := exec.Command("/bin/sh", "-c", appendScript(seg, size, len(add), digest(add), running))
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		return string(out), 0
	}
	if out, code := run(int64(len(orig)), []byte("damaged records!!!")); code != 4 {
		t.Fatalf("damaged bytes: exit %d\n%s", code, out)
	}
	if out, code := run(int64(len(orig))+1, add); code != 3 || !strings.Contains(out, "nothing was written") {
		t.Fatalf("a segment of another size: exit %d\n%s", code, out)
	}
	running = true
	if out, code := run(int64(len(orig)), add); code != 5 || !strings.Contains(out, "the seed runs") {
		t.Fatalf("a running seed without the records: exit %d\n%s", code, out)
	}
	running = false
	if out, code := run(int64(len(orig)), add); code != 0 || !strings.Contains(out, "appended") {
		t.Fatalf("append: exit %d\n%s", code, out)
	}
	if out, code := run(int64(len(orig)), add); code != 0 || !strings.Contains(out, "holds the records already") {
		t.Fatalf("again: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(seg); string(b) != string(orig)+string(add) {
		t.Fatalf("the segment is %q", b)
	}
	// The seed led since and wrote after the records (a resume after its
	// start): they are found where they were appended, running or not.
	f, _ := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("LeaderChange, NoOps"))
	f.Close()
	running = true
	if out, code := run(int64(len(orig)), add); code != 0 || !strings.Contains(out, "holds the records already") {
		t.Fatalf("records followed by the seed's own: exit %d\n%s", code, out)
	}
}

// TestDynamicQuorumMixRefused: controllers whose configs disagree on the
// quorum's kind are refused; all dynamic is dynamic.
func TestDynamicQuorumMixRefused(t *testing.T) {
	c := func(id int32, dyn, reach bool) ctrlView {
		return ctrlView{Host: ports.Host{ID: id}, Dynamic: dyn, Reachable: reach}
	}
	if _, err := dynamicQuorum([]ctrlView{c(1, true, true), c(2, false, true)}); !errors.Is(err, steps.ErrRefused) || !errors.Is(err, errHalfDone) {
		t.Errorf("a static and a dynamic config: %v", err)
	}
	if dyn, err := dynamicQuorum([]ctrlView{c(1, true, true), c(2, false, false)}); err != nil || !dyn {
		t.Errorf("dynamic beside an unreachable one: %v %v", dyn, err)
	}
	if err := checkLogVoters([]VoterEntry{{ID: 1}, {ID: 2}}, ports.Target{Controllers: []ports.Host{{ID: 1}, {ID: 2}, {ID: 3}}}, 1); !errors.Is(err, steps.ErrRefused) {
		t.Errorf("a log voter set other than the inventory's: %v", err)
	}
}
