package quorum

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strings"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// A broker's copy of the metadata log can be ahead of every controller's:
// the leader sends records to every fetcher, observers too, before a
// majority holds them. Seeding from a controller then discards them (the
// ledger lists them); --set copy_from=B seeds from broker B's copy
// instead: the backup step copies it (its backup, made a moment before)
// over a controller's copy — that controller's own kept aside — and the
// quorum restarts from it. Nothing is lost.

// maxCopyBytes bounds a copy streamed from a broker's host to a
// controller's through kremedy.
const maxCopyBytes = 1 << 30

// copyArgs: broker From's copy (its backup, Src) copied over controller
// To's copy (Dir), which goes aside (Aside).
type copyArgs struct {
	From  int32  `json:"from"`
	Src   string `json:"src"`
	To    int32  `json:"to"`
	Dir   string `json:"dir"`
	Aside string `json:"aside"`
	End   int64  `json:"end"`
	Epoch int32  `json:"epoch"`
}

// seedFromBroker is the seed when the operator names broker b's copy:
// it must be read and at least as far as every copy (epoch, then end); the
// controller it is copied over is want (--set seed) or the one whose copy
// is the best of the controllers'. The seed returned is that controller's
// copy as it will be: the broker's end and epoch in the controller's dir.
func seedFromBroker(copies []Copy, b, want int32) (seed, from Copy, err error) {
	for _, c := range copies {
		if c.Node == b && !c.Controller {
			from = c
		}
	}
	if !from.Known() || from.Dir == "" || from.Node != b {
		return seed, from, fmt.Errorf("%w: --set copy_from=%d names no broker whose copy of %s was read (%s); nothing was changed", steps.ErrRefused, b, MetadataLog, copiesText(copies))
	}
	if best, _ := Seed(copies); ahead(best, from) && (best.Epoch != from.Epoch || best.End != from.End) {
		return seed, from, fmt.Errorf("%w: --set copy_from=%d: %s is further (epoch %d, end %d) than broker %d's (epoch %d, end %d): copy the newest one (--set copy_from=%d if it is a broker's), or leave copy_from out. Nothing was changed", steps.ErrRefused, b, best.Role(), best.Epoch, best.End, b, from.Epoch, from.End, best.Node)
	}
	var ctrls []Copy
	for _, c := range copies {
		if c.Controller && c.Known() && (want < 0 || c.Node == want) {
			ctrls = append(ctrls, c)
		}
	}
	target, ok := Seed(ctrls)
	if !ok {
		return seed, from, fmt.Errorf("%w: --set copy_from=%d: no controller copy to copy it over was read (--set seed=%d names none): the controller needs its metadata dir and meta.properties. Nothing was changed", steps.ErrRefused, b, want)
	}
	seed = target
	seed.End, seed.Epoch, seed.Segment = from.End, from.Epoch, from.Segment
	return seed, from, nil
}

// copyOver copies broker a.From's backup over controller a.To's copy,
// unless that copy holds the broker's already (a resumed run).
func (k *backup) copyOver(ctx context.Context, env *steps.Env, a steps.Action) error {
	c, err := steps.ArgsOf[copyArgs](a)
	if err != nil {
		return err
	}
	return env.Do(a, func() error {
		want, err := listing(ctx, env.Hosts, c.From, c.Src)
		if err != nil {
			return err
		}
		if got, _ := listing(ctx, env.Hosts, c.To, c.Dir); got == want {
			env.Logf("controller %d's copy holds broker %d's already (the same files, the same sizes)", c.To, c.From)
			return nil
		}
		var size strings.Builder
		if err := env.Hosts.Run(ctx, c.From, shell.Script(fmt.Sprintf("du -sb -- %s | cut -f1", shell.Quote(c.Src))), func(l ports.Line) {
			if !l.Stderr {
				size.WriteString(strings.TrimSpace(l.Text))
			}
		}); err != nil {
			return err
		}
		var n int64
		fmt.Sscan(size.String(), &n)
		if n <= 0 || n > maxCopyBytes {
			return fmt.Errorf("%w: broker %d's copy %s is %s bytes: kremedy streams at most %d. Copy it by hand (with both nodes stopped: tar it on the broker, untar it as %s on controller %d, its own kept aside), then run again without copy_from. Nothing was changed", steps.ErrRefused, c.From, c.Src, size.String(), maxCopyBytes, c.Dir, c.To)
		}
		var b64 strings.Builder
		if err := env.Hosts.Run(ctx, c.From, shell.Script(fmt.Sprintf("tar -C %s -cf - -- %s | base64 -w0", shell.Quote(path.Dir(c.Src)), shell.Quote(path.Base(c.Src)))), func(l ports.Line) {
			if !l.Stderr {
				b64.WriteString(l.Text)
			}
		}); err != nil {
			return fmt.Errorf("read broker %d's copy %s: %w", c.From, c.Src, err)
		}
		tarball, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64.String()))
		if err != nil {
			return fmt.Errorf("read broker %d's copy: %w", c.From, err)
		}
		if err := env.Hosts.RunInput(ctx, c.To, untarScript(c.Dir, c.Aside, path.Base(c.Src)), tarball, func(l ports.Line) { env.Output(a.Target, l) }); err != nil {
			return err
		}
		// Checked as a whole: a tar read cut short on the broker's host
		// still makes a valid archive.
		if got, err := listing(ctx, env.Hosts, c.To, c.Dir); err != nil || got != want {
			return fmt.Errorf("controller %d's copy at %s does not hold the same files as broker %d's %s (%v): resume copies it again (the one it replaces is kept aside each time)", c.To, c.Dir, c.From, c.Src, err)
		}
		return nil
	})
}

// listing is a copy's files with their sizes, sorted: what a copy of it
// must hold.
func listing(ctx context.Context, h ports.Hosts, node int32, dir string) (string, error) {
	var b strings.Builder
	err := h.Run(ctx, node, shell.Script(fmt.Sprintf("cd %s && find . -type f -printf '%%P\t%%s\n' | LC_ALL=C sort", shell.Quote(dir))), func(l ports.Line) {
		if !l.Stderr {
			b.WriteString(l.Text + "\n")
		}
	})
	return b.String(), err
}

// untarScript unpacks, beside dir, the tar on its stdin whose one entry
// is name, keeps dir aside (never deleted) and puts the unpacked copy in
// its place, owned as dir's parent.
func untarScript(dir, aside, name string) string {
	return shell.Script(fmt.Sprintf(`set -eu
d=%s; a=%s; n=%s
p=$(dirname -- "$d")
t=$(mktemp -d "$p/.kremedy-copy.XXXXXX")
trap 'rm -rf -- "$t"' EXIT
tar -xf - -C "$t" || { echo "the copy could not be unpacked in $p (its free space: $(df -Pk -- "$p" | awk 'NR==2{print $4}') KiB); nothing was changed" >&2; exit 4; }
[ -d "$t/$n" ] || { echo "the copy received holds no $n; nothing was changed" >&2; exit 4; }
if [ -e "$d" ]; then
  if [ -e "$a" ]; then mv -- "$a" "$a.$(date -u +%%Y%%m%%dT%%H%%M%%SZ)"; fi
  mv -- "$d" "$a"; echo "$d kept aside as $a"
fi
if ! mv -- "$t/$n" "$d"; then
  [ -e "$a" ] && [ ! -e "$d" ] && mv -- "$a" "$d"
  echo "the copy could not be put in place of $d; the controller's own is back" >&2; exit 6
fi
chown -R --reference="$p" -- "$d" 2>/dev/null || true
echo "$d: the broker's copy in its place"`, shell.Quote(dir), shell.Quote(aside), shell.Quote(name)))
}
