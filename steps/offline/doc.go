// Package offline is the offline-partitions runbook's kind pack: partitions
// left without a leader after a multi-broker loss with
// unclean.leader.election.enable=false. offline-survey reads every
// replica's log end from its disk over SSH (brokers.ReadEnds) and says, per
// partition, what each way out loses; when a dead broker whose host answers
// holds the longest log, the run stops there (start it: nothing is lost).
// offline-elect reorders each partition's replica set so that the longest
// live log is first (the same set: AlterPartitionReassignments completes at
// once) and asks for an UNCLEAN election of exactly those partitions: Kafka
// alone would pick the first live replica in assignment order. offline-after
// names the consumer groups now committed past the log end, with the reset
// each needs, and the producers with a transaction still open.
package offline
