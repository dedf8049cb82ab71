// Package diagnose is kremedy's read-only analysis of a cluster, in
// ZooKeeper mode or KRaft mode (`kremedy diagnose`, and topic-cleanup's
// first screen): findings, each with its evidence, a severity, the fix and
// what not to do, grouped by cause — a finding that a root cause explains
// (a broker that is down, a missing controller, a topic's ghost: a stuck
// deletion, another topic's segments, a cache of a topic ZooKeeper lost)
// names that cause. In ZooKeeper mode Run reads ZooKeeper's cluster state
// (brokers, controller, topics, partition states, deletion markers), every
// registered broker's own metadata and its release (ApiVersions), broker
// configs, offsets and first records' times, consumer groups, and whether
// each ZooKeeper server listens; a disagreement is read again before it
// counts. On a KRaft cluster (a `mode: kraft` inventory, kraft.go) no
// ZooKeeper is dialled: it reads the metadata quorum (DescribeQuorum), the
// brokers registered and unfenced, every broker's own metadata and the
// finalized features over Kafka alone, and over SSH the `-stray` logs and
// the logs that will become strays. In both modes a run that holds the
// cluster's lease is named (lease.go, `lease-held`). With Options.Disk it
// lists every broker's log dirs over SSH; with Options.Migration it adds
// the ZooKeeper → KRaft readiness verdict (migration.go). It changes
// nothing: its Metadata requests never create topics, it writes nothing to
// ZooKeeper, and on a host it runs nothing but reads: a listing of the log
// dirs, and on a KRaft controller host a read of the lease's holder file.
// docs/diagnose.md lists every finding and the JSON form.
package diagnose
