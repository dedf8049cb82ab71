package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWipeController: a stopped controller's wipe removes its metadata
// dir and records it; `lab up` (refuseWiped) then refuses it, naming the
// runbook, until the dir is formatted again (meta.properties back).
func TestWipeController(t *testing.T) {
	l := &Lab{Dir: t.TempDir(), State: State{Format: FormatVersion, Config: Config{Net: 250, KRaft: true, KRaftControllers: 3, Brokers: 3}}}
	meta := l.controllerMetadataDir(2)
	seg := filepath.Join(meta, "__cluster_metadata-0", "00000000000000000000.log")
	if err := os.MkdirAll(filepath.Dir(seg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.refuseWiped(); err != nil {
		t.Fatalf("refuseWiped before any wipe: %v", err)
	}
	var said []string
	if err := l.WipeController(context.Background(), 2, func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(meta); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("metadata dir after wipe: %v", err)
	}
	back, err := Open(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.State.Wiped, []int{2}) {
		t.Fatalf("recorded wiped = %v, want [2]", back.State.Wiped)
	}
	err = back.refuseWiped()
	if !errors.Is(err, ErrWrongLab) || !strings.Contains(err.Error(), "quorum-recovery") || !strings.Contains(err.Error(), "3002") {
		t.Fatalf("refuseWiped = %v, want ErrWrongLab naming controller 3002 and quorum-recovery", err)
	}
	if err := os.MkdirAll(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := back.refuseWiped(); err == nil {
		t.Fatal("an empty recreated metadata dir (no meta.properties) was accepted")
	}
	if err := os.WriteFile(filepath.Join(meta, "meta.properties"), []byte("node.id=3002\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := back.refuseWiped(); err != nil {
		t.Fatalf("refuseWiped once formatted again: %v", err)
	}
}
