// Package migrate is the ZooKeeper → KRaft migration's kind pack (KIP-866,
// Kafka 3.9): the runbooks zk-to-kraft and zk-to-kraft-revert.
//
// Where the migration stands is observed, never remembered: every node's
// config file (read over SSH) says what each broker and controller runs
// as, /migration and /controller say whether the KRaft controller migrated
// the metadata and holds ZooKeeper's controller role, and DescribeQuorum
// asked of the controllers says whether their quorum has a leader. The
// phase (Observe) decides what each step plans and what a revert can do.
//
// Brokers and controllers are restarted by the one roller (steps/roll),
// one at a time with their own stop and start commands; their config files
// are edited while they are stopped (the roll's While: configWhile,
// finalizeWhile), after a backup beside each file
// (<file>.kremedy-before-<where>), with a check that the file is still what
// the plan read. A config file holds the node's passwords, so its new
// content is in no plan, journal record, event or command line: the plan
// carries the path, the sha256 of the file it read and of the content it
// will write, and the diff with every secret masked; Apply computes the
// content again from what the plan was made of, refuses one whose sha256
// is not the plan's (a stale plan), and sends it on the SSH session's
// standard input to a script that checks it before it renames it into
// place. The brokers are seen over Kafka (roll.KafkaBrokers),
// because KRaft brokers no longer register in ZooKeeper, and each stop is
// judged by the same stop-safety rule as a rolling restart's. A resumed
// run never restarts a node again whose roll this run already finished.
package migrate
