package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

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
		dirs := r.Facts.LogDirs[h.ID]
		for _, dir := range dirs {
			q := r.QuarantineDir(dir)
			for _, other := range dirs {
				if q == other || strings.HasPrefix(q, other+string(filepath.Separator)) {
					return nil, fmt.Errorf("%w: quarantine %s would be inside log dir %s on broker %d", ErrRefused, q, other, h.ID)
				}
			}
			entries, err := r.listLogDir(ctx, h.ID, dir)
			if err != nil {
				return nil, err
			}
			matches, strays := segments.Select(entries, t, ids)
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

const moveScript = `set -e
src=%s; dst=%s
if [ ! -e "$src" ] && [ -e "$dst" ]; then echo "already in quarantine: $dst"; exit 0; fi
if [ -e "$dst" ]; then echo "refusing: $dst already exists" >&2; exit 3; fi
mkdir -p -- "$(dirname -- "$dst")"
mv -- "$src" "$dst"
test ! -e "$src"
echo "moved $src -> $dst"`

func (k *wipeSegments) Apply(ctx context.Context, r *Run, p *Plan) error {
	var wp wipePlan
	if err := fromRaw(p.Payload, &wp); err != nil {
		return err
	}
	man, err := r.loadManifest()
	if err != nil {
		return fmt.Errorf("quarantine manifest %s: %w", r.ManifestPath(), err)
	}
	checked := map[int32]bool{}
	for i, mv := range wp.Moves {
		// Re-prove the broker is down right before touching its disk.
		if !checked[mv.Broker] {
			reg, err := r.registered(ctx)
			if err != nil {
				return err
			}
			if slices.Contains(reg, mv.Broker) {
				return fmt.Errorf("%w: broker %d registered again before its segments were moved; nothing more was moved (see %s)", ErrRefused, mv.Broker, r.ManifestPath())
			}
			checked[mv.Broker] = true
		}
		mv.At = r.now().UTC()
		idx := slices.IndexFunc(man.Moves, func(m Move) bool { return m.Broker == mv.Broker && m.From == mv.From })
		if idx < 0 {
			man.Moves = append(man.Moves, mv)
			idx = len(man.Moves) - 1
		}
		if err := WriteJSON(r.ManifestPath(), man); err != nil {
			return fmt.Errorf("write manifest before moving %s: %w; nothing more was moved", mv.From, err)
		}
		err := r.Do(p.Actions[i+1], func() error {
			return r.RunOn(ctx, mv.Broker, fmt.Sprintf(moveScript, ShQuote(mv.From), ShQuote(mv.To)))
		})
		if err != nil {
			return fmt.Errorf("move %s on broker %d: %w (moves done so far are in %s)", mv.From, mv.Broker, err, r.ManifestPath())
		}
		man.Moves[idx].State = "moved"
		if err := WriteJSON(r.ManifestPath(), man); err != nil {
			return err
		}
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
		err := r.Remote.Run(ctx, mv.Broker, fmt.Sprintf(whereScript, ShQuote(mv.From), ShQuote(mv.To)), func(l Line) {
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

// topicDirs lists the topic's directories on every broker's disk.
func (r *Run) topicDirs(ctx context.Context) ([]string, error) {
	ids := append([]string{}, r.Facts.OldIDs...)
	if r.Facts.TopicID != "" {
		ids = append(ids, r.Facts.TopicID)
	}
	var left []string
	for _, h := range r.Target.Hosts {
		for _, dir := range r.Facts.LogDirs[h.ID] {
			entries, err := r.listLogDir(ctx, h.ID, dir)
			if err != nil {
				return nil, err
			}
			ms, _ := segments.Select(entries, r.Topic(), ids)
			for _, m := range ms {
				left = append(left, fmt.Sprintf("broker %d %s/%s", h.ID, dir, m.Dir.Name))
			}
		}
	}
	return left, nil
}
