package quorum

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// Register adds quorum-recovery's kinds to r.
func Register(r *steps.Registry) {
	steps.Register(r, "quorum-survey", nil, func(o opts) steps.Kind { return &survey{o: o} })
	steps.Register(r, "quorum-stop", nil, func(o opts) steps.Kind { return &stopCtrls{o: o} })
	steps.Register(r, "quorum-backup", nil, func(o opts) steps.Kind { return &backup{o: o} })
	steps.Register(r, "quorum-rewrite", nil, func(o opts) steps.Kind { return &rewrite{o: o} })
	steps.Register(r, "quorum-verify", nil, func(o opts) steps.Kind { return &verify{o: o} })
	RegisterReplace(r)
	RegisterConvert(r)
}

// controllerSeed picks the seed among copies: the newest copy (Seed),
// which must be a controller's, or, when the operator chose one (want, a
// controller's id), that controller's. A broker's copy ahead of every
// controller's is refused, naming the ways on: --set copy_from (kremedy
// copies it, seedFromBroker), by hand, or choose a controller and lose
// what the ledger will list.
func controllerSeed(copies []Copy, want int32) (Copy, error) {
	if want >= 0 {
		for _, c := range copies {
			if c.Node == want && c.Controller {
				if !c.Known() {
					return Copy{}, fmt.Errorf("%w: --set seed=%d: controller %d's copy could not be read (%s); choose another controller. Nothing was changed", steps.ErrRefused, want, want, c.Err)
				}
				return c, nil
			}
		}
		return Copy{}, fmt.Errorf("%w: --set seed=%d names no controller of the inventory; nothing was changed", steps.ErrRefused, want)
	}
	best, ok := Seed(copies)
	if !ok {
		return Copy{}, fmt.Errorf("%w: no node's copy of %s could be read: %s. Nothing was changed", steps.ErrRefused, MetadataLog, copiesText(copies))
	}
	if best.Controller {
		return best, nil
	}
	var ctrls []Copy
	for _, c := range copies {
		if c.Controller {
			ctrls = append(ctrls, c)
		}
	}
	cs, ok := Seed(ctrls)
	if !ok {
		return Copy{}, fmt.Errorf("%w: no controller's copy of %s could be read, and the quorum restarts from a controller's. Nothing was changed", steps.ErrRefused, MetadataLog)
	}
	return Copy{}, fmt.Errorf("%w: %s holds the newest copy (epoch %d, end %d), ahead of every controller's (the best: %s, epoch %d, end %d): seeding from a controller discards records the lost quorum may have committed. Three ways on: (1) run again with --set copy_from=%d: kremedy copies the broker's copy over controller %d's (its own kept aside) and restarts the quorum from it — nothing is lost; (2) with broker %d and controller %d stopped, copy the broker's %s over the controller's yourself (keep the controller's aside) and run again; or (3) run again with --set seed=%d: the plan then lists, before its confirmation, every record the recovery discards. Nothing was changed",
		steps.ErrRefused, best.Role(), best.Epoch, best.End, cs.Role(), cs.Epoch, cs.End, best.Node, cs.Node, best.Node, cs.Node, best.Dir, cs.Node)
}

// pickSeed is the seed the operator's options give: a broker's copy
// copied over a controller's (copy_from; from is that broker's), or a
// controller's own (seed, or the newest).
func pickSeed(copies []Copy, o opts) (seed, from Copy, err error) {
	if o.CopyFrom >= 0 {
		return seedFromBroker(copies, int32(o.CopyFrom), int32(o.Seed))
	}
	seed, err = controllerSeed(copies, int32(o.Seed))
	return seed, Copy{}, err
}

func copiesText(copies []Copy) string {
	var s []string
	for _, c := range copies {
		s = append(s, c.String())
	}
	return strings.Join(s, "; ")
}

// survey is quorum-survey: read-only.
type survey struct{ o opts }

func (k *survey) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	v, err := lookAt(ctx, env, k.o)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Summary: "survey the controllers and every copy of the metadata log (changes nothing)"}
	for _, c := range v.Ctrls {
		state := "not listening"
		switch {
		case !c.Reachable:
			state = "host does not answer (" + c.Err + "); named fenced"
		case c.Listening:
			state = "listening on " + c.Host.Addr
		}
		p.Facts = append(p.Facts, fmt.Sprintf("controller %d (%s): %s", c.Host.ID, c.Host.On(), state))
	}
	if v.Dynamic {
		p.Facts = append(p.Facts, fmt.Sprintf("dynamic quorum (controller.quorum.bootstrap.servers, kraft.version 1): the voter set is in the metadata log; the backup step reads it from the seed's copy and checks it names the inventory's controllers %v", voterIDs(v.Voters)))
	} else {
		p.Facts = append(p.Facts, "static voter set (controller.quorum.voters): "+v.VotersLine)
	}
	if ok, why := v.serving(); ok {
		p.NoOp, p.EndsRun = true, true
		p.Summary = "the quorum serves (" + why + "): nothing to recover"
		p.Notes = append(p.Notes, "kremedy diagnose names what else is wrong, if anything")
		return p, nil
	} else {
		p.Facts = append(p.Facts, "the quorum: "+why)
	}
	copies := ReadCopies(ctx, env.Target, env.Hosts)
	for _, c := range copies {
		p.Facts = append(p.Facts, c.String())
	}
	seed, from, err := pickSeed(copies, k.o)
	if err != nil {
		return nil, err
	}
	if k.o.CopyFrom >= 0 {
		p.Facts = append(p.Facts, fmt.Sprintf("the seed: broker %d's copy (epoch %d, end %d), copied over controller %d's by the backup step", from.Node, from.Epoch, from.End, seed.Node))
	}
	var up, whole []int32
	for _, c := range v.Ctrls {
		if c.Listening {
			up = append(up, c.Host.ID)
			continue
		}
		for _, cp := range copies {
			if cp.Node == c.Host.ID && cp.Controller && cp.Known() {
				whole = append(whole, c.Host.ID)
			}
		}
	}
	if len(whole) > 0 && len(up)+len(whole) >= len(v.Voters)/2+1 {
		p.Notes = append(p.Notes, fmt.Sprintf("SIMPLER WAY, NOTHING LOST: controllers %v are stopped with their metadata logs on disk; started as they are (their own start commands), they and the running %v are a majority again, which elects a leader holding everything they committed. Consider that first and stop this run; this recovery rebuilds every voter from the seed instead (a lost disk's voter included)", whole, up))
	}
	p.Notes = append(p.Notes,
		fmt.Sprintf("the seed, as the copies stand now: %s (epoch %d, end offset %d) — read again once every controller is stopped", seed.Role(), seed.Epoch, seed.End),
		"the brokers keep running and serving the partitions they lead throughout; no metadata write (a topic, an ISR change, a broker's registration) is possible until the quorum is back",
		fmt.Sprintf("the other controllers come back empty, one at a time, and fetch the seed's log; the lost voters' old logs are kept aside, never deleted (DIR.%s.kremedy-aside-*, beside the metadata log dir)", MetadataLog))
	if f := fenced(v, k.o); len(f) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("controllers %v stay out (named fenced, their hosts do not answer): the quorum runs with the other %d of %d voters until they are replaced", f, len(v.Voters)-len(f), len(v.Voters)))
	}
	return p, nil
}

func (k *survey) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

func (k *survey) Verify(context.Context, *steps.Env) ([]steps.Check, error) { return nil, nil }

// ctrlArgs are a controller's stop or start, or the wait on its port.
type ctrlArgs struct {
	Node  int32      `json:"node"`
	Phase roll.Phase `json:"phase"`
}

// stopCtrls is quorum-stop: every controller whose host answers is
// stopped (a stopped one's stop command does nothing), so that no copy
// moves while it is read and backed up.
type stopCtrls struct{ o opts }

func (k *stopCtrls) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	v, err := lookAt(ctx, env, k.o)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Summary: "stop every controller whose host answers"}
	for _, c := range v.Ctrls {
		if !c.Reachable {
			p.Notes = append(p.Notes, fmt.Sprintf("controller %d: its host does not answer; you named it fenced (it must not come back with its old log)", c.Host.ID))
			continue
		}
		p.Actions = append(p.Actions,
			steps.Action{ID: fmt.Sprintf("stop-%d", c.Host.ID), Op: steps.OpSSH, Target: fmt.Sprintf("controller %d on %s", c.Host.ID, c.Host.On()), Detail: c.Host.Stop, Broker: c.Host.ID, Args: ctrlArgs{Node: c.Host.ID, Phase: roll.PhaseStop}},
			steps.Action{ID: fmt.Sprintf("gone-%d", c.Host.ID), Op: steps.OpWait, Target: c.Host.Addr, Detail: fmt.Sprintf("controller %d's port closes", c.Host.ID), Broker: c.Host.ID, Args: ctrlArgs{Node: c.Host.ID, Phase: roll.PhaseGone}})
	}
	return p, nil
}

func (k *stopCtrls) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		if err := doCtrl(ctx, env, a, k.o); err != nil {
			return err
		}
	}
	return nil
}

func (k *stopCtrls) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	// Once the backup step has read and saved every copy, the controllers
	// need not stay stopped: the rewrite starts them. A resumed run must
	// not stop them again.
	var r Recovery
	if ok, err := env.Load(stateKey, &r); err != nil {
		return nil, err
	} else if ok {
		return []steps.Check{{Name: "every controller was stopped while the copies were read", OK: true, Detail: fmt.Sprintf("the backup step saved them (seed %s); the rewrite starts the controllers again", r.Seed.Role())}}, nil
	}
	var out []steps.Check
	for _, c := range env.Target.Controllers {
		l := env.Kafka.Listening(ctx, c.Addr)
		out = append(out, steps.Check{Name: fmt.Sprintf("controller %d stopped", c.ID), OK: !l, Detail: map[bool]string{true: c.Addr + " still listens", false: c.Addr + " closed"}[l]})
	}
	return out, nil
}

// doCtrl runs a controller action: its stop or start command, or the wait
// for its port.
func doCtrl(ctx context.Context, env *steps.Env, a steps.Action, o opts) error {
	args, err := steps.ArgsOf[ctrlArgs](a)
	if err != nil {
		return err
	}
	c, ok := env.Target.Controller(args.Node)
	if !ok {
		return fmt.Errorf("action %s: no controller %d in the inventory", a.ID, args.Node)
	}
	return env.Do(a, func() error {
		switch args.Phase {
		case roll.PhaseStop:
			cctx, cancel := context.WithTimeout(ctx, o.StopTimeout)
			defer cancel()
			return roll.RunOn(cctx, env, c.ID, c.Stop)
		case roll.PhaseStart:
			cctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
			defer cancel()
			return roll.RunOn(cctx, env, c.ID, c.Start)
		case roll.PhaseGone:
			return roll.WaitListening(ctx, env, c, false, o.StopTimeout)
		case roll.PhaseBack:
			return roll.WaitListening(ctx, env, c, true, o.StartTimeout)
		}
		return fmt.Errorf("controller %d: no %s action here", c.ID, args.Phase)
	})
}

// keptPath is where kremedy keeps a node's file or directory name (what)
// out of the way: beside the node's metadata log dir, never inside it. A
// broker refuses to start when its log dir holds a directory that is not a
// topic-partition ("Kafka's log directories (and children) should only
// contain Kafka topic data", LogManager.loadLogs; seen on 3.9.2 in the lab
// with a backup beside __cluster_metadata-0).
func keptPath(c Copy, what, kind, run string) string {
	return path.Clean(c.MetaDir) + "." + what + ".kremedy-" + kind + "-" + run
}

// backupName is where a copy's backup goes.
func backupName(c Copy, run string) string { return keptPath(c, MetadataLog, "backup", run) }

// asideName is where a copy that diverges from the seed is moved.
func asideName(c Copy, run string) string { return keptPath(c, MetadataLog, "aside", run) }

// backupScript copies dir to its backup unless the backup is there
// already (a resumed run): cp -a keeps owners, modes and times. The copy
// is made under a .partial name and renamed once whole, so that a copy cut
// short (a dropped session, a host that rebooted) is never taken for a
// backup; a .partial left behind is kept under its own name, never
// deleted, and the copy made again.
func backupScript(dir, to string) string {
	return shell.Script(fmt.Sprintf(`set -eu
d=%s; b=%s; p="$b.partial"
if [ -e "$b" ]; then echo "$b is there already"; exit 0; fi
if [ ! -e "$d" ]; then echo "no $d: nothing to back up"; exit 0; fi
if [ -e "$p" ]; then mv -- "$p" "$p.$(date -u +%%Y%%m%%dT%%H%%M%%SZ)"; echo "an earlier copy cut short is kept as $p.<time>"; fi
cp -a -- "$d" "$p"
mv -- "$p" "$b"
echo "$d backed up to $b ($(du -sk -- "$b" | cut -f1) KiB)"`, shell.Quote(dir), shell.Quote(to)))
}

// nodeOn names where a node's commands run.
func nodeOn(t ports.Target, c Copy) string {
	return fmt.Sprintf("%s on %s", c.Role(), t.Node(c.Node).On())
}

// knownDirs are the copies read, by node: what the backup step copies.
func knownCopies(copies []Copy) []Copy {
	var out []Copy
	for _, c := range copies {
		if c.Known() && c.Dir != "" {
			out = append(out, c)
		}
	}
	return out
}

// beyondNodes are the nodes of Beyond(copies, seed).
func beyondNodes(copies []Copy, seed Copy) []int32 {
	var out []int32
	for _, c := range Beyond(copies, seed) {
		out = append(out, c.Node)
	}
	slices.Sort(out)
	return out
}

// ledgerDir is where the records a copy holds beyond the seed are fetched
// to, in the run directory.
func ledgerDir(runDir string, node int32) string {
	return path.Join(runDir, "ledger", fmt.Sprint(node))
}
