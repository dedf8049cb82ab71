package lease

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/ports"
)

// Defaults of the KRaft-mode lease.
const (
	DefaultBase  = "/var/tmp"
	DefaultEvery = 20 * time.Second
	DefaultTTL   = 2 * time.Minute
)

// KRaft is the KRaft-mode lease: a lock directory,
// Base/kremedy-lease-<cluster id>/ holding holder.json, made with an
// atomic mkdir on each KRaft controller host over SSH (the same logins
// and host keys as every other command), and held when a MAJORITY of the
// controller hosts granted it. Two runs cannot both hold a majority, and a
// controller host that does not answer counts against the taker, never for
// it. The holder rewrites holder.json every Every (its heartbeat); a lease
// whose heartbeat is older than TTL, by the reader's clock and by the
// host's own (the file's mtime against `date` there, so that neither a
// skewed laptop nor a skewed host alone can expire a live lease), has
// lapsed: its holder died, and a new run takes it over and says whose it
// took.
//
// Why the controller hosts and not the metadata quorum: a KRaft cluster
// has no ZooKeeper to hold an ephemeral node, and anything kept in the
// cluster's metadata needs the quorum that a quorum recovery runs without.
// The controller hosts are reachable over SSH whatever state Kafka is in,
// every runbook of a KRaft cluster already acts on them, and the cluster's
// id (DescribeCluster, which the brokers answer from their own metadata
// even while the controllers have no leader) keys the lock, so that two
// clusters on one host (a lab) never share it. The lock is shared by the
// operators who log in as the same user on the controller hosts (or use
// sudo), as their commands are.
type KRaft struct {
	Hosts       ports.Hosts
	Kafka       ports.Kafka
	Controllers []ports.Host
	// Base is where the lock directory is made; Every the heartbeat's
	// period (0: no heartbeat goroutine, for tests); TTL the expiry.
	Base       string
	Every, TTL time.Duration
	// Now is kremedy's clock.
	Now func() time.Time
}

// NewKRaft is the lease of the KRaft cluster whose controller hosts hosts
// reaches, with the defaults.
func NewKRaft(hosts ports.Hosts, kafka ports.Kafka, controllers []ports.Host) *KRaft {
	return &KRaft{Hosts: hosts, Kafka: kafka, Controllers: controllers, Base: DefaultBase, Every: DefaultEvery, TTL: DefaultTTL, Now: time.Now}
}

var _ ports.Lease = (*KRaft)(nil)

func (l *KRaft) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *KRaft) ttl() time.Duration { return cmp.Or(l.TTL, DefaultTTL) }

// Expiry: a dead holder's heartbeat ages past the TTL.
func (l *KRaft) Expiry() string {
	return fmt.Sprintf("%s after its last heartbeat (one every %s while its kremedy runs)", l.ttl(), cmp.Or(l.Every, DefaultEvery))
}

func (l *KRaft) majority() int { return len(l.Controllers)/2 + 1 }

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// dir is the lock directory of the cluster, named by its cluster id.
func (l *KRaft) dir(ctx context.Context) (string, error) {
	if len(l.Controllers) == 0 {
		return "", fmt.Errorf("%w: the inventory names no KRaft controllers, whose hosts hold the lease; nothing was done", ports.ErrRefused)
	}
	cv, err := l.Kafka.DescribeCluster(ctx)
	if err != nil || cv.ClusterID == "" {
		return "", fmt.Errorf("%w: no broker told the cluster id (DescribeCluster: %v), which names the cluster's lease on the controller hosts; nothing was done: start a broker, or check kafka.bootstrap", ports.ErrRefused, err)
	}
	return path.Join(cmp.Or(l.Base, DefaultBase), "kremedy-lease-"+unsafeName.ReplaceAllString(cv.ClusterID, "_")), nil
}

// hostState is what one controller host answered.
type hostState struct {
	id  int32
	err error
	// word is the script's verdict: taken, held, free, beat, lost,
	// released, gone, other, busy, changed, broke, none.
	word string
	// holder is holder.json's content when the host showed one (nil:
	// missing or unreadable); token its token ("" then).
	holder *ports.Holder
	token  string
	// age is how old holder.json (or the directory) is by the host's
	// clock.
	age time.Duration
}

const mark = "KREMEDY-LEASE"

// run runs script on controller id and parses its answer: a first line
// "KREMEDY-LEASE word [host-now mtime]", then holder.json's content.
func (l *KRaft) run(ctx context.Context, id int32, script string) hostState {
	s := hostState{id: id}
	var lines, stderr []string
	if err := l.Hosts.Run(ctx, id, shell.Script(script), func(ln ports.Line) {
		if ln.Stderr {
			stderr = append(stderr, ln.Text)
		} else {
			lines = append(lines, ln.Text)
		}
	}); err != nil {
		if len(stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.Join(stderr, " "))
		}
		s.err = err
		return s
	}
	i := slices.IndexFunc(lines, func(t string) bool { return strings.HasPrefix(t, mark+" ") })
	if i < 0 {
		s.err = fmt.Errorf("no answer from the lease script (output %q)", strings.Join(lines, "\n"))
		return s
	}
	f := strings.Fields(lines[i])
	s.word = f[1]
	if len(f) >= 4 {
		now, e1 := strconv.ParseInt(f[2], 10, 64)
		mtime, e2 := strconv.ParseInt(f[3], 10, 64)
		if e1 == nil && e2 == nil {
			s.age = time.Duration(now-mtime) * time.Second
		}
	}
	if body := strings.TrimSpace(strings.Join(lines[i+1:], "\n")); body != "" {
		var h ports.Holder
		if err := json.Unmarshal([]byte(body), &h); err == nil && h.Token != "" {
			s.holder, s.token = &h, h.Token
		}
	}
	return s
}

// showHeld prints the held line and holder.json: the host's time and
// holder.json's mtime (the directory's when the file is missing: a taker
// between its mkdir and its write, or one that died there).
const showHeld = `echo "` + mark + ` held $(date +%s) $(stat -c %Y "$f" 2>/dev/null || stat -c %Y "$d")"; cat "$f" 2>/dev/null; echo`

func vars(dir string) string {
	return fmt.Sprintf("d=%s; f=%s; t=%s\n", shell.Quote(dir), shell.Quote(dir+"/holder.json"), shell.Quote(dir+".takeover"))
}

// write is the shell that writes the holder's JSON to holder.json at
// once (a reader never sees half of it).
func write(h ports.Holder) string {
	b, _ := json.Marshal(h)
	return fmt.Sprintf(`printf '%%s\n' %s > "$f.new.$$" && mv -f "$f.new.$$" "$f"`, shell.Quote(string(b)))
}

func acquireScript(dir string, h ports.Holder) string {
	return vars(dir) + `if mkdir "$d" 2>/dev/null; then
  if ` + write(h) + `; then echo "` + mark + ` taken"; exit 0; fi
  rm -f "$f" "$f".new.*; rmdir "$d"; exit 1
fi
[ -d "$d" ] || { echo "cannot make $d" >&2; exit 1; }
` + showHeld + "\n"
}

// takeoverScript replaces an expired holder.json whose token is still
// old (or which is still missing, old ""), under a takeover lock so that
// two takers cannot both replace it; a takeover lock older than two
// minutes (a taker that died in it) is removed for the next try.
func takeoverScript(dir string, old string, ttl time.Duration, h ports.Holder) string {
	still := `! [ -e "$f" ]`
	if old != "" {
		still = fmt.Sprintf(`grep -qF %s "$f" 2>/dev/null`, shell.Quote(`"token":"`+old+`"`))
	}
	return vars(dir) + `if ! mkdir "$t" 2>/dev/null; then
  find "$t" -maxdepth 0 -mmin +2 -exec rmdir {} \; 2>/dev/null; echo "` + mark + ` busy"; exit 0
fi
trap 'rmdir "$t"' EXIT
age=$(( $(date +%s) - $(stat -c %Y "$f" 2>/dev/null || stat -c %Y "$d") ))
if [ -d "$d" ] && ` + still + ` && [ "$age" -gt ` + strconv.Itoa(int(ttl.Seconds())) + ` ]; then
  if ` + write(h) + `; then echo "` + mark + ` taken"; exit 0; fi
  exit 1
fi
echo "` + mark + ` changed"
`
}

func readScript(dir string) string {
	return vars(dir) + `if [ -d "$d" ]; then ` + showHeld + `; else echo "` + mark + ` free"; fi` + "\n"
}

func beatScript(dir string, h ports.Holder) string {
	return vars(dir) + fmt.Sprintf(`if grep -qF %s "$f" 2>/dev/null; then `, shell.Quote(`"token":"`+h.Token+`"`)) + write(h) + ` && echo "` + mark + ` beat"; else echo "` + mark + ` lost"; fi` + "\n"
}

// releaseScript removes the lock directory if holder.json is still the
// holder's; a missing one is gone (another host sharing the disk removed
// it a moment ago), another holder's is left alone.
func releaseScript(dir, token string) string {
	return vars(dir) + `if [ -f "$f" ] && ` + fmt.Sprintf(`grep -qF %s "$f" 2>/dev/null`, shell.Quote(`"token":"`+token+`"`)) + `; then rm -f "$f" "$f".new.*; rmdir "$d" 2>/dev/null; echo "` + mark + ` released"
elif [ -f "$f" ]; then echo "` + mark + ` other"; cat "$f" 2>/dev/null; echo
else echo "` + mark + ` gone"; fi
`
}

func breakScript(dir string) string {
	return vars(dir) + `if [ -d "$d" ]; then echo "` + mark + ` broke"; cat "$f" 2>/dev/null; echo; rm -f "$f" "$f".new.*; rmdir "$d" 2>/dev/null; else echo "` + mark + ` none"; fi
rmdir "$t" 2>/dev/null; exit 0
`
}

// expired: the holder's heartbeat is older than the TTL by the host's
// clock and, when holder.json names one, by kremedy's.
func (l *KRaft) expired(s hostState) bool {
	if s.age <= l.ttl() {
		return false
	}
	return s.holder == nil || s.holder.Heartbeat.IsZero() || l.now().Sub(s.holder.Heartbeat) > l.ttl()
}

func (l *KRaft) ids() []int32 {
	ids := make([]int32, len(l.Controllers))
	for i, c := range l.Controllers {
		ids[i] = c.ID
	}
	return ids
}

func (l *KRaft) name(id int32) string {
	for _, c := range l.Controllers {
		if c.ID == id && c.Host != "" {
			return fmt.Sprintf("controller %d (%s)", id, c.Host)
		}
	}
	return fmt.Sprintf("controller %d", id)
}

// take takes the lease on one host: the mkdir, or a lease of its own
// (an earlier try, or a host sharing another's disk), or the takeover of
// an expired one; a takeover another taker is in the middle of is tried
// again a few times.
func (l *KRaft) take(ctx context.Context, dir string, id int32, h ports.Holder) (s hostState, tookOver *ports.Holder) {
	for try := 0; ; try++ {
		s = l.run(ctx, id, acquireScript(dir, h))
		if s.err != nil || s.word == "taken" || s.token == h.Token && s.token != "" {
			if s.err == nil {
				s.word = "taken"
			}
			return s, nil
		}
		switch {
		case !l.expired(s) && s.holder != nil:
			return s, nil
		case !l.expired(s):
			// A directory without holder.json: a taker between its mkdir
			// and its write (milliseconds), or one that died there (it
			// expires). Look again.
		default:
			t := l.run(ctx, id, takeoverScript(dir, s.token, l.ttl(), h))
			if t.err != nil {
				return t, nil
			}
			if t.word == "taken" {
				return t, s.holder
			}
		}
		if try == 3 {
			return s, nil
		}
		select {
		case <-ctx.Done():
			s.err = ctx.Err()
			return s, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Acquire takes the lease on every controller host that answers and
// holds it when a majority did; otherwise it gives back what it took.
func (l *KRaft) Acquire(ctx context.Context, h ports.Holder) (ports.Held, error) {
	dir, err := l.dir(ctx)
	if err != nil {
		return nil, err
	}
	if h.Heartbeat.IsZero() {
		h.Heartbeat = l.now().UTC()
	}
	type answer struct {
		s        hostState
		tookOver *ports.Holder
	}
	got := par.Each(l.ids(), func(id int32) answer {
		s, took := l.take(ctx, dir, id, h)
		return answer{s, took}
	})
	held := &kraftHeld{l: l, dir: dir, h: h, stop: make(chan struct{}), done: make(chan struct{})}
	var other *ports.Holder
	var silent []string
	for _, a := range got {
		switch {
		case a.s.err != nil:
			silent = append(silent, fmt.Sprintf("%s: %v", l.name(a.s.id), a.s.err))
		case a.s.word == "taken":
			held.hosts = append(held.hosts, a.s.id)
			if a.tookOver != nil && held.tookOver == nil {
				held.tookOver = a.tookOver
			}
		default:
			if a.s.holder != nil && (other == nil || a.s.holder.Heartbeat.After(other.Heartbeat)) {
				other = a.s.holder
			} else if a.s.holder == nil && other == nil {
				other = &ports.Holder{RunID: "(being taken: holder.json not written yet)", Runbook: "?", Operator: "?"}
			}
		}
	}
	held.silent = silent
	held.beaten = l.now()
	if len(held.hosts) >= l.majority() {
		if l.Every > 0 {
			go held.loop()
		} else {
			close(held.done)
		}
		return held, nil
	}
	close(held.done)
	_ = held.release(ctx) // what was taken on a minority goes back
	if other != nil {
		return nil, &ports.LeaseHeldError{Holder: *other, Where: fmt.Sprintf("%s on the KRaft controller hosts", dir)}
	}
	return nil, fmt.Errorf("%w: the lease %s was taken on %d of %d KRaft controller hosts, and a majority (%d) is needed; did not answer: %s; nothing was done: make the controller hosts reachable over SSH (`kremedy diagnose` checks them) and run again",
		ports.ErrRefused, dir, len(held.hosts), len(l.Controllers), l.majority(), strings.Join(silent, "; "))
}

// Read asks every controller host and returns the freshest live holder,
// else an expired one (Expired set), else nil.
func (l *KRaft) Read(ctx context.Context) (*ports.Holder, error) {
	dir, err := l.dir(ctx)
	if err != nil {
		return nil, err
	}
	got := par.Each(l.ids(), func(id int32) hostState { return l.run(ctx, id, readScript(dir)) })
	var live, dead *ports.Holder
	var errs []error
	for _, s := range got {
		switch {
		case s.err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", l.name(s.id), s.err))
		case s.word != "held":
		case l.expired(s):
			if s.holder != nil && dead == nil {
				h := *s.holder
				h.Expired = true
				dead = &h
			}
		case s.holder != nil && (live == nil || s.holder.Heartbeat.After(live.Heartbeat)):
			live = s.holder
		}
	}
	if live != nil {
		return live, nil
	}
	if dead != nil {
		return dead, nil
	}
	if len(errs) == len(got) {
		return nil, errors.Join(errs...)
	}
	return nil, nil
}

// Break removes the lock directory on every controller host that answers.
func (l *KRaft) Break(ctx context.Context) (*ports.Holder, error) {
	dir, err := l.dir(ctx)
	if err != nil {
		return nil, err
	}
	got := par.Each(l.ids(), func(id int32) hostState { return l.run(ctx, id, breakScript(dir)) })
	var found *ports.Holder
	var errs []error
	for _, s := range got {
		if s.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.name(s.id), s.err))
		} else if s.holder != nil && found == nil {
			found = s.holder
		}
	}
	if len(errs) > len(got)-l.majority() {
		return found, fmt.Errorf("break the lease %s: %w", dir, errors.Join(errs...))
	}
	return found, nil
}

// kraftHeld is a lease held on hosts (a majority of the controllers).
type kraftHeld struct {
	l        *KRaft
	dir      string
	h        ports.Holder
	hosts    []int32
	silent   []string
	tookOver *ports.Holder

	mu   sync.Mutex
	lost map[int32]bool
	// beaten is when a heartbeat last reached a majority of the
	// controller hosts (first: when the lease was taken).
	beaten time.Time
	once   sync.Once
	stop   chan struct{}
	done   chan struct{}
}

func (k *kraftHeld) Where() string {
	var on []string
	for _, id := range k.hosts {
		on = append(on, k.l.name(id))
	}
	s := fmt.Sprintf("%s on %d of %d KRaft controller hosts (%s), a heartbeat every %s", k.dir, len(k.hosts), len(k.l.Controllers), strings.Join(on, ", "), cmp.Or(k.l.Every, DefaultEvery))
	if len(k.silent) > 0 {
		s += "; did not answer: " + strings.Join(k.silent, "; ")
	}
	return s
}

func (k *kraftHeld) TookOver() *ports.Holder { return k.tookOver }

func (k *kraftHeld) loop() {
	defer close(k.done)
	t := time.NewTicker(k.l.Every)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), k.l.Every)
			k.beat(ctx)
			cancel()
		}
	}
}

// beat rewrites holder.json, with the heartbeat's time, on every host the
// lease is held on and still this holder's; a host where it is not any
// more is lost (another run broke it or took it over).
func (k *kraftHeld) beat(ctx context.Context) {
	h := k.h
	h.Heartbeat = k.l.now().UTC()
	got := par.Each(k.hosts, func(id int32) hostState { return k.l.run(ctx, id, beatScript(k.dir, h)) })
	k.mu.Lock()
	defer k.mu.Unlock()
	beats := 0
	for _, s := range got {
		if s.err == nil && s.word == "beat" {
			beats++
		}
		if s.err == nil && s.word == "lost" {
			if k.lost == nil {
				k.lost = map[int32]bool{}
			}
			k.lost[s.id] = true
		}
	}
	if beats >= k.l.majority() {
		k.beaten = h.Heartbeat
	}
}

// Check asks no host: it reads what the heartbeats found. The lease is
// lost when the hosts it is still this holder's on are no longer a
// majority (a heartbeat found it gone or another run's), or when no
// heartbeat reached a majority for longer than the expiry (another run may
// have taken it over as expired). A KRaft lease is never taken again here:
// a resume takes it anew.
func (k *kraftHeld) Check(context.Context) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if still := len(k.hosts) - len(k.lost); len(k.lost) > 0 && still < k.l.majority() {
		var on []string
		for id := range k.lost {
			on = append(on, k.l.name(id))
		}
		slices.Sort(on)
		return false, fmt.Errorf("%w: a heartbeat found %s gone or another run's on %s; it is this run's on %d of %d controller hosts, fewer than a majority (%d)",
			ports.ErrLeaseLost, k.dir, strings.Join(on, ", "), still, len(k.l.Controllers), k.l.majority())
	}
	if k.l.Every > 0 {
		if since := k.l.now().Sub(k.beaten); since > k.l.ttl() {
			return false, fmt.Errorf("%w: no heartbeat of %s reached a majority of the controller hosts for %s, longer than the lease's expiry (%s): another run may have taken it over",
				ports.ErrLeaseLost, k.dir, since.Round(time.Second), k.l.ttl())
		}
	}
	return false, nil
}

// Release stops the heartbeat and removes the lock directory where it is
// still this holder's.
func (k *kraftHeld) Release(ctx context.Context) error {
	k.once.Do(func() { close(k.stop) })
	<-k.done
	return k.release(ctx)
}

func (k *kraftHeld) release(ctx context.Context) error {
	got := par.Each(k.hosts, func(id int32) hostState { return k.l.run(ctx, id, releaseScript(k.dir, k.h.Token)) })
	var lost, errs []string
	released := 0
	for _, s := range got {
		switch {
		case s.err != nil:
			errs = append(errs, fmt.Sprintf("%s: %v", k.l.name(s.id), s.err))
		case s.word == "released":
			released++
		case s.word == "other":
			who := "another run"
			if s.holder != nil {
				who = s.holder.String()
			}
			lost = append(lost, fmt.Sprintf("%s: now held by %s", k.l.name(s.id), who))
		}
	}
	k.mu.Lock()
	for id := range k.lost {
		lost = append(lost, fmt.Sprintf("%s: a heartbeat found it gone", k.l.name(id)))
	}
	k.mu.Unlock()
	switch {
	case len(lost) > 0:
		return fmt.Errorf("%w: %s", ports.ErrLeaseLost, strings.Join(lost, "; "))
	case len(errs) > 0:
		return fmt.Errorf("release the lease %s: %s (it lapses by itself %s)", k.dir, strings.Join(errs, "; "), k.l.Expiry())
	case released == 0 && len(k.hosts) > 0:
		return fmt.Errorf("%w: %s was gone from every controller host it was held on", ports.ErrLeaseLost, k.dir)
	}
	return nil
}
