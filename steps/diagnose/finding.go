package diagnose

import (
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// Severity of a finding.
type Severity string

const (
	Critical Severity = "critical"
	Warning  Severity = "warning"
	// Info is a finding that needs no repair (an upgrade available, a state
	// that settles by itself): it is shown, and the diagnosis stays healthy.
	Info Severity = "info"
)

// Finding kinds: every kind a diagnosis reports, in one block (Kinds lists
// them; TestEveryKindIsDocumented holds them to docs/diagnose.md). The JSON
// form of a diagnosis uses these names.
const (
	FindStuckDeletion    = "stuck-deletion"
	FindStaleMetadata    = "stale-metadata"
	FindDisagreement     = "metadata-disagreement"
	FindOrphanedSegments = "orphaned-segments"
	FindForeignSegments  = "foreign-segments"
	FindAdoptedSegments  = "adopted-segments"
	FindStrayDirectory   = "stray-directory"
	FindUnderReplicated  = "under-replicated"
	FindOffline          = "offline-partitions"
	// FindOfflineLogEnds is one cause across topics: partitions without a
	// leader whose in-sync replicas are all on the same dead brokers, with
	// each replica's log end read from its disk (offline.go).
	FindOfflineLogEnds    = "offline-log-ends"
	FindUnderMinISR       = "under-min-isr"
	FindLeaderNotInISR    = "leader-not-in-isr"
	FindLeaderNotServing  = "leader-not-serving"
	FindUnsafeAutoCreate  = "unsafe-auto-create"
	FindDeleteDisabled    = "delete-disabled"
	FindBrokerUnreachable = "broker-unreachable"
	FindDiskUnlisted      = "disk-unlisted"
	FindCorruptZnode      = "corrupt-znode"
	FindBrokerDown        = "broker-down"
	FindNoController      = "no-controller"
	FindZKServerDown      = "zookeeper-server-down"

	// Findings about what ZooKeeper holds against itself and against the
	// brokers, partition by partition (zk.go).
	FindUnregisteredReplica   = "unregistered-replica"
	FindStateNotInAssignment  = "state-not-in-assignment"
	FindMissingPartitionState = "missing-partition-state"
	FindMissingTopicID        = "missing-topic-id"
	FindUnknownToBrokers      = "partitions-unknown-to-brokers"
	FindUnknownToZooKeeper    = "partitions-unknown-to-zookeeper"

	// FindFewerReplicas is one cause across topics: partitions created with
	// fewer replicas than the min.insync.replicas in force. acks=all writes to
	// them can never succeed, and no replica is missing: restoring replicas or
	// a topic cleanup would not help (fewer.go).
	FindFewerReplicas = "fewer-replicas-than-min-isr"

	// FindSettling is a topic whose views disagree while it is expected to:
	// created within the settle window, a partition reassignment or a
	// preferred-leader election in flight. Informational: it never pages and
	// never points at a destructive runbook (settle.go).
	FindSettling = "settling"

	// FindLeaseHeld: a kremedy run holds the cluster's lease (info, lease.go).
	FindLeaseHeld = "lease-held"

	// A partition reassignment that cannot finish (a target broker down, a
	// throttle too low for the bytes left), and throttle configs left with
	// no reassignment in flight (reassign.go).
	FindStuckReassignment = "stuck-reassignment"
	FindThrottleLeft      = "throttle-left-behind"

	// Finding kinds of a KRaft cluster (kraft.go).
	FindQuorumMargin        = "quorum-margin"              // a voter down or lagging: the margin left
	FindQuorumNoLeader      = "quorum-no-leader"           // the metadata quorum answers without a leader
	FindQuorumUnreachable   = "quorum-unreachable"         // no controller nor broker answers DescribeQuorum
	FindQuorumLost          = "quorum-lost"                // fewer than a majority of the voters run (quorum_lost.go)
	FindQuorumWedged        = "quorum-wedged"              // a leader, but the metadata log does not advance (wedge.go)
	FindControllerNotVoter  = "controller-not-voter"       // an inventory controller the quorum does not list
	FindBrokerFenced        = "broker-fenced"              // registered with the controllers, not serving
	FindStrayLogs           = "stray-logs"                 // -stray directories Kafka set aside
	FindWouldBeStray        = "would-be-stray"             // a log Kafka will set aside at the broker's next start
	FindNoPartitionMetadata = "missing-partition-metadata" // a partition directory without partition.metadata
	FindFeatureLevel        = "feature-level"              // metadata.version below what the brokers run
	FindMigratedToKRaft     = "migrated-to-kraft"          // a ZooKeeper inventory of a cluster that migrated
	FindMigrationLeftover   = "migration-leftover"         // a config or znode the migration left behind

	// Findings only a migration readiness check makes (diagnose --migration,
	// migration.go).
	FindMigrationRelease      = "migration-release"
	FindMigrationJBOD         = "migration-jbod-ibp"
	FindMigrationGeneratedID  = "migration-generated-broker-id"
	FindMigrationReassignment = "migration-reassignment-in-flight"
	FindMigrationZnode        = "migration-znode"
	FindMigrationNoMetadata   = "migration-partition-metadata-missing"
	FindMigrationControlPlane = "migration-control-plane-listener"
	// The migration's rolls would take partitions no restart can keep
	// available out of service: unaccepted, a blocker; accepted
	// (Options.Accept), advice.
	FindMigrationUnavailable = "migration-roll-unavailable"
	FindMigrationAccepted    = "migration-roll-accepted"

	// FindLogDirFull is a log dir whose filesystem is full (95% used or
	// more, or under 1 MiB free) or that its broker took offline: Kafka
	// takes a dir offline on an I/O error such as ENOSPC and stops a broker
	// whose every dir failed. The cause of that broker's broker-down
	// (linkCauses; space.go).
	FindLogDirFull = "log-dir-full"
)

// Kinds is every finding kind, in the order of their declaration above.
var Kinds = []string{
	FindStuckDeletion, FindStaleMetadata, FindDisagreement, FindOrphanedSegments, FindForeignSegments,
	FindAdoptedSegments, FindStrayDirectory, FindUnderReplicated, FindOffline, FindOfflineLogEnds, FindUnderMinISR,
	FindLeaderNotInISR, FindLeaderNotServing, FindUnsafeAutoCreate, FindDeleteDisabled,
	FindBrokerUnreachable, FindDiskUnlisted, FindCorruptZnode, FindBrokerDown, FindNoController,
	FindZKServerDown, FindUnregisteredReplica, FindStateNotInAssignment, FindMissingPartitionState,
	FindMissingTopicID, FindUnknownToBrokers, FindUnknownToZooKeeper, FindFewerReplicas, FindSettling,
	FindLeaseHeld, FindStuckReassignment, FindThrottleLeft, FindQuorumMargin, FindQuorumNoLeader, FindQuorumUnreachable, FindQuorumLost, FindQuorumWedged,
	FindControllerNotVoter, FindBrokerFenced, FindStrayLogs, FindWouldBeStray,
	FindNoPartitionMetadata, FindFeatureLevel, FindMigratedToKRaft, FindMigrationLeftover,
	FindMigrationRelease, FindMigrationJBOD, FindMigrationGeneratedID, FindMigrationReassignment,
	FindMigrationZnode, FindMigrationNoMetadata, FindMigrationControlPlane, FindMigrationUnavailable,
	FindMigrationAccepted, FindLogDirFull,
}

// Finding is one problem, with its evidence and what repairs it.
type Finding struct {
	// ID names the finding within the diagnosis ("broker-down/1",
	// "under-replicated/orders").
	ID         string   `json:"id"`
	Kind       string   `json:"kind"`
	Severity   Severity `json:"severity"`
	Topic      string   `json:"topic,omitempty"`
	Brokers    []int32  `json:"brokers,omitempty"`
	Partitions []int32  `json:"partitions,omitempty"`
	Summary    string   `json:"summary"`
	Evidence   []string `json:"evidence"`
	Fix        string   `json:"fix"`
	DoNot      string   `json:"do_not,omitempty"`
	Runbook    string   `json:"runbook,omitempty"`
	// Cause is the ID of the finding that explains this one (a broker that
	// is down, the topic's ghost); "" for a root cause.
	Cause string `json:"cause,omitempty"`
}

// Diagnosis is what `kremedy diagnose` reports. Its JSON form is stable:
// fields are only ever added.
type Diagnosis struct {
	Version    int       `json:"version"` // 1
	Cluster    string    `json:"cluster"`
	Topic      string    `json:"topic,omitempty"` // "" for the whole cluster
	Healthy    bool      `json:"healthy"`
	Brokers    []int32   `json:"brokers"` // registered in ZooKeeper
	Controller int32     `json:"controller"`
	Topics     int       `json:"topics_scanned"`
	Disk       bool      `json:"disk_checked"` // log dirs listed over SSH
	Findings   []Finding `json:"findings"`
	// Shared are causes several topics share, with the one command that
	// repairs them all (sharedCauses).
	Shared []Shared `json:"shared_causes,omitempty"`
	Took   string   `json:"took"`
	// Releases is what each registered broker runs (ApiVersions, IBP);
	// Methods what kremedy judges differently because of it.
	Releases brokers.Releases `json:"releases,omitempty"`
	Methods  []string         `json:"methods,omitempty"`
	// Migration is the ZooKeeper → KRaft readiness verdict (--migration).
	Migration *Readiness `json:"migration,omitempty"`
	// Mode is "kraft" for a KRaft cluster ("" in ZooKeeper mode); such a
	// diagnosis has the metadata quorum and the finalized features.
	Mode     string          `json:"mode,omitempty"`
	Quorum   *ports.Quorum   `json:"quorum,omitempty"`
	Features *ports.Features `json:"features,omitempty"`
}

// Options narrow or widen a diagnosis.
type Options struct {
	Topic string // "" for the whole cluster
	// Disk lists every broker's log dirs over SSH.
	Disk bool
	// Migration adds the ZooKeeper → KRaft migration's readiness checks
	// and verdict (Diagnosis.Migration).
	Migration bool
	// Settle is the settle window (DefaultSettle when 0): how long a
	// disagreement must last to count, and how young a topic is settling.
	Settle time.Duration
	// Accept: the topics whose partitions no restart can keep available
	// that the migration's rolls are to accept (brokers.AcceptParam; "*"
	// for every one): advice, not a blocker.
	Accept []string
	// Lease reads the cluster's lease and reports a run holding it
	// (lease-held). `kremedy diagnose` does; a run's own diagnosis does
	// not (the lease it would find is its own).
	Lease bool
}

const cleanupFix = "run the topic-cleanup runbook: `kremedy run topic-cleanup --inventory " + InventoryMark + " --set topic=%s` (it detaches clients, deletes the znodes with a backup, stops every broker, quarantines the segments, restarts everything and verifies)"

// cleanupFixRecreate is cleanupFix with the topic recreated empty at the end.
const cleanupFixRecreate = "run the topic-cleanup runbook with recreate=true: `kremedy run topic-cleanup --inventory " + InventoryMark + " --set topic=%s --set recreate=true` (it detaches clients, deletes the znodes with a backup, stops every broker, quarantines the segments, restarts everything, recreates the topic empty and verifies)"

// InventoryMark stands for the inventory's path in a finding's commands;
// the command that knows the path (diagnose's) puts it in (WithInventory).
const InventoryMark = "INV"

// appendFinding adds f with its brokers and partitions sorted, once each.
func appendFinding(fs []Finding, f Finding) []Finding {
	slices.Sort(f.Brokers)
	f.Brokers = slices.Compact(f.Brokers)
	slices.Sort(f.Partitions)
	f.Partitions = slices.Compact(f.Partitions)
	return append(fs, f)
}

func rank(s Severity) int {
	switch s {
	case Critical:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// sortFindings puts the critical first, then by topic and kind.
func sortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if a.Severity != b.Severity {
			return rank(a.Severity) - rank(b.Severity)
		}
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return strings.Compare(a.Kind, b.Kind)
	})
}

// healthy: no finding that needs a repair (info findings do not).
func healthy(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity != Info {
			return false
		}
	}
	return true
}
