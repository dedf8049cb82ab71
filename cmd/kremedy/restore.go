package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/drill"
	"github.com/kremedy/kremedy/inventory/connect"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/cleanup"
)

// inventoryOf finds the inventory a run used, from the journal of the run
// directory that holds path (the backup or the manifest).
func inventoryOf(path string) (string, error) {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if meta, err := steps.ReadMeta(dir); err == nil && meta.Inventory != "" {
			return meta.Inventory, nil
		}
		if dir == filepath.Dir(dir) {
			return "", errors.New("no --inventory given and no run journal found beside the file; pass --inventory")
		}
	}
}

// connectFor connects to the cluster of --inventory, or of the run that
// wrote path when none is given.
func connectFor(ctx context.Context, path, inv string) (*connect.Clients, error) {
	if inv == "" {
		var err error
		if inv, err = inventoryOf(path); err != nil {
			return nil, usageErr(err)
		}
	}
	return openCluster(ctx, inv)
}

func restoreErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, steps.ErrRefused) {
		return failedErr(err)
	}
	if errors.Is(err, os.ErrNotExist) {
		return usageErr(err)
	}
	return failedErr(err)
}

func newZnodesCmd() *cobra.Command {
	var inv string
	var force, brk bool
	restore := &cobra.Command{
		Use:   "restore BACKUP",
		Short: "Recreate the znodes of a run's backup (data and ACLs); refuses to overwrite existing ones unless --force",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			actsOn(cmd, drill.Invocation{Inventory: inv})
			return restoreZnodes(cmd, args[0], inv, force, brk)
		},
	}
	restore.Flags().StringVar(&inv, "inventory", "", "inventory of the cluster (default: the one the run used)")
	restore.Flags().BoolVar(&force, "force", false, "restore only the missing znodes when some exist (existing ones are never overwritten)")
	restore.Flags().BoolVar(&brk, "break-lease", false, breakLeaseUsage)
	c := &cobra.Command{Use: "znodes", Short: "ZooKeeper backups of a run"}
	c.AddCommand(restore)
	return group(c)
}

func newSegmentsCmd() *cobra.Command {
	var inv string
	var brk bool
	restore := &cobra.Command{
		Use:   "restore MANIFEST",
		Short: "Move a run's quarantined partition directories back into their log dirs (brokers must be stopped)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			actsOn(cmd, drill.Invocation{Inventory: inv})
			return restoreSegments(cmd, args[0], inv, brk)
		},
	}
	restore.Flags().StringVar(&inv, "inventory", "", "inventory of the cluster (default: the one the run used)")
	restore.Flags().BoolVar(&brk, "break-lease", false, breakLeaseUsage)
	c := &cobra.Command{Use: "segments", Short: "Quarantined partition directories of a run"}
	c.AddCommand(restore)
	return group(c)
}

// breakLeaseUsage is the --break-lease flag of the commands that change a
// cluster outside a run.
const breakLeaseUsage = "break the cluster's lease (held by a kremedy run, named when it refuses) before taking it: only after making sure that run is dead"

// restoreZnodes is `znodes restore`: the backup at path written back into ZooKeeper under the cluster's lease.
func restoreZnodes(cmd *cobra.Command, path, inv string, force, brk bool) error {
	cl, err := connectFor(cmd.Context(), path, inv)
	if err != nil {
		return err
	}
	defer cl.Close()
	if cl.ZK == nil {
		return usageErr(fmt.Errorf("znodes restore writes the run's backup into ZooKeeper, and %s describes a KRaft cluster (mode: kraft), which has none; nothing was done", cl.Inv.Path))
	}
	out := cmd.OutOrStdout()
	return restoreErr(steps.HoldLease(cmd.Context(), cl.Ports.Lease, "znodes restore", brk, out, func() error {
		return cleanup.RestoreZnodes(cmd.Context(), cl.ZK, path, force, out)
	}))
}

// restoreSegments is `segments restore`: the quarantined directories of the manifest at path moved back, under the cluster's lease.
func restoreSegments(cmd *cobra.Command, path, inv string, brk bool) error {
	cl, err := connectFor(cmd.Context(), path, inv)
	if err != nil {
		return err
	}
	defer cl.Close()
	out := cmd.OutOrStdout()
	if err := steps.HoldLease(cmd.Context(), cl.Ports.Lease, "segments restore", brk, out, func() error {
		return cleanup.RestoreSegments(cmd.Context(), cl.Ports, path, out)
	}); err != nil {
		return restoreErr(err)
	}
	fmt.Fprintln(cmd.OutOrStdout(), "start the brokers only after the znodes are restored too")
	return nil
}
