package brokers

import (
	"context"
	"fmt"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// CheckCluster is every preflight's first look at ZooKeeper: it refuses a
// chroot that is not a Kafka cluster's (no /brokers/ids or /cluster/id: a
// wrong chroot silently starts a new, empty cluster), a cluster migrating
// to KRaft (migrating says why that matters to this runbook) and, on
// resume, another cluster than the run's first preflight saw (priorID,
// "" on a first run). It returns the cluster's id and the check it passed.
func CheckCluster(ctx context.Context, env *steps.Env, priorID, migrating string) (string, steps.Check, error) {
	zk := env.ZK
	chroot := zk.Chroot()
	if chroot == "" {
		chroot = "(no chroot)"
	}
	for _, need := range []string{kafkazk.BrokerIDsPath, kafkazk.ClusterIDPath} {
		if ok, _, err := zk.Exists(ctx, need); err != nil {
			return "", steps.Check{}, fmt.Errorf("ZooKeeper %s: %w", env.Target.ZKConnect, err)
		} else if !ok {
			return "", steps.Check{}, fmt.Errorf("%w: ZooKeeper chroot %s has no %s: this is not the Kafka cluster's chroot (a wrong chroot silently starts a new, empty cluster). Check zookeeper.connect in the inventory against the brokers' server.properties; nothing was changed", steps.ErrRefused, chroot, need)
		}
	}
	if ok, _, err := zk.Exists(ctx, kafkazk.MigrationPath); err != nil {
		return "", steps.Check{}, err
	} else if ok {
		return "", steps.Check{}, fmt.Errorf("%w: %s%s exists: the cluster is migrating from ZooKeeper to KRaft; %s. Nothing was changed", steps.ErrRefused, zk.Chroot(), kafkazk.MigrationPath, migrating)
	}
	check := steps.Check{Name: "ZooKeeper chroot is a Kafka cluster", OK: true, Detail: fmt.Sprintf("%s has %s and %s, no %s", chroot, kafkazk.BrokerIDsPath, kafkazk.ClusterIDPath, kafkazk.MigrationPath)}
	var id string
	if b, _, err := zk.Get(ctx, kafkazk.ClusterIDPath); err == nil {
		id = kafkazk.ClusterID(b)
	}
	// A resumed run must be on the cluster it started on: an inventory
	// edited (or a DNS name moved) between attempts would otherwise carry
	// the run's later, destructive steps to another cluster.
	if priorID != "" && id != priorID {
		return id, check, fmt.Errorf("%w: this run started on the cluster with id %s, but %s%s now says %q: the inventory points at another cluster. Nothing was changed; check the inventory (%s)", steps.ErrRefused, priorID, zk.Chroot(), kafkazk.ClusterIDPath, id, env.Inventory())
	}
	return id, check, nil
}
