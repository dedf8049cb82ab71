package quorum

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// A dynamic quorum's way back (KIP-853, kraft.version 1). Its voter set is
// the last KRaftVoters record of the log, so editing a config changes
// nothing. The seed's log gets, while it is stopped, the records that
// take its voter set down to itself — one voter removed per record, as
// Kafka replays no voter set that does not overlap the previous one's
// majority (VoterSetHistory.addAt) — appended after its last batch, of
// its last batch's epoch. Started alone, it is the one voter and leads.
// The other controllers come back empty as observers (a new directory
// id), fetch the seed's log, and are added one at a time with
// AddRaftVoter, the request kafka-metadata-quorum.sh add-controller sends.
// A controller that comes back with its old log can take no part: the
// new voter set names the others by their new directory ids.

// dynamicLog is what the backup step reads of the seed's copy on a
// dynamic quorum.
type dynamicLog struct {
	Voters []VoterEntry `json:"voters"`
	// VotersAt is the offset of the KRaftVoters record they come from.
	VotersAt int64 `json:"voters_at"`
	// Segment is the seed's last segment, where the records are
	// appended; Size its size, which must be its whole batches'.
	Segment string `json:"segment"`
	Size    int64  `json:"size"`
}

// maxCheckpointHead is how much of a snapshot is read for its voters: a
// snapshot of kraft.version 1 starts with its header, the kraft.version
// and the voters (RecordsSnapshotWriter), long before its metadata.
const maxCheckpointHead = 1 << 20

// readDynamicLog reads the seed's voter set (its newest snapshot's, or a
// later KRaftVoters record of its segments) and its last segment.
func readDynamicLog(ctx context.Context, h ports.Hosts, seed Copy) (dynamicLog, error) {
	snaps, segs, err := listLog(ctx, h, seed)
	if err != nil {
		return dynamicLog{}, err
	}
	if len(segs) == 0 {
		return dynamicLog{}, fmt.Errorf("%s holds no segment", seed.Dir)
	}
	d := dynamicLog{VotersAt: -1}
	found := false
	// A snapshot's name is its end offset and epoch: its records are the
	// log's state before that offset, numbered from 0 inside the file.
	var snapEnd int64
	if len(snaps) > 0 {
		s := snaps[len(snaps)-1]
		snapEnd = s.base
		b, err := readHead(ctx, h, seed.Node, path.Join(seed.Dir, s.name), maxCheckpointHead)
		if err != nil {
			return d, err
		}
		if vs, _, ok, err := LastVoters(b); err != nil {
			return d, fmt.Errorf("%s: %w", s.name, err)
		} else if ok {
			d.Voters, d.VotersAt, found = vs, snapEnd-1, true
		}
	}
	for i, s := range segs {
		last := i == len(segs)-1
		if !last && segs[i+1].base <= snapEnd {
			continue // wholly before the snapshot's end: the snapshot holds its state
		}
		if s.size > maxSegmentFetch {
			return d, fmt.Errorf("%s is %d bytes, more than kremedy fetches (%d) to find a voter set: read it on controller %d with kafka-dump-log.sh --cluster-metadata-decoder --files %s, or choose another controller as the seed (--set seed=N)", s.name, s.size, maxSegmentFetch, seed.Node, path.Join(seed.Dir, s.name))
		}
		b, err := brokers.ReadFile(ctx, h, seed.Node, path.Join(seed.Dir, s.name))
		if err != nil {
			return d, err
		}
		if vs, off, ok, err := LastVoters(b); err != nil {
			return d, fmt.Errorf("%s: %w (a damaged copy: choose another controller as the seed with --set seed=N; the ledger then lists what that loses)", s.name, err)
		} else if ok && off >= snapEnd {
			d.Voters, d.VotersAt, found = vs, off, true
		}
		if last {
			d.Segment, d.Size = path.Join(seed.Dir, s.name), int64(len(b))
			if v := ValidLength(b); v != len(b) {
				return d, fmt.Errorf("%s ends with %d bytes that are no whole batch (a write cut short): Kafka's log recovery truncates them at the next start, and kremedy appends only after whole batches. With every other controller stopped, start the seed once by hand and stop it (its recovery truncates the tail; it cannot lead alone), then run again", d.Segment, len(b)-v)
			}
		}
	}
	if !found {
		return d, fmt.Errorf("%s holds no KRaftVoters record (neither its newest snapshot nor the segments after it): its configs say dynamic (controller.quorum.bootstrap.servers) but its log has no voter set, as a static quorum's (kraft.version 0) has none. If the quorum was static, put controller.quorum.voters back in every controller's config and run again", seed.Dir)
	}
	return d, nil
}

// logFile is a snapshot (.checkpoint: base is its end offset) or a
// segment (.log: base is its first offset) of a copy.
type logFile struct {
	base int64
	size int64
	name string
}

// listLog lists a copy's snapshots and segments, each by base.
func listLog(ctx context.Context, h ports.Hosts, seed Copy) (snaps, segs []logFile, err error) {
	var lines []string
	cmd := shell.Script(fmt.Sprintf(`cd %s && for f in *.checkpoint *.log; do [ -e "$f" ] && printf '%%s\t%%s\n' "$(stat -c %%s -- "$f")" "$f"; done; true`, shell.Quote(seed.Dir)))
	if err := h.Run(ctx, seed.Node, cmd, func(l ports.Line) {
		if !l.Stderr {
			lines = append(lines, l.Text)
		}
	}); err != nil {
		return nil, nil, fmt.Errorf("list %s on %s: %w", seed.Dir, seed.Role(), err)
	}
	for _, l := range lines {
		sz, name, _ := strings.Cut(l, "\t")
		size, err := strconv.ParseInt(sz, 10, 64)
		head, _, _ := strings.Cut(name, "-")
		base, err2 := strconv.ParseInt(strings.TrimSuffix(head, ".log"), 10, 64)
		if err != nil || err2 != nil {
			continue
		}
		if strings.HasSuffix(name, ".checkpoint") {
			snaps = append(snaps, logFile{base, size, name})
		} else {
			segs = append(segs, logFile{base, size, name})
		}
	}
	byBase := func(fs []logFile) { sort.Slice(fs, func(i, j int) bool { return fs[i].base < fs[j].base }) }
	byBase(snaps)
	byBase(segs)
	return snaps, segs, nil
}

// readHead reads up to n bytes of a file on a node's host.
func readHead(ctx context.Context, h ports.Hosts, id int32, p string, n int) ([]byte, error) {
	var b strings.Builder
	err := h.Run(ctx, id, shell.Script(fmt.Sprintf("head -c %d -- %s | base64 -w0", n, shell.Quote(p))), func(l ports.Line) {
		if !l.Stderr {
			b.WriteString(l.Text)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read %s on node %d: %w", p, id, err)
	}
	return base64.StdEncoding.DecodeString(strings.TrimSpace(b.String()))
}

// checkLogVoters refuses a log voter set that is not the inventory's
// controllers: the recovery adds back exactly the controllers the log
// names.
func checkLogVoters(vs []VoterEntry, t ports.Target, seed int32) error {
	ids := voterEntryIDs(vs)
	var inv []int32
	for _, c := range t.Controllers {
		inv = append(inv, c.ID)
	}
	slices.Sort(ids)
	slices.Sort(inv)
	if !slices.Equal(ids, inv) {
		return fmt.Errorf("%w: the seed's log names voters %v, the inventory controllers %v: make the inventory list exactly the log's voters (kafka-metadata-quorum.sh describe --replication said so while the quorum served), and run again. Nothing was changed", steps.ErrRefused, ids, inv)
	}
	if !slices.Contains(ids, seed) {
		return fmt.Errorf("%w: the seed %d is not a voter of its own log", steps.ErrRefused, seed)
	}
	return nil
}

// SeedStateDynamic is the seed's quorum-state on a dynamic quorum (data
// version 1, Kafka 3.9+): no leader and no vote at epoch, the highest
// epoch any node saw (SeedState says why).
func SeedStateDynamic(epoch int32) []byte {
	b, _ := json.Marshal(struct {
		LeaderID    int32  `json:"leaderId"`
		LeaderEpoch int32  `json:"leaderEpoch"`
		VotedID     int32  `json:"votedId"`
		VotedDir    string `json:"votedDirectoryId"`
		DataVersion int    `json:"data_version"`
	}{-1, epoch, -1, "AAAAAAAAAAAAAAAAAAAAAA", 1})
	return b
}

// shrinkBytes are the control batches appended to the seed's log: from
// its end offset, of its last epoch, the voter sets of ShrinkTo.
func (r Recovery) shrinkBytes(tsMillis int64) ([]byte, []string, error) {
	sets, err := ShrinkTo(r.Log.Voters, r.Seed.Node)
	if err != nil {
		return nil, nil, err
	}
	var out []byte
	var said []string
	for i, s := range sets {
		b, err := VotersBatch(r.Seed.End+int64(i), r.Seed.Epoch, tsMillis, s)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, b...)
		said = append(said, fmt.Sprintf("offset %d: voters %v", r.Seed.End+int64(i), voterEntryIDs(s)))
	}
	return out, said, nil
}

// appendScript appends the bytes on its stdin to seg when seg is size
// bytes long, or finds them there already (the bytes at [size, size+n)
// are theirs: appended by an earlier attempt, the seed perhaps leading
// and writing since); sha is theirs. running: the seed's process runs —
// then nothing is appended (a running process owns its open segment and
// trims it back to what it wrote when it stops): exit 5 unless the
// records are there. Exit 3: seg changed since the plan; 4: the bytes
// came damaged.
func appendScript(seg string, size int64, n int, sha string, running bool) string {
	run := 0
	if running {
		run = 1
	}
	return shell.Script(fmt.Sprintf(`set -eu
f=%s; want=%d; n=%d; sha=%s; running=%d
t=$(mktemp); trap 'rm -f -- "$t"' EXIT
cat > "$t"
[ "$(sha256sum -- "$t" | cut -d' ' -f1)" = "$sha" ] || { echo "the records received are not the planned ones; nothing was written" >&2; exit 4; }
size=$(stat -c %%s -- "$f")
if [ "$size" -ge $((want + n)) ] && [ "$(head -c $((want + n)) -- "$f" | tail -c "$n" | sha256sum | cut -d' ' -f1)" = "$sha" ]; then echo "$f holds the records already"; exit 0; fi
[ "$running" = 0 ] || { echo "the seed runs, and $f does not hold the records: nothing was written" >&2; exit 5; }
[ "$size" -eq "$want" ] || { echo "$f is $size bytes, not the $want bytes planned: the log changed since the backup; nothing was written" >&2; exit 3; }
cat -- "$t" >> "$f"
sync -- "$f" 2>/dev/null || sync
echo "$f: $n bytes appended (now $((want + n)))"`, shell.Quote(seg), size, n, shell.Quote(sha), run))
}

// addFunc adds an action to the rewrite's plan in a phase; backFunc plans
// a controller's return, empty (rewrite.Plan's back).
type (
	addFunc  func(phase string, a steps.Action)
	backFunc func(phase string, id int32, check, checkWhat string) error
)

// planDynamicSeed plans the seed's phase on a dynamic quorum: alone, its
// quorum-state, the voter set shrunk to it in its log, started, leading.
func planDynamicSeed(add addFunc, r Recovery, seedHost ports.Host, qs, from, run string) error {
	on := fmt.Sprintf("controller %d on %s", seedHost.ID, seedHost.On())
	b, said, err := r.shrinkBytes(r.ReadAtMs)
	if err != nil {
		return fmt.Errorf("%w: %v; nothing was changed", steps.ErrRefused, err)
	}
	content := SeedStateDynamic(r.StateEpoch)
	add(phaseSeed, steps.Action{Op: steps.OpCheck, Target: "every controller", Detail: "no controller but the seed runs (one brought back by its service manager, or by hand, could lead the old timeline beside the seed)", Args: rwArgs{Node: seedHost.ID, Do: doAlone}})
	add(phaseSeed, steps.Action{Op: steps.OpSSH, Target: on, Detail: fmt.Sprintf("write %s: no leader, no vote, epoch %d (the highest any node saw)", qs, r.StateEpoch), Broker: seedHost.ID,
		Args: rwArgs{Node: seedHost.ID, Do: doFile, Path: qs, Backup: keptPath(r.Seed, "quorum-state", "was", run), From: from, To: digest(content), Content: string(content)}})
	add(phaseSeed, steps.Action{Op: steps.OpSSH, Target: on, Detail: fmt.Sprintf("append to %s (%d bytes now) the voter set shrunk to controller %d, one voter at a time as Kafka replays it: %s (KRaftVoters control records of epoch %d; the segment as it was is in the backup)", r.Log.Segment, r.Log.Size, r.Seed.Node, strings.Join(said, "; "), r.Seed.Epoch), Broker: seedHost.ID,
		Args: rwArgs{Node: seedHost.ID, Do: doAppend, Path: r.Log.Segment, Size: r.Log.Size, Bytes: base64.StdEncoding.EncodeToString(b), To: digest(b)}})
	add(phaseSeed, steps.Action{Op: steps.OpSSH, Target: on, Detail: seedHost.Start, Broker: seedHost.ID, Args: rwArgs{Node: seedHost.ID, Do: doStart}})
	add(phaseSeed, steps.Action{Op: steps.OpWait, Target: seedHost.Addr, Detail: fmt.Sprintf("controller %d leads, the one voter", seedHost.ID), Broker: seedHost.ID, Args: rwArgs{Node: seedHost.ID, Do: doLeads}})
	return nil
}

// planDynamicJoin plans every other controller's return on a dynamic
// quorum, one at a time: empty, a new directory id, started as an
// observer, caught up, added as a voter (AddRaftVoter), the quorum
// serving with it.
func planDynamicJoin(add addFunc, back backFunc, r Recovery, seedHost ports.Host) error {
	voters := []int32{r.Seed.Node}
	for _, id := range r.others() {
		if err := back(phaseRejoin, id, doObserve, "the seed leads as the one voter: an empty controller starts as an observer, which takes no part in an election"); err != nil {
			return err
		}
		add(phaseRejoin, steps.Action{Op: steps.OpWait, Target: seedHost.Addr, Detail: fmt.Sprintf("controller %d fetched the seed's log to its end", id), Broker: id, Args: rwArgs{Node: id, Do: doCaughtUp}})
		add(phaseRejoin, steps.Action{Op: steps.OpKafka, Target: seedHost.Addr, Detail: fmt.Sprintf("AddRaftVoter %d with its new directory id and its listeners as the log had them (what kafka-metadata-quorum.sh add-controller sends)", id), Broker: id, Args: rwArgs{Node: id, Do: doAddVoter}})
		voters = append(voters, id)
		add(phaseRejoin, steps.Action{Op: steps.OpWait, Target: "the KRaft quorum", Detail: fmt.Sprintf("a leader, and voters %v caught up", voters), Broker: id, Args: rwArgs{Node: id, Do: doQuorum, Want: slices.Clone(voters)}})
	}
	return nil
}

// newDirectoryID plans a controller's meta.properties with a new
// directory.id when it still holds old, the one the lost quorum's voter
// set had for it (ok false: it holds another already — this run, or an
// earlier replacement, gave it one).
func newDirectoryID(id int32, mp string, own []byte, old, run string) (steps.Action, bool, error) {
	if old == "" || dirIDOf(own) != old {
		return steps.Action{}, false, nil
	}
	text, err := metaFor(own, id)
	if err != nil {
		return steps.Action{}, false, err
	}
	kept := mp + ".kremedy-" + run
	return steps.Action{Op: steps.OpSSH, Detail: fmt.Sprintf("write %s with a new directory.id (%s, the one its old log had, is never reused; the file before it kept as %s)", mp, old, kept), Broker: id,
		Args: rwArgs{Node: id, Do: doFile, Path: mp, Backup: kept, From: digest(own), To: digest(text), Content: string(text)}}, true, nil
}

// dirIDOf is a meta.properties' directory.id ("" without one).
func dirIDOf(meta []byte) string {
	for _, l := range strings.Split(string(meta), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "directory.id="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// oldDirID is the directory id the lost quorum's voter set had for id.
func (r Recovery) oldDirID(id int32) string {
	for _, v := range r.Log.Voters {
		if v.ID == id {
			return v.DirID
		}
	}
	return ""
}

// actDynamic runs a dynamic quorum's own actions.
func actDynamic(ctx context.Context, env *steps.Env, r Recovery, a steps.Action, args rwArgs) error {
	seed, _ := env.Target.Controller(r.Seed.Node)
	switch args.Do {
	case doAppend:
		b, err := base64.StdEncoding.DecodeString(args.Bytes)
		if err != nil {
			return err
		}
		running := env.Kafka.Listening(ctx, seed.Addr)
		err = env.Hosts.RunInput(ctx, args.Node, appendScript(args.Path, args.Size, len(b), args.To, running), b, func(l ports.Line) { env.Output(a.Target, l) })
		switch code, _ := brokers.ExitStatus(err); code {
		case 5:
			return fmt.Errorf("%w: controller %d runs (brought back by its service manager, or by hand?) and its log does not hold the records that shrink the voter set: it would stand for election with the lost voter set. Stop it (and disable what restarts it), then resume: nothing was written", steps.ErrRefused, args.Node)
		case 3:
			return fmt.Errorf("%w: %s is not as the backup read it (%d bytes), nor does it hold the planned records: did the seed run? Nothing was written. Its copy as it was is in the backup (DIR.%s.kremedy-backup-RUN): with every controller stopped, put it back and start a new run", steps.ErrRefused, args.Path, args.Size, MetadataLog)
		}
		return err
	case doObserve:
		q, err := env.Kafka.Quorum(ctx, roll.ControllerAddrs(env.Target))
		if err != nil || q.Leader < 0 {
			return fmt.Errorf("%w: the quorum has no leader now (%v): controller %d is not started. Resume once it has one (the seed, controller %d, started)", steps.ErrRefused, err, args.Node, r.Seed.Node)
		}
		for _, v := range q.Voters {
			if v.ID == args.Node && v.DirID != "" {
				env.Logf("controller %d is a voter already (directory %s): an earlier attempt added it", args.Node, v.DirID)
			}
		}
		env.Logf("safe: controller %d leads; voters %v: controller %d starts as an observer", q.Leader, voterIDsOf(q.Voters), args.Node)
		return nil
	case doAddVoter:
		return addVoter(ctx, env, r, seed, args.Node)
	}
	return fmt.Errorf("action %s: nothing to do for %q", a.ID, args.Do)
}

// addVoter adds controller id with the directory id its meta.properties
// holds now and the listeners the log had for it, unless the quorum
// lists it with that directory id already.
func addVoter(ctx context.Context, env *steps.Env, r Recovery, seed ports.Host, id int32) error {
	h, _ := env.Target.Controller(id)
	c := r.copyOf(id)
	metaDir := c.MetaDir
	if metaDir == "" {
		return fmt.Errorf("%w: controller %d's metadata dir is unknown (its config was not read): add it by hand with kafka-metadata-quorum.sh --bootstrap-controller %s --command-config %s add-controller on its host", steps.ErrRefused, id, seed.Addr, h.Config)
	}
	mb, err := brokers.ReadFile(ctx, env.Hosts, id, path.Join(metaDir, "meta.properties"))
	if err != nil {
		return err
	}
	dir := dirIDOf(mb)
	if dir != "" && dir == r.oldDirID(id) {
		return fmt.Errorf("%w: controller %d's meta.properties holds directory id %s, the one its old log had in the lost voter set: it is not added under it. Resume: the rewrite gives it a new one", steps.ErrRefused, id, dir)
	}
	var eps []ports.Listener
	for _, v := range r.Log.Voters {
		if v.ID == id {
			for _, e := range v.Endpoints {
				eps = append(eps, ports.Listener{Name: e.Name, Host: e.Host, Port: int(e.Port)})
			}
		}
	}
	if dir == "" || len(eps) == 0 {
		return fmt.Errorf("%w: controller %d: no directory.id in its meta.properties, or no listener in the log's voter set: add it by hand (kafka-metadata-quorum.sh add-controller)", steps.ErrRefused, id)
	}
	if err := addAtLeader(ctx, env, ports.NewVoter{ID: id, DirID: dir, Listeners: eps}); err != nil {
		return fmt.Errorf("%w. Controller %d runs as an observer, not yet a voter; resume to try again, or add it by hand on its host: kafka-metadata-quorum.sh --bootstrap-controller %s --command-config %s add-controller", err, id, seed.Addr, h.Config)
	}
	return nil
}

// addAtLeader adds v as a voter at whichever controller leads, until the
// quorum lists it with its directory id (a minute at most).
func addAtLeader(ctx context.Context, env *steps.Env, v ports.NewVoter) error {
	return roll.WaitFor(ctx, env, time.Minute, fmt.Sprintf("the leader to add controller %d", v.ID), func() (bool, string) {
		q, err := env.Kafka.Quorum(ctx, roll.ControllerAddrs(env.Target))
		if err != nil || q.Leader < 0 {
			return false, fmt.Sprintf("no leader (%v)", err)
		}
		for _, vo := range q.Voters {
			if vo.ID == v.ID && vo.DirID == v.DirID {
				env.Logf("controller %d is a voter with directory %s", v.ID, v.DirID)
				return true, ""
			}
		}
		lh, ok := env.Target.Controller(q.Leader)
		if !ok {
			return false, fmt.Sprintf("leader %d is not in the inventory", q.Leader)
		}
		if err := env.Kafka.AddVoter(ctx, lh.Addr, v); err != nil {
			return false, err.Error()
		}
		env.Logf("controller %d added as a voter (directory %s) by leader %d", v.ID, v.DirID, q.Leader)
		return true, ""
	})
}

func voterIDsOf(vs []ports.Voter) []int32 {
	var ids []int32
	for _, v := range vs {
		ids = append(ids, v.ID)
	}
	return ids
}
