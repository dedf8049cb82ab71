package brokers

import (
	"context"
	"fmt"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// CheckCluster is every preflight's first look at ZooKeeper: it refuses a
// chroot that is not a Kafka cluster's (no /brokers/ids or /cluster/id: a
// wrong chroot silently starts a new, empty cluster), a cluster migrating
// to KRaft (migrating says why that matters to this runbook) and, on
// resume, another cluster than the run's first preflight saw (priorID,
// "" on a first run). connect and inventory name the inventory's
// zookeeper.connect and file in the messages. It returns the cluster's id
// and what the check it passed saw.
func CheckCluster(ctx context.Context, zk ports.ZooKeeper, connect, inventory, priorID, migrating string) (id, passed string, err error) {
	chroot := zk.Chroot()
	if chroot == "" {
		chroot = "(no chroot)"
	}
	for _, need := range []string{kafkazk.BrokerIDsPath, kafkazk.ClusterIDPath} {
		if ok, _, err := zk.Exists(ctx, need); err != nil {
			return "", "", fmt.Errorf("ZooKeeper %s: %w", connect, err)
		} else if !ok {
			return "", "", fmt.Errorf("%w: ZooKeeper chroot %s has no %s: this is not the Kafka cluster's chroot (a wrong chroot silently starts a new, empty cluster). Check zookeeper.connect in the inventory against the brokers' server.properties; nothing was changed", ports.ErrRefused, chroot, need)
		}
	}
	if ok, _, err := zk.Exists(ctx, kafkazk.MigrationPath); err != nil {
		return "", "", err
	} else if ok {
		ctrl, found, err := ControllerZNode(ctx, zk)
		if err != nil {
			return "", "", err
		}
		if kid, migrated, err := Migrated(ctx, zk); err != nil {
			return "", "", err
		} else if migrated {
			return "", "", fmt.Errorf("%w: this cluster runs in KRaft mode since its migration from ZooKeeper: KRaft controller %d holds %s%s and no broker registers in ZooKeeper any more, so this ZooKeeper-mode inventory no longer describes it; %s. Nothing was changed", ports.ErrRefused, kid, zk.Chroot(), kafkazk.ControllerPath, MigratedHint)
		}
		if !found || !ctrl.KRaft() {
			return "", "", fmt.Errorf("%w: %s%s exists but no KRaft controller holds %s%s: it is left from an earlier, reverted migration attempt (a later attempt would skip the metadata sync, Strimzi #11262) — or the cluster is migrating and its KRaft controller has not taken over yet. If no migration is under way, delete it after reading it (`get %s%s`; zk-to-kraft-revert's reset-znodes step deletes it with a copy); %s. Nothing was changed", ports.ErrRefused, zk.Chroot(), kafkazk.MigrationPath, zk.Chroot(), kafkazk.ControllerPath, zk.Chroot(), kafkazk.MigrationPath, migrating)
		}
		return "", "", fmt.Errorf("%w: %s%s exists: the cluster is migrating from ZooKeeper to KRaft; %s. Nothing was changed", ports.ErrRefused, zk.Chroot(), kafkazk.MigrationPath, migrating)
	}
	passed = fmt.Sprintf("%s has %s and %s, no %s", chroot, kafkazk.BrokerIDsPath, kafkazk.ClusterIDPath, kafkazk.MigrationPath)
	if b, _, err := zk.Get(ctx, kafkazk.ClusterIDPath); err == nil {
		id = kafkazk.ClusterID(b)
	}
	// A resumed run must be on the cluster it started on: an inventory
	// edited (or a DNS name moved) between attempts would otherwise carry
	// the run's later, destructive steps to another cluster.
	if priorID != "" && id != priorID {
		return id, passed, fmt.Errorf("%w: this run started on the cluster with id %s, but %s%s now says %q: the inventory points at another cluster. Nothing was changed; check the inventory (%s)", ports.ErrRefused, priorID, zk.Chroot(), kafkazk.ClusterIDPath, id, inventory)
	}
	return id, passed, nil
}

// ClusterCheckName is the name of the check CheckCluster passed.
const ClusterCheckName = "ZooKeeper chroot is a Kafka cluster"
