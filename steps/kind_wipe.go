package steps

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

	"github.com/kremedy/kremedy/steps/journal"

	"github.com/kremedy/kremedy/steps/segments"
)

// wipeSegments moves exactly the topic's partition directories — live,
// -delete, -future and -stray forms, matched the way Kafka parses names —
// out of every log dir of every broker into a quarantine directory beside
// (never inside) the log dirs, recording each move in a manifest first.
// It refuses on a broker that is still registered or listening.
type wipeSegments struct{}

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
	Backup  string `json:"znode_backup"`
	Moves   []Move `json:"moves"`
}

type wipePlan struct {
	Moves []Move `json:"moves"`
}

func (k *wipeSegments) Plan(ctx context.Context, r *Run) (*Plan, error) {
	if r.Facts.Clean {
		return r.cleanNoOp("wipe"), nil
	}
	t := r.Topic()
	reg, err := r.registered(ctx)
	if err != nil {
		return nil, err
	}
	ids := append([]string{}, r.Facts.OldIDs...)
	if r.Facts.TopicID != "" {
		ids = append(ids, r.Facts.TopicID)
	}
	if !r.Preview {
		if err := r.requireZnodesGone(ctx); err != nil {
			return nil, err
		}
	}
	p := &Plan{Summary: fmt.Sprintf("move every partition directory of %q out of every log dir into quarantine", t)}
	var wp wipePlan
	for _, h := range r.Target.Hosts {
		if !r.Preview {
			if slices.Contains(reg, h.ID) {
				return nil, fmt.Errorf("%w: broker %d is still registered in ZooKeeper: it may be running, and wiping under a running broker corrupts it. Nothing was moved", ErrRefused, h.ID)
			}
			if addr := r.brokerAddr(ctx, h.ID); addr != "" && r.Kafka.Listening(ctx, addr) {
				return nil, fmt.Errorf("%w: something still listens on broker %d's port %s. Nothing was moved", ErrRefused, h.ID, addr)
			}
		}
	}
	all, err := r.listAll(ctx)
	if err != nil {
		return nil, err
	}
	for _, h := range r.Target.Hosts {
		dirs := r.Facts.LogDirs[h.ID]
		listing := all[h.ID]
		for _, dir := range dirs {
			q := r.QuarantineDir(dir)
			for _, other := range dirs {
				if q == other || strings.HasPrefix(q, other+string(filepath.Separator)) {
					return nil, fmt.Errorf("%w: quarantine %s would be inside log dir %s on broker %d", ErrRefused, q, other, h.ID)
				}
			}
			matches, strays := segments.Select(listing[dir], t, ids)
			for _, s := range strays {
				p.Notes = append(p.Notes, fmt.Sprintf("broker %d %s/%s: %s — not a partition directory; Kafka will refuse to start while it is there. kremedy does not move what it cannot parse: move it out of the log dir by hand", h.ID, dir, s.Name, s.Why))
			}
			for _, m := range matches {
				mv := Move{Broker: h.ID, Host: h.Host, From: filepath.Join(dir, m.Dir.Name), To: filepath.Join(q, m.Dir.Name), Kind: m.Dir.Kind.String(), State: "planned"}
				wp.Moves = append(wp.Moves, mv)
				p.Actions = append(p.Actions, Action{Kind: "move", Broker: h.ID, Target: fmt.Sprintf("broker %d: %s", h.ID, mv.From), Detail: "→ " + mv.To + " (" + m.Reason + ")"})
			}
		}
	}
	if len(wp.Moves) == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("no log dir holds a directory of %q", t)
	} else {
		p.Actions = append([]Action{{Kind: "save", Target: r.ManifestPath(), Detail: "each move is recorded before and after it happens"}}, p.Actions...)
	}
	p.Payload, _ = jsonRaw(wp)
	return p, nil
}

func (r *Run) loadManifest() (*Manifest, error) {
	m := &Manifest{Format: 1, Cluster: r.Target.Name, Topic: r.Topic(), Backup: r.BackupPath()}
	b, err := os.ReadFile(r.ManifestPath())
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
const lockFunc = `kremedy_lockcheck() {
  h=$(find /proc/[0-9]*/fd -lname "$1/.lock" 2>/dev/null | head -n 1)
  if [ -n "$h" ]; then
    pid=${h#/proc/}; pid=${pid%%/*}
    echo "refusing: process $pid ($(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | cut -c1-120)) holds $1/.lock: a broker still runs on this log dir. Nothing was moved on this host" >&2
    return 5
  fi
}
`

// moveScript is one host's wipe: the lock check of every log dir involved,
// then each move, stopping at the first failure.
func moveScript(moves []Move) string {
	var script strings.Builder
	script.WriteString(moveFunc)
	script.WriteString(lockFunc)
	checked := map[string]bool{}
	for _, mv := range moves {
		if d := filepath.Dir(mv.From); !checked[d] {
			checked[d] = true
			fmt.Fprintf(&script, "kremedy_lockcheck %s || exit $?\n", ShQuote(d))
		}
	}
	for _, mv := range moves {
		fmt.Fprintf(&script, "kremedy_move %s %s || exit $?\n", ShQuote(mv.From), ShQuote(mv.To))
	}
	return script.String()
}

func (k *wipeSegments) Apply(ctx context.Context, r *Run, p *Plan) error {
	var wp wipePlan
	if err := fromRaw(p.Payload, &wp); err != nil {
		return err
	}
	man, err := r.loadManifest()
	if err != nil {
		return fmt.Errorf("quarantine manifest %s: %w", r.ManifestPath(), err)
	}
	// One SSH command per broker moves that broker's directories, brokers
	// in parallel; each move is in the manifest (as planned) before its
	// command starts and marked moved as soon as the host reports it.
	var order []int32
	byBroker := map[int32][]int{}
	for i, mv := range wp.Moves {
		if _, ok := byBroker[mv.Broker]; !ok {
			order = append(order, mv.Broker)
		}
		byBroker[mv.Broker] = append(byBroker[mv.Broker], i)
	}
	// Re-prove the topic's znodes are gone and every broker is down right
	// before touching any disk.
	if err := r.requireZnodesGone(ctx); err != nil {
		return err
	}
	reg, err := r.registered(ctx)
	if err != nil {
		return err
	}
	for _, b := range order {
		if slices.Contains(reg, b) {
			return fmt.Errorf("%w: broker %d registered again before its segments were moved; nothing was moved", ErrRefused, b)
		}
	}
	var mu sync.Mutex          // guards man and the manifest file
	idx := map[string]int{}    // broker/From -> manifest index
	action := map[string]int{} // broker/From -> plan action index
	keyOf := func(b int32, from string) string { return fmt.Sprintf("%d/%s", b, from) }
	for _, b := range order {
		for _, i := range byBroker[b] {
			mv := wp.Moves[i]
			mv.At = r.now().UTC()
			n := slices.IndexFunc(man.Moves, func(m Move) bool { return m.Broker == mv.Broker && m.From == mv.From })
			if n < 0 {
				man.Moves = append(man.Moves, mv)
				n = len(man.Moves) - 1
			}
			idx[keyOf(b, mv.From)], action[keyOf(b, mv.From)] = n, i+1
			if err := r.journalled(journal.ActionStart, p.Actions[i+1]); err != nil {
				return err
			}
		}
	}
	if err := WriteJSON(r.ManifestPath(), man); err != nil {
		return fmt.Errorf("write manifest %s before moving: %w; nothing was moved", r.ManifestPath(), err)
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for bi, b := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []Move
			for _, i := range byBroker[b] {
				mine = append(mine, wp.Moves[i])
			}
			script := moveScript(mine)
			h, _ := r.Target.Host(b)
			host := fmt.Sprintf("broker %d (%s)", b, h.Host)
			start := r.now()
			err := r.Remote.Run(ctx, b, Script(script), func(l Line) {
				r.Output(host, l)
				for _, prefix := range []string{"moved ", "in quarantine: "} {
					if rest, ok := strings.CutPrefix(l.Text, prefix); ok {
						from, _, _ := strings.Cut(rest, " -> ")
						mu.Lock()
						if n, ok := idx[keyOf(b, from)]; ok {
							man.Moves[n].State = "moved"
							_ = r.journalled(journal.ActionEnd, map[string]any{"action": p.Actions[action[keyOf(b, from)]], "ok": true, "took_ms": r.now().Sub(start).Milliseconds()})
							_ = WriteJSON(r.ManifestPath(), man)
						}
						mu.Unlock()
					}
				}
			})
			if err != nil {
				errs[bi] = fmt.Errorf("moving directories on broker %d: %w", b, err)
			}
		}()
	}
	wg.Wait()
	if err := WriteJSON(r.ManifestPath(), man); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w (what was moved is marked in %s)", err, r.ManifestPath())
	}
	return nil
}

func (k *wipeSegments) Verify(ctx context.Context, r *Run) ([]Check, error) {
	if r.Facts.Clean {
		return nil, nil
	}
	left, err := r.topicDirs(ctx)
	if err != nil {
		return nil, err
	}
	checks := []Check{{Name: fmt.Sprintf("no log dir holds a directory of %q", r.Topic()), OK: len(left) == 0, Detail: summarize(left)}}
	if c, err := r.reconcileManifest(ctx); err != nil {
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
func (r *Run) reconcileManifest(ctx context.Context) (*Check, error) {
	man, err := r.loadManifest()
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
		err := r.Remote.Run(ctx, mv.Broker, Script(fmt.Sprintf(whereScript, ShQuote(mv.From), ShQuote(mv.To))), func(l Line) {
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
			r.Logf("%s was moved before the interruption; manifest updated", mv.From)
		default:
			lost = append(lost, fmt.Sprintf("broker %d %s (%s)", mv.Broker, mv.From, where))
		}
	}
	if changed {
		if err := WriteJSON(r.ManifestPath(), man); err != nil {
			return nil, err
		}
	}
	return &Check{Name: "every directory in the manifest is in quarantine", OK: len(lost) == 0, Detail: summarize(lost)}, nil
}

// requireZnodesGone refuses to wipe a topic ZooKeeper still has: its
// brokers would recreate empty logs for a live topic on restart.
func (r *Run) requireZnodesGone(ctx context.Context) error {
	for _, p := range []string{TopicPath(r.Topic()), ConfigTopicPath(r.Topic())} {
		ok, err := r.exists(ctx, p)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%w: %s%s exists (the znode step was skipped, or a client recreated the topic); wiping its segments now would empty a live topic. Nothing was moved", ErrRefused, r.ZK.Chroot(), p)
		}
	}
	return nil
}

// topicDirs lists the topic's directories on every broker's disk.
func (r *Run) topicDirs(ctx context.Context) ([]string, error) {
	ids := append([]string{}, r.Facts.OldIDs...)
	if r.Facts.TopicID != "" {
		ids = append(ids, r.Facts.TopicID)
	}
	var left []string
	all, err := r.listAll(ctx)
	if err != nil {
		return nil, err
	}
	for _, h := range r.Target.Hosts {
		for _, dir := range r.Facts.LogDirs[h.ID] {
			ms, _ := segments.Select(all[h.ID][dir], r.Topic(), ids)
			for _, m := range ms {
				left = append(left, fmt.Sprintf("broker %d %s/%s", h.ID, dir, m.Dir.Name))
			}
		}
	}
	return left, nil
}
