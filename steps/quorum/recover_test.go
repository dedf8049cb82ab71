package quorum

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps"
)

func TestParseVoters(t *testing.T) {
	vs, err := ParseVoters(" 3001@c1:9093, 3002@c2:9093,3003@[::1]:9093 ")
	if err != nil || len(vs) != 3 || vs[2].ID != 3003 || vs[2].Entry != "3003@[::1]:9093" {
		t.Fatalf("ParseVoters: %+v %v", vs, err)
	}
	for _, bad := range []string{"", "c1:9093", "x@c1:9093", "3001@"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("ParseVoters(%q) took it", bad)
		}
	}
}

func TestWithVoters(t *testing.T) {
	cfg := "# controller\nprocess.roles=controller\ncontroller.quorum.voters=3001@a:1,3002@b:1\nlog.dirs=/x\n"
	got, err := withVoters([]byte(cfg), "3001@a:1")
	if err != nil || string(got) != strings.Replace(cfg, "3001@a:1,3002@b:1", "3001@a:1", 1) {
		t.Fatalf("withVoters: %q %v", got, err)
	}
	back, _ := withVoters(got, "3001@a:1,3002@b:1")
	if string(back) != cfg {
		t.Fatalf("withVoters back: %q", back)
	}
	// A $ in a value is written as is, never as a regexp group.
	if got, _ := withVoters([]byte(cfg), "3001@$1:1"); !strings.Contains(string(got), "voters=3001@$1:1\n") {
		t.Fatalf("withVoters with $: %q", got)
	}
	for _, bad := range []string{"log.dirs=/x\n", cfg + "controller.quorum.voters=1@z:1\n"} {
		if _, err := withVoters([]byte(bad), "3001@a:1"); err == nil {
			t.Errorf("withVoters of a config setting the voters not exactly once took it: %q", bad)
		}
	}
}

func TestMetaFor(t *testing.T) {
	seed := "#\nnode.id=3001\nversion=1\ncluster.id=abc\ndirectory.id=OLDOLDOLDOLDOLDOLDOLDw\n"
	got, err := metaFor([]byte(seed), 3002)
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	if !strings.Contains(s, "node.id=3002\n") || !strings.Contains(s, "cluster.id=abc\n") || strings.Contains(s, "OLDOLD") || !strings.Contains(s, "directory.id=") {
		t.Fatalf("metaFor: %q", s)
	}
	again, _ := metaFor([]byte(seed), 3002)
	if string(again) == s {
		t.Fatal("two meta.properties made for a lost disk share a directory id")
	}
	if _, err := metaFor([]byte("cluster.id=abc\n"), 3002); err == nil {
		t.Fatal("metaFor took a meta.properties without node.id")
	}
}

func TestControllerSeed(t *testing.T) {
	copies := []Copy{
		{Node: 3001, Controller: true, End: 39, Epoch: 2, Dir: "/c1/__cluster_metadata-0"},
		{Node: 3002, Controller: true, Err: "no directory"},
		{Node: 1, End: 61, Epoch: 3, Dir: "/b1/__cluster_metadata-0"},
		{Node: 2, End: 61, Epoch: 3, Dir: "/b2/__cluster_metadata-0"},
	}
	_, err := controllerSeed(copies, -1)
	if !errors.Is(err, steps.ErrRefused) {
		t.Fatalf("a broker's copy ahead of every controller's: %v", err)
	}
	for _, want := range []string{"broker 1 holds the newest copy", "--set seed=3001", "copy the broker's /b1/__cluster_metadata-0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	s, err := controllerSeed(copies, 3001)
	if err != nil || s.Node != 3001 {
		t.Fatalf("--set seed=3001: %v %v", s, err)
	}
	if b := beyondNodes(copies, s); len(b) != 2 || b[0] != 1 || b[1] != 2 {
		t.Fatalf("beyond the chosen seed: %v", b)
	}
	for _, bad := range []int32{3002, 1, 9} {
		if _, err := controllerSeed(copies, bad); !errors.Is(err, steps.ErrRefused) {
			t.Errorf("--set seed=%d: %v", bad, err)
		}
	}
	copies[0].End, copies[0].Epoch = 61, 3
	if s, err := controllerSeed(copies, -1); err != nil || s.Node != 3001 || len(beyondNodes(copies, s)) != 0 {
		t.Fatalf("a controller tied with the brokers: %v %v", s, err)
	}
	// A shorter copy of a later epoch diverges too.
	copies[2].End, copies[2].Epoch = 50, 4
	if b := beyondNodes(copies, copies[0]); len(b) != 1 || b[0] != 1 {
		t.Fatalf("a copy of a later epoch is not beyond the seed: %v", b)
	}
}

// TestLedgerFetched: the segments of a copy beyond the seed are fetched
// over the host's shell from the one holding the seed's end on (the
// segment before it left), and the rewrite's ledger decodes them: the
// topic created beyond the seed is named, as lost.
func TestLedgerFetched(t *testing.T) {
	seg, _, _ := segment(t)
	remote := t.TempDir()
	split := batchEnd(t, seg, 1)
	os.WriteFile(filepath.Join(remote, "00000000000000000000.log"), seg[:split], 0o644)
	os.WriteFile(filepath.Join(remote, "00000000000000000003.log"), seg[split:], 0o644)
	os.WriteFile(filepath.Join(remote, "00000000000000000003.index"), []byte("not a log"), 0o644)
	run := t.TempDir()
	if err := fetchLedger(context.Background(), &shHosts{}, run, fetchArgs{Node: 2, Dir: remote, From: 4}); err != nil {
		t.Fatal(err)
	}
	got, _ := filepath.Glob(filepath.Join(ledgerDir(run, 2), "*"))
	if len(got) != 1 || filepath.Base(got[0]) != "00000000000000000003.log" {
		t.Fatalf("fetched %v, want the segment holding offset 4 only", got)
	}
	r := Recovery{Seed: Copy{Node: 3001, Controller: true, End: 4, Epoch: 4}, Copies: []Copy{{Node: 3001, Controller: true, End: 4, Epoch: 4}, {Node: 2, End: 13, Epoch: 4}}, Beyond: []int32{2}}
	lines, lost := r.ledgerLines(run)
	text := strings.Join(lines, "\n")
	if !slices.Equal(lost, []string{"fresh"}) || !strings.Contains(text, "broker 2: offsets 4 to 12 beyond the seed's end") || !strings.Contains(text, "topic fresh created") || strings.Contains(text, "SECRET") {
		t.Fatalf("ledger: lost %v\n%s", lost, text)
	}
	// A second copy with the same tail is listed with the first, once.
	if err := fetchLedger(context.Background(), &shHosts{}, run, fetchArgs{Node: 1, Dir: remote, From: 4}); err != nil {
		t.Fatal(err)
	}
	r.Copies, r.Beyond = append(r.Copies, Copy{Node: 1, End: 13, Epoch: 4}), []int32{1, 2}
	two, _ := r.ledgerLines(run)
	if len(two) != len(lines) || !strings.HasPrefix(two[0], "broker 2, broker 1: offsets 4 to 12") {
		t.Fatalf("two copies with the same tail:\n%s", strings.Join(two, "\n"))
	}
	if l, lost := (Recovery{Seed: r.Seed, Copies: r.Copies}).ledgerLines(run); len(l) != 0 || len(lost) != 0 {
		t.Fatalf("a recovery with no copy beyond the seed lists %v %v", l, lost)
	}
}

// TestAsideScript: a copy is moved aside once (a second run finds it
// there); on a running node it is only checked, and a node that runs its
// old log (never moved aside) is refused with exit 5.
func TestAsideScript(t *testing.T) {
	root := t.TempDir()
	d, a := filepath.Join(root, "m", MetadataLog), filepath.Join(root, "m."+MetadataLog+".kremedy-aside-r1")
	os.MkdirAll(d, 0o755)
	run := func(running bool) (string, int) {
		out, err := exec.Command("/bin/sh", "-c", asideScript(d, a, running)).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return string(out), code
	}
	if out, code := run(true); code != 5 || !strings.Contains(out, "never moved aside") {
		t.Fatalf("a running node with its old copy: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(d); err != nil {
		t.Fatal("the refusal moved the copy")
	}
	if out, code := run(false); code != 0 || !strings.Contains(out, "moved") {
		t.Fatalf("move aside: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatalf("not moved: %v", err)
	}
	os.MkdirAll(d, 0o755) // the node started again, empty, and fetched the seed's log
	for _, running := range []bool{false, true} {
		if out, code := run(running); code != 0 || !strings.Contains(out, "moved aside before") {
			t.Fatalf("again (running %v): exit %d\n%s", running, code, out)
		}
	}
	if _, err := os.Stat(d); err != nil {
		t.Fatal("a second run moved the new copy")
	}
}

// TestBackupScript: the backup is made whole or not at all; a copy cut
// short earlier is kept aside and the copy made again; a second run finds
// the backup there.
func TestBackupScript(t *testing.T) {
	root := t.TempDir()
	d, b := filepath.Join(root, "m", MetadataLog), filepath.Join(root, "m."+MetadataLog+".kremedy-backup-r1")
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "00000000000000000000.log"), []byte("log"), 0o644)
	os.MkdirAll(b+".partial", 0o755) // an earlier copy, cut short
	for i := 0; i < 2; i++ {
		if out, err := exec.Command("/bin/sh", "-c", backupScript(d, b)).CombinedOutput(); err != nil {
			t.Fatalf("backup: %v\n%s", err, out)
		}
	}
	if got, err := os.ReadFile(filepath.Join(b, "00000000000000000000.log")); err != nil || string(got) != "log" {
		t.Fatalf("the backup: %q %v", got, err)
	}
	if _, err := os.Stat(b + ".partial"); !os.IsNotExist(err) {
		t.Fatalf("a .partial is left under the backup's name: %v", err)
	}
	if kept, _ := filepath.Glob(b + ".partial.*"); len(kept) != 1 {
		t.Fatalf("the copy cut short is not kept: %v", kept)
	}
}

// TestUnreadControllersRefused: a controller whose copy exists but could
// not be read would start with a log nobody saw; a lost disk (no
// directory) and a fenced controller are not refused.
func TestUnreadControllersRefused(t *testing.T) {
	copies := []Copy{{Node: 3001, Controller: true, End: 5}, {Node: 3002, Controller: true, Err: "no directory __cluster_metadata-0 in its log dirs"}, {Node: 1, Err: "permission denied"}}
	if err := unreadControllers(copies, nil); err != nil {
		t.Fatalf("a lost disk and an unread broker copy refused: %v", err)
	}
	copies = append(copies, Copy{Node: 3003, Controller: true, Err: "leader-epoch-checkpoint: torn"})
	if err := unreadControllers(copies, nil); !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "controller 3003") {
		t.Fatalf("an unread controller copy: %v", err)
	}
	if err := unreadControllers(copies, []int32{3003}); err != nil {
		t.Fatalf("a fenced controller refused: %v", err)
	}
}

func TestWithVotersRefusesAContinuedLine(t *testing.T) {
	cfg := "controller.quorum.voters=3001@a:1,\\\n  3002@b:1\nlog.dirs=/x\n"
	if _, err := withVoters([]byte(cfg), "3001@a:1"); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Fatalf("a voters line continued over the next: %v", err)
	}
}
