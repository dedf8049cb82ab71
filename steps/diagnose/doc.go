// Package diagnose is kremedy's read-only analysis of a ZooKeeper-mode
// cluster (`kremedy diagnose`, and topic-cleanup's first screen): findings,
// each with its evidence, a severity, the fix and what not to do, grouped by
// cause — a finding that a root cause explains (a broker that is down, a
// missing controller, a topic's ghost: a stuck deletion, another topic's
// segments, a cache of a topic ZooKeeper lost) names that cause. Run reads
// ZooKeeper's cluster state (brokers, controller, topics, partition states,
// deletion markers), every registered broker's own metadata and its release
// (ApiVersions), broker configs, offsets and first records' times, consumer
// groups, and whether each ZooKeeper server listens; a disagreement is read
// again before it counts. With Options.Disk it lists every broker's log dirs
// over SSH; with Options.Migration it adds the ZooKeeper → KRaft readiness
// verdict (migration.go). It changes nothing: its Metadata requests never
// create topics, it writes nothing to ZooKeeper, and on a host it runs
// nothing but a listing of the log dirs. docs/diagnose.md lists every
// finding and the JSON form.
package diagnose
