// Package roll is the one rolling restart every runbook stands on
// (rolling-restart, topic-cleanup's rolling mode, each roll of the ZooKeeper
// → KRaft migration, kraft-rolling-restart's controllers then brokers, and
// stray-cleanup's stray-roll of the brokers that hold would-be strays), and
// the acts the kind packs share on a running
// cluster: a node's own commands over SSH (RunOn), waits (WaitGone,
// WaitFor, WaitListening, WaitQuorum), the health gates (Gate over
// ZooKeeper and every broker's Metadata, Health over the brokers' Metadata
// alone, held by Hold), and the cluster check every preflight starts with.
//
// A Roll restarts nodes one at a time, the last one (the controller, the
// quorum's leader) last. Each node is a unit of actions with a typed Phase
// in their Args — safe (the one stop-safety rule, brokers.StopRisks, read
// right before the stop), stop, gone, what While does while it is stopped
// (its own actions: a config edit, directories moved to a quarantine),
// start, back, gate — and the run's history is read by step, phase and
// node. A node this run already touched goes first on resume, and no node
// is restarted twice in a run.
//
// What differs between rolls is a Nodes: how a node is listed, looked at
// (up; a new process), waited for and gated. ZooKeeperBrokers sees brokers
// registered in ZooKeeper (a new process has a new session); KafkaBrokers
// sees them only through Kafka (the migration's rolls, kraft-rolling-restart,
// stray-roll); Controllers are the KRaft controllers (finalize's roll,
// kraft-rolling-restart). A Nodes that is also a Guard reads the Snapshot the
// stop-safety rule judges; the plan refuses before the first stop when
// any node's stop would not be safe. A new kind of roll is a new Nodes and,
// if work is done while a node is stopped, a While (a Skipper when some
// nodes need no restart).
//
// The package registers a roll's parameter types with the engine
// (TypeBrokers, TypeTopics, TypeBatch); its files hold one layer each:
// phase.go the vocabulary of the actions, snapshot.go the rule, plan.go the
// planning, apply.go the applying, roll.go the Roll and its seams.
package roll
