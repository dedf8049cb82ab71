// Package connect opens what an inventory describes, in the one way every
// caller uses: the kremedy commands, inventory init and check, and the lab
// tests. Load and Open read the client.properties files the inventory names
// (config providers resolved, as Kafka's tools read them), dial ZooKeeper
// (none for a KRaft cluster), open the Kafka client and check that the
// brokers accept its security, and build the SSH fleet (hosts are reached
// lazily, on first use) and the run's lease: the engine's ports.Cluster,
// with the secrets the journal must never show. Init and InitKRaft read a
// live cluster for inventory init, KRaft voters from the brokers'
// controller.quorum.voters (Voters). An error the inventory or a file it
// names causes, before anything reached the cluster, is a *ConfigError.
package connect
