// Package lease holds the adapters of ports.Lease, the one-run-at-a-time
// lease kremedy takes on a cluster before a run's first change: in
// ZooKeeper mode an ephemeral znode under the cluster's chroot (ZK), in
// KRaft mode a lock directory on a majority of the controller hosts,
// reached over SSH (KRaft). Both name the run, the operator and the
// machine that hold it, and both lapse by themselves when the holder dies.
package lease
