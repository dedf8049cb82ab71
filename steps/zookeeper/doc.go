// Package zookeeper is kremedy's port adapter over go-zookeeper. It applies
// the chroot that go-zookeeper lacks, bounds every call with a context (the
// library's calls take none), silences the library's stderr logger, decodes
// Kafka's znodes (ZK mode, Kafka 3.9 layout), waits by reading every 100 ms
// (never a watch: see waitEvery), and reads a whole cluster's topic state fast (Scan: many
// reads in flight, pipelined on the one session).
package zookeeper
