// Package reassign is the kind pack of reassignment-unstick: a partition
// reassignment that cannot finish (a target broker down, a replication
// throttle too low for the bytes left) and the throttle configs such moves
// leave behind. reassign-save keeps the assignment before the move (the
// original replicas, in kafka-reassign-partitions' JSON) and the throttles
// as the rollback; reassign-unstick acts per partition as the operator
// chose (Decide: cancel only when the original replicas are live and in
// sync, KAFKA-14424; retarget away from a dead broker; raise the
// throttle); throttle-sweep waits for the moves to end and removes every
// *.throttled.* config on the brokers and topics; reassign-verify checks
// that no move is in flight, no partition is leaderless and no throttle
// is left. What the cluster's reassignments are is read by
// brokers.ReadReassigning, which diagnose shares.
package reassign
