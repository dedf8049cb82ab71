package brokers_test

import (
	"context"
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
	missing := filepath.Join(dir, "no such dir")
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
			if err := got.Err(target); err == nil || !strings.Contains(err.Error(), "no such dir") {
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

// TestListLogDirsHostileNames: a directory whose name holds line ends and
// tabs cannot forge the listing's own lines (another directory's topic id,
// a missing dir), and a symbolic link to a directory is a directory, as
// Kafka's File.isDirectory has it.
func TestListLogDirsHostileNames(t *testing.T) {
	dir := t.TempDir()
	for name, meta := range map[string]string{
		"orders-0":                               "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",
		"z\n0\ti\torders-0\tFORGED\n0\tx\t\t\nq": "version: 0\ntopic_id: HOSTILEHOSTILEHOSTILE0\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "partition.metadata"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
	}
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
	byName := map[string]segments.Entry{}
	for _, e := range got.Entries[1][dir] {
		byName[e.Name] = e
	}
	if e := byName["orders-0"]; !e.IsDir || e.TopicID != "AAAAAAAAAAAAAAAAAAAAAA" {
		t.Errorf("orders-0 %+v: a hostile name forged its topic id", e)
	}
	if e := byName["orders-1"]; !e.IsDir {
		t.Errorf("orders-1, a link to a directory: %+v", e)
	}
	if len(got.Entries[1][dir]) != 3 {
		t.Errorf("entries %+v, want orders-0, orders-1 and the hostile one on one line", got.Entries[1][dir])
	}
	for _, e := range got.Entries[1][dir] {
		if e.TopicID == "HOSTILEHOSTILEHOSTILE0" || e.TopicID == "FORGED" {
			t.Errorf("a forged topic id landed on %+v", e)
		}
	}
}
