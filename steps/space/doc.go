// Package space is the disk-full runbook's kind pack: free space on a
// broker's full log dir without losing a record any consumer group has not
// committed past, and bring the dir back online.
//
//   - space-move-dirs: on a running broker with several log dirs (JBOD),
//     move replicas off a dir short of headroom to the broker's online dir
//     on another filesystem with the most room (AlterReplicaLogDirs), and
//     wait until Kafka swapped each in and freed the old copy. Nothing is
//     lost, so it goes first. An offline dir's replicas cannot be moved.
//   - space-free-records: only while a dir is full or offline or the
//     broker is down; per partition in the broker's dirs, DeleteRecords no
//     further than the lowest offset every consumer group committed on it
//     (Bound), with the bytes that frees from the segments' sizes read over
//     SSH (brokers.PartitionSpace.FreedBelow). A partition no group has
//     committed on is left alone: nothing says what was read.
//   - space-quarantine: while the broker is down (Kafka stopped it: its
//     only dir failed), or running with a full dir offline (it is then
//     stopped first), its filesystem must have room before it can start
//     (3.9.2 crashes rebuilding an index on a full tmpfs). Whole partition
//     directories whose data lives on an in-sync replica elsewhere are moved
//     to a quarantine on another filesystem (a move, never a delete); the
//     broker fetches them again from the leader's new log start offset.
//     The only copy of a partition is never moved.
//   - space-start: start the broker (or restart it when a dir of a running
//     broker is offline), wait for it to register, its dirs online and
//     every partition back in ISR.
//
// Never rm a segment: nothing here deletes a file.
package space
