package journal

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestSecondWriterIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal.jsonl")
	j, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(RunStart, "", map[string]int{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(p); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open while the first is open: %v, want ErrInUse", err)
	}
	if _, err := Read(p); err != nil {
		t.Fatalf("Read must not need the lock: %v", err)
	}
	j.Close()
	j2, recs, err := Open(p)
	if err != nil || len(recs) != 1 {
		t.Fatalf("Open after Close: %v %d", err, len(recs))
	}
	j2.Close()
}
