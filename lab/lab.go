package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/internal/kafkaver"
)

// FormatVersion is the layout version of a lab directory. A directory made
// by another layout is refused with instructions instead of half-reused.
const FormatVersion = 1

// Fixed ports on each loopback host, as on a real fleet.
const (
	KafkaPort   = 9092
	SSHPort     = 2222
	ZKPort      = 2181
	ZKPeerPort  = 2888
	ZKElectPort = 3888
)

// Errors callers can match.
var (
	ErrNoLab         = errors.New("no lab in this directory")
	ErrOtherVersion  = errors.New("lab directory has another layout version")
	ErrConfigChanged = errors.New("lab already exists with other settings")
	ErrPortTaken     = errors.New("address already in use")
	ErrMissingPart   = errors.New("a part the lab needs is missing")
	ErrNotHealthy    = errors.New("lab did not become healthy")
	ErrBadConfig     = errors.New("nothing was started")
)

// Config is what `kremedy lab up` was asked for.
type Config struct {
	Brokers          int    `json:"brokers"`
	ZooKeepers       int    `json:"zookeepers"`
	Chroot           string `json:"chroot"`
	LogDirsPerBroker int    `json:"log_dirs_per_broker"`
	// IBP is inter.broker.protocol.version; "" leaves Kafka's default.
	IBP       string `json:"ibp,omitempty"`
	KafkaHome string `json:"kafka_home"`
	// KafkaVersion is the release asked for with --kafka-version ("": the
	// Kafka home's, by default KafkaVersion's install).
	KafkaVersion string `json:"kafka_version_wanted,omitempty"`
	// Net is the second octet of every lab address: brokers live on
	// 127.<Net>.1.N, ZooKeeper nodes on 127.<Net>.2.N. 0 by default, so a
	// second lab (e.g. the test suite's) can run beside an engineer's.
	Net int `json:"net"`
	// Secure makes the lab a secured cluster (secure.go).
	Secure bool `json:"secure,omitempty"`
	// Kerberos makes a secured lab Kerberized (kerberos.go): a local KDC,
	// brokers on GSSAPI, kremedy with a keytab.
	Kerberos bool `json:"kerberos,omitempty"`
	// KRaftControllers is the KRaft controller quorum: in a ZooKeeper lab
	// one provisioned for the ZooKeeper → KRaft migration (kraft.go; 0 for
	// none), in a KRaft lab the cluster's own quorum.
	KRaftControllers int `json:"kraft_controllers,omitempty"`
	// Tiered turns on tiered storage (KIP-405) in a KRaft 4.x lab
	// (tiered.go): Kafka's own LocalTieredStorage, a directory of the lab
	// as the remote store; a topic opts in with remote.storage.enable.
	Tiered bool `json:"tiered,omitempty"`
	// KRaft makes the lab a KRaft-only cluster (kraftlab.go): no ZooKeeper,
	// KRaftControllers controllers and Brokers brokers in KRaft mode.
	KRaft bool `json:"kraft,omitempty"`
	// Combined makes a KRaft lab's brokers combined nodes
	// (process.roles=broker,controller): they are the quorum's voters
	// (their controller listener on 127.<Net>.1.N:9093), and no
	// controller of its own runs (KRaftControllers 0).
	Combined bool `json:"combined,omitempty"`
	// KRaftQuorum is a KRaft lab's quorum: QuorumStatic ("" too: every
	// node lists controller.quorum.voters) or QuorumDynamic (KIP-853, Kafka
	// 3.9+: the controllers formatted with --initial-controllers, every
	// node finds them through controller.quorum.bootstrap.servers, and the
	// voter set lives in the metadata log).
	KRaftQuorum string `json:"kraft_quorum,omitempty"`
	// ZKHeap is each ZooKeeper node's -Xmx, such as 2g ("": 128m): a
	// cluster seeded with hundreds of thousands of znodes needs a heap
	// sized like a production ensemble's.
	ZKHeap string `json:"zk_heap,omitempty"`
	// BrokerHeap is each broker's -Xmx ("": 512m): a lab filled with
	// thousands of partitions per broker (lab fill) needs more, or its
	// brokers spend their time in full GCs.
	BrokerHeap string `json:"broker_heap,omitempty"`
	// Racks spreads the brokers over this many broker.rack values (broker
	// n in rack-((n-1) % Racks + 1)); 0 sets none. Kafka then places each
	// new topic's replicas rack-aware, as many production clusters do.
	Racks int `json:"racks,omitempty"`
	// LogDirSize makes each broker log dir a tmpfs of this size, such as
	// 64m ("": none; logdirsize.go): scenario disk-full fills one until
	// ENOSPC. Root only; `lab down` unmounts them, data and all.
	LogDirSize string `json:"log_dir_size,omitempty"`
}

// Rack is broker n's broker.rack ("" when the lab has no racks).
func (c Config) Rack(n int) string {
	if c.Racks < 1 {
		return ""
	}
	return fmt.Sprintf("rack-%d", (n-1)%c.Racks+1)
}

// rackProp is broker n's broker.rack line for its properties ("" for none).
func (c Config) rackProp(n int) string {
	if r := c.Rack(n); r != "" {
		return "broker.rack=" + r + "\n"
	}
	return ""
}

// DefaultConfig is a 3-broker, 3-node lab under /kafka.
func DefaultConfig() Config {
	return Config{Brokers: 3, ZooKeepers: 3, Chroot: "/kafka", LogDirsPerBroker: 1}
}

// KRaftConfig is a KRaft-only lab: 3 controllers, 3 brokers, no ZooKeeper.
func KRaftConfig() Config {
	return Config{Brokers: 3, KRaftControllers: 3, LogDirsPerBroker: 1, KRaft: true}
}

// heapRe is a Java -Xmx size.
var heapRe = regexp.MustCompile(`^[1-9][0-9]{0,5}[mMgG]$`)

// Validate checks the numbers before anything is written.
func (c Config) Validate() error {
	if c.KRaft {
		if err := c.validateKRaft(); err != nil {
			return err
		}
	}
	switch {
	case c.Brokers < 1 || c.Brokers > 9:
		return fmt.Errorf("--brokers %d: the lab runs 1 to 9 brokers", c.Brokers)
	case !c.KRaft && (c.ZooKeepers < 1 || c.ZooKeepers > 7 || c.ZooKeepers%2 == 0):
		return fmt.Errorf("--zookeepers %d: use an odd ensemble size from 1 to 7", c.ZooKeepers)
	case c.Racks < 0 || c.Racks > c.Brokers:
		return fmt.Errorf("--racks %d: use 0 (none) to --brokers (%d)", c.Racks, c.Brokers)
	case c.LogDirsPerBroker < 1 || c.LogDirsPerBroker > 4:
		return fmt.Errorf("--log-dirs-per-broker %d: use 1 to 4", c.LogDirsPerBroker)
	case c.Net < 0 || c.Net > 255:
		return fmt.Errorf("loopback net %d out of range 0..255", c.Net)
	case c.KRaftControllers < 0 || c.KRaftControllers > 5 || c.KRaftControllers > 0 && c.KRaftControllers%2 == 0:
		return fmt.Errorf("--kraft-controllers %d: use 0 (none), 1, 3 or 5", c.KRaftControllers)
	case c.Tiered && !c.KRaft:
		return fmt.Errorf("--tiered without --kraft: the lab's tiered storage runs on a KRaft 4.x lab; add --kraft --kafka-version 4.1.2")
	case c.Tiered && c.Secure:
		return fmt.Errorf("--tiered with --secure: not yet (the secured lab's service user cannot read LocalTieredStorage's jar in the Kafka cache); leave one out")
	case c.Kerberos && !c.Secure:
		return fmt.Errorf("--kerberos without --secure: Kerberos is a secured lab's SASL; add --secure")
	case c.Kerberos && c.KRaftControllers > 0 && !c.KRaft:
		return fmt.Errorf("--kerberos with --kraft-controllers: not yet: the Kerberized lab has no KRaft controllers (the secured lab without --kerberos has)")
	case !c.KRaft && c.Chroot != "" && (c.Chroot[0] != '/' || filepath.Clean(c.Chroot) != c.Chroot || c.Chroot == "/"):
		return fmt.Errorf("--chroot %q: use a clean absolute path such as /kafka, or \"\" for none", c.Chroot)
	}
	if c.ZKHeap != "" && (c.KRaft || !heapRe.MatchString(c.ZKHeap)) {
		if c.KRaft {
			return fmt.Errorf("--zk-heap with --kraft: a KRaft lab runs no ZooKeeper; leave --zk-heap out")
		}
		return fmt.Errorf("--zk-heap %q: a Java heap size such as 512m or 2g", c.ZKHeap)
	}
	if err := c.checkLogDirSize(); err != nil {
		return err
	}
	if c.BrokerHeap != "" && !heapRe.MatchString(c.BrokerHeap) {
		return fmt.Errorf("--broker-heap %q: a Java heap size such as 512m or 2g", c.BrokerHeap)
	}
	if c.IBP != "" {
		if _, err := kafkaver.Parse(c.IBP); err != nil {
			return fmt.Errorf("--ibp: %w", err)
		}
	}
	if c.KafkaVersion != "" {
		v, err := kafkaver.Parse(c.KafkaVersion)
		if err != nil || v.Patch < 0 {
			return fmt.Errorf("--kafka-version %q: expected a Kafka release such as %s", c.KafkaVersion, KafkaVersion)
		}
		if err := runnable(v); err != nil {
			return err
		}
		if err := checkMode(v, c.KRaft); err != nil {
			return err
		}
	}
	return nil
}

// validateKRaft refuses what a KRaft lab does not have.
func (c Config) validateKRaft() error {
	switch {
	case c.ZooKeepers != 0:
		return fmt.Errorf("--kraft with --zookeepers %d: a KRaft lab runs no ZooKeeper; leave --zookeepers out", c.ZooKeepers)
	case c.Chroot != "":
		return fmt.Errorf("--kraft with --chroot %s: a KRaft lab has no ZooKeeper to chroot; leave --chroot out", c.Chroot)
	case c.IBP != "":
		return fmt.Errorf("--kraft with --ibp %s: a KRaft cluster has metadata.version, not inter.broker.protocol.version; leave --ibp out", c.IBP)
	case c.Kerberos && c.Combined:
		return fmt.Errorf("--kerberos with --combined: not yet: the Kerberized KRaft lab runs separate controllers; leave --combined out (`lab up --kraft --secure --kerberos`), or --kerberos out for secured combined nodes (SCRAM)")
	case c.Combined && c.KRaftControllers != 0:
		return fmt.Errorf("--combined with --kraft-controllers %d: the combined brokers are the quorum; leave --kraft-controllers out", c.KRaftControllers)
	case c.Combined && c.Brokers%2 == 0:
		return fmt.Errorf("--combined with --brokers %d: the brokers are the quorum's voters; use an odd number (1, 3, 5…)", c.Brokers)
	case c.Combined && c.KRaftQuorum == QuorumDynamic:
		return fmt.Errorf("--combined with --kraft-quorum %s: not yet: a combined lab's quorum is static; leave --kraft-quorum out, or run separate controllers (no --combined) for a dynamic quorum", QuorumDynamic)
	case c.KRaftQuorum != "" && c.KRaftQuorum != QuorumStatic && c.KRaftQuorum != QuorumDynamic:
		return fmt.Errorf("--kraft-quorum %q: a KRaft lab's quorum is %s (controller.quorum.voters) or %s (formatted with --initial-controllers, Kafka 3.9+)", c.KRaftQuorum, QuorumStatic, QuorumDynamic)
	case !c.Combined && c.KRaftControllers < 1:
		return fmt.Errorf("--kraft with --kraft-controllers %d: a KRaft cluster needs a controller quorum; use 1, 3 or 5", c.KRaftControllers)
	}
	return nil
}

// voters is how many voters the lab's quorum has: its controllers, or its
// combined brokers.
func (c Config) voters() int {
	if c.Combined {
		return c.Brokers
	}
	return c.KRaftControllers
}

// software and ibp are the lab's release and IBP as kafkaver versions.
func (s State) software() kafkaver.Version {
	v, _ := kafkaver.Parse(s.Kafka)
	return v
}

func (s State) ibp() kafkaver.Version {
	if s.Config.IBP == "" {
		return kafkaver.Version{}
	}
	v, _ := kafkaver.Parse(s.Config.IBP)
	return v
}

// KRaft reports whether the lab is a KRaft-only cluster.
func (s State) KRaft() bool { return s.Config.KRaft }

// StraysMissingMetadata reports whether a KRaft broker of the lab's
// release marks a log without partition.metadata stray (3.7.1 and later,
// KAFKA-16814); 3.7.0 refuses to start on it instead.
func (s State) StraysMissingMetadata() bool {
	v := s.software()
	return v.AtLeast(3, 8) || v.Major == 3 && v.Minor == 7 && v.Patch >= 1
}

// TopicIDs reports whether the brokers use topic IDs (software and IBP at
// least 2.8).
func (s State) TopicIDs() bool { return kafkaver.TopicIDs(s.software(), s.ibp()) }

// StuckRecreate reports whether a topic recreated after a hand deletion
// of its znodes mid-deletion gets no leaders (Kafka < 2.7: the controller
// still has it queued for deletion).
func (s State) StuckRecreate() bool { return kafkaver.KeepsDeletionQueued(s.software()) }

// RefusesStaleLog reports whether a restarted broker refuses a directory
// of another topic ID (INCONSISTENT_TOPIC_ID: 3.0+ with topic IDs); on the
// other labs the recreated topic silently adopts it.
func (s State) RefusesStaleLog() bool { return kafkaver.RefusesStaleLog(s.software(), s.ibp()) }

// BrokerHost is broker n's loopback address.
func (c Config) BrokerHost(n int) string { return fmt.Sprintf("127.%d.1.%d", c.Net, n) }

// ZKHost is ZooKeeper node n's loopback address.
func (c Config) ZKHost(n int) string { return fmt.Sprintf("127.%d.2.%d", c.Net, n) }

// ZKConnect is the connect string the brokers use, chroot included.
func (c Config) ZKConnect() string {
	s := ""
	for n := 1; n <= c.ZooKeepers; n++ {
		if n > 1 {
			s += ","
		}
		s += c.ZKHost(n) + ":" + strconv.Itoa(ZKPort)
	}
	return s + c.Chroot
}

// Bootstrap lists every broker's listener.
func (c Config) Bootstrap() []string {
	var out []string
	for n := 1; n <= c.Brokers; n++ {
		out = append(out, fmt.Sprintf("%s:%d", c.BrokerHost(n), KafkaPort))
	}
	return out
}

// Applied records a scenario run on the lab, for `lab status`.
type Applied struct {
	Scenario string    `json:"scenario"`
	Topic    string    `json:"topic"`
	At       time.Time `json:"at"`
	// DownBroker is a broker the scenario left stopped on purpose (0: none).
	DownBroker int32 `json:"down_broker,omitempty"`
	// DownController is a KRaft controller's node.id the scenario left
	// stopped on purpose (0: none).
	DownController int32 `json:"down_controller,omitempty"`
}

// State is DIR/lab.json.
type State struct {
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
	Config  Config    `json:"config"`
	User    string    `json:"user"`
	Java    string    `json:"java"`
	Kafka   string    `json:"kafka_version"`
	// ClusterID is a KRaft lab's cluster.id, every node formatted with it
	// (kafka-storage format --cluster-id).
	ClusterID string `json:"cluster_id,omitempty"`
	// DirectoryIDs are a dynamic quorum's controllers' metadata directory
	// ids (by controller number), as --initial-controllers named them.
	DirectoryIDs map[int]string `json:"directory_ids,omitempty"`
	// Wiped are the KRaft controllers (by number) whose metadata dir
	// `lab controller wipe` removed, as a lost disk: `lab up` neither
	// formats nor starts them again (see refuseWiped).
	Wiped     []int     `json:"wiped_controllers,omitempty"`
	Scenarios []Applied `json:"scenarios,omitempty"`
}

// Lab is a lab directory and its state.
type Lab struct {
	Dir   string
	State State
}

// Paths inside a lab directory.
func (l *Lab) path(p ...string) string { return filepath.Join(append([]string{l.Dir}, p...)...) }

// StatePath is DIR/lab.json.
func (l *Lab) StatePath() string { return l.path("lab.json") }

// InventoryPath is DIR/inventory.yaml, the file every other command takes.
func (l *Lab) InventoryPath() string { return l.path("inventory.yaml") }

// KnownHostsPath is DIR/known_hosts.
func (l *Lab) KnownHostsPath() string { return l.path("known_hosts") }

// KeyPath is the lab user's private key.
func (l *Lab) KeyPath() string { return l.path("id_ed25519") }

// BrokerDir is DIR/broker/N.
func (l *Lab) BrokerDir(n int) string { return l.path("broker", strconv.Itoa(n)) }

// LogDirs are broker n's log.dirs.
func (l *Lab) LogDirs(n int) []string {
	var out []string
	for i := 1; i <= l.State.Config.LogDirsPerBroker; i++ {
		out = append(out, filepath.Join(l.BrokerDir(n), fmt.Sprintf("data-%d", i)))
	}
	return out
}

// ZKDir is DIR/zk/N.
func (l *Lab) ZKDir(n int) string { return l.path("zk", strconv.Itoa(n)) }

// SSHDir is DIR/sshd/N.
func (l *Lab) SSHDir(n int) string { return l.path("sshd", strconv.Itoa(n)) }

// Open reads an existing lab directory.
func Open(dir string) (*Lab, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	l := &Lab{Dir: abs}
	b, err := os.ReadFile(l.StatePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (start one with `kremedy lab up --dir %s`)", abs, ErrNoLab, abs)
	}
	if err != nil {
		return nil, err
	}
	var probe struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(b, &probe); err != nil || probe.Format == 0 {
		if err == nil {
			err = errors.New("no \"format\" field")
		}
		return nil, fmt.Errorf("%s: corrupt lab state: %v (remove the directory with `kremedy lab down --dir %s --purge`)", l.StatePath(), err, abs)
	}
	if probe.Format != FormatVersion {
		return nil, fmt.Errorf("%s: %w: it was made with layout %d, this kremedy uses %d. Nothing was started. Stop and remove it with `kremedy lab down --dir %s --purge`, then run `kremedy lab up` again",
			abs, ErrOtherVersion, probe.Format, FormatVersion, abs)
	}
	if err := json.Unmarshal(b, &l.State); err != nil {
		return nil, fmt.Errorf("%s: corrupt lab state: %v", l.StatePath(), err)
	}
	return l, nil
}

// Save writes lab.json atomically.
func (l *Lab) Save() error {
	b, err := json.MarshalIndent(l.State, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(l.StatePath(), append(b, '\n'))
}

// DefaultDir is the per-user lab directory.
func DefaultDir() string {
	return filepath.Join(CacheDir(), "lab")
}

// CacheDir is where kremedy keeps the lab and the Kafka jars.
func CacheDir() string {
	if d := os.Getenv("KREMEDY_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "kremedy")
}

// BrokerPID is the pid of broker n's JVM, 0 when it is not running (fault
// injection in tests freezes it with SIGSTOP).
func (l *Lab) BrokerPID(n int) int { return l.brokerPID(n) }

// ZKPID is the pid of ZooKeeper node n, 0 when it is not running.
func (l *Lab) ZKPID(n int) int { return l.zkPID(n) }

// SSHDPID is the pid of broker host n's sshd listener, 0 when it is not running.
func (l *Lab) SSHDPID(n int) int { return l.sshdPID(n) }
