package cleanup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/segments"
)

// wipeSegments moves exactly the topic's partition directories — live,
// -delete, -future and -stray forms, matched the way Kafka parses names —
// out of every log dir of every broker into a quarantine directory beside
// (never inside) the log dirs, recording each move in a manifest first.
// It refuses on a broker that is still registered or listening.
type wipeSegments struct{ o wipeOpts }

type wipeOpts struct {
	topicOpts
	modeOpts
}

// Move is one quarantined directory.
type Move struct {
	Broker int32     `json:"broker"`
	Host   string    `json:"host"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Kind   string    `json:"kind"`
	State  string    `json:"state"` // planned, moved
	At     time.Time `json:"at"`
}

// Manifest is the quarantine manifest of a run.
type Manifest struct {
	Format  int    `json:"format"`
	Cluster string `json:"cluster"`
	Topic   string `json:"topic"`
	// Topics are a several-topic run's topics (Topic is then the first).
	Topics []string `json:"topics,omitempty"`
	// Kind is "" for a topic's directories (topic-cleanup: restored only
	// while the brokers are stopped) and strayManifestKind for -stray
	// directories moved while the brokers ran.
	Kind   string `json:"kind,omitempty"`
	Backup string `json:"znode_backup,omitempty"`
	Moves  []Move `json:"moves"`
}

// QuarantineDir is where a log dir's moved partition directories go on the
// broker host: beside the log dir, never inside any log dir.
func QuarantineDir(runID, logDir string) string {
	return filepath.Join(filepath.Dir(logDir), "kremedy-quarantine", runID, filepath.Base(logDir))
}

func (k *wipeSegments) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	f, err := facts(env)
	if err != nil {
		return nil, err
	}
	t := k.o.quoted()
	if f.Clean {
		return cleanNoOp(k.o.topicOpts, "wipe"), nil
	}
	if k.o.Mode == modeRolling {
		return &steps.Plan{NoOp: true, Summary: fmt.Sprintf("rolling mode: the directories of %s were moved into quarantine broker by broker during the rolling step; the check below proves none is left", t)}, nil
	}
	if !env.Preview() {
		if err := k.refuseLive(ctx, env, f); err != nil {
			return nil, err
		}
	}
	l := brokers.List(ctx, env.Hosts, env.Target, f.LogDirs)
	if err := l.Err(env.Target); err != nil {
		return nil, err
	}
	p := &steps.Plan{Summary: fmt.Sprintf("move every partition directory of %s out of every log dir into quarantine", t)}
	for _, h := range env.Target.Hosts {
		dirs := f.LogDirs[h.ID]
		if err := quarantineOutside(env, h.ID, dirs); err != nil {
			return nil, err
		}
		for _, dir := range dirs {
			q := QuarantineDir(env.RunID(), dir)
			matches, strays := selectAll(l.Entries[h.ID][dir], f, k.o.names())
			for _, s := range strays {
				p.Notes = append(p.Notes, fmt.Sprintf("broker %d %s/%s: %s — not a partition directory; Kafka will refuse to start while it is there. kremedy does not move what it cannot parse: move it out of the log dir by hand", h.ID, dir, s.Name, s.Why))
			}
			for _, m := range matches {
				mv := Move{Broker: h.ID, Host: h.Host, From: filepath.Join(dir, m.Dir.Name), To: filepath.Join(q, m.Dir.Name), Kind: m.Dir.Kind.String(), State: "planned"}
				p.Actions = append(p.Actions, steps.Action{ID: fmt.Sprintf("move-%d", len(p.Actions)), Op: steps.OpMove, Broker: h.ID,
					Target: fmt.Sprintf("broker %d on %s: %s", h.ID, h.On(), mv.From), Detail: "→ " + mv.To + " (" + m.Reason + ")", Args: mv})
			}
		}
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("no log dir holds a directory of %s", t)
		return p, nil
	}
	p.Actions = append([]steps.Action{{ID: "manifest", Op: steps.OpSave, Target: env.Artifact(artManifest), Detail: "each move is recorded before and after it happens"}}, p.Actions...)
	return p, nil
}

// selectAll selects the directories of every topic of names in one log
// dir's entries (each topic's with its own ids); the names Kafka cannot
// parse are strays, reported once.
func selectAll(entries []segments.Entry, f *Facts, names []string) ([]segments.Match, []segments.Unparseable) {
	var out []segments.Match
	var strays []segments.Unparseable
	for i, t := range names {
		ms, ss := segments.Select(entries, t, f.Of(t).IDs())
		out = append(out, ms...)
		if i == 0 {
			strays = ss
		}
	}
	return out, strays
}

// quarantineOutside refuses a quarantine that would sit inside one of
// broker id's log dirs: Kafka would try to load it as a partition.
func quarantineOutside(env *steps.Env, id int32, dirs []string) error {
	for _, dir := range dirs {
		q := QuarantineDir(env.RunID(), dir)
		for _, other := range dirs {
			if q == other || strings.HasPrefix(q, other+string(filepath.Separator)) {
				return fmt.Errorf("%w: quarantine %s would be inside log dir %s on broker %d", steps.ErrRefused, q, other, id)
			}
		}
	}
	return nil
}

// refuseLive refuses while the topic's znodes exist or any broker may run:
// registered in ZooKeeper, or something listening on its port.
func (k *wipeSegments) refuseLive(ctx context.Context, env *steps.Env, f *Facts) error {
	for _, t := range k.o.names() {
		if err := requireZnodesGone(ctx, env, t); err != nil {
			return err
		}
	}
	reg, err := brokers.Registered(ctx, env.ZK)
	if err != nil {
		return err
	}
	for _, h := range env.Target.Hosts {
		if slices.Contains(reg, h.ID) {
			return fmt.Errorf("%w: broker %d is still registered in ZooKeeper: it may be running, and wiping under a running broker corrupts it. Nothing was moved", steps.ErrRefused, h.ID)
		}
		if addr := brokers.Addr(ctx, env.ZK, h.ID, firstOf(f.Addrs[h.ID], h.Addr)); addr != "" && env.Kafka.Listening(ctx, addr) {
			return fmt.Errorf("%w: something still listens on broker %d's port %s. Nothing was moved", steps.ErrRefused, h.ID, addr)
		}
	}
	return nil
}

// loadManifest reads the run's quarantine manifest, or starts one: the
// topics' (with the znode backup beside it), or for no topics a stray
// cleanup's.
func loadManifest(env *steps.Env, topics []string) (*Manifest, error) {
	m := &Manifest{Format: 1, Cluster: env.Target.Name, Kind: strayManifestKind}
	if len(topics) > 0 {
		m.Topic, m.Kind, m.Backup = topics[0], "", env.Artifact(artBackup)
	}
	if len(topics) > 1 {
		m.Topics = topics
	}
	b, err := os.ReadFile(env.Artifact(artManifest))
	if os.IsNotExist(err) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	return m, json.Unmarshal(b, m)
}

// moveFunc moves one directory into quarantine, idempotently: a directory
// already in quarantine (an earlier, interrupted attempt) is success.
const moveFunc = `kremedy_move() {
  src=$1; dst=$2
  if [ ! -e "$src" ] && [ -e "$dst" ]; then echo "in quarantine: $src -> $dst"; return 0; fi
  if [ -e "$dst" ]; then echo "refusing: $dst already exists" >&2; return 3; fi
  mkdir -p -- "$(dirname -- "$dst")" || return 1
  # A quarantine on another filesystem would turn the move into a long,
  # non-atomic copy: refuse instead.
  if [ "$(stat -c %d -- "$(dirname -- "$src")")" != "$(stat -c %d -- "$(dirname -- "$dst")")" ]; then
    echo "refusing: $(dirname -- "$dst") is on another filesystem than $src" >&2; return 4
  fi
  mv -- "$src" "$dst" || return 1
  [ ! -e "$src" ] || return 1
  echo "moved $src -> $dst"
}
`

// lockFunc refuses when a process still holds a log dir's .lock, which a
// running Kafka broker keeps open for its whole life: the last guard on the
// host itself, after "not registered" and "port closed". It sees only the
// processes the SSH user may inspect (root, or the broker's own user).
// The log dir is never a pattern (a "[1]" in it would fail open, security
// review L4): find's fixed pattern picks the descriptors of any .lock, and
// each one's target is compared as a string with the log dir's .lock as
// named and as the kernel names it (symbolic links resolved, pwd -P).
const lockFunc = `kremedy_lockcheck() {
  want=$1/.lock
  real=$(cd -- "$1" 2>/dev/null && pwd -P) && real=$real/.lock || real=$want
  pid=$(find /proc/[0-9]*/fd -lname '*/.lock' 2>/dev/null | while IFS= read -r h; do
    l=$(readlink "$h" 2>/dev/null) || continue
    if [ "$l" = "$want" ] || [ "$l" = "$real" ]; then
      h=${h#/proc/}; echo "${h%%/*}"; break
    fi
  done)
  if [ -n "$pid" ]; then
    echo "refusing: process $pid ($(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | cut -c1-120)) holds $1/.lock: a broker still runs on this log dir. Nothing was moved on this host" >&2
    return 5
  fi
}
`

// strayFunc refuses to move a directory whose name does not end in
// -stray: the only kind Kafka never touches again while it runs.
const strayFunc = `kremedy_straycheck() {
  case "$1" in
    *-stray) ;;
    *) echo "refusing: $1 is not a -stray directory, and only those may move while the broker runs. Nothing more was moved on this host" >&2; return 6 ;;
  esac
}
`

// moveScript is one host's wipe: the lock check of every log dir involved,
// then each move, stopping at the first failure. With strays (directories
// moved while the broker runs) the lock check gives way to a check that
// every source is a -stray directory.
func moveScript(moves []Move, strays bool) string {
	var script strings.Builder
	script.WriteString(moveFunc)
	if strays {
		script.WriteString(strayFunc)
		for _, mv := range moves {
			fmt.Fprintf(&script, "kremedy_straycheck %s || exit $?\n", shell.Quote(mv.From))
		}
	} else {
		script.WriteString(lockFunc)
		checked := map[string]bool{}
		for _, mv := range moves {
			if d := filepath.Dir(mv.From); !checked[d] {
				checked[d] = true
				fmt.Fprintf(&script, "kremedy_lockcheck %s || exit $?\n", shell.Quote(d))
			}
		}
	}
	for _, mv := range moves {
		fmt.Fprintf(&script, "kremedy_move %s %s || exit $?\n", shell.Quote(mv.From), shell.Quote(mv.To))
	}
	return script.String()
}

// hostMoves are one broker's planned moves with their actions.
type hostMoves struct {
	broker  int32
	moves   []Move
	actions []steps.Action
}

// byHost groups a plan's moves by broker, in plan order.
func byHost(p *steps.Plan) ([]*hostMoves, error) {
	var hosts []*hostMoves
	for _, a := range p.Actions {
		if a.Op != steps.OpMove {
			continue
		}
		mv, err := steps.ArgsOf[Move](a)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(hosts, func(h *hostMoves) bool { return h.broker == mv.Broker })
		if i < 0 {
			hosts = append(hosts, &hostMoves{broker: mv.Broker})
			i = len(hosts) - 1
		}
		hosts[i].moves, hosts[i].actions = append(hosts[i].moves, mv), append(hosts[i].actions, a)
	}
	return hosts, nil
}

// quarantine is one wipe in progress: the manifest, and each move's
// journal record waiting for its host to report it.
type quarantine struct {
	env  *steps.Env
	mu   sync.Mutex // guards man, ends and the manifest file
	man  *Manifest
	ends map[string]func(error) error // broker/from -> its action's end
	idx  map[string]int               // broker/from -> its index in man.Moves
	// strays: the moves are -stray directories, moved while the broker
	// runs — no .lock check, and the host refuses any other name.
	strays bool
}

func moveKey(b int32, from string) string { return fmt.Sprintf("%d/%s", b, from) }

func (k *wipeSegments) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	man, err := loadManifest(env, k.o.names())
	if err != nil {
		return fmt.Errorf("quarantine manifest %s: %w", env.Artifact(artManifest), err)
	}
	hosts, err := byHost(p)
	if err != nil {
		return err
	}
	// Re-prove the topics' znodes are gone and every broker is down right
	// before touching any disk.
	for _, t := range k.o.names() {
		if err := requireZnodesGone(ctx, env, t); err != nil {
			return err
		}
	}
	reg, err := brokers.Registered(ctx, env.ZK)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if slices.Contains(reg, h.broker) {
			return fmt.Errorf("%w: broker %d registered again before its segments were moved; nothing was moved", steps.ErrRefused, h.broker)
		}
	}
	q := &quarantine{env: env, man: man, ends: map[string]func(error) error{}, idx: map[string]int{}}
	if err := q.plan(hosts, p.Actions[0]); err != nil {
		return err
	}
	return q.moveAll(ctx, hosts)
}

// moveAll runs one SSH command per broker, moving that broker's
// directories, brokers in parallel; each move is marked moved as soon as
// its host reports it.
func (q *quarantine) moveAll(ctx context.Context, hosts []*hostMoves) error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { errs[i] = q.move(ctx, h) })
	}
	wg.Wait()
	return q.finish(errors.Join(errs...))
}

// plan records every move in the manifest, as planned, and journals its
// start, before any command runs.
func (q *quarantine) plan(hosts []*hostMoves, save steps.Action) error {
	env := q.env
	for _, h := range hosts {
		for i, mv := range h.moves {
			mv.At = env.Now().UTC()
			n := slices.IndexFunc(q.man.Moves, func(m Move) bool { return m.Broker == mv.Broker && m.From == mv.From })
			if n < 0 {
				q.man.Moves = append(q.man.Moves, mv)
				n = len(q.man.Moves) - 1
			}
			end, err := env.Begin(h.actions[i])
			if err != nil {
				return err
			}
			q.ends[moveKey(h.broker, mv.From)], q.idx[moveKey(h.broker, mv.From)] = end, n
		}
	}
	if err := env.Do(save, func() error { return atomicfile.WriteJSON(env.Artifact(artManifest), q.man) }); err != nil {
		return fmt.Errorf("write manifest %s before moving: %w; nothing was moved", env.Artifact(artManifest), err)
	}
	return nil
}

// move runs one host's moves and records each as its host reports it.
func (q *quarantine) move(ctx context.Context, h *hostMoves) error {
	env := q.env
	host, _ := env.Target.Host(h.broker)
	label := fmt.Sprintf("broker %d (%s)", h.broker, host.Host)
	err := env.Hosts.Run(ctx, h.broker, shell.Script(moveScript(h.moves, q.strays)), func(l ports.Line) {
		env.Output(label, l)
		for _, prefix := range []string{"moved ", "in quarantine: "} {
			rest, ok := strings.CutPrefix(l.Text, prefix)
			if !ok {
				continue
			}
			from, _, _ := strings.Cut(rest, " -> ")
			q.mu.Lock()
			if end, ok := q.ends[moveKey(h.broker, from)]; ok {
				q.man.Moves[q.idx[moveKey(h.broker, from)]].State = "moved"
				delete(q.ends, moveKey(h.broker, from))
				_ = end(nil)
				_ = atomicfile.WriteJSON(env.Artifact(artManifest), q.man)
			}
			q.mu.Unlock()
		}
	})
	if err != nil {
		return fmt.Errorf("moving directories on broker %d: %w", h.broker, err)
	}
	return nil
}

// finish journals the moves no host reported (their outcome is settled by
// the manifest's reconciliation) and writes the manifest once more.
func (q *quarantine) finish(err error) error {
	why := err
	if why == nil {
		why = errors.New("its host did not report it")
	}
	for key, end := range q.ends {
		_ = end(fmt.Errorf("%s: not reported moved: %w", key, why))
	}
	if werr := atomicfile.WriteJSON(q.env.Artifact(artManifest), q.man); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("%w (what was moved is marked in %s)", err, q.env.Artifact(artManifest))
	}
	return nil
}

func (k *wipeSegments) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	f, err := facts(env)
	if err != nil || f.Clean {
		return nil, err
	}
	left, err := topicDirs(ctx, env, f, k.o.names())
	if err != nil {
		return nil, err
	}
	checks := []steps.Check{{Name: fmt.Sprintf("no log dir holds a directory of %s", k.o.quoted()), OK: len(left) == 0, Detail: text.Summarize(left)}}
	if c, err := reconcileManifest(ctx, env, k.o.names()); err != nil {
		return nil, err
	} else if c != nil {
		checks = append(checks, *c)
	}
	return checks, nil
}

const whereScript = `if [ -e %[2]s ] && [ ! -e %[1]s ]; then echo moved; elif [ -e %[1]s ]; then echo source; else echo missing; fi`

// reconcileManifest settles entries a crash left as "planned": the move
// either happened (the directory is in quarantine) or did not (it is still
// in the log dir, and a later plan moves it). It asks the host, and records
// the truth in the manifest.
func reconcileManifest(ctx context.Context, env *steps.Env, topics []string) (*steps.Check, error) {
	man, err := loadManifest(env, topics)
	if err != nil || len(man.Moves) == 0 {
		return nil, err
	}
	var lost []string
	changed := false
	for i, mv := range man.Moves {
		if mv.State == "moved" {
			continue
		}
		var where string
		err := env.Hosts.Run(ctx, mv.Broker, shell.Script(fmt.Sprintf(whereScript, shell.Quote(mv.From), shell.Quote(mv.To))), func(l ports.Line) {
			if !l.Stderr {
				where = strings.TrimSpace(l.Text)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("check quarantine of %s on broker %d: %w", mv.From, mv.Broker, err)
		}
		switch where {
		case "moved":
			man.Moves[i].State, changed = "moved", true
			env.Logf("%s was moved before the interruption; manifest updated", mv.From)
		default:
			lost = append(lost, fmt.Sprintf("broker %d %s (%s)", mv.Broker, mv.From, where))
		}
	}
	if changed {
		if err := atomicfile.WriteJSON(env.Artifact(artManifest), man); err != nil {
			return nil, err
		}
	}
	return &steps.Check{Name: "every directory in the manifest is in quarantine", OK: len(lost) == 0, Detail: text.Summarize(lost)}, nil
}

// requireZnodesGone refuses to wipe a topic ZooKeeper still has: its
// brokers would recreate empty logs for a live topic on restart.
func requireZnodesGone(ctx context.Context, env *steps.Env, topic string) error {
	for _, p := range []string{kafkazk.TopicPath(topic), kafkazk.ConfigTopicPath(topic)} {
		ok, err := exists(ctx, env, p)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%w: %s%s exists (the znode step was skipped, or a client recreated the topic); wiping its segments now would empty a live topic. Nothing was moved", steps.ErrRefused, env.ZK.Chroot(), p)
		}
	}
	return nil
}

// topicDirs lists the directories of the topics on every broker's disk.
func topicDirs(ctx context.Context, env *steps.Env, f *Facts, topics []string) ([]string, error) {
	l := brokers.List(ctx, env.Hosts, env.Target, f.LogDirs)
	if err := l.Err(env.Target); err != nil {
		return nil, err
	}
	var left []string
	for _, h := range env.Target.Hosts {
		for _, dir := range f.LogDirs[h.ID] {
			ms, _ := selectAll(l.Entries[h.ID][dir], f, topics)
			for _, m := range ms {
				left = append(left, fmt.Sprintf("broker %d %s/%s", h.ID, dir, m.Dir.Name))
			}
		}
	}
	return left, nil
}
