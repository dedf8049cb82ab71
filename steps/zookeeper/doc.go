// Package zookeeper is kremedy's port adapter over go-zookeeper. It applies
// the chroot that go-zookeeper lacks, bounds every call with a context (the
// library's calls take none), silences the library's stderr logger, decodes
// Kafka's znodes (ZK mode, Kafka 3.9 layout) and waits on watches rather
// than sleep-polling.
package zookeeper
