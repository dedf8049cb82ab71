// Package segments decides which directories of a broker's log dirs hold one
// topic's partitions, the way Kafka 3.9 itself reads them
// (LocalLog.parseTopicPartitionName): a name is split on its last '-', so
// topic orders owns "orders-0", "orders-0.<uuid>-delete", "-future" and
// "-stray" but never "orders-v2-0"; -delete and -stray names that Kafka cut to
// 255 bytes are claimed only by the topic ID in their partition.metadata; and
// directories Kafka cannot parse, which stop a broker at start-up, are
// reported apart so that nobody moves them or leaves new ones behind. It reads
// names and file contents only; listing, reading and moving belong to the
// caller.
package segments
