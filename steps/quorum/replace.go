package quorum

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// controller-replace: a controller's disk replaced on a dynamic quorum
// (KIP-853), the neighbour of quorum-recovery while the quorum still
// serves. The voter is removed first (RemoveRaftVoter), so that the
// quorum never counts a voter that has lost its log; its metadata log is
// moved aside (or its new disk is empty) and its meta.properties written
// with a new directory id — never the old one, which names the lost disk
// in the voter set's history —, it starts as an observer and fetches the
// leader's log, and it is added back (AddRaftVoter) once caught up. What
// kafka-storage format --no-initial-controllers and kafka-metadata-quorum
// remove-controller / add-controller do by hand.

// errConfigUnread: the target controller's config could not be read.
var errConfigUnread = errors.New("the controller's config could not be read")

// replaceOpts are controller-replace's kinds' options.
type replaceOpts struct {
	Controller   int           `opt:"controller" default:"-1"`
	StopTimeout  time.Duration `opt:"stop_timeout" default:"3m"`
	StartTimeout time.Duration `opt:"start_timeout" default:"3m"`
}

// replaceKey keeps what the remove step read before it removed the
// voter: its directory id then, its listeners, the voter set, and the
// meta.properties the disk step writes (its new directory id, chosen
// once).
const replaceKey = "quorum/replace"

type replaceFact struct {
	ID        int32            `json:"id"`
	OldDir    string           `json:"old_directory_id"`
	Listeners []ports.Listener `json:"listeners"`
	Voters    []int32          `json:"voters"`
	MetaDir   string           `json:"meta_dir"`
	NewMeta   string           `json:"new_meta,omitempty"`
}

// RegisterReplace adds controller-replace's kinds to r.
func RegisterReplace(r *steps.Registry) {
	steps.Register(r, "controller-remove", nil, func(o replaceOpts) steps.Kind { return &removeVoter{o: o} })
	steps.Register(r, "controller-disk", nil, func(o replaceOpts) steps.Kind { return &newDisk{o: o} })
	steps.Register(r, "controller-add", nil, func(o replaceOpts) steps.Kind { return &addBack{o: o} })
}

// target reads the controller to replace: in the inventory, its config
// dynamic (controller.quorum.bootstrap.servers alone), its metadata dir.
func (o replaceOpts) target(ctx context.Context, env *steps.Env) (ports.Host, string, error) {
	id := int32(o.Controller)
	if o.Controller < 0 {
		return ports.Host{}, "", fmt.Errorf("%w: name the controller whose disk is replaced: --set controller=N (its controllers: %v); nothing was changed", steps.ErrRefused, hostIDs(env.Target.Controllers))
	}
	h, ok := env.Target.Controller(id)
	if !env.Target.KRaft || !ok {
		return h, "", fmt.Errorf("%w: --set controller=%d names no KRaft controller of the inventory (its controllers: %v); nothing was changed", steps.ErrRefused, o.Controller, hostIDs(env.Target.Controllers))
	}
	if env.Target.Combined(id) {
		return h, "", fmt.Errorf("%w: controller %d is a combined node (process.roles=broker,controller): controller-replace does not replace a combined node's disk (its partitions' logs are there too). Replace it by hand: move its partitions' replicas to other brokers first (kafka-reassign-partitions.sh), then remove it as a voter, format the new disk with --no-initial-controllers, start it and add it back (kafka-metadata-quorum.sh remove-controller / add-controller). Nothing was changed", steps.ErrRefused, id)
	}
	b, err := brokers.ReadFile(ctx, env.Hosts, id, h.Config)
	if err != nil {
		return h, "", fmt.Errorf("%w: %w: controller %d's config %s: %v. Fix SSH to its host (or, for a new host, put its config there), then run again or resume. Nothing was changed", steps.ErrRefused, errConfigUnread, id, h.Config, err)
	}
	p, err := javaprops.Parse(b)
	if err != nil {
		return h, "", fmt.Errorf("%w: controller %d's %s: %v; nothing was changed", steps.ErrRefused, id, h.Config, err)
	}
	if v, _ := p.Get("controller.quorum.voters"); strings.TrimSpace(v) != "" {
		return h, "", fmt.Errorf("%w: controller %d is a voter of a static quorum (controller.quorum.voters): its voter set names no directory id, so there is no voter to remove and add back, and a voter that comes back with an empty log still votes: were the leader lost meanwhile, it could help elect a voter that lacks committed records. On Kafka 4.1 or later make the quorum dynamic first (kremedy run quorum-to-dynamic), then run controller-replace. On 3.9 or earlier, by hand and only while every other voter runs caught up: stop it, format the new disk with kafka-storage.sh format --cluster-id <the cluster's id> --config %s, start it, and wait until kafka-metadata-quorum.sh describe --replication shows it caught up before anything else restarts. Nothing was changed", steps.ErrRefused, id, h.Config)
	}
	dir := MetadataDir(p)
	if dir == "" {
		return h, "", fmt.Errorf("%w: controller %d's %s names neither metadata.log.dir nor log.dirs; nothing was changed", steps.ErrRefused, id, h.Config)
	}
	return h, dir, nil
}

func hostIDs(hs []ports.Host) []int32 {
	var ids []int32
	for _, h := range hs {
		ids = append(ids, h.ID)
	}
	return ids
}

// leaderQuorum is the quorum as its leader describes it.
func leaderQuorum(ctx context.Context, env *steps.Env) (ports.Quorum, error) {
	q, err := env.Kafka.Quorum(ctx, roll.ControllerAddrs(env.Target))
	if err == nil && q.Leader < 0 {
		err = fmt.Errorf("no leader")
	}
	return q, err
}

// removeRisk is why removing voter id now would leave the quorum unable
// to serve: the voters left must have a majority of themselves caught up
// with the leader ("" when they do).
func removeRisk(q ports.Quorum, id int32) string {
	lag := brokers.Lagging(q, 2*time.Second)
	var left, behind []int32
	for _, v := range q.Voters {
		if v.ID == id {
			continue
		}
		left = append(left, v.ID)
		if lag[v.ID] != "" {
			behind = append(behind, v.ID)
		}
	}
	if len(left) == 0 {
		return fmt.Sprintf("controller %d is the only voter", id)
	}
	if up := len(left) - len(behind); up < len(left)/2+1 {
		return fmt.Sprintf("of the voters left %v, %v lag behind leader %d: fewer than a majority of them caught up", left, behind, q.Leader)
	}
	return ""
}

// removeVoter is controller-remove.
type removeVoter struct{ o replaceOpts }

func (k *removeVoter) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	h, metaDir, err := k.o.target(ctx, env)
	var unreachable error
	if errors.Is(err, errConfigUnread) {
		// Its host is being replaced, or SSH to it fails: the removal
		// needs the quorum only; the disk step needs the host.
		unreachable, err = err, nil
	}
	if err != nil {
		return nil, err
	}
	q, err := leaderQuorum(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("%w: the quorum has no leader (%v): a disk is replaced on a quorum that serves. For a lost quorum: kremedy run quorum-recovery. Nothing was changed", steps.ErrRefused, err)
	}
	var f replaceFact
	saved, err := env.Load(replaceKey, &f)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(q.Voters, func(v ports.Voter) bool { return v.ID == h.ID })
	if saved && i >= 0 && q.Voters[i].DirID != f.OldDir {
		return &steps.Plan{NoOp: true, Summary: fmt.Sprintf("controller %d was removed by this run and is a voter again under its new directory %s: nothing to remove", h.ID, q.Voters[i].DirID)}, nil
	}
	if i < 0 {
		if saved {
			return &steps.Plan{NoOp: true, Summary: fmt.Sprintf("controller %d is out of the voter set already (removed by this run; directory %s)", h.ID, f.OldDir)}, nil
		}
		return nil, fmt.Errorf("%w: controller %d is not a voter of the quorum (voters %v): nothing to remove. If it runs as an observer after a disk change, add it with kafka-metadata-quorum.sh add-controller on its host. Nothing was changed", steps.ErrRefused, h.ID, voterIDsOf(q.Voters))
	}
	old := q.Voters[i].DirID
	if old == "" {
		return nil, fmt.Errorf("%w: DescribeQuorum names no directory id for controller %d (a Kafka before 3.9, or a static quorum): nothing to remove by id. Nothing was changed", steps.ErrRefused, h.ID)
	}
	eps := q.Listeners[h.ID]
	if len(eps) == 0 {
		return nil, fmt.Errorf("%w: DescribeQuorum names no listener for controller %d: it could not be added back. Nothing was changed", steps.ErrRefused, h.ID)
	}
	n := len(q.Voters) - 1
	p := &steps.Plan{Summary: fmt.Sprintf("remove controller %d (directory %s) from the voter set of %d", h.ID, old, len(q.Voters))}
	p.Facts = append(p.Facts, fmt.Sprintf("leader %d, epoch %d, voters %v; controller %d's listeners %v; its metadata dir %s", q.Leader, q.Epoch, voterIDsOf(q.Voters), h.ID, eps, cmpOr(metaDir, "not read")))
	if unreachable != nil {
		p.Notes = append(p.Notes, fmt.Sprintf("controller %d's config could not be read (%v): it is removed from the voter set all the same; the next step (its new disk) needs SSH to its host", h.ID, unreachable))
	}
	p.Notes = append(p.Notes, fmt.Sprintf("until controller %d is added back (this runbook's last change), the quorum has %d voters and survives %d lost: a controller lost meanwhile can stop every metadata write", h.ID, n, (n-1)/2))
	p.Actions = []steps.Action{
		{ID: "safe", Op: steps.OpCheck, Target: "the KRaft quorum", Detail: fmt.Sprintf("read right before the removal: a leader, and a majority of the voters besides %d caught up", h.ID)},
		{ID: "remove", Op: steps.OpKafka, Target: "the quorum's leader", Detail: fmt.Sprintf("RemoveRaftVoter %d, directory %s (what kafka-metadata-quorum.sh remove-controller sends)", h.ID, old), Broker: h.ID,
			Args: replaceFact{ID: h.ID, OldDir: old, Listeners: eps, Voters: voterIDsOf(q.Voters), MetaDir: metaDir}},
	}
	p.Rollback = fmt.Sprintf("On its host: kafka-metadata-quorum.sh --bootstrap-controller <leader> --command-config %s add-controller (on a secured quorum, that file also needs the client settings of the controllers' listener: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*).", h.Config)
	return p, nil
}

func (k *removeVoter) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		if a.ID == "safe" {
			if err := env.Do(a, func() error {
				q, err := leaderQuorum(ctx, env)
				if err != nil {
					return fmt.Errorf("%w: the quorum has no leader now (%v): nothing was removed. Resume once it has", steps.ErrRefused, err)
				}
				if why := removeRisk(q, int32(k.o.Controller)); why != "" {
					return fmt.Errorf("%w: %s. Nothing was removed; resume once they are caught up", steps.ErrRefused, why)
				}
				return nil
			}); err != nil {
				return err
			}
			continue
		}
		f, err := steps.ArgsOf[replaceFact](a)
		if err != nil {
			return err
		}
		if err := env.Do(a, func() error {
			// Saved once: a resumed run keeps the directory id it removed
			// and the new one it chose.
			var was replaceFact
			if ok, err := env.Load(replaceKey, &was); err != nil {
				return err
			} else if !ok {
				if err := env.Save(replaceKey, f); err != nil {
					return err
				}
			}
			return roll.WaitFor(ctx, env, time.Minute, fmt.Sprintf("controller %d out of the voter set", f.ID), func() (bool, string) {
				q, err := leaderQuorum(ctx, env)
				if err != nil {
					return false, err.Error()
				}
				if !slices.ContainsFunc(q.Voters, func(v ports.Voter) bool { return v.ID == f.ID }) {
					return true, ""
				}
				lh, _ := env.Target.Controller(q.Leader)
				if err := env.Kafka.RemoveVoter(ctx, lh.Addr, f.ID, f.OldDir); err != nil {
					return false, err.Error()
				}
				return false, "removed; waiting for the voter set to say so"
			})
		}); err != nil {
			return err
		}
	}
	return nil
}

func (k *removeVoter) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	q, err := leaderQuorum(ctx, env)
	if err != nil {
		return nil, err
	}
	id := int32(k.o.Controller)
	var f replaceFact
	saved, err := env.Load(replaceKey, &f)
	if err != nil {
		return nil, err
	}
	// Out of the voter set, or back in it under another directory id than
	// the one removed (the add step ran: a resumed run must not remove it
	// again).
	ok := !slices.ContainsFunc(q.Voters, func(v ports.Voter) bool { return v.ID == id && (!saved || v.DirID == f.OldDir) })
	return []steps.Check{{Name: fmt.Sprintf("controller %d out of the voter set under its old directory id", id), OK: ok, Detail: fmt.Sprintf("voters %v", voterIDsOf(q.Voters))}}, nil
}

// newDisk is controller-disk: the controller stopped, its log moved
// aside, a new directory id, started as an observer and caught up.
type newDisk struct{ o replaceOpts }

type diskArgs struct {
	Do      string `json:"do"`
	Dir     string `json:"dir,omitempty"`
	Aside   string `json:"aside,omitempty"`
	Path    string `json:"path,omitempty"`
	Backup  string `json:"backup,omitempty"`
	From    string `json:"from_sha256,omitempty"`
	To      string `json:"to_sha256,omitempty"`
	Content string `json:"content,omitempty"`
}

func (k *newDisk) fact(env *steps.Env) (replaceFact, error) {
	var f replaceFact
	ok, err := env.Load(replaceKey, &f)
	if err == nil && !ok {
		err = fmt.Errorf("%w: the controller was not removed from the voter set by this run (the remove step): its disk is not replaced while it is a voter. Nothing was changed", steps.ErrRefused)
	}
	return f, err
}

func (k *newDisk) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	h, metaDir, err := k.o.target(ctx, env)
	if err != nil {
		return nil, err
	}
	f, err := k.fact(env)
	if err != nil {
		return nil, err
	}
	if f.MetaDir == "" { // not read when the voter was removed
		f.MetaDir = metaDir
	}
	run := env.RunID()
	con := fmt.Sprintf("controller %d on %s", h.ID, h.On())
	log := path.Join(f.MetaDir, MetadataLog)
	aside := fmt.Sprintf("%s.%s.kremedy-replaced-%s", f.MetaDir, MetadataLog, run)
	mp := path.Join(f.MetaDir, "meta.properties")
	cur, curErr := brokers.ReadFile(ctx, env.Hosts, h.ID, mp)
	content := f.NewMeta
	if content == "" {
		base := cur
		if curErr != nil {
			if base, err = k.otherMeta(ctx, env, h.ID); err != nil {
				return nil, err
			}
		}
		b, err := metaFor(base, h.ID)
		if err != nil {
			return nil, err
		}
		content = string(b)
	}
	from := ""
	if curErr == nil {
		from = digest(cur)
	}
	p := &steps.Plan{Summary: fmt.Sprintf("controller %d: stopped, its metadata log moved aside, a new directory id (%s), started as an observer of the leader", h.ID, dirIDOf([]byte(content)))}
	p.Actions = []steps.Action{
		{ID: "stop", Op: steps.OpSSH, Target: con, Detail: h.Stop, Broker: h.ID, Args: diskArgs{Do: doStop}},
		{ID: "gone", Op: steps.OpWait, Target: h.Addr, Detail: fmt.Sprintf("controller %d's port closes", h.ID), Broker: h.ID, Args: diskArgs{Do: doGone}},
		{ID: "aside", Op: steps.OpMove, Target: con, Detail: fmt.Sprintf("mv %s %s (kept, never deleted; nothing to move on a new, empty disk)", shell.Quote(log), shell.Quote(aside)), Broker: h.ID, Args: diskArgs{Do: doAside, Dir: log, Aside: aside}},
		{ID: "meta", Op: steps.OpSSH, Target: con, Detail: fmt.Sprintf("write %s: the cluster id, node.id=%d, a new directory.id (what kafka-storage.sh format --no-initial-controllers writes; the file before it kept as %s)", mp, h.ID, mp+".kremedy-"+run), Broker: h.ID,
			Args: diskArgs{Do: doFile, Path: mp, Backup: mp + ".kremedy-" + run, From: from, To: digest([]byte(content)), Content: content, Dir: f.MetaDir}},
		{ID: "start", Op: steps.OpSSH, Target: con, Detail: h.Start, Broker: h.ID, Args: diskArgs{Do: doStart}},
		{ID: "observer", Op: steps.OpWait, Target: "the quorum's leader", Detail: fmt.Sprintf("controller %d fetches as an observer, caught up with the leader", h.ID), Broker: h.ID, Args: diskArgs{Do: doCaughtUp}},
	}
	p.Rollback = fmt.Sprintf("Its old metadata log is kept as %s and its meta.properties as %s.kremedy-%s. Put both back with it stopped and add it as a voter again (kafka-metadata-quorum.sh add-controller) only if its log is whole.", aside, mp, run)
	return p, nil
}

// otherMeta is another controller's meta.properties (for a new, empty
// disk: its cluster id).
func (k *newDisk) otherMeta(ctx context.Context, env *steps.Env, id int32) ([]byte, error) {
	for _, c := range env.Target.Controllers {
		if c.ID == id {
			continue
		}
		b, err := brokers.ReadFile(ctx, env.Hosts, c.ID, c.Config)
		if err != nil {
			continue
		}
		p, err := javaprops.Parse(b)
		if err != nil {
			continue
		}
		if m, err := brokers.ReadFile(ctx, env.Hosts, c.ID, path.Join(MetadataDir(p), "meta.properties")); err == nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%w: controller %d has no meta.properties (a new disk) and no other controller's could be read for the cluster id: format its disk with kafka-storage.sh format --cluster-id <the cluster's id> --config <its config> --no-initial-controllers, then resume. Nothing was changed", steps.ErrRefused, id)
}

func (k *newDisk) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	f, err := k.fact(env)
	if err != nil {
		return err
	}
	h, _ := env.Target.Controller(f.ID)
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[diskArgs](a)
		if err != nil {
			return err
		}
		if err := env.Do(a, func() error { return k.act(ctx, env, &f, h, a, args) }); err != nil {
			return err
		}
	}
	return nil
}

func (k *newDisk) act(ctx context.Context, env *steps.Env, f *replaceFact, h ports.Host, a steps.Action, args diskArgs) error {
	out := func(l ports.Line) { env.Output(a.Target, l) }
	switch args.Do {
	case doStop:
		if !env.Kafka.Listening(ctx, h.Addr) {
			env.Logf("controller %d is not running", h.ID)
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, k.o.StopTimeout)
		defer cancel()
		return roll.RunOn(cctx, env, h.ID, h.Stop)
	case doGone:
		return roll.WaitListening(ctx, env, h, false, k.o.StopTimeout)
	case doAside:
		err := env.Hosts.Run(ctx, h.ID, asideScript(args.Dir, args.Aside, env.Kafka.Listening(ctx, h.Addr)), out)
		if code, ok := brokers.ExitStatus(err); ok && code == 5 {
			return fmt.Errorf("%w: controller %d runs again with its old metadata log (restarted by its service manager?): stop it, disable what restarts it, then resume", steps.ErrRefused, h.ID)
		}
		return err
	case doFile:
		// The new directory id is chosen once: kept in the run's facts
		// before the file is written, so that a resumed run writes the
		// same one.
		if f.NewMeta == "" {
			f.NewMeta, f.MetaDir = args.Content, args.Dir
			if err := env.Save(replaceKey, *f); err != nil {
				return err
			}
		}
		if args.Content != f.NewMeta {
			return fmt.Errorf("%w: this run chose directory id %s for controller %d already", steps.ErrStalePlan, dirIDOf([]byte(f.NewMeta)), h.ID)
		}
		if err := env.Hosts.Run(ctx, h.ID, mkdirScript(args.Dir), out); err != nil {
			return err
		}
		err := env.Hosts.RunInput(ctx, h.ID, brokers.EditScript(args.Path, args.Backup, args.From, args.To), []byte(args.Content), out)
		if code, ok := brokers.ExitStatus(err); ok && code == 3 {
			return fmt.Errorf("%w: %s changed since the plan: nothing was written", steps.ErrStalePlan, args.Path)
		}
		return err
	case doStart:
		return startOnce(ctx, env, h.ID, h, k.o.StartTimeout)
	case doCaughtUp:
		dir := dirIDOf([]byte(f.NewMeta))
		return roll.WaitFor(ctx, env, k.o.StartTimeout, fmt.Sprintf("controller %d to fetch the leader's log", h.ID), func() (bool, string) {
			q, err := leaderQuorum(ctx, env)
			if err != nil {
				return false, err.Error()
			}
			for _, o := range q.Observers {
				if o.ID == h.ID && o.DirID == dir {
					return o.LogEndOffset >= q.HighWatermark, fmt.Sprintf("its log end %d, the high watermark %d", o.LogEndOffset, q.HighWatermark)
				}
			}
			return false, fmt.Sprintf("not fetching yet as directory %s (high watermark %d)", dir, q.HighWatermark)
		})
	}
	return fmt.Errorf("action %s: nothing to do for %q", a.ID, args.Do)
}

func (k *newDisk) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	f, err := k.fact(env)
	if err != nil {
		return nil, err
	}
	h, _ := env.Target.Controller(f.ID)
	b, err := brokers.ReadFile(ctx, env.Hosts, f.ID, path.Join(f.MetaDir, "meta.properties"))
	dir := dirIDOf(b)
	ok := err == nil && dir != "" && dir != f.OldDir && env.Kafka.Listening(ctx, h.Addr)
	return []steps.Check{{Name: fmt.Sprintf("controller %d runs with a new directory id", f.ID), OK: ok, Detail: fmt.Sprintf("directory %s (was %s)", dir, f.OldDir)}}, nil
}

// addBack is controller-add.
type addBack struct{ o replaceOpts }

func (k *addBack) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	f, err := (&newDisk{o: k.o}).fact(env)
	if err != nil {
		return nil, err
	}
	dir := dirIDOf([]byte(f.NewMeta))
	p := &steps.Plan{Summary: fmt.Sprintf("add controller %d back to the voter set with directory %s", f.ID, dir)}
	p.Actions = []steps.Action{
		{ID: "add", Op: steps.OpKafka, Target: "the quorum's leader", Detail: fmt.Sprintf("AddRaftVoter %d, directory %s, listeners %v (what kafka-metadata-quorum.sh add-controller sends; the leader refuses an observer not caught up)", f.ID, dir, f.Listeners), Broker: f.ID},
		{ID: "quorum", Op: steps.OpWait, Target: "the KRaft quorum", Detail: fmt.Sprintf("a leader, and voters %v caught up", f.Voters)},
	}
	p.Rollback = fmt.Sprintf("Remove it again with kafka-metadata-quorum.sh remove-controller --controller-id %d --controller-directory-id %s.", f.ID, dir)
	return p, nil
}

func (k *addBack) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	f, err := (&newDisk{o: k.o}).fact(env)
	if err != nil {
		return err
	}
	dir := dirIDOf([]byte(f.NewMeta))
	if err := env.Do(p.Actions[0], func() error {
		return addAtLeader(ctx, env, ports.NewVoter{ID: f.ID, DirID: dir, Listeners: f.Listeners})
	}); err != nil {
		return err
	}
	return env.Do(p.Actions[1], func() error {
		return roll.WaitFor(ctx, env, k.o.StartTimeout, "the KRaft quorum", func() (bool, string) { return quorumBack(ctx, env, f.Voters) })
	})
}

func (k *addBack) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	f, err := (&newDisk{o: k.o}).fact(env)
	if err != nil {
		return nil, err
	}
	ok, detail := quorumBack(ctx, env, f.Voters)
	q, qerr := leaderQuorum(ctx, env)
	newID := false
	if qerr == nil {
		for _, v := range q.Voters {
			if v.ID == f.ID && v.DirID != "" && v.DirID != f.OldDir {
				newID = true
			}
		}
	}
	return []steps.Check{
		{Name: "the quorum has a leader and every voter back, caught up", OK: ok, Detail: detail},
		{Name: fmt.Sprintf("controller %d a voter under its new directory id", f.ID), OK: newID, Detail: fmt.Sprintf("was %s", f.OldDir)},
	}, nil
}
