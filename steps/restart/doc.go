// Package restart is the kind pack of the rolling restarts: cluster-preflight
// (read only: the chroot is a Kafka cluster's, every registered broker is in
// the inventory, every broker host answers over SSH, how healthy the cluster
// is now) and rolling-restart, which restarts brokers one at a time, the
// controller last, so that every broker reloads its metadata from ZooKeeper
// without an outage: the one roller (steps/roll) over the brokers seen in
// ZooKeeper (roll.ZooKeeperBrokers). Before each stop it refuses when
// stopping that broker would take any partition offline or below
// min.insync.replicas (brokers.StopRisks); between brokers it holds the
// health gate. A resumed run never restarts a broker twice: a broker
// registered under another ZooKeeper session than when the roll began is
// a new process.
package restart
