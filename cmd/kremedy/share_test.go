package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/steptest"
)

// TestSharedRunRefusedBeforeAnything (review M4): a policy.group that
// does not exist, that the operator is not in, or that could not reach the
// run directory (a directory above it the group cannot search) exits 2,
// naming the group and the fix, before any run directory exists.
func TestSharedRunRefusedBeforeAnything(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "alice")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, _ := os.ReadFile(key + ".pub")
	f := strings.Fields(string(pub))
	signers := filepath.Join(dir, "signers")
	os.WriteFile(signers, []byte("alice@example.com "+f[0]+" "+f[1]+"\n"), 0o600)
	own, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Fatal(err)
	}
	open := reachableDir(t)
	for _, tc := range []struct {
		name, group, runDir, want string
	}{
		{"no such group", "kremedy-no-such-group", filepath.Join(open, "a"), "policy.group kremedy-no-such-group: group: unknown group kremedy-no-such-group — create the group (groupadd kremedy-no-such-group)"},
		{"the operator is not in it", steptest.ForeignGroup(t), filepath.Join(open, "b"), "not in group " + steptest.ForeignGroup(t)},
		// t.TempDir is 0700: the group cannot search it.
		{"the group cannot reach the run directory", own.Name, filepath.Join(dir, "runs", "c"), "the approvers cannot reach the run directory " + filepath.Join(dir, "runs", "c") + ": " + filepath.Dir(dir) + " (mode 0700"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := filepath.Join(dir, "inventory.yaml")
			os.WriteFile(inv, []byte(teamInventory+fmt.Sprintf("policy:\n  approvals: 2\n  allowed_signers: %s\n  group: %s\n", signers, tc.group)), 0o600)
			r := kremedy(t, "run", "rolling-restart", "--headless", "--yes", "--confirm", "prod", "--run-dir", tc.runDir, "--inventory", inv, "--key", key)
			if r.code != 2 || !strings.Contains(r.out, tc.want) || !strings.Contains(r.out, "nothing was done") {
				t.Errorf("exit %d, want 2 saying %q\n%s", r.code, tc.want, r.out)
			}
			if _, err := os.Lstat(tc.runDir); !os.IsNotExist(err) {
				t.Errorf("a refused run made its directory: %v", err)
			}
		})
	}
}

// TestApproveUnreadableRunNamesTheGroup: approve's error for a journal it
// cannot read names the group the run is shared with (the lab test shows
// it to a user outside the group: TestTeamLab).
func TestApproveUnreadableRunNamesTheGroup(t *testing.T) {
	own, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Fatal(err)
	}
	shared, private := filepath.Join(t.TempDir(), "run"), filepath.Join(t.TempDir(), "run")
	os.Mkdir(shared, 0o700)
	os.Chmod(shared, 0o750|fs.ModeSetgid)
	os.Mkdir(private, 0o700)
	for dir, want := range map[string]string{
		shared:  "cannot read " + filepath.Join(shared, "journal.jsonl") + ": permission denied — this run is shared with group " + own.Name + " (policy.group); ask to be added to it, or approve where the run directory is readable; nothing was signed",
		private: "the run directory is its operator's alone (mode 0700): an inventory's policy.group shares a run",
	} {
		if err := unreadableRun(dir, fs.ErrPermission); !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant %q", err, want)
		}
	}
}

// reachableDir is a temporary directory every user can search.
func reachableDir(t *testing.T) string {
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
