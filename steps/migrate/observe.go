package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// Phase is where a ZooKeeper → KRaft migration stands, as kremedy observes
// it from the nodes' config files and the cluster.
type Phase string

const (
	PhaseZooKeeper   Phase = "zookeeper"               // nothing started
	PhaseControllers Phase = "controllers-provisioned" // the quorum runs, brokers untouched
	PhaseEntering    Phase = "entering-migration"      // some brokers in migration mode
	PhaseMigration   Phase = "migration-mode"          // every broker in migration mode, metadata not migrated yet
	PhaseMigrated    Phase = "migrated"                // metadata migrated, brokers still ZooKeeper brokers (hybrid)
	PhaseToKRaft     Phase = "entering-kraft"          // some brokers are KRaft brokers
	PhaseDualWrite   Phase = "dual-write"              // every broker a KRaft broker, controllers still write ZooKeeper
	PhaseFinalizing  Phase = "finalizing"              // some controllers no longer migrate
	PhaseFinalized   Phase = "finalized"               // no controller writes ZooKeeper: the point of no return is passed
	PhaseUnknown     Phase = "unknown"
)

// Revertible says whether zk-to-kraft-revert can bring the cluster back to
// ZooKeeper mode from this phase, and how.
func (p Phase) Revertible() (bool, string) {
	switch p {
	case PhaseZooKeeper:
		return true, "nothing to revert: the cluster is in ZooKeeper mode"
	case PhaseControllers:
		return true, "revert: stop the KRaft controllers"
	case PhaseEntering, PhaseMigration, PhaseMigrated:
		return true, "revert: stop the controllers, delete /controller and /migration (a copy kept), roll the brokers out of migration mode"
	case PhaseToKRaft, PhaseDualWrite:
		return true, "revert: roll the KRaft brokers back to ZooKeeper brokers in migration mode, stop the controllers, delete /controller and /migration (a copy kept), roll the brokers out of migration mode (and remove __cluster_metadata)"
	case PhaseFinalizing, PhaseFinalized:
		return false, "no revert: the controllers stopped writing ZooKeeper (finalized); ZooKeeper's metadata is stale from that moment on"
	}
	return false, "unknown phase: read the nodes' config files"
}

// File is a node's config file as read from its host.
type File struct {
	Node  int32  `json:"node"`
	Path  string `json:"path"`
	Text  string `json:"-"`
	Sum   string `json:"sha256"`
	Props *Props `json:"-"`
}

// readFile reads a config file exactly (base64 over SSH, so no byte is
// lost or added).
func readFile(ctx context.Context, env *steps.Env, id int32, path string) (File, error) {
	if path == "" {
		return File{}, fmt.Errorf("%w: node %d has no config in the inventory: set brokers[].config (server.properties) and kraft_controllers[].config; kremedy edits those files for the migration", steps.ErrRefused, id)
	}
	raw, err := brokers.ReadFile(ctx, env.Hosts, id, path)
	if err != nil {
		return File{}, err
	}
	p, err := ParseProps(string(raw))
	if err != nil {
		return File{}, fmt.Errorf("%s on node %d: %w", path, id, err)
	}
	return File{Node: id, Path: path, Text: string(raw), Sum: sum(string(raw)), Props: p}, nil
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// MigrationZnode is /migration (ZkData.scala, MigrationZNode).
type MigrationZnode struct {
	Version         int    `json:"version"`
	MetadataOffset  int64  `json:"kraft_metadata_offset"`
	MetadataEpoch   int32  `json:"kraft_metadata_epoch"`
	ControllerID    int32  `json:"kraft_controller_id"`
	ControllerEpoch int32  `json:"kraft_controller_epoch"`
	Raw             string `json:"-"`
	Null            bool   `json:"-"`
}

// controllerZnode is /controller; a KRaft controller writes
// kraftControllerEpoch.
type controllerZnode struct {
	BrokerID   int32  `json:"brokerid"`
	KRaftEpoch *int32 `json:"kraftControllerEpoch"`
}

// State is what kremedy observes of a migration.
type State struct {
	Brokers     map[int32]Mode `json:"brokers"`
	Controllers map[int32]Mode `json:"controllers"`
	// Running are the controllers whose listener accepts connections.
	Running   []int32         `json:"running"`
	Migration *MigrationZnode `json:"migration,omitempty"`
	// ZKController is /controller's broker id (-1 none); KRaftController
	// says it is a KRaft controller.
	ZKController    int32         `json:"zk_controller"`
	KRaftController bool          `json:"kraft_controller"`
	Quorum          *ports.Quorum `json:"quorum,omitempty"`
	QuorumErr       string        `json:"quorum_error,omitempty"`
	Phase           Phase         `json:"phase"`
	Why             string        `json:"why,omitempty"`
	files           map[int32]File
}

// Observe reads every node's config file, /migration, /controller and the
// quorum, and says the phase.
func Observe(ctx context.Context, env *steps.Env) (*State, error) {
	t := env.Target
	if len(t.Controllers) == 0 {
		return nil, fmt.Errorf("%w: the inventory lists no kraft_controllers: provision the KRaft controller quorum (formatted with the cluster's id, migration enabled) and list each with its host, listener, config, stop and start", steps.ErrRefused)
	}
	s := &State{Brokers: map[int32]Mode{}, Controllers: map[int32]Mode{}, ZKController: -1, files: map[int32]File{}}
	nodes := append(slices.Clone(t.Hosts), t.Controllers...)
	ids := make([]int32, len(nodes))
	for i, h := range nodes {
		ids[i] = h.ID
	}
	type got struct {
		f   File
		err error
	}
	files := par.Each(ids, func(id int32) got {
		h, ok := t.Host(id)
		if !ok {
			h, _ = t.Controller(id)
		}
		f, err := readFile(ctx, env, id, h.Config)
		return got{f, err}
	})
	var errs []string
	for i, g := range files {
		id := ids[i]
		if g.err != nil {
			errs = append(errs, g.err.Error())
			continue
		}
		s.files[id] = g.f
		if _, ok := t.Host(id); ok {
			s.Brokers[id] = g.f.Props.BrokerMode()
		} else {
			s.Controllers[id] = g.f.Props.ControllerMode()
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s. Nothing was changed", steps.ErrRefused, strings.Join(errs, "; "))
	}
	for _, c := range t.Controllers {
		if env.Kafka.Listening(ctx, c.Addr) {
			s.Running = append(s.Running, c.ID)
		}
	}
	if len(s.Running) > 0 {
		q, err := env.Kafka.Quorum(ctx, roll.ControllerAddrs(t))
		if err != nil {
			s.QuorumErr = err.Error()
		} else {
			s.Quorum = &q
		}
	}
	if err := s.readZK(ctx, env); err != nil {
		return nil, err
	}
	s.Phase, s.Why = s.phase()
	s.announce(env)
	return s, nil
}

// announce puts the phase and whether it can be reverted in the run's
// header.
func (s *State) announce(env *steps.Env) {
	ok, _ := s.Phase.Revertible()
	rev := "revertible with zk-to-kraft-revert"
	switch {
	case s.Phase == PhaseZooKeeper:
		rev = "nothing to revert"
	case !ok && s.Phase != PhaseUnknown:
		rev = "NOT revertible: finalized"
	case !ok:
		rev = "revert unknown"
	}
	env.Status(fmt.Sprintf("ZooKeeper → KRaft: %s · %s", s.Phase, rev))
}

// zkState reads only what ZooKeeper says: /migration and /controller.
func zkState(ctx context.Context, env *steps.Env) (*State, error) {
	s := &State{ZKController: -1}
	return s, s.readZK(ctx, env)
}

func (s *State) readZK(ctx context.Context, env *steps.Env) error {
	b, _, err := env.ZK.Get(ctx, kafkazk.MigrationPath)
	switch {
	case env.ZK.IsNoNode(err):
	case err != nil:
		return fmt.Errorf("read %s%s: %w", env.ZK.Chroot(), kafkazk.MigrationPath, err)
	case len(b) == 0 || string(b) == "null":
		s.Migration = &MigrationZnode{Null: true, MetadataOffset: -1}
	default:
		m := MigrationZnode{Raw: string(b)}
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%s%s is not the migration's JSON (%q): %w", env.ZK.Chroot(), kafkazk.MigrationPath, b, err)
		}
		s.Migration = &m
	}
	b, _, err = env.ZK.Get(ctx, kafkazk.ControllerPath)
	switch {
	case env.ZK.IsNoNode(err):
	case err != nil:
		return fmt.Errorf("read %s%s: %w", env.ZK.Chroot(), kafkazk.ControllerPath, err)
	default:
		var c controllerZnode
		if json.Unmarshal(b, &c) == nil {
			// A ZooKeeper broker writes kraftControllerEpoch -1 (3.4+).
			s.ZKController, s.KRaftController = c.BrokerID, c.KRaftEpoch != nil && *c.KRaftEpoch >= 0
		}
	}
	return nil
}

// Migrated: the KRaft controller has loaded ZooKeeper's metadata and
// holds ZooKeeper's controller role.
func (s *State) Migrated() bool {
	return s.Migration != nil && !s.Migration.Null && s.Migration.MetadataOffset >= 0 && s.KRaftController
}

func (s *State) phase() (Phase, string) {
	count := map[Mode][]int32{}
	for id, m := range s.Brokers {
		count[m] = append(count[m], id)
	}
	for _, ids := range count {
		slices.Sort(ids)
	}
	if u := count[ModeUnknown]; len(u) > 0 {
		return PhaseUnknown, fmt.Sprintf("brokers %s have configs that are neither ZooKeeper, migration nor KRaft brokers'", fmt.Sprint(u))
	}
	var finals []int32
	for id, m := range s.Controllers {
		switch m {
		case ModeController:
			finals = append(finals, id)
		case ModeMigration: // still migrating: counted by what finals lacks
		default:
			return PhaseUnknown, fmt.Sprintf("controller %d's config is not a KRaft controller's (process.roles=controller)", id)
		}
	}
	n := len(s.Brokers)
	m, k := len(count[ModeMigration]), len(count[ModeKRaft])
	switch {
	case len(finals) == len(s.Controllers) && k == n:
		return PhaseFinalized, "every broker is a KRaft broker and no controller migrates"
	case len(finals) > 0:
		return PhaseFinalizing, fmt.Sprintf("controllers %s no longer migrate", fmt.Sprint(slices.Sorted(slices.Values(finals))))
	case k == n:
		return PhaseDualWrite, "every broker is a KRaft broker; the controllers still write ZooKeeper"
	case k > 0:
		return PhaseToKRaft, fmt.Sprintf("brokers %s are KRaft brokers, %s not yet", fmt.Sprint(count[ModeKRaft]), fmt.Sprint(append(count[ModeMigration], count[ModeZK]...)))
	case m == n && s.Migrated():
		return PhaseMigrated, fmt.Sprintf("every broker in migration mode; metadata migrated at offset %d, /controller is KRaft controller %d", s.Migration.MetadataOffset, s.ZKController)
	case m == n:
		return PhaseMigration, "every broker in migration mode; the metadata is not migrated yet"
	case m > 0:
		return PhaseEntering, fmt.Sprintf("brokers %s in migration mode, %s not yet", fmt.Sprint(count[ModeMigration]), fmt.Sprint(count[ModeZK]))
	case len(s.Running) > 0:
		return PhaseControllers, fmt.Sprintf("KRaft controllers %s run; the brokers are ZooKeeper brokers", fmt.Sprint(s.Running))
	}
	return PhaseZooKeeper, "every broker a ZooKeeper broker, no KRaft controller runs"
}

// security is CheckSecurity of the configs the state read.
func (s *State) security(listener string, set ControllerSettings) Security {
	b, c := map[int32]*Props{}, map[int32]*Props{}
	for id := range s.Brokers {
		b[id] = s.files[id].Props
	}
	for id := range s.Controllers {
		c[id] = s.files[id].Props
	}
	return CheckSecurity(b, c, listener, set)
}

// Facts are the lines a plan shows about the state.
func (s *State) Facts() []string {
	ok, how := s.Phase.Revertible()
	rev := "revertible"
	if !ok {
		rev = "NOT revertible"
	}
	out := []string{fmt.Sprintf("phase: %s (%s); %s: %s", s.Phase, s.Why, rev, how)}
	var b []string
	for _, id := range slices.Sorted(maps.Keys(s.Brokers)) {
		b = append(b, fmt.Sprintf("%d %s", id, s.Brokers[id]))
	}
	out = append(out, "brokers' configs: "+strings.Join(b, ", "))
	var c []string
	for _, id := range slices.Sorted(maps.Keys(s.Controllers)) {
		run := "stopped"
		if slices.Contains(s.Running, id) {
			run = "running"
		}
		c = append(c, fmt.Sprintf("%d %s (%s)", id, s.Controllers[id], run))
	}
	out = append(out, "KRaft controllers: "+strings.Join(c, ", "))
	switch {
	case s.Quorum != nil:
		out = append(out, fmt.Sprintf("metadata quorum: leader %d, epoch %d, high watermark %d (asked %s)", s.Quorum.Leader, s.Quorum.Epoch, s.Quorum.HighWatermark, s.Quorum.AskedAt))
	case s.QuorumErr != "":
		out = append(out, "metadata quorum: no answer ("+s.QuorumErr+")")
	}
	switch {
	case s.Migration == nil:
		out = append(out, "/migration: absent")
	case s.Migration.Null:
		out = append(out, "/migration: null (left by zookeeper-security-migration, KAFKA-19480)")
	default:
		out = append(out, "/migration: "+s.Migration.Raw)
	}
	who := "a ZooKeeper broker"
	if s.KRaftController {
		who = "a KRaft controller"
	}
	out = append(out, fmt.Sprintf("/controller: %d (%s)", s.ZKController, who))
	return out
}
