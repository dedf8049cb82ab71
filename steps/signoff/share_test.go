package signoff_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/signoff"
)

// TestSharedApprovalModes (review M4): in a run shared with its
// approvers' group, approvals/ is 3770 (setgid: files take the group;
// sticky: nobody removes or replaces another's) and the request, the
// operator's signature and an approver's signature are 0640, whatever the
// umask; in a run that is not shared they stay 0700 and 0600. (That the
// group's other members can then add but not remove files is the lab's
// to prove: TestTeamLab, two local users.)
func TestSharedApprovalModes(t *testing.T) {
	k := newKeys(t)
	old := syscall.Umask(0o077) // the strictest an operator's shell has
	defer syscall.Umask(old)
	gid := os.Getegid()
	for _, tc := range []struct {
		name           string
		shared         bool
		wantDir        fs.FileMode
		wantFile, want fs.FileMode
	}{
		{name: "shared", shared: true, wantDir: fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o770, wantFile: 0o640},
		{name: "the operator's alone", wantDir: fs.ModeDir | 0o700, wantFile: 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			mode := fs.FileMode(0o700)
			if tc.shared {
				mode = steps.SharedDirMode
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			var l lines
			a := &signoff.Approver{Inner: &strictApprover{t: t, want: []string{"stop-brokers"}}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: k.allowed, Timeout: 20 * time.Second},
				Run: "run-1", Dir: dir, Shared: tc.shared, Key: k.key("alice"), Signer: signoff.Keygen{}, Report: &l, Log: l.log, Poll: 20 * time.Millisecond}
			done := approveAsync(a)
			req := request(t, dir, "")
			check := func(path string, want fs.FileMode) {
				t.Helper()
				fi, err := os.Lstat(path)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode() != want {
					t.Errorf("%s: mode %v, want %v", filepath.Base(path), fi.Mode(), want)
				}
				if st := fi.Sys().(*syscall.Stat_t); int(st.Gid) != gid {
					t.Errorf("%s: group %d, want the run directory's %d", filepath.Base(path), st.Gid, gid)
				}
			}
			check(filepath.Join(dir, signoff.Dir), tc.wantDir)
			check(signoff.RequestPath(dir, "stop-brokers"), tc.wantFile)
			ops, _ := filepath.Glob(filepath.Join(dir, signoff.Dir, "*+operator.sig"))
			if len(ops) != 1 {
				t.Fatalf("the operator's signature: %v", ops)
			}
			check(ops[0], tc.wantFile)
			bob := sign(t, k, dir, req, "bob", "bob@example.com")
			check(bob, tc.wantFile)
			if r := wait(t, done, &l); r.err != nil || len(r.ap.Signoffs) != 2 {
				t.Fatalf("approval: %+v, %v\n%s", r.ap, r.err, l.text())
			}
		})
	}
}

// TestMakeDirRefusesALink: approvals/ that is a symbolic link (to a
// directory of someone else's choosing) is not made shared, nor used.
func TestMakeDirRefusesALink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, signoff.Dir)); err != nil {
		t.Fatal(err)
	}
	if err := signoff.MakeDir(dir, true); err == nil {
		t.Fatal("a link was taken for approvals/")
	}
}
