// Package brokers is what every part of kremedy reads about a cluster's
// brokers, through the ports only: the registrations and the controller,
// the one stop-safety rule (StopRisks, over Partition values read from
// ZooKeeper's states or from a broker's Metadata) with the one
// min.insync.replicas resolver (ReadMinISR), what a stop costs (Losses),
// the brokers' views compared (ViewDiff), the log dirs listed over SSH,
// what each broker runs (Releases), whether this ZooKeeper session may
// delete (MayDelete) and whether a chroot is a Kafka cluster's
// (CheckCluster). It changes nothing and imports no engine: diagnose, the
// lab and the inventory's checks use it as the kind packs do. What acts
// and journals (commands, waits, gates, the roller) is steps/roll.
package brokers
