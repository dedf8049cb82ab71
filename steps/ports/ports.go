package ports

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

// ZooKeeper is the cluster's ZooKeeper, seen through its chroot. Paths are
// chroot-relative ("/brokers/ids").
type ZooKeeper interface {
	// ReadState reads the topic state of the chroot at once (every topic,
	// or the ones named): the adapter pipelines it, the fake reads one
	// znode at a time, and steptest.StateConformance holds both to the
	// same answers.
	kafkazk.StateReader
	Get(ctx context.Context, path string) ([]byte, kafkazk.ZStat, error)
	Exists(ctx context.Context, path string) (bool, kafkazk.ZStat, error)
	Children(ctx context.Context, path string) ([]string, error)
	GetACL(ctx context.Context, path string) ([]kafkazk.ACL, error)
	Create(ctx context.Context, path string, data []byte, acl []kafkazk.ACL) error
	// CreateEphemeral makes an ephemeral znode owned by this session: it
	// goes when the session ends (closed, or expired after its timeout
	// when the process died). An existing node is an error, and so is
	// creating one under an ephemeral parent (ephemerals have no children).
	CreateEphemeral(ctx context.Context, path string, data []byte, acl []kafkazk.ACL) error
	Set(ctx context.Context, path string, data []byte, version int32) (kafkazk.ZStat, error)
	// Delete removes one node if its version matches; ErrNoNode and
	// ErrBadVersion (the adapter's sentinels) come back wrapped.
	Delete(ctx context.Context, path string, version int32) error
	// DeleteAll removes nodes in one transaction, each only if its version
	// matches: all of them or none (a failure wraps the first failing
	// node's error, ErrNoNode or ErrBadVersion classified as for Delete).
	DeleteAll(ctx context.Context, paths []string, versions []int32) error
	// WaitChildren blocks until cond holds for path's children (a missing path has none).
	WaitChildren(ctx context.Context, path string, cond func([]string) bool) ([]string, error)
	Chroot() string
	// IsNoNode and IsBadVersion classify the adapter's errors.
	IsNoNode(err error) bool
	IsBadVersion(err error) bool
}

// PartitionView is one broker's cached view of one partition.
type PartitionView struct {
	Partition   int32    `json:"partition"`
	Leader      int32    `json:"leader"`
	LeaderEpoch int32    `json:"leader_epoch"`
	Replicas    []int32  `json:"replicas"`
	ISR         []int32  `json:"isr"`
	Offline     []int32  `json:"offline,omitempty"`
	Err         KafkaErr `json:"error,omitempty"` // written as Kafka's name; NONE is left out
}

// IsOffline: no leader — nobody can produce to or read the partition.
// Offline replicas alone do not make it so: Kafka lists in
// offline_replicas every replica on a broker that is not alive (stopped,
// fenced) as well as one on a failed log dir, while a leader still
// serves; such a partition is under-replicated (its ISR lacks them), and
// the gates say so rather than "offline".
func (p PartitionView) IsOffline() bool { return p.Leader < 0 }

// UnderReplicated: fewer in-sync replicas than replicas.
func (p PartitionView) UnderReplicated() bool { return len(p.ISR) < len(p.Replicas) }

// TopicView is one broker's cached view of one topic.
type TopicView struct {
	Name       string                  `json:"name"`
	ID         string                  `json:"id,omitempty"` // Kafka's base64url topic id
	Err        KafkaErr                `json:"error,omitempty"`
	Partitions map[int32]PartitionView `json:"partitions,omitempty"`
}

// Present reports whether the broker answered for the topic without an
// error: it knows the topic, and kremedy may see it.
func (t TopicView) Present() bool { return t.Err == KafkaNone }

// Gone reports whether the broker answered that it does not know the topic
// (UNKNOWN_TOPIC_OR_PARTITION). A view that is neither Present nor Gone
// (TOPIC_AUTHORIZATION_FAILED, INVALID_TOPIC_EXCEPTION…) cannot tell
// whether the broker knows the topic: Kafka answers
// TOPIC_AUTHORIZATION_FAILED for a topic the principal may not Describe
// whether the topic exists or not (KafkaApis.handleTopicMetadataRequest).
func (t TopicView) Gone() bool { return t.Err == KafkaUnknownTopicOrPartition }

// Unsure explains a view that is neither Present nor Gone, for a check's
// detail or a finding's evidence ("" for a view that is either): what the
// broker answered, what that leaves open, and for
// TOPIC_AUTHORIZATION_FAILED the ACL kremedy's principal lacks.
func (t TopicView) Unsure() string {
	switch {
	case t.Present() || t.Gone():
		return ""
	case t.Err == KafkaTopicAuthorizationFailed:
		return fmt.Sprintf("%s: kremedy may not Describe topic %q, so the broker's answer does not say whether it knows the topic; "+
			"grant kremedy's principal Describe on it (kafka-acls.sh --add --allow-principal User:<principal> --operation Describe --topic %s) and run again", t.Err, t.Name, t.Name)
	}
	return fmt.Sprintf("%s: the broker's answer does not say whether it knows topic %q", t.Err, t.Name)
}

// BrokerView is what one broker answers to a Metadata request.
type BrokerView struct {
	Broker     int32                `json:"broker"`
	Controller int32                `json:"controller"`
	Brokers    []int32              `json:"brokers"`
	Topics     map[string]TopicView `json:"topics"`
}

// GroupUse is a consumer group that uses a topic.
type GroupUse struct {
	// Topic is the topic the use is of (set by a several-topic cleanup;
	// "" in an older run's files: the run's one topic).
	Topic   string          `json:"topic,omitempty"`
	Group   string          `json:"group"`
	State   string          `json:"state"`
	Members []string        `json:"members,omitempty"` // members assigned partitions of the topic
	Offsets map[int32]int64 `json:"offsets,omitempty"` // committed offsets on the topic
}

// ProducerUse is a producer with recent state on a partition of the topic.
type ProducerUse struct {
	Topic         string    `json:"topic,omitempty"` // as GroupUse.Topic
	Partition     int32     `json:"partition"`
	ProducerID    int64     `json:"producer_id"`
	LastTimestamp time.Time `json:"last_timestamp"`
	TxnStart      int64     `json:"txn_start_offset"`
	// Epoch is the producer epoch that wrote last, and CoordinatorEpoch
	// its transaction coordinator's epoch then (what an abort's marker
	// carries).
	Epoch            int16 `json:"producer_epoch,omitempty"`
	CoordinatorEpoch int32 `json:"coordinator_epoch,omitempty"`
}

// Transactions is what the transaction coordinators say of producers:
// kafka-transactions.sh find-hanging's second half. Implemented by the
// Kafka adapter and the fake; a Kafka port without it cannot tell a
// hanging transaction from an open one.
type Transactions interface {
	// Transactions maps each producer id a transactional id uses now to
	// its coordinator's state of it (ListTransactions filtered by the ids,
	// then DescribeTransactions). A producer id no transactional id uses
	// is absent. A coordinator that did not answer is an error: a
	// transaction it holds would be missing, and called hanging.
	Transactions(ctx context.Context, producerIDs []int64) (map[int64]TxnState, error)
}

// Tiered says what tiered storage (KIP-405) holds of topics. Implemented
// by the Kafka adapter; a port without it cannot tell a local copy of an
// uploaded segment from data held nowhere else.
type Tiered interface {
	// Tiered maps each topic with remote.storage.enable=true to its
	// partitions' highest offset in the remote store (ListOffsets
	// LATEST_TIERED_TIMESTAMP, KIP-1005; -1: nothing uploaded yet). A
	// topic without tiered storage is absent.
	Tiered(ctx context.Context, topics []string) (map[string]map[int32]int64, error)
}

// TxnState is a transaction as its coordinator describes it.
type TxnState struct {
	TxnID         string `json:"txn_id"`
	State         string `json:"state"` // Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence
	ProducerEpoch int16  `json:"producer_epoch"`
	TimeoutMillis int32  `json:"timeout_ms"`
	// Partitions are the partitions in the transaction, by topic (when
	// preparing to end, those whose marker is not written yet).
	Partitions map[string][]int32 `json:"partitions,omitempty"`
}

// BrokerRelease is what one broker tells about its release: the APIs it
// answers (ApiVersions) and its inter.broker.protocol.version
// (DescribeConfigs). kremedy picks, per capability, a method every broker
// supports, and says which.
type BrokerRelease struct {
	Broker int32 `json:"broker"`
	// Guess is franz-go's reading of the API table ("v2.8", "between v2.7
	// and v2.8").
	Guess string `json:"release_guess"`
	IBP   string `json:"ibp,omitempty"` // "" when it could not be read
	// DescribeProducers: the broker answers it (Kafka 2.8+, KIP-664).
	DescribeProducers bool `json:"describe_producers"`
	// MetadataIDs: Metadata v10+ carries topic IDs (software 2.8+).
	MetadataIDs bool `json:"metadata_topic_ids"`
	// Release30: ListOffsets v7 (KIP-734), the mark of software 3.0+.
	Release30 bool   `json:"release_3_0"`
	Err       string `json:"error,omitempty"`
}

// Kafka is the cluster's Kafka side. Every Metadata request it sends has
// AllowAutoTopicCreation=false. steptest.KafkaConformance holds the
// franz-go adapter (on kfake) and the fake to the same answers.
type Kafka interface {
	// BrokerView asks exactly one broker.
	BrokerView(ctx context.Context, broker int32, topics ...string) (BrokerView, error)
	// Groups lists consumer groups with members on, or offsets committed
	// for, the topic. An answer with holes (a broker whose shard of
	// ListGroups or DescribeGroups failed, a group whose OffsetFetch
	// failed) returns the groups read with an error wrapping
	// ErrGroupsIncomplete that names what is missing.
	Groups(ctx context.Context, topic string) ([]GroupUse, error)
	// Producers lists producers the partitions' replicas still track,
	// asking the brokers given and every broker the metadata names. A
	// partition it could not ask about is an error; one that wraps
	// ErrUnhosted is a partition no broker hosts (nobody can write to it).
	Producers(ctx context.Context, topic string, partitions []int32, brokers []int32) ([]ProducerUse, error)
	// BrokerConfig reads one broker's effective config value.
	BrokerConfig(ctx context.Context, broker int32, key string) (string, error)
	CreateTopic(ctx context.Context, topic string, assignment [][]int32, partitions int32, rf int16, configs map[string]string) (string, error)
	// Offsets returns the earliest and latest offset of a partition, asked
	// of the given broker.
	Offsets(ctx context.Context, broker int32, topic string, partition int32) (earliest, latest int64, err error)
	// Canary produces one record with acks=all, reads it back, and removes
	// it again so that the topic's consumers never see it.
	Canary(ctx context.Context, topic string, partition int32, value string) (CanaryResult, error)
	// OnlyCanaries reports whether every record in [from, to) of a
	// partition is a kremedy canary (one left by an interrupted attempt,
	// or a canary and its tombstone).
	OnlyCanaries(ctx context.Context, topic string, partition int32, from, to int64) (bool, error)
	DeleteGroupOffsets(ctx context.Context, group, topic string) error
	// LogDirs asks one broker for its log directories (DescribeLogDirs).
	LogDirs(ctx context.Context, broker int32) ([]string, error)
	// FirstRecordTime returns the timestamp of a partition's first record
	// (ok=false when the partition is empty).
	FirstRecordTime(ctx context.Context, topic string, partition int32) (t time.Time, ok bool, err error)
	// Releases asks each broker for its API versions and IBP; a broker that
	// did not answer has Err set.
	Releases(ctx context.Context, brokers []int32) []BrokerRelease
	// EndOffsets returns every partition's log end offset, from its leader
	// (a partition without one is absent).
	EndOffsets(ctx context.Context, topic string) (map[int32]int64, error)
	// Listening reports whether something accepts TCP connections at addr.
	Listening(ctx context.Context, addr string) bool
	// Quorum asks the KRaft controllers at addrs, one after another until
	// one answers, for the metadata quorum (DescribeQuorum, KIP-595/919);
	// a broker's address works too (it forwards the request to the active
	// controller).
	Quorum(ctx context.Context, addrs []string) (Quorum, error)
	// AddVoter asks the controller at addr, the quorum's leader, to add a
	// voter to a dynamic quorum (AddRaftVoter, KIP-853, Kafka 3.9+); it
	// returns once the leader committed the new voter set. The leader
	// refuses a controller that has not caught up as an observer.
	AddVoter(ctx context.Context, addr string, v NewVoter) error
	// RemoveVoter asks the controller at addr, the quorum's leader, to
	// remove voter id of directory dirID from a dynamic quorum
	// (RemoveRaftVoter, KIP-853); it returns once the new voter set is
	// committed.
	RemoveVoter(ctx context.Context, addr string, id int32, dirID string) error
	// UpgradeFeature asks the controller at addr to raise a finalized
	// feature to level (UpdateFeatures, KIP-584; kraft.version 1 turns a
	// static quorum dynamic, KIP-853, from Kafka 4.1).
	UpgradeFeature(ctx context.Context, addr, feature string, level int16) error
	// DescribeCluster asks the cluster for its id, controller and brokers
	// (DescribeCluster, KIP-700); from Kafka 4.0 the fenced brokers too
	// (KIP-1073).
	DescribeCluster(ctx context.Context) (ClusterView, error)
	// Features asks the brokers for the cluster's finalized feature levels
	// (metadata.version, kraft.version) and the levels each one supports
	// (ApiVersions v3+, KIP-584).
	Features(ctx context.Context, brokers []int32) (Features, error)
	// TopicOverrides returns the topics' own value of a topic config (an
	// override set on the topic; topics without one are absent), asked
	// over Kafka (DescribeConfigs): the one source in KRaft mode.
	TopicOverrides(ctx context.Context, key string, topics []string) (map[string]string, error)
	// EligibleLeaders asks for the topics' partitions' eligible leader
	// replicas (DescribeTopicPartitions, KIP-966, Kafka 3.8+): replicas a
	// clean election may pick although they left the ISR. A cluster whose
	// brokers do not answer it is ErrUnsupported.
	EligibleLeaders(ctx context.Context, topics []string) (map[string]map[int32]ELR, error)
}

// ELR is one partition's eligible leader replicas and the last ones known
// (KIP-966).
type ELR struct {
	Eligible  []int32 `json:"eligible,omitempty"`
	LastKnown []int32 `json:"last_known,omitempty"`
}

// ClusterView is the cluster as DescribeCluster describes it.
type ClusterView struct {
	ClusterID string `json:"cluster_id"`
	// Controller is what the brokers name as controller: ZooKeeper's
	// controller, or in KRaft mode a broker (clients never reach the
	// controllers).
	Controller int32        `json:"controller"`
	Brokers    []BrokerNode `json:"brokers"`
	// FencedKnown: the cluster answered with its fenced brokers too
	// (Kafka 4.0+); otherwise only unfenced brokers are listed.
	FencedKnown bool `json:"fenced_known"`
}

// BrokerNode is one broker of a ClusterView.
type BrokerNode struct {
	ID     int32  `json:"id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
	Fenced bool   `json:"fenced,omitempty"`
}

// Features are a cluster's feature flags (KIP-584): the finalized levels
// and what each broker's release supports.
type Features struct {
	Finalized map[string]int16 `json:"finalized"`
	// Supported[broker][feature] is the [min, max] level that broker's
	// release supports.
	Supported map[int32]map[string][2]int16 `json:"supported"`
	// Errs are the brokers that did not answer.
	Errs map[int32]string `json:"errors,omitempty"`
}

// Quorum is the KRaft metadata quorum as a controller describes it.
type Quorum struct {
	Leader        int32   `json:"leader"` // -1: none
	Epoch         int32   `json:"epoch"`
	HighWatermark int64   `json:"high_watermark"`
	Voters        []Voter `json:"voters"`
	Observers     []Voter `json:"observers,omitempty"`
	// AskedAt is the controller that answered.
	AskedAt string `json:"asked_at"`
	// Listeners are the voters' endpoints by node id, as a dynamic
	// quorum's leader knows them (DescribeQuorum v2, KIP-853); none from
	// an older one.
	Listeners map[int32][]Listener `json:"listeners,omitempty"`
}

// Listener is one named endpoint of a quorum node.
type Listener struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int    `json:"port"`
}

// Voter is one replica of the metadata log.
type Voter struct {
	ID           int32 `json:"id"`
	LogEndOffset int64 `json:"log_end_offset"`
	// CaughtUp: the leader saw it fetch up to its end recently (-1 unknown).
	LastCaughtUpMs int64 `json:"last_caught_up_ms"`
	// LastFetchMs is when the leader last saw it fetch (-1 unknown).
	LastFetchMs int64 `json:"last_fetch_ms"`
	// DirID is its metadata directory id (DescribeQuorum v2, Kafka 3.9+;
	// "" before), as Kafka prints it.
	DirID string `json:"directory_id,omitempty"`
}

// NewVoter is a controller AddVoter adds to a dynamic quorum: its node id,
// its metadata directory id (meta.properties directory.id) and the
// listeners it is reached on.
type NewVoter struct {
	ID        int32
	DirID     string
	Listeners []Listener
}

// Controller returns the inventory entry for KRaft controller id.
func (t Target) Controller(id int32) (Host, bool) {
	for _, h := range t.Controllers {
		if h.ID == id {
			return h, true
		}
	}
	return Host{}, false
}

// Node returns the inventory entry for node id, a broker or a KRaft
// controller (their ids differ); a bare Host{ID: id} when neither.
func (t Target) Node(id int32) Host {
	if h, ok := t.Host(id); ok {
		return h
	}
	if h, ok := t.Controller(id); ok {
		return h
	}
	return Host{ID: id}
}

// Line is one line of remote output.
type Line struct {
	Stderr bool
	Text   string
}

// Hosts runs commands on the broker hosts (and the inventory's client
// hosts) over SSH, with verified host keys.
type Hosts interface {
	// Run runs cmd on broker's host; a non-zero exit is an error that
	// satisfies interface{ ExitStatus() int }.
	Run(ctx context.Context, broker int32, cmd string, out func(Line)) error
	// RunInput runs cmd as Run does, with stdin as its standard input:
	// how a file's content reaches a host. cmd itself is seen by others
	// (sudo logs it, ps shows it), so it names paths and digests only;
	// a secret travels in stdin, never in cmd.
	RunInput(ctx context.Context, broker int32, cmd string, stdin []byte, out func(Line)) error
	// Check proves the host is reachable with a verified host key.
	Check(ctx context.Context, broker int32) error
	// RunClient runs an inventory client's command on its host.
	RunClient(ctx context.Context, client Client, cmd string, out func(Line)) error
}

// Host describes one broker host as the inventory does.
type Host struct {
	ID      int32    `json:"id"`
	Host    string   `json:"host"`
	Stop    string   `json:"stop"`
	Start   string   `json:"start"`
	LogDirs []string `json:"log_dirs,omitempty"`
	// Addr is the Kafka listener (host:port) when known; a KRaft
	// controller's controller listener.
	Addr string `json:"addr,omitempty"`
	// Config is the settings file the process reads (server.properties,
	// controller.properties), "" when the inventory does not name it.
	Config string `json:"config,omitempty"`
	// ServerLog is the process's server.log, "" when the inventory does
	// not name it.
	ServerLog string `json:"server_log,omitempty"`
	// Login is the user kremedy logs in as over SSH ("" when unknown);
	// Sudo: each command runs through `sudo -n` (become: sudo).
	Login string `json:"login,omitempty"`
	Sudo  bool   `json:"sudo,omitempty"`
}

// On says where a command for this host runs, as a plan names it: the
// login and host, and sudo when it runs through it ("deploy@10.0.0.1 via
// sudo -n").
func (h Host) On() string { return On(h.Login, h.Host, h.Sudo) }

// On names a login on host, and sudo when commands run through it.
func On(login, host string, sudo bool) string {
	s := host
	if login != "" {
		s = login + "@" + host
	}
	if sudo {
		s += " via sudo -n"
	}
	return s
}

// Client is a producer or consumer the inventory knows how to stop and
// start again.
type Client struct {
	Name  string `json:"name"`
	Host  string `json:"host"`
	Stop  string `json:"stop"`
	Start string `json:"start,omitempty"`
	// Login and Sudo: as Host's.
	Login string `json:"login,omitempty"`
	Sudo  bool   `json:"sudo,omitempty"`
}

// On says where the client's commands run (Host.On).
func (c Client) On() string { return On(c.Login, c.Host, c.Sudo) }

// Target is the cluster a run acts on.
type Target struct {
	Name string `json:"name"`
	Lab  bool   `json:"lab"`
	// KRaft: the cluster keeps its metadata in a KRaft quorum
	// (Controllers); it has no ZooKeeper (ZKConnect is empty, the
	// Cluster's ZK nil).
	KRaft     bool     `json:"kraft,omitempty"`
	ZKConnect string   `json:"zookeeper"`
	Bootstrap []string `json:"bootstrap"`
	Hosts     []Host   `json:"brokers"`
	// Controllers are the KRaft controllers provisioned for the ZooKeeper
	// → KRaft migration (their node ids differ from every broker id; Hosts'
	// Run reaches them by it), or a KRaft cluster's quorum: there a
	// combined node (process.roles=broker,controller) is in Hosts and in
	// Controllers under one id, one host and one stop and start (Combined).
	Controllers []Host   `json:"kraft_controllers,omitempty"`
	Clients     []Client `json:"clients,omitempty"`
}

// Host returns the inventory entry for broker id.
func (t Target) Host(id int32) (Host, bool) {
	for _, h := range t.Hosts {
		if h.ID == id {
			return h, true
		}
	}
	return Host{}, false
}

// Combined reports whether node id is a combined node: a broker and a
// KRaft controller of the inventory, one process.
func (t Target) Combined(id int32) bool {
	if _, ok := t.Host(id); !ok {
		return false
	}
	_, ok := t.Controller(id)
	return ok
}

// CanaryResult says where a canary record landed and how long each half of
// its round trip took, so the journal shows where the verify step's time goes.
type CanaryResult struct {
	Offset  int64
	Produce time.Duration // until the acks=all produce was acknowledged
	Read    time.Duration // until the record was read back
	// Removed says how the record was taken away again: "DeleteRecords"
	// (the partition now starts after it) or, where the topic's cleanup
	// policy forbids that (compact only), "tombstone".
	Removed string
}

// Cluster is one cluster's ports: what a run, a diagnosis or a restore acts
// on.
type Cluster struct {
	Target Target
	ZK     ZooKeeper
	Kafka  Kafka
	Hosts  Hosts
	// Lease is the cluster's one-run-at-a-time lease (lease.go); nil
	// when none can be taken (a preview, a test without one).
	Lease Lease
}

// Errors the adapters and the shared readers wrap; package steps names
// them too (steps.ErrRefused is ErrRefused), so that the packages below
// the engine can refuse without importing it.
var (
	// ErrRefused: kremedy will not do what was asked now (it says why and
	// what to do instead); nothing was changed.
	ErrRefused = errors.New("refused")
	// ErrCheckFailed: a condition kremedy checked or waited for does not
	// hold.
	ErrCheckFailed = errors.New("check failed")
	// ErrUnsupported: the cluster's release does not answer the request.
	ErrUnsupported = errors.New("not supported by the brokers' release")
	// ErrNoConfig: the broker answered DescribeConfigs without that key (a
	// config its release does not have, such as the IBP on Kafka 4.x).
	ErrNoConfig = errors.New("no such config")
	// ErrUnhosted: every broker answered that it hosts no replica of the
	// partition (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnhosted = errors.New("no broker hosts it")
	// ErrOutcomeUnknown: the action was sent but its result never came
	// back (a dropped SSH session).
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrGroupsIncomplete: Groups read some groups but not all (a
	// coordinator loading or down): what it returns beside it may leave
	// out the group furthest behind. A caller that bounds a deletion by
	// the groups refuses; one that only reports may use what was read.
	ErrGroupsIncomplete = errors.New("consumer groups answer incomplete")
)
