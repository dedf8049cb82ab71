package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kremedy/kremedy/internal/atomicfile"
)

// LabMarkerFile is the marker `kremedy lab up` writes beside the inventory
// it generates (lab.json's directory): it names that inventory and its
// sha256. `lab: true` waives an approval policy only for an inventory a
// marker vouches for, so a live cluster's inventory does not escape its
// policy by saying it is a lab.
const LabMarkerFile = "kremedy-lab.marker"

// ErrNoLabMarker: an inventory says lab: true, but no marker of `kremedy
// lab up` vouches for it as it is.
var ErrNoLabMarker = errors.New("no lab marker vouches for it")

type labMarker struct {
	// Inventory is the inventory's file name, in the marker's directory.
	Inventory string `json:"inventory"`
	// SHA256 is the inventory's content as `lab up` wrote it.
	SHA256 string `json:"sha256"`
}

// WriteLabMarker vouches for the inventory at path, as it is now, as a
// kremedy lab's (`kremedy lab up` calls it after writing the inventory).
func WriteLabMarker(path string) error {
	sum, err := fileSHA256(path)
	if err != nil {
		return err
	}
	b, err := json.Marshal(labMarker{Inventory: filepath.Base(path), SHA256: sum})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(filepath.Dir(path), LabMarkerFile), append(b, '\n'))
}

// CheckLabMarker is nil when the marker beside the inventory at path
// vouches for it as it is, or an ErrNoLabMarker saying why not (no marker,
// another inventory's, the inventory edited since).
func CheckLabMarker(path string) error {
	marker := filepath.Join(filepath.Dir(path), LabMarkerFile)
	fi, err := os.Lstat(marker)
	if err != nil {
		return fmt.Errorf("%w: %s has no %s beside it (`kremedy lab up` writes one with the inventory it generates)", ErrNoLabMarker, path, LabMarkerFile)
	}
	if !fi.Mode().IsRegular() || fi.Size() > 4<<10 {
		return fmt.Errorf("%w: %s is not a marker `kremedy lab up` wrote", ErrNoLabMarker, marker)
	}
	b, err := os.ReadFile(marker)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoLabMarker, err)
	}
	var m labMarker
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%w: %s is not a marker `kremedy lab up` wrote: %v", ErrNoLabMarker, marker, err)
	}
	if m.Inventory != filepath.Base(path) {
		return fmt.Errorf("%w: %s vouches for %s, not %s", ErrNoLabMarker, marker, m.Inventory, filepath.Base(path))
	}
	sum, err := fileSHA256(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoLabMarker, err)
	}
	if sum != m.SHA256 {
		return fmt.Errorf("%w: %s was changed since `kremedy lab up` wrote it (sha256 %.12s then, %.12s now)", ErrNoLabMarker, path, m.SHA256, sum)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	b, err := readLimited(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
