package migrate

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
)

// Where a broker roll takes the brokers.
const (
	ToMigration     = "migration"         // ZooKeeper brokers into migration mode
	ToKRaft         = "kraft"             // migration-mode brokers to KRaft brokers
	BackToMigration = "back-to-migration" // revert: KRaft brokers back to ZooKeeper brokers in migration mode
	BackToZooKeeper = "back-to-zookeeper" // revert: migration mode off
)

// rollOpts are roll-brokers' options.
type rollOpts struct {
	To            string        `opt:"to"`
	StopTimeout   time.Duration `opt:"stop_timeout" default:"5m"`
	StartTimeout  time.Duration `opt:"start_timeout" default:"5m"`
	HealthChecks  int           `opt:"health_checks" default:"3"`
	HealthTimeout time.Duration `opt:"health_timeout" default:"5m"`
	// ControllerListener and ControllerProtocol name the brokers' way to
	// the controllers (migration mode).
	ControllerListener string `opt:"controller_listener" default:"CONTROLLER"`
	ControllerProtocol string `opt:"controller_protocol" default:"PLAINTEXT"`
}

// roll restarts the brokers one at a time, editing each one's config file
// while it is stopped (a backup beside it first): the migration's rolling
// restarts. Health is read from the brokers over Kafka (in KRaft mode they
// no longer register in ZooKeeper): before each stop, every broker lists
// every broker, no partition is offline or under-replicated, and stopping
// it keeps every partition at min.insync.replicas; after each start, the
// broker is listed again and the gate holds before the next.
type roll struct{ o rollOpts }

// editArgs are one config edit: the file, its content before (sha256) and
// after (the whole new content), and the backup made first.
type editArgs struct {
	Node    int32  `json:"node"`
	Path    string `json:"path"`
	From    string `json:"from_sha256"`
	To      string `json:"to_sha256"`
	Content string `json:"content_base64"`
	Backup  string `json:"backup"`
}

// nodeArgs name the node an action is about.
type nodeArgs struct {
	Node int32  `json:"node"`
	Addr string `json:"addr"`
}

// backupOf is where an edit toward to keeps the file it replaces; a revert
// restores from it.
func backupOf(path, to string) string { return path + ".kremedy-before-" + to }

// target is what broker id's config must become, and whether that is a
// change; reason when the roll cannot take it there.
func (k *roll) target(ctx context.Context, env *steps.Env, st *State, id int32) (text string, change bool, err error) {
	f := st.files[id]
	mode := st.Brokers[id]
	wrong := func(want string) error {
		return fmt.Errorf("%w: broker %d's config (%s) is in %s mode; %s", steps.ErrRefused, id, f.Path, mode, want)
	}
	var e Edit
	switch k.o.To {
	case ToMigration:
		switch mode {
		case ModeMigration:
			return f.Text, false, nil
		case ModeZK:
			e, err = MigrationEdit(f.Props, Quorum{Voters: voters(env), Listener: k.o.ControllerListener, Protocol: k.o.ControllerProtocol})
		default:
			return "", false, wrong("only a ZooKeeper broker enters migration mode")
		}
	case ToKRaft:
		switch mode {
		case ModeKRaft:
			return f.Text, false, nil
		case ModeMigration:
			e, err = KRaftEdit(f.Props)
		default:
			return "", false, wrong("a broker becomes a KRaft broker from migration mode only")
		}
	case BackToMigration:
		if mode != ModeKRaft {
			return f.Text, false, nil
		}
		return k.restore(ctx, env, f, ToKRaft, ModeMigration)
	case BackToZooKeeper:
		switch mode {
		case ModeZK:
			return f.Text, false, nil
		case ModeMigration:
			if text, change, err := k.restore(ctx, env, f, ToMigration, ModeZK); err == nil {
				return text, change, nil
			}
			e = OutOfMigration()
		default:
			return "", false, wrong("revert the KRaft brokers to migration mode first")
		}
	default:
		return "", false, fmt.Errorf("roll-brokers: unknown to %q (migration, kraft, back-to-migration, back-to-zookeeper)", k.o.To)
	}
	if err != nil {
		return "", false, fmt.Errorf("%w: broker %d (%s): %v", steps.ErrRefused, id, f.Path, err)
	}
	text, d, err := f.Props.Apply(e)
	if err != nil {
		return "", false, fmt.Errorf("%w: broker %d (%s): %v", steps.ErrRefused, id, f.Path, err)
	}
	return text, len(d.Added)+len(d.Removed) > 0, nil
}

// restore reads the backup the forward edit toward `from` made and checks
// it is a config of mode want.
func (k *roll) restore(ctx context.Context, env *steps.Env, f File, from string, want Mode) (string, bool, error) {
	b, err := readFile(ctx, env, f.Node, backupOf(f.Path, from))
	if err != nil {
		return "", false, fmt.Errorf("%w: broker %d: the backup made before its roll to %s (%s) cannot be read: %v. Restore its %s-mode config by hand, then resume",
			steps.ErrRefused, f.Node, from, backupOf(f.Path, from), err, want)
	}
	if m := b.Props.BrokerMode(); m != want {
		return "", false, fmt.Errorf("%w: broker %d: the backup %s is a %s-mode config, not %s", steps.ErrRefused, f.Node, b.Path, m, want)
	}
	return b.Text, b.Text != f.Text, nil
}

func voters(env *steps.Env) string {
	var v []string
	for _, c := range env.Target.Controllers {
		v = append(v, fmt.Sprintf("%d@%s", c.ID, c.Addr))
	}
	return strings.Join(v, ",")
}

// brokerAddr is broker id's Kafka listener: its ZooKeeper registration,
// else the bootstrap server on its host.
func brokerAddr(ctx context.Context, env *steps.Env, id int32) string {
	h, _ := env.Target.Host(id)
	fallback := h.Addr
	for _, b := range env.Target.Bootstrap {
		if strings.HasPrefix(b, h.Host+":") {
			fallback = b
		}
	}
	return brokers.Addr(ctx, env.ZK, id, fallback)
}

// progress is what this run already did to each broker.
type progress struct{ stopped, started, gated bool }

func nodeProgress(env *steps.Env, id int32) progress {
	var p progress
	for _, a := range env.History().Actions(env.Step().ID) {
		ok := a.Ended && a.OK
		switch a.Action.ID {
		case fmt.Sprintf("stop-%d", id):
			p.stopped = p.stopped || ok
		case fmt.Sprintf("start-%d", id):
			p.started = p.started || ok
		case fmt.Sprintf("gate-%d", id):
			p.gated = p.gated || ok
		}
	}
	return p
}

func (k *roll) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	if err := k.precondition(st); err != nil {
		return nil, err
	}
	ids := brokers.HostIDs(env.Target)
	if ctrl, err := brokers.Controller(ctx, env.ZK); err == nil {
		if i := slices.Index(ids, ctrl); i >= 0 {
			ids = append(append(slices.Clone(ids[:i]), ids[i+1:]...), ctrl)
		}
	}
	p := &steps.Plan{Summary: fmt.Sprintf("roll brokers %s to %s one at a time: each stopped, its config edited (a backup beside it first), started, and the cluster healthy before the next", brokers.I32s(ids), k.o.To)}
	p.Facts = st.Facts()
	// A broker this run stopped and has not gated yet (a resume) goes first.
	slices.SortStableFunc(ids, func(a, b int32) int {
		pa, pb := nodeProgress(env, a), nodeProgress(env, b)
		fa, fb := pa.stopped && !pa.gated, pb.stopped && !pb.gated
		switch {
		case fa && !fb:
			return -1
		case fb && !fa:
			return 1
		}
		return 0
	})
	pending := 0
	for _, id := range ids {
		acts, fact, err := k.brokerPlan(ctx, env, st, id)
		if err != nil {
			return nil, err
		}
		p.Facts = append(p.Facts, fact)
		if len(acts) > 0 {
			pending++
			p.Actions = append(p.Actions, acts...)
		}
	}
	if pending == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("every broker's config is already %s and none is left to restart", k.o.To)
		return p, nil
	}
	p.Notes = append(p.Notes, "controlled shutdown moves each broker's leaderships away first; producers with acks=all and retries lose nothing while every partition keeps min.insync.replicas")
	p.Rollback = backupsNote(p.Actions)
	return p, nil
}

// precondition refuses a roll the migration's phase does not allow.
func (k *roll) precondition(st *State) error {
	switch k.o.To {
	case ToMigration, BackToMigration:
		if st.Quorum == nil || st.Quorum.Leader < 0 {
			return fmt.Errorf("%w: the KRaft controller quorum does not answer with a leader (%s); brokers in migration mode need it. Start the controllers first", steps.ErrRefused, cmp.Or(st.QuorumErr, "no controller runs"))
		}
	case ToKRaft:
		if !st.Migrated() && st.Phase != PhaseToKRaft && st.Phase != PhaseDualWrite {
			return fmt.Errorf("%w: the metadata is not migrated yet (phase %s: %s); brokers become KRaft brokers only after the KRaft controller completed the migration", steps.ErrRefused, st.Phase, st.Why)
		}
	case BackToZooKeeper:
		if len(st.Running) > 0 {
			return fmt.Errorf("%w: KRaft controllers %s still run; the revert stops them and deletes /controller and /migration before the brokers leave migration mode", steps.ErrRefused, brokers.I32s(st.Running))
		}
	}
	return nil
}

// brokerPlan is what is left of broker id's roll.
func (k *roll) brokerPlan(ctx context.Context, env *steps.Env, st *State, id int32) ([]steps.Action, string, error) {
	pr := nodeProgress(env, id)
	if pr.gated {
		return nil, fmt.Sprintf("broker %d: rolled to %s and gated by an earlier attempt of this run; not restarted again", id, k.o.To), nil
	}
	text, change, err := k.target(ctx, env, st, id)
	if err != nil {
		return nil, "", err
	}
	if !change && !pr.stopped {
		return nil, fmt.Sprintf("broker %d: its config is already %s (%s); not restarted", id, k.o.To, st.Brokers[id]), nil
	}
	h, _ := env.Target.Host(id)
	addr := brokerAddr(ctx, env, id)
	args := nodeArgs{Node: id, Addr: addr}
	a := func(op steps.Op, name, target, detail string) steps.Action {
		return steps.Action{ID: fmt.Sprintf("%s-%d", name, id), Op: op, Broker: id, Target: target, Detail: detail, Args: args}
	}
	var acts []steps.Action
	fact := fmt.Sprintf("broker %d: stopped by an earlier attempt of this run; its config is edited if needed and it is started", id)
	if !pr.stopped {
		fact = fmt.Sprintf("broker %d: %s → %s", id, st.Brokers[id], k.o.To)
		acts = append(acts,
			a(steps.OpCheck, "safe", fmt.Sprintf("broker %d", id), "read right before the stop, from the brokers: every broker lists every broker, no partition offline or under-replicated, and stopping it keeps every partition at min.insync.replicas"),
			a(steps.OpSSH, "stop", fmt.Sprintf("broker %d on %s", id, h.Host), h.Stop),
			a(steps.OpWait, "gone", addr, fmt.Sprintf("port closed, at most %s", k.o.StopTimeout)))
	}
	f := st.files[id]
	if change {
		e := editAction(f, text, backupOf(f.Path, k.o.To))
		e.Detail = diffText(f.Text, text) + "; backup first: " + backupOf(f.Path, k.o.To)
		acts = append(acts, e)
	}
	if k.o.To == BackToZooKeeper {
		acts = append(acts, a(steps.OpMove, "metadata", fmt.Sprintf("broker %d's log dirs", id),
			"move __cluster_metadata-0 (the KRaft metadata log a KRaft broker left) out of each log dir, beside it, if there is one"))
	}
	acts = append(acts,
		a(steps.OpSSH, "start", fmt.Sprintf("broker %d on %s", id, h.Host), h.Start),
		a(steps.OpWait, "back", addr, fmt.Sprintf("listening and listed by the other brokers again, at most %s", k.o.StartTimeout)),
		a(steps.OpWait, "gate", "cluster", fmt.Sprintf("health gate from the brokers: every broker answers and lists every broker, no offline or under-replicated partition, the same topics; %d checks in a row, at most %s", max(1, k.o.HealthChecks), k.o.HealthTimeout)))
	return acts, fact, nil
}

// editAction replaces file f with text, after a backup.
func editAction(f File, text, backup string) steps.Action {
	return steps.Action{ID: fmt.Sprintf("edit-%d", f.Node), Op: steps.OpSSH, Broker: f.Node, Target: f.Path,
		Args: editArgs{Node: f.Node, Path: f.Path, From: f.Sum, To: sum(text), Content: base64.StdEncoding.EncodeToString([]byte(text)), Backup: backup}}
}

// diffText is the lines an edit removes and adds.
func diffText(from, to string) string {
	a, b := strings.Split(from, "\n"), strings.Split(to, "\n")
	var d Diff
	for _, l := range a {
		if l != "" && !slices.Contains(b, l) {
			d.Removed = append(d.Removed, l)
		}
	}
	for _, l := range b {
		if l != "" && !slices.Contains(a, l) {
			d.Added = append(d.Added, l)
		}
	}
	return d.String()
}

// editScript replaces the file if it is still what the plan read: it
// keeps the file it replaces as the backup (an older, different backup of
// the same name is renamed, never overwritten) and writes the new content
// beside it, then renames it over the file. Exit 3: the file changed since
// the plan.
func editScript(e editArgs) string {
	return shell.Script(fmt.Sprintf(`set -eu
f=%s; b=%s
cur=$(sha256sum -- "$f" | cut -d' ' -f1)
if [ "$cur" = %s ]; then echo "$f is already as planned"; exit 0; fi
if [ "$cur" != %s ]; then echo "$f changed since the plan (sha256 $cur)" >&2; exit 3; fi
if [ -e "$b" ] && ! cmp -s -- "$f" "$b"; then mv -- "$b" "$b.$(date -u +%%Y%%m%%dT%%H%%M%%SZ)"; fi
cp -p -- "$f" "$b"
t="$f.kremedy-new"
printf '%%s' %s | base64 -d > "$t"
chmod --reference="$f" -- "$t"
chown --reference="$f" -- "$t" 2>/dev/null || true
mv -f -- "$t" "$f"
echo "$f edited; the file before it is $b"`, shell.Quote(e.Path), shell.Quote(e.Backup), shell.Quote(e.To), shell.Quote(e.From), shell.Quote(e.Content)))
}

// applyEdit runs an edit on its node's host.
func applyEdit(ctx context.Context, env *steps.Env, a steps.Action) error {
	e, err := steps.ArgsOf[editArgs](a)
	if err != nil {
		return err
	}
	err = env.Do(a, func() error { return brokers.RunOn(ctx, env, e.Node, editScript(e)) })
	if code, ok := brokers.ExitStatus(err); ok && code == 3 {
		return fmt.Errorf("%w: %s on node %d changed since the plan; nothing was written", steps.ErrStalePlan, e.Path, e.Node)
	}
	return err
}

// metadataScript moves __cluster_metadata-0 out of each log dir.
func metadataScript(dirs []string, run string) string {
	var b strings.Builder
	b.WriteString("set -eu\n")
	for _, d := range dirs {
		src := d + "/__cluster_metadata-0"
		fmt.Fprintf(&b, "if [ -e %s ]; then mv -- %s %s; echo \"moved %s aside\"; fi\n", shell.Quote(src), shell.Quote(src), shell.Quote(d+".__cluster_metadata-0.kremedy-"+run), src)
	}
	return shell.Script(b.String())
}

func (k *roll) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped before %s: %w", a.ID, err)
		}
		if err := k.apply(ctx, env, a); err != nil {
			return err
		}
	}
	return nil
}

func (k *roll) apply(ctx context.Context, env *steps.Env, a steps.Action) error {
	id := a.Broker
	h, _ := env.Target.Host(id)
	if strings.HasPrefix(a.ID, "edit-") {
		return applyEdit(ctx, env, a)
	}
	n, err := steps.ArgsOf[nodeArgs](a)
	if err != nil {
		return err
	}
	want := brokers.HostIDs(env.Target)
	switch {
	case strings.HasPrefix(a.ID, "safe-"):
		return env.Do(a, func() error {
			hl := readHealth(ctx, env, want)
			if !steps.AllOK(hl.checks()) {
				return fmt.Errorf("%w: broker %d was not stopped: the cluster is not healthy: %s", steps.ErrRefused, id, steps.Failing(hl.checks()))
			}
			other := want[0]
			if other == id && len(want) > 1 {
				other = want[1]
			}
			mi, err := minISR(ctx, env, other)
			if err != nil {
				return err
			}
			if rs := hl.stopRisks(id, mi); len(rs) > 0 {
				return fmt.Errorf("%w: stopping broker %d now is not safe: %s. It was not stopped", steps.ErrRefused, id, brokers.Summarize(rs))
			}
			return nil
		})
	case strings.HasPrefix(a.ID, "stop-"):
		err := env.Do(a, func() error {
			cctx, cancel := context.WithTimeout(ctx, k.o.StopTimeout)
			defer cancel()
			return brokers.RunOn(cctx, env, id, h.Stop)
		})
		if code, ok := brokers.ExitStatus(err); ok {
			return fmt.Errorf("broker %d's stop command exited %d: it is probably still running; its config was not edited: %w", id, code, err)
		}
		return err
	case strings.HasPrefix(a.ID, "gone-"):
		return env.Do(a, func() error {
			return waitFor(ctx, env, k.o.StopTimeout, fmt.Sprintf("broker %d's port %s to close", id, n.Addr), func() (bool, string) {
				return !env.Kafka.Listening(ctx, n.Addr), "still listening"
			})
		})
	case strings.HasPrefix(a.ID, "metadata-"):
		return env.Do(a, func() error { return brokers.RunOn(ctx, env, id, metadataScript(h.LogDirs, env.RunID())) })
	case strings.HasPrefix(a.ID, "start-"):
		err := env.Do(a, func() error {
			cctx, cancel := context.WithTimeout(ctx, k.o.StartTimeout)
			defer cancel()
			return brokers.RunOn(cctx, env, id, h.Start)
		})
		if err != nil {
			return fmt.Errorf("broker %d did not start: %w (its log is on %s). Its config is the edited one (the backup is beside it); fix the cause and resume, which starts it and goes on", id, err, h.Host)
		}
		return nil
	case strings.HasPrefix(a.ID, "back-"):
		return env.Do(a, func() error { return waitListed(ctx, env, id, n.Addr, want, k.o.StartTimeout) })
	case strings.HasPrefix(a.ID, "gate-"):
		return env.Do(a, func() error {
			checks, err := holdHealth(ctx, env, want, max(1, k.o.HealthChecks), k.o.HealthTimeout)
			for _, c := range checks {
				env.Check(c)
			}
			return err
		})
	}
	return fmt.Errorf("roll-brokers: unknown action %s", a.ID)
}

// waitListed waits until broker id listens and another broker lists it.
func waitListed(ctx context.Context, env *steps.Env, id int32, addr string, want []int32, timeout time.Duration) error {
	return waitFor(ctx, env, timeout, fmt.Sprintf("broker %d to serve again", id), func() (bool, string) {
		if !env.Kafka.Listening(ctx, addr) {
			return false, "not listening on " + addr
		}
		for _, o := range want {
			if o == id {
				continue
			}
			v, err := env.Kafka.BrokerView(ctx, o)
			if err == nil && slices.Contains(v.Brokers, id) {
				return true, ""
			}
		}
		return false, "listening, but no other broker lists it yet"
	})
}

// Verify: every broker's config is where the roll takes it, and the
// cluster is healthy.
func (k *roll) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	want := map[string]Mode{ToMigration: ModeMigration, ToKRaft: ModeKRaft, BackToMigration: ModeMigration, BackToZooKeeper: ModeZK}[k.o.To]
	var off []string
	for id, m := range st.Brokers {
		if m != want && !(k.o.To == BackToMigration && m == ModeZK) {
			off = append(off, fmt.Sprintf("broker %d is %s", id, m))
		}
	}
	slices.Sort(off)
	checks := []steps.Check{{Name: fmt.Sprintf("every broker's config is %s", want), OK: len(off) == 0, Detail: orNone(off)}}
	if want == ModeKRaft {
		reg, err := brokers.Registered(ctx, env.ZK)
		if err != nil && !errors.Is(err, context.Canceled) {
			reg = nil
		}
		checks = append(checks, steps.Check{Name: "no broker registers in ZooKeeper any more (KRaft brokers register with the controllers)", OK: len(reg) == 0, Detail: "registered: " + brokers.I32s(reg)})
	}
	n, timeout := max(1, k.o.HealthChecks), k.o.HealthTimeout
	if env.Rechecking() {
		n, timeout = 1, 0
	}
	hc, _ := holdHealth(ctx, env, brokers.HostIDs(env.Target), n, timeout)
	return append(checks, hc...), nil
}

// backupsNote lists the backups a plan's edits make, by node: what the
// rollback note of this run restores from.
func backupsNote(acts []steps.Action) string {
	var lines []string
	for _, a := range acts {
		if e, ok := a.Args.(editArgs); ok {
			lines = append(lines, fmt.Sprintf("  node %d: cp -p %s %s", e.Node, shell.Quote(e.Backup), shell.Quote(e.Path)))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "This run's backups, each made right before its edit (restore one by hand with the node stopped):\n" + strings.Join(lines, "\n")
}
