package brokers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/segments"
	"github.com/kremedy/kremedy/steps/steptest"
)

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
	missing := filepath.Join(dir, "no-such-dir")
	for _, sh := range []string{"/bin/sh", "/bin/bash", "no grep"} {
		t.Run(sh, func(t *testing.T) {
			if sh == "no grep" {
				// grep does not start (as with too many directories to
				// name at once): the shell reads the topic ids itself.
				bin := t.TempDir()
				ls, err := exec.LookPath("ls")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(ls, filepath.Join(bin, "ls")); err != nil {
					t.Fatal(err)
				}
				t.Setenv("PATH", bin)
				sh = "/bin/sh"
			}
			target := ports.Target{Hosts: []ports.Host{{ID: 1, Host: "localhost"}}}
			got := brokers.List(context.Background(), steptest.LocalShell{Shell: sh}, target, map[int32][]string{1: {dir}})
			if err := got.Err(target); err != nil || len(got.Unexpected) > 0 {
				t.Fatalf("%v; unexpected lines %v", err, got.Unexpected)
			}
			l := got.Entries[1][dir]
			slices.SortFunc(l, func(a, b segments.Entry) int { return strings.Compare(a.Name, b.Name) })
			if !slices.Equal(l, want) {
				t.Errorf("listing under %s:\n got %+v\nwant %+v", sh, l, want)
			}
			got = brokers.List(context.Background(), steptest.LocalShell{Shell: sh}, target, map[int32][]string{1: {dir, missing}})
			if err := got.Err(target); err == nil || !strings.Contains(err.Error(), "no-such-dir") || !strings.Contains(err.Error(), "do not exist") {
				t.Errorf("a missing log dir: %v", err)
			}
		})
	}
}

// TestListLogDirsLsFails: a listing whose ls fails is an error for that
// host, never an empty log dir.
func TestListLogDirsLsFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "orders-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir()) // no ls, no grep
	target := ports.Target{Hosts: []ports.Host{{ID: 1, Host: "localhost"}}}
	got := brokers.List(context.Background(), steptest.LocalShell{Shell: "/bin/sh"}, target, map[int32][]string{1: {dir}})
	if err := got.Err(target); err == nil || !strings.Contains(err.Error(), "could not be listed") {
		t.Fatalf("a listing without ls: %v, entries %v", err, got.Entries[1])
	}
}

// TestListLogDirsHostileNames: a directory whose name holds a line break
// or a tab could give another directory its topic id (grep prints names
// raw), so the host's listing is refused, naming it, under every way the
// listing runs (dash, bash, without grep), and even when ls did not see it
// (made between ls and grep): the topic-id lines it prints do not parse.
// Security review L3: "zzz\norders-0" with FORGED made orders-0 FORGED.
func TestListLogDirsHostileNames(t *testing.T) {
	const real = "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"
	for _, tc := range []struct {
		name    string
		hostile string
		shell   string // "/bin/sh" or "/bin/bash"
		noGrep  bool   // the shell reads the topic ids itself
		blindLs bool   // ls lists orders-0 only: the hostile name came after it
		want    string // in the refusal
	}{
		{name: "newline", hostile: "zzz\norders-0", shell: "/bin/sh", want: `"zzz?orders-0"`},
		{name: "newline under bash", hostile: "zzz\norders-0", shell: "/bin/bash", want: `"zzz?orders-0"`},
		{name: "newline without grep", hostile: "zzz\norders-0", shell: "/bin/sh", noGrep: true, want: `"zzz?orders-0"`},
		{name: "newline after ls", hostile: "zzz\norders-0", shell: "/bin/sh", blindLs: true, want: `"zzz"`},
		{name: "newline after ls without grep", hostile: "zzz\norders-0", shell: "/bin/sh", noGrep: true, blindLs: true, want: `"orders-0\tFORGEDFORGEDFORGEDFORGE"`},
		{name: "tab without grep", hostile: "orders-0\tFORGEDFORGEDFORGEDFORGE", shell: "/bin/sh", noGrep: true, want: `"orders-0?FORGEDFORGEDFORGEDFORGE"`},
		{name: "tab after ls without grep", hostile: "orders-0\tFORGEDFORGEDFORGEDFORGE", shell: "/bin/sh", noGrep: true, blindLs: true, want: `"0\ti\torders-0\tFORGEDFORGEDFORGEDFORGE\t`},
		{name: "listing lines", hostile: "z\n0\ti\torders-0\tFORGED\n0\tx\t\t\nq", shell: "/bin/sh", want: `"z?0?i?orders-0?FORGED?0?x???q"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, meta := range map[string]string{"orders-0": real, tc.hostile: "version: 0\ntopic_id: FORGEDFORGEDFORGEDFORGE\n"} {
				if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name, "partition.metadata"), []byte(meta), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.noGrep || tc.blindLs {
				bin := t.TempDir()
				if tc.blindLs {
					if err := os.WriteFile(filepath.Join(bin, "ls"), []byte("#!/bin/sh\necho orders-0/\n"), 0o755); err != nil {
						t.Fatal(err)
					}
				} else if ls, err := exec.LookPath("ls"); err != nil {
					t.Fatal(err)
				} else if err := os.Symlink(ls, filepath.Join(bin, "ls")); err != nil {
					t.Fatal(err)
				}
				if !tc.noGrep {
					grep, err := exec.LookPath("grep")
					if err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(grep, filepath.Join(bin, "grep")); err != nil {
						t.Fatal(err)
					}
				}
				t.Setenv("PATH", bin)
			}
			target := ports.Target{Hosts: []ports.Host{{ID: 1, Host: "localhost"}}}
			got := brokers.List(context.Background(), steptest.LocalShell{Shell: tc.shell}, target, map[int32][]string{1: {dir}})
			for _, e := range got.Entries[1][dir] {
				if e.TopicID != "" && e.TopicID != "AAAAAAAAAAAAAAAAAAAAAA" {
					t.Errorf("a forged topic id landed on %+v", e)
				}
			}
			err := got.Err(target)
			if !errors.Is(err, ports.ErrRefused) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "move it out of the log dir") {
				t.Fatalf("listing %q: %v, entries %+v; want a refusal naming %s", tc.hostile, err, got.Entries[1][dir], tc.want)
			}
		})
	}
}

// TestListLogDirsLinkedDirectory: a symbolic link to a directory is a
// directory, as Kafka's File.isDirectory has it.
func TestListLogDirsLinkedDirectory(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "orders-1")
	if err := os.MkdirAll(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "orders-1")); err != nil {
		t.Fatal(err)
	}
	target := ports.Target{Hosts: []ports.Host{{ID: 1, Host: "localhost"}}}
	got := brokers.List(context.Background(), steptest.LocalShell{Shell: "/bin/sh"}, target, map[int32][]string{1: {dir}})
	if err := got.Err(target); err != nil {
		t.Fatal(err)
	}
	if l := got.Entries[1][dir]; len(l) != 1 || l[0] != (segments.Entry{Name: "orders-1", IsDir: true}) {
		t.Errorf("entries %+v; want orders-1, a directory", l)
	}
}

// TestListLogDirsRefusesAPathAScriptCouldMisread: a log dir that is a glob,
// an expansion or two lines is never put in a command, wherever it came
// from (a broker's DescribeLogDirs answer reaches List unchecked).
func TestListLogDirsRefusesAPathAScriptCouldMisread(t *testing.T) {
	var h strictHosts
	target := ports.Target{Hosts: []ports.Host{{ID: 1, Host: "localhost"}}}
	for _, dir := range []string{"/data/k[1]", "/data/$(id)", "/data/k*", "/data/a b", "/data/x\ny", "data"} {
		got := brokers.List(context.Background(), &h, target, map[int32][]string{1: {"/data/ok", dir}})
		err := got.Err(target)
		if !errors.Is(err, ports.ErrRefused) || !strings.Contains(err.Error(), fmt.Sprintf("%q", dir)) || !strings.Contains(err.Error(), "did nothing with this broker's log dirs") {
			t.Errorf("%q: %v", dir, err)
		}
	}
	if h.ran != 0 {
		t.Errorf("%d commands ran", h.ran)
	}
}

// strictHosts counts the commands it is asked to run, and runs none (its
// other methods are not to be called: they panic).
type strictHosts struct {
	ports.Hosts
	ran int
}

func (h *strictHosts) Run(context.Context, int32, string, func(ports.Line)) error {
	h.ran++
	return errors.New("no command may run")
}
