package quorum

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// stateKey is where quorum-backup keeps, once every copy is backed up, the
// recovery it read: the seed, every copy, the voters. The rewrite and the
// verification plan from it, never from copies read again (by then the
// seed's log has moved on).
const stateKey = "quorum/recovery"

// Recovery is what the backup step read with every controller stopped.
type Recovery struct {
	Seed   Copy    `json:"seed"`
	Copies []Copy  `json:"copies"`
	Voters []voter `json:"voters"`
	// VotersLine is controller.quorum.voters as it was.
	VotersLine string `json:"voters_line"`
	// StateEpoch is the highest epoch any node's quorum-state holds (at
	// least the seed's log's).
	StateEpoch int32   `json:"state_epoch"`
	Fenced     []int32 `json:"fenced,omitempty"`
	// Beyond are the nodes whose copies hold records past the seed's end.
	Beyond []int32 `json:"beyond,omitempty"`
	// Dynamic: a dynamic quorum (kraft.version 1); Log is then what the
	// seed's copy holds of its voter set.
	Dynamic bool       `json:"dynamic,omitempty"`
	Log     dynamicLog `json:"log,omitempty"`
	// ReadAtMs is when the copies were read (Unix ms): the timestamp of
	// the records a dynamic quorum's rewrite appends, the same in every
	// plan of the run.
	ReadAtMs int64 `json:"read_at_ms,omitempty"`
	// CopyFrom is the broker's copy the seed is copied from (nil: the
	// seed's own).
	CopyFrom *Copy `json:"copy_from,omitempty"`
}

// ledgerKey keeps the ledger the backup step decoded: what every copy
// beyond the seed holds past its end, and the topics created there.
const ledgerKey = "quorum/ledger"

type ledgerFact struct {
	Lines []string `json:"lines,omitempty"`
	Lost  []string `json:"lost,omitempty"`
}

// unreadControllers refuses a controller (not fenced) whose copy exists
// but could not be read.
func unreadControllers(copies []Copy, fenced []int32) error {
	for _, c := range copies {
		if c.Controller && !c.Known() && !strings.Contains(c.Err, "no directory") && !slices.Contains(fenced, c.Node) {
			return fmt.Errorf("%w: controller %d's copy of %s could not be read (%s): it would come back with a log kremedy has not seen. Fix what stops the read (its metadata.log.dir, permissions), or move its %s aside yourself, and run again. Nothing was changed", steps.ErrRefused, c.Node, MetadataLog, c.Err, MetadataLog)
		}
	}
	return nil
}

// maxSegmentFetch bounds a segment fetched for the ledger: a bigger one is
// named, not decoded.
const maxSegmentFetch = 256 << 20

type backupArgs struct {
	Node int32  `json:"node"`
	Dir  string `json:"dir"`
	To   string `json:"to"`
}

type fetchArgs struct {
	Node int32  `json:"node"`
	Dir  string `json:"dir"`
	From int64  `json:"from"`
}

// backup is quorum-backup.
type backup struct{ o opts }

// read reads every copy and picks the seed. Controllers must be stopped,
// except in a preview (`kremedy plan`: the stop step has not run yet, and
// the copies are read as they stand).
func (k *backup) read(ctx context.Context, env *steps.Env) (*Recovery, error) {
	v, err := lookAt(ctx, env, k.o)
	if err != nil {
		return nil, err
	}
	for _, c := range v.Ctrls {
		if c.Listening && !env.Preview() {
			return nil, fmt.Errorf("%w: controller %d still listens on %s: every controller is stopped before the copies are read and backed up (the stop step; run it again). Nothing was changed", steps.ErrRefused, c.Host.ID, c.Host.Addr)
		}
	}
	copies := ReadCopies(ctx, env.Target, env.Hosts)
	// A controller whose host answers but whose copy could not be read
	// would be neither backed up nor moved aside, and would start with
	// whatever log it holds: refused. Only a copy that is gone (a lost
	// disk) is no copy.
	if err := unreadControllers(copies, fenced(v, k.o)); err != nil {
		return nil, err
	}
	seed, from, err := pickSeed(copies, k.o)
	if err != nil {
		return nil, err
	}
	r := &Recovery{Seed: seed, Copies: copies, Voters: v.Voters, VotersLine: v.VotersLine, StateEpoch: seed.Epoch, Fenced: fenced(v, k.o), Beyond: beyondNodes(copies, seed), Dynamic: v.Dynamic, ReadAtMs: env.Now().UnixMilli()}
	logOf := seed
	if k.o.CopyFrom >= 0 {
		r.CopyFrom, logOf = &from, from
	}
	if v.Dynamic {
		if r.Log, err = readDynamicLog(ctx, env.Hosts, logOf); err != nil {
			return nil, fmt.Errorf("%w: the seed's voter set: %v. Nothing was changed", steps.ErrRefused, err)
		}
		// Read from the broker's copy, appended to in the controller's.
		r.Log.Segment = path.Join(seed.Dir, path.Base(r.Log.Segment))
		if err := checkLogVoters(r.Log.Voters, env.Target, seed.Node); err != nil {
			return nil, err
		}
	}
	for _, c := range knownCopies(copies) {
		b, err := brokers.ReadFile(ctx, env.Hosts, c.Node, path.Join(c.Dir, "quorum-state"))
		if err != nil {
			continue // a broker without one, a copy never started
		}
		if e, err := StateEpoch(b); err == nil && e > r.StateEpoch {
			r.StateEpoch = e
		}
	}
	return r, nil
}

func (k *backup) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	r, err := k.read(ctx, env)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Summary: fmt.Sprintf("back up every copy of %s beside its log dir, pick the seed (%s), fetch what other copies hold beyond it", MetadataLog, r.Seed.Role())}
	if env.Preview() {
		p.Facts = append(p.Facts, "a preview: the copies as they stand now, read while controllers may still run; the step reads them again once every controller is stopped, and plans from that")
	}
	for _, c := range r.Copies {
		p.Facts = append(p.Facts, c.String())
	}
	p.Facts = append(p.Facts, fmt.Sprintf("the seed: %s — the largest last epoch (%d), then the largest end offset (%d)", r.Seed.Role(), r.Seed.Epoch, r.Seed.End),
		fmt.Sprintf("the highest epoch any node's quorum-state holds: %d (the seed starts above it)", r.StateEpoch))
	var backups []string
	for _, c := range knownCopies(r.Copies) {
		to := backupName(c, env.RunID())
		p.Actions = append(p.Actions, steps.Action{ID: fmt.Sprintf("backup-%d", c.Node), Op: steps.OpSSH, Target: nodeOn(env.Target, c), Detail: fmt.Sprintf("cp -a %s %s", shell.Quote(c.Dir), shell.Quote(to)), Broker: c.Node, Args: backupArgs{Node: c.Node, Dir: c.Dir, To: to}})
		backups = append(backups, fmt.Sprintf("  %s: %s", c.Role(), to))
	}
	for _, c := range Beyond(r.Copies, r.Seed) {
		p.Actions = append(p.Actions, steps.Action{ID: fmt.Sprintf("fetch-%d", c.Node), Op: steps.OpSave, Target: ledgerDir(env.RunDir(), c.Node), Detail: fmt.Sprintf("the segments of %s's copy from offset %d on (what it holds beyond the seed), read over SSH, for the ledger", c.Role(), r.Seed.End), Broker: c.Node, Args: fetchArgs{Node: c.Node, Dir: backupName(c, env.RunID()), From: r.Seed.End}})
	}
	p.Actions = append(p.Actions, steps.Action{ID: "seed", Op: steps.OpCheck, Target: r.Seed.Role(), Detail: "every copy read again after the backups: the same ends and epochs as planned", Args: *r})
	if f := r.CopyFrom; f != nil {
		src := backupName(*f, env.RunID())
		aside := fmt.Sprintf("%s.%s.kremedy-before-copy-%s", r.Seed.MetaDir, MetadataLog, env.RunID())
		p.Summary += fmt.Sprintf("; broker %d's copy, the newest, copied over controller %d's", f.Node, r.Seed.Node)
		p.Actions = append(p.Actions, steps.Action{ID: "copy", Op: steps.OpMove, Target: nodeOn(env.Target, r.Seed),
			Detail: fmt.Sprintf("broker %d's copy (its backup %s: end %d, epoch %d) copied over controller %d's %s, streamed through kremedy over SSH; controller %d's own kept as %s", f.Node, src, f.End, f.Epoch, r.Seed.Node, r.Seed.Dir, r.Seed.Node, aside), Broker: r.Seed.Node,
			Args: copyArgs{From: f.Node, Src: src, To: r.Seed.Node, Dir: r.Seed.Dir, Aside: aside, End: f.End, Epoch: f.Epoch}})
	}
	p.Rollback = "The backups are copies (nothing was changed): remove them once the cluster is back and you no longer need them:\n" + strings.Join(backups, "\n")
	return p, nil
}

func (k *backup) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		var err error
		switch a.Op {
		case steps.OpSSH:
			err = k.backupOne(ctx, env, a)
		case steps.OpSave:
			var f fetchArgs
			if f, err = steps.ArgsOf[fetchArgs](a); err == nil {
				err = env.Do(a, func() error { return fetchLedger(ctx, env.Hosts, env.RunDir(), f) })
			}
		case steps.OpCheck:
			err = k.same(ctx, env, a)
		case steps.OpMove:
			err = k.copyOver(ctx, env, a)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (k *backup) backupOne(ctx context.Context, env *steps.Env, a steps.Action) error {
	b, err := steps.ArgsOf[backupArgs](a)
	if err != nil {
		return err
	}
	return env.Do(a, func() error {
		return env.Hosts.Run(ctx, b.Node, backupScript(b.Dir, b.To), func(l ports.Line) { env.Output(a.Target, l) })
	})
}

// same reads every copy again and saves the recovery when nothing moved.
func (k *backup) same(ctx context.Context, env *steps.Env, a steps.Action) error {
	planned, err := steps.ArgsOf[Recovery](a)
	if err != nil {
		return err
	}
	return env.Do(a, func() error {
		now, err := k.read(ctx, env)
		if err != nil {
			return err
		}
		was := map[int32]Copy{}
		for _, c := range planned.Copies {
			was[c.Node] = c
		}
		for _, c := range now.Copies {
			if w := was[c.Node]; w.End != c.End || w.Epoch != c.Epoch || w.Known() != c.Known() {
				return fmt.Errorf("%w: %s moved since the plan (was %s, now %s)", steps.ErrStalePlan, c.Role(), w, c)
			}
		}
		if now.Seed.Node != planned.Seed.Node {
			return fmt.Errorf("%w: the seed is now %s, not %s", steps.ErrStalePlan, now.Seed.Role(), planned.Seed.Role())
		}
		// The ledger is decoded now and kept as a run fact; the segments
		// fetched for it go: they hold what the metadata log holds —
		// dynamic password configs as they were set, SCRAM credentials —
		// and a run directory is no place for them.
		lines, lost := planned.ledgerLines(env.RunDir())
		if err := env.Save(ledgerKey, ledgerFact{Lines: lines, Lost: lost}); err != nil {
			return err
		}
		if err := os.RemoveAll(filepath.Join(env.RunDir(), "ledger")); err != nil {
			return fmt.Errorf("remove the fetched segments from the run directory: %w", err)
		}
		return env.Save(stateKey, planned)
	})
}

// fetchLedger copies the segments of a copy's backup that hold offsets
// from From on into the run directory: the rewrite decodes them.
func fetchLedger(ctx context.Context, hosts ports.Hosts, runDir string, f fetchArgs) error {
	var lines []string
	cmd := shell.Script(fmt.Sprintf(`cd %s && for f in *.log; do [ -e "$f" ] && printf '%%s\t%%s\n' "$(stat -c %%s -- "$f")" "$f"; done; true`, shell.Quote(f.Dir)))
	if err := hosts.Run(ctx, f.Node, cmd, func(l ports.Line) {
		if !l.Stderr {
			lines = append(lines, l.Text)
		}
	}); err != nil {
		return fmt.Errorf("list %s on node %d: %w", f.Dir, f.Node, err)
	}
	type seg struct {
		base int64
		size int64
		name string
	}
	var segs []seg
	for _, l := range lines {
		sz, name, ok := strings.Cut(l, "\t")
		base, err := strconv.ParseInt(strings.TrimSuffix(name, ".log"), 10, 64)
		size, err2 := strconv.ParseInt(sz, 10, 64)
		if ok && err == nil && err2 == nil {
			segs = append(segs, seg{base, size, name})
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].base < segs[j].base })
	first := 0
	for i, s := range segs {
		if s.base <= f.From {
			first = i
		}
	}
	dir := ledgerDir(runDir, f.Node)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var errs []error
	for _, s := range segs[min(first, len(segs)):] {
		if s.size > maxSegmentFetch {
			errs = append(errs, fmt.Errorf("%s is %d bytes, more than kremedy fetches (%d): read it on node %d with kafka-dump-log.sh --cluster-metadata-decoder --files %s", s.name, s.size, maxSegmentFetch, f.Node, path.Join(f.Dir, s.name)))
			continue
		}
		b, err := brokers.ReadFile(ctx, hosts, f.Node, path.Join(f.Dir, s.name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, s.name), b, 0o600); err != nil {
			return err
		}
	}
	if len(errs) > 0 {
		return os.WriteFile(filepath.Join(dir, "NOT-FETCHED"), []byte(errors.Join(errs...).Error()+"\n"), 0o600)
	}
	return nil
}

func (k *backup) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	var r Recovery
	ok, err := env.Load(stateKey, &r)
	if err != nil {
		return nil, err
	}
	c := steps.Check{Name: "every copy backed up, the seed chosen", OK: ok}
	if ok {
		c.Detail = fmt.Sprintf("seed %s: epoch %d, end %d", r.Seed.Role(), r.Seed.Epoch, r.Seed.End)
	}
	return []steps.Check{c}, nil
}
