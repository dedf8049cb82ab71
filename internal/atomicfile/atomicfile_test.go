package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestModes: WriteFile's files are 0600 whatever the umask and the
// directory (a shared run's setgid 2750 directory: a backup written there
// stays the operator's alone); WriteFileMode's have the mode asked for,
// even under umask 077, and replacing a file gives the new one that mode.
func TestModes(t *testing.T) {
	for _, umask := range []int{0, 0o077} {
		old := syscall.Umask(umask)
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o750|fs.ModeSetgid); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			perm fs.FileMode
		}{{"backup.json", 0o600}, {"request.json", 0o640}, {"sub/backup.json", 0o600}} {
			path := filepath.Join(dir, tc.name)
			var err error
			if tc.perm == 0o600 {
				err = WriteFile(path, []byte("x"))
			} else {
				err = WriteFileMode(path, []byte("x"), tc.perm)
			}
			if err == nil && tc.perm != 0o600 {
				err = WriteFileMode(path, []byte("y"), tc.perm) // replaced
			}
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode() != tc.perm {
				t.Errorf("umask %#o: %s: %v %v, want %v", umask, tc.name, fi.Mode(), err, tc.perm)
			}
		}
		if fi, err := os.Stat(filepath.Join(dir, "sub")); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("umask %#o: a new parent: %v %v, want 0700", umask, fi.Mode(), err)
		}
		syscall.Umask(old)
	}
}
