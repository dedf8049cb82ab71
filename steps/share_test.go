package steps_test

import (
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/steptest"
)

// ownGroup is the name of this process's group.
func ownGroup(t *testing.T) (string, int) {
	t.Helper()
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Fatal(err)
	}
	return g.Name, os.Getegid()
}

func sharedMeta(rb *steps.Runbook, group string) steps.Meta {
	m := steps.NewMeta(rb, "/etc/kremedy/prod.yaml", "prod", false, "v1", time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	m.Policy = &steps.PolicyRecord{Approvals: 2, AllowedSigners: "/etc/kremedy/allowed_signers", Enforced: true, Group: group}
	return m
}

func mode(t *testing.T, path string) (fs.FileMode, int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode(), int(fi.Sys().(*syscall.Stat_t).Gid)
}

// TestCreateShared (review M4): a run whose policy names a group makes its
// directory (and the missing ones above it) the group's, setgid 2750,
// and its journal 0640, whatever the umask; a run without one stays
// 0700/0600; a group that does not exist or the operator is not in is
// refused before anything is made.
func TestCreateShared(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "word", Noun: "thing"}}
	name, gid := ownGroup(t)

	t.Run("shared", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "runs", "run")
		s, err := steps.Create(dir, rb, sharedMeta(rb, name))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if m, g := mode(t, d); m != fs.ModeDir|steps.SharedDirMode || g != gid {
				t.Errorf("%s: mode %v group %d, want %v group %d", d, m, g, fs.ModeDir|steps.SharedDirMode, gid)
			}
		}
		if m, g := mode(t, s.JournalPath()); m != 0o640 || g != gid {
			t.Errorf("journal: mode %v group %d, want 0640 group %d", m, g, gid)
		}
		if meta, err := steps.ReadMeta(dir); err != nil || meta.Policy.Group != name {
			t.Errorf("the run-start record's policy: %+v, %v", meta.Policy, err)
		}
		if !strings.Contains(sharedMeta(rb, name).Policy.String(), "shared with group "+name) {
			t.Errorf("the policy's text does not name the group: %s", sharedMeta(rb, name).Policy)
		}
	})
	t.Run("not shared", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		s, err := steps.Create(dir, rb, sharedMeta(rb, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if m, _ := mode(t, dir); m != fs.ModeDir|0o700 {
			t.Errorf("run dir: %v, want 0700", m)
		}
		if m, _ := mode(t, s.JournalPath()); m != 0o600 {
			t.Errorf("journal: %v, want 0600", m)
		}
	})
	for _, tc := range []struct{ name, group, want string }{
		{"no such group", "kremedy-no-such-group", "groupadd kremedy-no-such-group"},
		{"the operator is not in it", steptest.ForeignGroup(t), "not in group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "runs", "run")
			_, err := steps.Create(dir, rb, sharedMeta(rb, tc.group))
			if !errors.Is(err, steps.ErrShare) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was done") {
				t.Fatalf("err %v, want ErrShare saying %q", err, tc.want)
			}
			if _, err := os.Lstat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("something was made: %v", err)
			}
		})
	}
}

// TestShareReach: the approvers' group must be able to search every
// directory above the run directory: others' x, or the group's own x.
func TestShareReach(t *testing.T) {
	name, gid := ownGroup(t)
	for _, tc := range []struct {
		name    string
		mode    fs.FileMode
		other   bool // the parent's group is not the approvers'
		wantErr bool
	}{
		{name: "0755", mode: 0o755, other: true},
		{name: "0711", mode: 0o711, other: true},
		{name: "2770 of the group", mode: 0o770 | fs.ModeSetgid},
		{name: "0750 of another group", mode: 0o750, other: true, wantErr: true},
		{name: "0700", mode: 0o700, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := reachable(t)
			parent := filepath.Join(base, "runs")
			if err := os.Mkdir(parent, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(parent, tc.mode); err != nil {
				t.Fatal(err)
			}
			// The parent is this process's group's; the approvers' is
			// that one, or (other) another.
			approvers := gid
			if tc.other {
				approvers = gid + 12345
			}
			note, err := steps.ShareReach(filepath.Join(parent, "run"), name, approvers)
			if tc.wantErr != (err != nil) || note != "" {
				t.Fatalf("err %v note %q, want an error: %v", err, note, tc.wantErr)
			}
			if err != nil && (!errors.Is(err, steps.ErrShare) || !strings.Contains(err.Error(), parent+" (mode") || !strings.Contains(err.Error(), "--run-dir /srv/kremedy/runs/RUN")) {
				t.Errorf("the error does not name the directory and the fix: %v", err)
			}
		})
	}
}

// reachable is a temporary directory every user can search (t.TempDir's
// are 0700), below /tmp.
func reachable(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kremedy-share-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
