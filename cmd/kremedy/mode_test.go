package main

import (
	"strings"
	"testing"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/runbooks"
)

// TestModeErrNamesTheWayForward: a runbook on an inventory of the other
// mode is refused naming the runbooks that fit (rolling-restart on KRaft:
// kraft-rolling-restart), and a runbook of the inventory's mode passes.
func TestModeErrNamesTheWayForward(t *testing.T) {
	get := func(name string) *runbooks.Runbook {
		rb, err := runbooks.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		return rb
	}
	kraft := &inventory.Inventory{Path: "k.yaml", Mode: inventory.ModeKRaft}
	zk := &inventory.Inventory{Path: "z.yaml"}
	err := modeErr(get("rolling-restart"), kraft)
	if err == nil {
		t.Fatal("rolling-restart accepted a KRaft inventory")
	}
	for _, w := range []string{"run kraft-rolling-restart instead", "the runbooks for kraft-mode clusters: ", "kraft-rolling-restart, quorum-recovery, quorum-to-dynamic, stray-cleanup)", "nothing was done", "kremedy diagnose --inventory k.yaml"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal lacks %q: %v", w, err)
		}
	}
	err = modeErr(get("kraft-rolling-restart"), zk)
	if err == nil || !strings.Contains(err.Error(), "rolling-restart") || strings.Contains(err.Error(), "run kraft-rolling-restart instead") {
		t.Errorf("kraft-rolling-restart on a ZooKeeper-mode inventory: %v", err)
	}
	if err := modeErr(get("kraft-rolling-restart"), kraft); err != nil {
		t.Errorf("kraft-rolling-restart on a KRaft inventory: %v", err)
	}
	if err := modeErr(get("topic-cleanup"), zk); err != nil {
		t.Errorf("topic-cleanup on a ZooKeeper-mode inventory: %v", err)
	}
}
