// Package atomicfile writes files so that a crash leaves either the old
// content or the new, never a torn file: the data goes to a temporary file
// beside the target, which is fsynced, renamed over the target, and the
// directory fsynced. Files are private (0600, new parent directories 0700):
// they hold backups of a cluster's metadata. WriteFileMode gives a file
// another mode (a run shared with its approvers' group: 0640), whatever
// the umask.
package atomicfile

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to path (0600, parent 0700) and fsyncs both.
func WriteFile(path string, data []byte) error {
	return WriteFileMode(path, data, 0o600)
}

// WriteFileMode writes data to path with mode perm (set on the temporary
// file before the rename, so the umask does not narrow it and the file
// is never seen with another mode), a missing parent 0700, and fsyncs
// both. In a setgid directory the file takes the directory's group.
func WriteFileMode(path string, data []byte, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if perm != 0o600 { // CreateTemp's own
		if err := tmp.Chmod(perm); err != nil {
			tmp.Close()
			return err
		}
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// WriteJSON writes v as indented JSON, durably (0600).
func WriteJSON(path string, v any) error {
	return WriteJSONMode(path, v, 0o600)
}

// WriteJSONMode writes v as indented JSON, durably, with mode perm.
func WriteJSONMode(path string, v any, perm fs.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileMode(path, append(b, '\n'), perm)
}
