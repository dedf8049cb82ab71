// Package steptest holds strict fakes of the ports — ZK (an in-memory
// ZooKeeper with versions, ACLs, watches and ephemeral owners), Kafka
// (brokers answering from the fake ZooKeeper, with stale caches on demand),
// Hosts (broker hosts with log dirs and stop/start commands; any command it
// does not know fails the test) and LocalShell (commands on this machine's
// real shell) — the ghost-topic state the unit tests start from (Ghost),
// and the conformance suites (CoordinatorConformance, StateConformance,
// KafkaConformance) that the fakes and the real adapters — against a real
// ZooKeeper, and on franz-go's kfake — both pass,
// so that a fake cannot drift from the real thing.
package steptest
