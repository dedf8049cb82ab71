package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// A wiped controller is a KRaft controller whose disk is lost: `lab
// controller wipe K` stops it and removes its metadata dir (the
// __cluster_metadata-0 log, quorum-state, meta.properties). The lab then
// never formats or starts it again by itself: formatting it anew with its
// old directory id is the case the Apache docs warn about ("If a majority
// of the controllers were able to start with an empty log directory, a
// leader might be able to be elected with missing committed data",
// docs/operations/kraft.md), and the way back is the quorum-recovery
// runbook (docs/quorum-recovery.md).

// WipeController stops controller k when it runs (its stop command over
// SSH, as `lab controller stop` does), removes its metadata dir and
// records it in the lab's state.
func (l *Lab) WipeController(ctx context.Context, k int, out func(string)) error {
	if !l.State.Config.KRaft {
		return fmt.Errorf("%w: `lab controller wipe` is for a KRaft lab's controllers (`lab up --kraft`); a migration lab's controllers are the zk-to-kraft runbook's", ErrWrongLab)
	}
	if l.controllerPID(k) > 0 {
		if err := l.ControllerCommand(ctx, k, "stop", out); err != nil {
			return fmt.Errorf("%w. Nothing was removed", err)
		}
	}
	dir := l.controllerMetadataDir(k)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove kraft controller %d's metadata dir %s: %w (it is stopped; remove the dir by hand or run the wipe again)", ControllerID(k), dir, err)
	}
	if !slices.Contains(l.State.Wiped, k) {
		l.State.Wiped = append(l.State.Wiped, k)
		slices.Sort(l.State.Wiped)
	}
	if err := l.Save(); err != nil {
		return err
	}
	out(fmt.Sprintf("kraft controller %d wiped: stopped, %s removed (a lost disk). `lab up` will neither format nor start it; the way back is `kremedy run quorum-recovery` (docs/quorum-recovery.md)", ControllerID(k), dir))
	return nil
}

// refuseWiped refuses `lab up` while a wiped controller's metadata dir
// is not formatted again (by the quorum-recovery runbook, which brings it
// back empty once the seed leads): up would format it with its old
// directory id and start it empty.
func (l *Lab) refuseWiped() error {
	for _, k := range l.State.Wiped {
		if _, err := os.Stat(filepath.Join(l.controllerMetadataDir(k), "meta.properties")); err == nil {
			continue
		}
		return fmt.Errorf("%w: kraft controller %d was wiped (`lab controller wipe`): its metadata log is gone. `lab up` did nothing: formatting it again with its old directory id and starting it empty is what Apache Kafka warns against (a majority of empty voters elects a leader without the committed metadata). The way back is the quorum-recovery runbook: `kremedy run quorum-recovery --inventory %s` (docs/quorum-recovery.md); `lab down` then `lab up` in a new dir starts afresh",
			ErrWrongLab, ControllerID(k), l.InventoryPath())
	}
	return nil
}
