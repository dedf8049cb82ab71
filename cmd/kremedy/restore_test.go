package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
)

// TestInventoryOfIsTheRunsInventory: a restore without --inventory uses the
// inventory of the run whose directory holds the backup, however deep.
func TestInventoryOfIsTheRunsInventory(t *testing.T) {
	dir := t.TempDir()
	rb := &steps.Runbook{Name: "topic-cleanup", Confirm: steps.Confirmation{Word: "orders", Noun: "topic"}}
	s, err := steps.Create(dir, rb, steps.NewMeta(rb, "/srv/prod.yaml", "prod", false, "test", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	backup := filepath.Join(dir, "backup", "znodes", "orders.json")
	if err := os.MkdirAll(filepath.Dir(backup), 0o700); err != nil {
		t.Fatal(err)
	}
	if inv, err := inventoryOf(backup); err != nil || inv != "/srv/prod.yaml" {
		t.Errorf("inventoryOf(%s) = %q, %v", backup, inv, err)
	}
	if inv, err := inventoryOf(filepath.Join(t.TempDir(), "b.json")); err == nil {
		t.Errorf("no run around the file: %q", inv)
	}
}
