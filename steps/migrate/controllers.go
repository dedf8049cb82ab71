package migrate

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/logdir"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// ctrlOpts are the controller kinds' options.
type ctrlOpts struct {
	StopTimeout   time.Duration `opt:"stop_timeout" default:"5m"`
	StartTimeout  time.Duration `opt:"start_timeout" default:"5m"`
	HealthChecks  int           `opt:"health_checks" default:"3"`
	HealthTimeout time.Duration `opt:"health_timeout" default:"5m"`
}

// startControllers starts the provisioned KRaft controllers and waits for
// their quorum. Before anything starts it proves each one belongs to this
// cluster: its config migrates (zookeeper.metadata.migration.enable=true)
// from this cluster's ZooKeeper (zookeeper.connect, chroot included), and
// its metadata dir was formatted with this cluster's id (/cluster/id).
type startControllers struct{ o ctrlOpts }

// ctrlAction is controller c's action of phase ph (its own start or stop
// command, or the wait for its port), typed like the roller's.
func ctrlAction(c ports.Host, ph roll.Phase, op steps.Op, target, detail string) steps.Action {
	return roll.Action(ph, c.ID, c.Addr, op, target, detail)
}

// quorumWait is the action that waits for the controllers' quorum.
type quorumWait struct {
	Voters []string `json:"voters"`
}

func (k *startControllers) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	if err := checkControllers(ctx, env, st); err != nil {
		return nil, err
	}
	p := &steps.Plan{Summary: "start the KRaft controllers and wait for their quorum to elect a leader", Facts: st.Facts()}
	for _, c := range env.Target.Controllers {
		if slices.Contains(st.Running, c.ID) {
			p.Facts = append(p.Facts, fmt.Sprintf("controller %d already runs (%s)", c.ID, c.Addr))
			continue
		}
		p.Actions = append(p.Actions,
			ctrlAction(c, roll.PhaseStart, steps.OpSSH, fmt.Sprintf("controller %d on %s", c.ID, c.On()), c.Start),
			ctrlAction(c, roll.PhaseBack, steps.OpWait, c.Addr, fmt.Sprintf("listening, at most %s", k.o.StartTimeout)))
	}
	if len(p.Actions) == 0 && st.Quorum != nil && st.Quorum.Leader >= 0 {
		p.NoOp = true
		p.Summary = "every KRaft controller runs and the quorum has a leader"
		return p, nil
	}
	p.Actions = append(p.Actions, steps.Action{ID: "quorum", Op: steps.OpWait, Target: "metadata quorum",
		Detail: fmt.Sprintf("a leader, and every controller a voter, at most %s", k.o.StartTimeout), Args: quorumWait{Voters: roll.ControllerAddrs(env.Target)}})
	p.Notes = append(p.Notes, "nothing changes for clients: the controllers wait until every ZooKeeper broker registers with them in migration mode (the next step)")
	return p, nil
}

// checkControllers refuses controllers that are not this cluster's
// migration quorum.
func checkControllers(ctx context.Context, env *steps.Env, st *State) error {
	idData, _, err := env.ZK.Get(ctx, kafkazk.ClusterIDPath)
	if err != nil {
		return fmt.Errorf("read %s%s: %w", env.ZK.Chroot(), kafkazk.ClusterIDPath, err)
	}
	clusterID := kafkazk.ClusterID(idData)
	var why []string
	for _, c := range env.Target.Controllers {
		f := st.files[c.ID]
		if st.Controllers[c.ID] != ModeMigration {
			why = append(why, fmt.Sprintf("controller %d: %s has no zookeeper.metadata.migration.enable=true (or is not process.roles=controller)", c.ID, f.Path))
			continue
		}
		if zk, _ := f.Props.Get("zookeeper.connect"); strings.TrimSpace(zk) != env.Target.ZKConnect {
			why = append(why, fmt.Sprintf("controller %d: zookeeper.connect is %q, the brokers' is %q (chroot included)", c.ID, zk, env.Target.ZKConnect))
		}
		dir, _ := f.Props.Get("metadata.log.dir")
		if dir == "" {
			d, _ := f.Props.Get("log.dirs")
			if d == "" {
				d, _ = f.Props.Get("log.dir")
			}
			dir = strings.TrimSpace(strings.Split(d, ",")[0])
		}
		if dir == "" {
			why = append(why, fmt.Sprintf("controller %d: neither metadata.log.dir nor log.dirs is set", c.ID))
			continue
		}
		if err := logdir.Check(dir); err != nil {
			why = append(why, fmt.Sprintf("controller %d: its metadata log dir %q (%s) is not a path kremedy puts in a command: %v; give it a plain path (a symbolic link to it will do)", c.ID, dir, f.Path, err))
			continue
		}
		meta, err := readFile(ctx, env, c.ID, path.Join(dir, "meta.properties"))
		if err != nil {
			why = append(why, fmt.Sprintf("controller %d: not formatted (%v): run kafka-storage format --cluster-id=%s -c %s", c.ID, err, clusterID, f.Path))
			continue
		}
		if got, _ := meta.Props.Get("cluster.id"); got != clusterID {
			why = append(why, fmt.Sprintf("controller %d: formatted with cluster id %q, this cluster's is %q (%s%s)", c.ID, got, clusterID, env.ZK.Chroot(), kafkazk.ClusterIDPath))
		}
		// A controller that ran before (an earlier, reverted attempt) keeps
		// the migration's state in its metadata log: started again it would
		// skip the initial metadata load. Only this run's own start counts.
		if !slices.Contains(st.Running, c.ID) && !roll.Began(env, roll.PhaseStart, c.ID) {
			log := path.Join(dir, "__cluster_metadata-0")
			err := roll.RunOn(ctx, env, c.ID, shell.Command("test", "!", "-e", log))
			if code, ok := brokers.ExitStatus(err); err != nil && !ok || ok && code != 1 {
				why = append(why, fmt.Sprintf("controller %d: could not tell whether %s exists: %v", c.ID, log, err))
			} else if ok {
				why = append(why, fmt.Sprintf("controller %d: its metadata log %s exists — it ran before (an earlier attempt?) and would skip the initial metadata load: remove %s and format it again (kafka-storage format --cluster-id=%s -c %s)", c.ID, log, log, clusterID, f.Path))
			}
		}
	}
	if len(why) > 0 {
		return fmt.Errorf("%w: the KRaft controllers are not this cluster's migration quorum: %s. Nothing was started", steps.ErrRefused, strings.Join(why, "; "))
	}
	return nil
}

func (k *startControllers) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		var err error
		switch a.Args.(type) {
		case roll.Args:
			err = k.o.doCtrl(ctx, env, a)
		case quorumWait:
			err = env.Do(a, func() error { return roll.WaitQuorum(ctx, env, nil, k.o.StartTimeout) })
		default:
			err = fmt.Errorf("start-controllers: action %s is neither a controller's nor the quorum's wait", a.ID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// doCtrl performs a controller's own start or stop command, or the wait
// for its port to open or close, by the action's phase.
func (o ctrlOpts) doCtrl(ctx context.Context, env *steps.Env, a steps.Action) error {
	args, err := steps.ArgsOf[roll.Args](a)
	if err != nil {
		return err
	}
	c, _ := env.Target.Controller(args.Node)
	run := func(cmd string, timeout time.Duration) error {
		return env.Do(a, func() error {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return roll.RunOn(cctx, env, c.ID, cmd)
		})
	}
	switch args.Phase {
	case roll.PhaseStop:
		return run(c.Stop, o.StopTimeout)
	case roll.PhaseStart:
		return run(c.Start, o.StartTimeout)
	case roll.PhaseGone:
		return env.Do(a, func() error { return roll.WaitListening(ctx, env, c, false, o.StopTimeout) })
	case roll.PhaseBack:
		return env.Do(a, func() error { return roll.WaitListening(ctx, env, c, true, o.StartTimeout) })
	}
	return fmt.Errorf("controller %d: no %s action here", c.ID, args.Phase)
}

func (k *startControllers) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	q, err := env.Kafka.Quorum(ctx, roll.ControllerAddrs(env.Target))
	c := steps.Check{Name: "the KRaft controller quorum has a leader", OK: err == nil && q.Leader >= 0}
	if err != nil {
		c.Detail = err.Error()
	} else {
		c.Detail = fmt.Sprintf("leader %d, epoch %d", q.Leader, q.Epoch)
	}
	return []steps.Check{c}, nil
}

// stopControllers deprovisions the KRaft controllers (the revert): each
// is stopped with its own command; its metadata log stays on its disk.
type stopControllers struct{ o ctrlOpts }

func (k *stopControllers) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	if ok, how := st.Phase.Revertible(); !ok {
		return nil, fmt.Errorf("%w: %s", steps.ErrRefused, how)
	}
	if n := brokersIn(st, ModeKRaft); len(n) > 0 {
		return nil, fmt.Errorf("%w: brokers %s are KRaft brokers and need the controllers: roll them back to migration mode first", steps.ErrRefused, fmt.Sprint(n))
	}
	p := &steps.Plan{Summary: "stop every KRaft controller", Facts: st.Facts()}
	for _, c := range env.Target.Controllers {
		if !slices.Contains(st.Running, c.ID) {
			continue
		}
		p.Actions = append(p.Actions,
			ctrlAction(c, roll.PhaseStop, steps.OpSSH, fmt.Sprintf("controller %d on %s", c.ID, c.On()), c.Stop),
			ctrlAction(c, roll.PhaseGone, steps.OpWait, c.Addr, fmt.Sprintf("port closed, at most %s", k.o.StopTimeout)))
	}
	if len(p.Actions) == 0 {
		p.NoOp, p.Summary = true, "no KRaft controller runs"
	}
	return p, nil
}

func brokersIn(st *State, m Mode) []int32 {
	var out []int32
	for id, mm := range st.Brokers {
		if mm == m {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (k *stopControllers) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		if err := k.o.doCtrl(ctx, env, a); err != nil {
			return err
		}
	}
	return nil
}

func (k *stopControllers) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	var up []string
	for _, c := range env.Target.Controllers {
		if env.Kafka.Listening(ctx, c.Addr) {
			up = append(up, fmt.Sprintf("controller %d (%s)", c.ID, c.Addr))
		}
	}
	return []steps.Check{{Name: "no KRaft controller listens", OK: len(up) == 0, Detail: orNone(up)}}, nil
}

// finalize takes the controllers out of migration mode through the one
// roller, one at a time, the quorum's leader last: the migration flag and
// the ZooKeeper settings are removed from each one's config while it is
// stopped (a backup beside it), it restarts, and its log catches up before
// the next. From then on no controller writes ZooKeeper: the point of no
// return.
type finalize struct {
	o ctrlOpts
	w *finalizeWhile
	r roll.Roll
}

func newFinalize(o ctrlOpts) *finalize {
	k := &finalize{o: o, w: &finalizeWhile{}}
	k.r = roll.Roll{Nodes: &roll.Controllers{HealthChecks: o.HealthChecks, HealthTimeout: o.HealthTimeout},
		StopTimeout: o.StopTimeout, StartTimeout: o.StartTimeout, While: k.w, HealWait: o.HealthTimeout}
	return k
}

// finalizeWhile edits a stopped controller's config out of migration mode.
type finalizeWhile struct{ st *State }

func (w *finalizeWhile) Skip(_ context.Context, _ *steps.Env, id int32) (string, error) {
	if w.st.Controllers[id] == ModeController {
		return "already out of migration mode", nil
	}
	return "", nil
}

func (w *finalizeWhile) Plan(_ context.Context, env *steps.Env, id int32) ([]steps.Action, string, error) {
	if w.st.Controllers[id] != ModeMigration {
		return nil, "", nil
	}
	f := w.st.files[id]
	text, err := w.text(id)
	if err != nil {
		return nil, "", err
	}
	e := editAction(f, text, backupOf(f.Path, "finalize"))
	e.Target += " on " + env.Target.Node(id).On()
	return []steps.Action{e}, "out of migration mode", nil
}

// text is controller id's config out of migration mode.
func (w *finalizeWhile) text(id int32) (string, error) {
	f := w.st.files[id]
	text, _, err := f.Props.Apply(FinalizeController())
	if err != nil {
		return "", fmt.Errorf("%w: controller %d (%s): %v", steps.ErrRefused, id, f.Path, err)
	}
	return text, nil
}

func (w *finalizeWhile) Apply(ctx context.Context, env *steps.Env, id int32, acts []steps.Action) error {
	for _, a := range acts {
		if err := applyEdit(ctx, env, a, func() (string, error) { return w.text(id) }); err != nil {
			return err
		}
	}
	return nil
}

func (k *finalize) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	if st.Phase != PhaseDualWrite && st.Phase != PhaseFinalizing && st.Phase != PhaseFinalized {
		return nil, fmt.Errorf("%w: the cluster is not in dual-write (phase %s: %s); finalize only once every broker is a KRaft broker", steps.ErrRefused, st.Phase, st.Why)
	}
	k.w.st = st
	return planRoll(ctx, env, &k.r, st, "every KRaft controller is out of migration mode: the migration is finalized",
		func(*steps.Plan) string {
			return "finalize: take every KRaft controller out of migration mode, one at a time, the leader last — THE POINT OF NO RETURN: afterwards ZooKeeper is no longer written and the migration cannot be reverted"
		})
}

func (k *finalize) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	return k.r.Apply(ctx, env, p)
}

func (k *finalize) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	checks := []steps.Check{{Name: "the migration is finalized: every broker a KRaft broker, no controller migrates", OK: st.Phase == PhaseFinalized, Detail: fmt.Sprintf("phase %s: %s", st.Phase, st.Why)}}
	return append(checks, roll.VerifyHealth(ctx, env, k.o.HealthChecks, k.o.HealthTimeout)...), nil
}
