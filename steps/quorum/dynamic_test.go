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

// TestSeedFromBroker: --set copy_from names a broker whose copy is the
// newest; the seed is the best controller's copy as it will be (the
// broker's end and epoch in the controller's dir), nothing beyond it; a
// broker behind, or none, is refused.
func TestSeedFromBroker(t *testing.T) {
	copies := []Copy{
		{Node: 3001, Controller: true, End: 39, Epoch: 2, Dir: "/c1/__cluster_metadata-0", MetaDir: "/c1"},
		{Node: 3002, Controller: true, Err: "no directory"},
		{Node: 1, End: 61, Epoch: 3, Dir: "/b1/__cluster_metadata-0"},
		{Node: 2, End: 61, Epoch: 3, Dir: "/b2/__cluster_metadata-0"},
		{Node: 3, End: 50, Epoch: 3, Dir: "/b3/__cluster_metadata-0"},
	}
	if _, err := controllerSeed(copies, -1); err == nil || !strings.Contains(err.Error(), "--set copy_from=1") {
		t.Errorf("the refusal does not name copy_from: %v", err)
	}
	seed, from, err := seedFromBroker(copies, 1, -1)
	if err != nil || seed.Node != 3001 || seed.Dir != "/c1/__cluster_metadata-0" || seed.End != 61 || seed.Epoch != 3 || from.Node != 1 {
		t.Fatalf("copy_from=1: seed %+v from %+v, %v", seed, from, err)
	}
	if b := beyondNodes(copies, seed); len(b) != 0 {
		t.Errorf("beyond a seed copied from the newest copy: %v", b)
	}
	for _, bad := range []int32{3, 9, 3001} {
		if _, _, err := seedFromBroker(copies, bad, -1); !errors.Is(err, steps.ErrRefused) {
			t.Errorf("copy_from=%d: %v", bad, err)
		}
	}
	if _, _, err := seedFromBroker(copies, 1, 3002); !errors.Is(err, steps.ErrRefused) {
		t.Errorf("copy_from=1 over controller 3002, whose copy is gone: %v", err)
	}
}

// TestUntarScript: the copy received takes the controller copy's place,
// which is kept aside, owned as its parent; a tar without the copy is
// refused with nothing changed.
func TestUntarScript(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "b", "data.__cluster_metadata-0.kremedy-backup-r1")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "00000000000000000000.log"), []byte("broker's"), 0o644)
	tarball, err := exec.Command("tar", "-C", filepath.Dir(src), "-cf", "-", filepath.Base(src)).Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "c", MetadataLog)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), []byte("controller's"), 0o644)
	aside := filepath.Join(root, "c."+MetadataLog+".kremedy-before-copy-r1")
	run := func(name string, in []byte) (string, int) {
		cmd := exec.Command("/bin/sh", "-c", untarScript(dir, aside, name))
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		return string(out), 0
	}
	if out, code := run("other", tarball); code != 4 {
		t.Fatalf("a tar without the copy named: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "00000000000000000000.log")); string(b) != "controller's" {
		t.Fatalf("the refusal changed the controller's copy: %q", b)
	}
	if out, code := run(filepath.Base(src), tarball); code != 0 {
		t.Fatalf("copy: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "00000000000000000000.log")); string(b) != "broker's" {
		t.Errorf("the controller's copy is %q after the copy", b)
	}
	if b, _ := os.ReadFile(filepath.Join(aside, "00000000000000000000.log")); string(b) != "controller's" {
		t.Errorf("the controller's own copy was not kept aside: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "c", ".kremedy-copy.*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestWithBootstrap: the voters line becomes the bootstrap servers line,
// whatever its separator; a continued line, a key set twice, or the
// bootstrap servers beside it are refused; nothing else changes.
func TestWithBootstrap(t *testing.T) {
	for _, line := range []string{"controller.quorum.voters=1@h:9093", "controller.quorum.voters = 1@h:9093", "  controller.quorum.voters:1@h:9093"} {
		cfg := "a=1\n" + line + "\nb=2\n"
		got, err := withBootstrap([]byte(cfg), "h:9093")
		if err != nil || string(got) != "a=1\ncontroller.quorum.bootstrap.servers=h:9093\nb=2\n" {
			t.Errorf("%q: %q, %v", line, got, err)
		}
	}
	for _, cfg := range []string{
		"controller.quorum.voters=1@h:9093,\\\n 2@g:9093\n",
		"controller.quorum.voters=1@h:9093\ncontroller.quorum.voters=2@g:9093\n",
		"controller.quorum.voters=1@h:9093\ncontroller.quorum.bootstrap.servers=h:9093\n",
	} {
		if _, err := withBootstrap([]byte(cfg), "h:9093"); err == nil {
			t.Errorf("%q was converted", cfg)
		}
	}
}
