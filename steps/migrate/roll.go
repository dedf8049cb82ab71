package migrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
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
	ControllerProtocol string `opt:"controller_protocol" default:""`
	// ControllerSettings is the file of what each broker needs to log in
	// to a secured controller listener (ReadControllerSettings).
	ControllerSettings string `opt:"controller_settings" default:""`
	StaticJAAS         bool   `opt:"static_jaas" default:"false"`
	// Accept: the topics whose partitions no restart can keep available
	// that the operator accepts (roll.AcceptParam).
	Accept []string `opt:"accept_unavailable" type:"topics" default:""`
	// Batch: how many brokers stop at once (roll.BatchParam): 1, N or auto.
	Batch int `opt:"batch" type:"batch" default:"1"`
}

// rollBrokers restarts the brokers one at a time through the one roller,
// editing each one's config file while it is stopped (a backup beside it
// first): the migration's rolling restarts. The brokers are seen over
// Kafka (roll.KafkaBrokers: in KRaft mode they no longer register in
// ZooKeeper), each stop judged by the one stop-safety rule.
type rollBrokers struct {
	o rollOpts
	w *configWhile
	r roll.Roll
}

func newRollBrokers(o rollOpts) *rollBrokers {
	k := &rollBrokers{o: o}
	k.w = &configWhile{o: o}
	k.r = roll.Roll{Nodes: &roll.KafkaBrokers{HealthChecks: o.HealthChecks, HealthTimeout: o.HealthTimeout},
		StopTimeout: o.StopTimeout, StartTimeout: o.StartTimeout, While: k.w, Accept: o.Accept, HealWait: o.HealthTimeout, Batch: o.Batch}
	return k
}

// editArgs are one config edit: the file, its content before and after
// (sha256 each), and the backup made first. The new content itself is in
// no plan, journal or command line (a broker's config holds its
// passwords): Apply computes it again from what the plan was made of,
// refuses it unless its sha256 is To (which the plan's digest binds), and
// sends it to the host on the SSH session's standard input.
type editArgs struct {
	Node   int32  `json:"node"`
	Path   string `json:"path"`
	From   string `json:"from_sha256"`
	To     string `json:"to_sha256"`
	Backup string `json:"backup"`
}

// metadataArgs are the revert's move of the KRaft metadata log out of a
// broker's log dirs.
type metadataArgs struct {
	Node int32    `json:"node"`
	Dirs []string `json:"log_dirs"`
}

// backupOf is where an edit toward to keeps the file it replaces; a revert
// restores from it.
func backupOf(path, to string) string { return path + ".kremedy-before-" + to }

// configWhile is the migration's work on a stopped broker: its config
// edited toward where the roll takes it, and on the revert's last roll the
// KRaft metadata log moved aside. It reads the State the kind observed.
type configWhile struct {
	o  rollOpts
	st *State
	// q is the migration edit's quorum and login, planned from st and the
	// controller settings (into migration mode only).
	q Quorum
}

// target is what broker id's config must become, and whether that is a
// change; an error when the roll cannot take it there.
func (w *configWhile) target(ctx context.Context, env *steps.Env, id int32) (text string, change bool, err error) {
	st := w.st
	f := st.files[id]
	mode := st.Brokers[id]
	wrong := func(want string) error {
		return fmt.Errorf("%w: broker %d's config (%s) is in %s mode; %s", steps.ErrRefused, id, f.Path, mode, want)
	}
	var e Edit
	switch w.o.To {
	case ToMigration:
		switch mode {
		case ModeMigration:
			return f.Text, false, nil
		case ModeZK:
			if w.q.Voters == "" {
				if _, err := w.quorum(env); err != nil {
					return "", false, err
				}
			}
			e, err = MigrationEdit(f.Props, w.q)
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
		return restore(ctx, env, f, ToKRaft, ModeMigration)
	case BackToZooKeeper:
		switch mode {
		case ModeZK:
			return f.Text, false, nil
		case ModeMigration:
			if text, change, err := restore(ctx, env, f, ToMigration, ModeZK); err == nil {
				return text, change, nil
			}
			e = OutOfMigration()
		default:
			return "", false, wrong("revert the KRaft brokers to migration mode first")
		}
	default:
		return "", false, fmt.Errorf("roll-brokers: unknown to %q (migration, kraft, back-to-migration, back-to-zookeeper)", w.o.To)
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

// Skip: a broker whose config is already where the roll takes it is not
// restarted.
func (w *configWhile) Skip(ctx context.Context, env *steps.Env, id int32) (string, error) {
	_, change, err := w.target(ctx, env, id)
	if err != nil || change {
		return "", err
	}
	return fmt.Sprintf("its config is already %s (%s)", w.o.To, w.st.Brokers[id]), nil
}

func (w *configWhile) Plan(ctx context.Context, env *steps.Env, id int32) ([]steps.Action, string, error) {
	text, change, err := w.target(ctx, env, id)
	if err != nil {
		return nil, "", err
	}
	var acts []steps.Action
	f := w.st.files[id]
	if change {
		e := editAction(f, text, backupOf(f.Path, w.o.To))
		e.Target += " on " + env.Target.Node(id).On()
		acts = append(acts, e)
	}
	if w.o.To == BackToZooKeeper {
		h, _ := env.Target.Host(id)
		acts = append(acts, steps.Action{ID: roll.WhileID(id, "metadata"), Op: steps.OpMove, Broker: id, Target: fmt.Sprintf("broker %d's log dirs on %s", id, h.On()),
			Detail: "move __cluster_metadata-0 (the KRaft metadata log a KRaft broker left) out of each log dir, beside it, if there is one",
			Args:   metadataArgs{Node: id, Dirs: h.LogDirs}})
	}
	return acts, fmt.Sprintf("%s → %s", w.st.Brokers[id], w.o.To), nil
}

func (w *configWhile) Apply(ctx context.Context, env *steps.Env, id int32, acts []steps.Action) error {
	for _, a := range acts {
		var err error
		switch args := a.Args.(type) {
		case editArgs:
			err = applyEdit(ctx, env, a, func() (string, error) {
				text, _, err := w.target(ctx, env, id)
				return text, err
			})
		case metadataArgs:
			err = env.Do(a, func() error { return roll.RunOn(ctx, env, id, metadataScript(args.Dirs, env.RunID())) })
		default:
			err = fmt.Errorf("roll-brokers: action %s of broker %d is neither a config edit nor the metadata log's move", a.ID, id)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// restore reads the backup the forward edit toward `from` made and checks
// it is a config of mode want.
func restore(ctx context.Context, env *steps.Env, f File, from string, want Mode) (string, bool, error) {
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

func (k *rollBrokers) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	if err := k.precondition(st); err != nil {
		return nil, err
	}
	k.w.st = st
	var why string
	if k.o.To == BackToZooKeeper {
		k.r.First, why = newestFirst(ctx, env)
	}
	var sec Security
	if k.o.To == ToMigration {
		if sec, err = k.w.quorum(env); err != nil {
			return nil, err
		}
	}
	p, err := planRoll(ctx, env, &k.r, st, fmt.Sprintf("every broker's config is already %s and none is left to restart", k.o.To),
		func(p *steps.Plan) string {
			if b, ok := roll.Batched(p); ok {
				return fmt.Sprintf("roll brokers %s to %s %s: each batch stopped together, each broker's config edited (a backup beside it first), started, and the cluster healthy before the next batch", fmt.Sprint(nodesOf(p)), k.o.To, b)
			}
			return fmt.Sprintf("roll brokers %s to %s one at a time: each stopped, its config edited (a backup beside it first), started, and the cluster healthy before the next", fmt.Sprint(nodesOf(p)), k.o.To)
		})
	if p != nil {
		p.Facts = append(p.Facts, sec.Facts...)
		if why != "" {
			p.Facts = append(p.Facts, why)
		}
	}
	return p, err
}

// quorum plans the migration edit's quorum: the controllers' voters and
// listener, its protocol as the controllers serve it, and the login the
// operator's controller settings give; a secured cluster the edit would
// leave unable to reach its controllers is refused (CheckSecurity).
func (w *configWhile) quorum(env *steps.Env) (Security, error) {
	set, err := ReadControllerSettings(w.o.ControllerSettings, w.o.ControllerListener)
	if err != nil {
		return Security{}, fmt.Errorf("%w: %v. Nothing was changed", steps.ErrRefused, err)
	}
	set.StaticJAAS = w.o.StaticJAAS
	sec := w.st.security(w.o.ControllerListener, set)
	if p := w.o.ControllerProtocol; p != "" && sec.Protocol != "" && !strings.EqualFold(p, sec.Protocol) {
		sec.Problems = append(sec.Problems, fmt.Sprintf("controller_protocol is %s, the controllers serve %s on %s: leave controller_protocol out (kremedy reads it from the controllers' listener.security.protocol.map)", p, sec.Protocol, w.o.ControllerListener))
	}
	if len(sec.Problems) > 0 {
		return sec, fmt.Errorf("%w: the brokers in migration mode could not work with the controllers as configured: %s. Nothing was changed", steps.ErrRefused, strings.Join(sec.Problems, "; "))
	}
	w.q = Quorum{Voters: voters(env), Listener: w.o.ControllerListener, Protocol: cmp.Or(sec.Protocol, strings.ToUpper(w.o.ControllerProtocol), "PLAINTEXT"), Settings: set.Set}
	return sec, nil
}

// planRoll plans one of the migration's rolls: the roller's plan, with the
// migration's state first among its facts, the migration's own summary,
// and the backups its edits make in the rollback note.
func planRoll(ctx context.Context, env *steps.Env, r *roll.Roll, st *State, noop string, summary func(*steps.Plan) string) (*steps.Plan, error) {
	p, err := r.Plan(ctx, env)
	if err != nil {
		return nil, err
	}
	p.Facts = append(st.Facts(), p.Facts...)
	if p.NoOp {
		p.Summary = noop
		return p, nil
	}
	p.Summary = summary(p)
	p.Rollback = backupsNote(p.Actions)
	return p, nil
}

// nodesOf lists the nodes a plan's actions are about, in order.
func nodesOf(p *steps.Plan) []int32 {
	var ids []int32
	for _, a := range p.Actions {
		if !slices.Contains(ids, a.Broker) {
			ids = append(ids, a.Broker)
		}
	}
	return ids
}

// precondition refuses a roll the migration's phase does not allow.
func (k *rollBrokers) precondition(st *State) error {
	switch k.o.To {
	case ToMigration, BackToMigration:
		if st.Quorum == nil || st.Quorum.Leader < 0 {
			return fmt.Errorf("%w: the KRaft controller quorum does not answer with a leader (%s); brokers in migration mode need it. Start the controllers first", steps.ErrRefused, orDefault(st.QuorumErr, "no controller runs"))
		}
	case ToKRaft:
		if !st.Migrated() && st.Phase != PhaseToKRaft && st.Phase != PhaseDualWrite {
			return fmt.Errorf("%w: the metadata is not migrated yet (phase %s: %s); brokers become KRaft brokers only after the KRaft controller completed the migration", steps.ErrRefused, st.Phase, st.Why)
		}
	case BackToZooKeeper:
		if len(st.Running) > 0 {
			return fmt.Errorf("%w: KRaft controllers %s still run; the revert stops them and deletes /controller and /migration before the brokers leave migration mode", steps.ErrRefused, fmt.Sprint(st.Running))
		}
	}
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func (k *rollBrokers) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	return k.r.Apply(ctx, env, p)
}

// Verify: every broker's config is where the roll takes it, every broker
// the roll restarted runs again, and the cluster is healthy.
func (k *rollBrokers) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	k.w.st = st
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
		checks = append(checks, steps.Check{Name: "no broker registers in ZooKeeper any more (KRaft brokers register with the controllers)", OK: len(reg) == 0, Detail: "registered: " + fmt.Sprint(reg)})
	}
	rc, err := k.r.Verify(ctx, env)
	return append(checks, rc...), err
}

// editAction replaces file f with text, after a backup: the action
// carries text's sha256, never text, and shows the masked diff.
func editAction(f File, text, backup string) steps.Action {
	return steps.Action{ID: roll.WhileID(f.Node, "edit"), Op: steps.OpSSH, Broker: f.Node, Target: f.Path,
		Detail: diffText(f.Text, text) + "; backup first: " + backup,
		Args:   editArgs{Node: f.Node, Path: f.Path, From: f.Sum, To: sum(text), Backup: backup}}
}

// diffText is the lines an edit removes and adds, secrets masked (the
// plan is shown on screens, journaled, and sent to webhooks; the edit
// itself carries only the content's sha256). It compares logical lines: a
// value continued over several lines (a trailing backslash) is one entry,
// masked as a whole.
func diffText(from, to string) string {
	a, b := logicalLines(from), logicalLines(to)
	var d Diff
	for _, l := range a {
		if !slices.Contains(b, l) {
			d.Removed = append(d.Removed, maskLine(l))
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			d.Added = append(d.Added, maskLine(l))
		}
	}
	return d.String()
}

// logicalLines splits a config file into its logical lines (blank lines
// left out): a line that ends in an odd number of backslashes continues
// on the next, joined here without the backslash and with the next
// line's leading blanks trimmed, as Java reads it.
func logicalLines(text string) []string {
	var out []string
	var cur strings.Builder
	cont := false
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimRight(raw, "\r")
		if cont {
			line = strings.TrimLeft(line, " \t\f")
		}
		bs := len(line) - len(strings.TrimRight(line, "\\"))
		comment := !cont && (strings.HasPrefix(strings.TrimLeft(line, " \t\f"), "#") || strings.HasPrefix(strings.TrimLeft(line, " \t\f"), "!"))
		more := bs%2 == 1 && !comment
		if more {
			line = line[:len(line)-1]
		}
		cur.WriteString(line)
		cont = more
		if !cont {
			if strings.TrimSpace(cur.String()) != "" {
				out = append(out, cur.String())
			}
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, cur.String())
	}
	return out
}

// secretKey: a config key whose whole value is a secret (any listener's
// prefix too): a password or passphrase, a secret (password.encoder.secret,
// an OAuth client secret), a key (ssl.keystore.key, an inline PEM private
// key; delegation.token.secret.key), and ssl.truststore.certificates.
// ssl.keystore.certificate.chain is a public certificate chain: it is
// masked only when its value holds a private key, as any value is.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"password", "passphrase", "secret"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return k == "key" || strings.HasSuffix(k, ".key") || strings.HasSuffix(k, "ssl.truststore.certificates")
}

// jaasSecret is a secret option inside a JAAS line: a password, a client
// secret, a token or credential, a PLAIN login module's user_<name>,
// quoted or not.
var jaasSecret = regexp.MustCompile(`(?i)\b(\w*(?:password|passphrase|secret|token|credential)\w*|user_[^\s=]+)(\s*=\s*)("[^"]*"|[^\s";]+)`)

// maskLine hides a config line's secrets: the whole value of a key
// secretKey names or of any value holding a PEM private key, the secret
// options inside a JAAS config (a key ending in jaas.config), and the same
// in a commented-out line. The key's separator may be '=', ':' or blanks,
// as Java reads it.
func maskLine(l string) string {
	t := strings.TrimLeft(l, " \t\f")
	if t == "" {
		return l
	}
	lead := l[:len(l)-len(t)]
	if t[0] == '#' || t[0] == '!' {
		rest := strings.TrimLeft(t, "#! \t\f")
		return lead + t[:len(t)-len(rest)] + maskLine(rest)
	}
	end := keyEnd(t)
	k, rest := t[:end], t[end:]
	v := strings.TrimLeft(rest, " \t\f")
	if v != "" && (v[0] == '=' || v[0] == ':') {
		v = strings.TrimLeft(v[1:], " \t\f")
	}
	sep := rest[:len(rest)-len(v)]
	key := strings.ReplaceAll(k, "\\", "")
	switch {
	case v == "":
		return l
	case secretKey(key) || strings.Contains(v, "PRIVATE KEY"):
		return lead + k + sep + "****"
	case strings.HasSuffix(strings.ToLower(key), "jaas.config"):
		return lead + k + sep + jaasSecret.ReplaceAllString(v, `$1$2"****"`)
	}
	return l
}

// keyEnd is where a properties line's key ends: at the first unescaped
// '=', ':' or blank.
func keyEnd(t string) int {
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '\\':
			i++
		case '=', ':', ' ', '\t', '\f':
			return i
		}
	}
	return len(t)
}

// editScript is brokers.EditScript for an edit's arguments.
func editScript(e editArgs) string { return brokers.EditScript(e.Path, e.Backup, e.From, e.To) }

// applyEdit runs an edit on its node's host: content computes the new
// text again from what the plan was made of, and a text that is not the
// planned one (its sha256 in the action) is a stale plan, never written.
// The text goes to the host on the session's standard input.
func applyEdit(ctx context.Context, env *steps.Env, a steps.Action, content func() (string, error)) error {
	e, err := steps.ArgsOf[editArgs](a)
	if err != nil {
		return err
	}
	text, err := content()
	if err != nil {
		return err
	}
	if got := sum(text); got != e.To {
		return fmt.Errorf("%w: the config kremedy would write to %s on node %d now (sha256 %.12s) is not the one planned (sha256 %.12s): what it is made of changed since the plan; nothing was written",
			steps.ErrStalePlan, e.Path, e.Node, got, e.To)
	}
	err = env.Do(a, func() error { return runInput(ctx, env, e.Node, editScript(e), []byte(text)) })
	if code, ok := brokers.ExitStatus(err); ok && code == 3 {
		return fmt.Errorf("%w: %s on node %d changed since the plan; nothing was written", steps.ErrStalePlan, e.Path, e.Node)
	}
	if code, ok := brokers.ExitStatus(err); ok && code == 4 {
		return fmt.Errorf("the new %s did not reach node %d whole (its sha256 differs from the plan's); nothing was written, the node is stopped: run again (kremedy resume): %w", e.Path, e.Node, err)
	}
	return err
}

// runInput is roll.RunOn with stdin as the command's standard input: the
// command's output is the run's, its input is nobody's.
func runInput(ctx context.Context, env *steps.Env, node int32, cmd string, stdin []byte) error {
	h, ok := env.Target.Host(node)
	host := fmt.Sprintf("broker %d (%s)", node, h.Host)
	if c, isCtrl := env.Target.Controller(node); !ok && isCtrl {
		host = fmt.Sprintf("controller %d (%s)", node, c.Host)
	}
	return env.Hosts.RunInput(ctx, node, cmd, stdin, func(l ports.Line) { env.Output(host, l) })
}

// metadataScript moves __cluster_metadata-0 out of each log dir. Every
// path is quoted, in the messages too (a log dir may hold `$`, `"`).
func metadataScript(dirs []string, run string) string {
	var b strings.Builder
	b.WriteString("set -eu\n")
	for _, d := range dirs {
		src := d + "/__cluster_metadata-0"
		fmt.Fprintf(&b, "if [ -e %s ]; then mv -- %s %s; printf 'moved %%s aside\\n' %s; fi\n", shell.Quote(src), shell.Quote(src), shell.Quote(d+".__cluster_metadata-0.kremedy-"+run), shell.Quote(src))
	}
	return shell.Script(b.String())
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

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return text.Summarize(s)
}
