package diagnose

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// MetadataLogDir is the KRaft metadata log's partition directory under a
// node's metadata.log.dir (Kafka: __cluster_metadata-0).
const MetadataLogDir = "__cluster_metadata-0"

// voterLook is what one inventory controller shows when the quorum has no
// leader: its listener, its host over SSH, its config's quorum settings
// and its metadata log on disk (quorum-state: the last election it saw).
type voterLook struct {
	h         ports.Host
	listening bool
	hostErr   error // the host does not answer over SSH
	// from its config (h.Config); configErr when it could not be read
	configErr error
	static    []int32 // controller.quorum.voters' ids; nil: unset
	bootstrap bool    // controller.quorum.bootstrap.servers set
	dir       string  // the metadata log's directory
	// the metadata log: gone (no directory), or its files and quorum-state
	gone     bool
	logs     int
	state    *quorumStateFile
	stateErr error
}

// quorumStateFile is a KRaft node's quorum-state file (Kafka's
// QuorumStateData: the election it last took part in).
type quorumStateFile struct {
	LeaderID    int32 `json:"leaderId"`
	LeaderEpoch int32 `json:"leaderEpoch"`
	VotedID     int32 `json:"votedId"`
}

// lookAtVoters reads every inventory controller, concurrently.
func (g *kraftDiag) lookAtVoters(ctx context.Context) []voterLook {
	cs := g.c.Target.Controllers
	out := make([]voterLook, len(cs))
	for i, v := range par.Each(idsOf(cs, func(h ports.Host) int32 { return h.ID }), func(id int32) voterLook {
		h, _ := g.c.Target.Controller(id)
		return lookAtVoter(ctx, g.c, h)
	}) {
		out[i] = v
	}
	return out
}

func lookAtVoter(ctx context.Context, c ports.Cluster, h ports.Host) voterLook {
	v := voterLook{h: h, listening: h.Addr != "" && c.Kafka.Listening(ctx, h.Addr)}
	if err := c.Hosts.Check(ctx, h.ID); err != nil {
		v.hostErr = err
		return v
	}
	if h.Config == "" {
		v.configErr = fmt.Errorf("the inventory names no config file for controller %d", h.ID)
		return v
	}
	b, err := brokers.ReadFile(ctx, c.Hosts, h.ID, h.Config)
	if err != nil {
		v.configErr = err
		return v
	}
	p, err := javaprops.Parse(b)
	if err != nil {
		v.configErr = fmt.Errorf("%s: %w", h.Config, err)
		return v
	}
	v.static = staticVoters(p)
	_, v.bootstrap = p.Get("controller.quorum.bootstrap.servers")
	v.dir = metadataDir(p)
	if v.dir == "" {
		v.configErr = fmt.Errorf("%s names neither metadata.log.dir nor log.dirs", h.Config)
		return v
	}
	dir := path.Join(v.dir, MetadataLogDir)
	var names []string
	if err := c.Hosts.Run(ctx, h.ID, shell.Script("if [ -d "+shell.Quote(dir)+" ]; then ls -1 -- "+shell.Quote(dir)+"; else echo '<gone>'; fi"), func(l ports.Line) {
		if !l.Stderr {
			names = append(names, l.Text)
		}
	}); err != nil {
		v.stateErr = fmt.Errorf("list %s: %w", dir, err)
		return v
	}
	if slices.Contains(names, "<gone>") {
		v.gone = true
		return v
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			v.logs++
		}
	}
	qs, err := brokers.ReadFile(ctx, c.Hosts, h.ID, path.Join(dir, "quorum-state"))
	if err != nil {
		v.stateErr = err
		return v
	}
	var st quorumStateFile
	if err := json.Unmarshal(qs, &st); err != nil {
		v.stateErr = fmt.Errorf("%s: %w", path.Join(dir, "quorum-state"), err)
		return v
	}
	v.state = &st
	return v
}

// staticVoters are the node ids of controller.quorum.voters
// (id@host:port,…); nil when it is unset or empty.
func staticVoters(p javaprops.Properties) []int32 {
	s, ok := p.Get("controller.quorum.voters")
	if !ok || strings.TrimSpace(s) == "" {
		return nil
	}
	var ids []int32
	for _, e := range strings.Split(s, ",") {
		id, _, _ := strings.Cut(strings.TrimSpace(e), "@")
		if n, err := strconv.ParseInt(id, 10, 32); err == nil {
			ids = append(ids, int32(n))
		}
	}
	return ids
}

// metadataDir is where a node keeps the metadata log: metadata.log.dir,
// else the first of log.dirs (or log.dir), as Kafka's KafkaConfig does.
func metadataDir(p javaprops.Properties) string {
	if d, ok := p.Get("metadata.log.dir"); ok && strings.TrimSpace(d) != "" {
		return strings.TrimSpace(d)
	}
	for _, k := range []string{"log.dirs", "log.dir"} {
		if d, ok := p.Get(k); ok && strings.TrimSpace(d) != "" {
			first, _, _ := strings.Cut(d, ",")
			return strings.TrimSpace(first)
		}
	}
	return ""
}

// running reports whether the voter's controller serves its listener.
func (v voterLook) running() bool { return v.listening }

// recoverable: stopped, but its host answers and its metadata log is on
// disk: starting it brings its committed records back to the quorum.
func (v voterLook) recoverable() bool {
	return !v.listening && v.hostErr == nil && !v.gone && v.stateErr == nil && v.state != nil && v.logs > 0
}

// line is the voter's evidence line.
func (v voterLook) line() string {
	who := fmt.Sprintf("controller %d (%s)", v.h.ID, v.h.On())
	lis := "its listener " + v.h.Addr + " accepts connections"
	if !v.listening {
		lis = "its listener " + v.h.Addr + " accepts no connection"
	}
	switch {
	case v.hostErr != nil:
		return fmt.Sprintf("%s: %s; its host does not answer over SSH (%v): its metadata log cannot be looked at", who, lis, v.hostErr)
	case v.configErr != nil:
		return fmt.Sprintf("%s: %s; its config not read: %v", who, lis, v.configErr)
	case v.gone:
		return fmt.Sprintf("%s: %s; its metadata log %s is GONE (no directory): this voter's copy of the metadata is lost", who, lis, path.Join(v.dir, MetadataLogDir))
	case v.stateErr != nil:
		return fmt.Sprintf("%s: %s; its metadata log %s not read: %v", who, lis, path.Join(v.dir, MetadataLogDir), v.stateErr)
	}
	return fmt.Sprintf("%s: %s; its metadata log %s holds %d segment(s), quorum-state: leader %d, epoch %d, voted for %d", who, lis, path.Join(v.dir, MetadataLogDir), v.logs, v.state.LeaderID, v.state.LeaderEpoch, v.state.VotedID)
}

// quorumLost judges a quorum that has no leader, that nobody could
// describe, or whose leader has fewer than a majority caught up (Kafka
// 3.9's leader keeps its title with no majority behind it, committing
// nothing), voter by voter. It adds FindQuorumLost and reports true when
// fewer than a majority of the voters run; otherwise it adds nothing and
// reports false (an election in progress or trouble between running
// voters: the caller's finding).
//
// The voters counted are, in this order: the ones DescribeQuorum named
// (known), a static quorum's controller.quorum.voters, else the
// inventory's controllers — said so, since a dynamic quorum's voter set
// lives in its log and the inventory may list an observer or miss a voter.
func (g *kraftDiag) quorumLost(ctx context.Context, why string, known []int32) bool {
	if len(g.c.Target.Controllers) == 0 {
		return false
	}
	g.noMajority = true
	looks := g.lookAtVoters(ctx)
	voters := idsOf(g.c.Target.Controllers, func(h ports.Host) int32 { return h.ID })
	kind := g.quorumKind(ctx, looks)
	counted := "the inventory's controllers, taken for the voters (a dynamic quorum's voter set lives in its metadata log: an observer listed there, or a voter missing from it, changes the majority)"
	for _, v := range looks {
		if len(v.static) > 0 {
			voters = slices.Sorted(slices.Values(v.static))
			counted = "the voters of controller.quorum.voters"
			break
		}
	}
	if len(known) > 0 {
		voters, counted = slices.Sorted(slices.Values(known)), "the voters DescribeQuorum named"
	}
	majority := len(voters)/2 + 1
	var up, back, lost []int32
	ev := []string{why}
	for _, v := range looks {
		if !slices.Contains(voters, v.h.ID) {
			ev = append(ev, v.line()+" (not a voter: not counted)")
			continue
		}
		switch {
		case v.running():
			up = append(up, v.h.ID)
		case v.recoverable():
			back = append(back, v.h.ID)
		default:
			lost = append(lost, v.h.ID)
		}
		ev = append(ev, v.line())
	}
	if len(up) >= majority {
		return false
	}
	ev = append(ev, kind, "counted: "+counted)
	f := Finding{Kind: FindQuorumLost, Severity: Critical, Brokers: append(append([]int32{}, back...), lost...),
		Summary:  fmt.Sprintf("the metadata quorum has lost its majority: %d of the %d voters %s run (a majority is %d); no metadata change happens (no topic, no ISR shrink, no broker registration) until a majority is back", len(up), len(voters), fmt.Sprint(voters), majority),
		Evidence: ev,
		DoNot:    "do not format a controller or empty its metadata log to bring it back, and never reuse a lost controller's directory id: a majority that starts without the committed metadata elects a leader that has lost it (Apache Kafka, docs/operations: KRaft)"}
	if len(up)+len(back) >= majority {
		f.Fix = fmt.Sprintf("start controllers %s with their metadata logs as they are (their start command): once %d voters run, they elect a leader and nothing is lost; then `kremedy diagnose` again", fmt.Sprint(back), majority)
	} else {
		f.Fix = fmt.Sprintf("first start every stopped controller whose log is on disk (%s); the others (%s) have lost their copy or cannot be reached, so a majority cannot come back as it was: that is a quorum-loss recovery, which discards what only the lost voters held: `kremedy run quorum-recovery --inventory INVENTORY` (a static or a dynamic quorum; docs/quorum-recovery.md) backs up every copy of %s, brokers' too, picks the seed by epoch then offset and lists what it discards before its one irreversible step", orNone(back), fmt.Sprint(lost), MetadataLogDir)
		f.Runbook = "quorum-recovery"
	}
	g.add(f)
	return true
}

// quorumKind says whether the quorum is static (controller.quorum.voters)
// or dynamic (kraft.version 1, KIP-853): from the brokers' finalized
// features (they keep answering ApiVersions without a quorum) and the
// controllers' configs.
func (g *kraftDiag) quorumKind(ctx context.Context, looks []voterLook) string {
	kv := "kraft.version not reported by the brokers"
	if f, err := g.c.Kafka.Features(ctx, g.unfenced()); err == nil {
		if v, ok := f.Finalized["kraft.version"]; ok {
			kv = fmt.Sprintf("kraft.version %d finalized", v)
		}
	}
	for _, v := range looks {
		if len(v.static) > 0 {
			return fmt.Sprintf("a static quorum: controller.quorum.voters on controller %d names %s (%s); the voters are the config's", v.h.ID, fmt.Sprint(v.static), kv)
		}
	}
	for _, v := range looks {
		if v.bootstrap {
			return fmt.Sprintf("a dynamic quorum: controller %d's config sets controller.quorum.bootstrap.servers and no voters (%s); the voter set lives in the metadata log (VotersRecords)", v.h.ID, kv)
		}
	}
	return "the quorum's kind is not known: no controller config was read (" + kv + ")"
}

func voterIDList(vs []ports.Voter) []int32 {
	return idsOf(vs, func(v ports.Voter) int32 { return v.ID })
}

func orNone(ids []int32) string {
	if len(ids) == 0 {
		return "none"
	}
	return fmt.Sprint(ids)
}
