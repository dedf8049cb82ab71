package lease

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// base stands for each controller host's own /var/tmp in the commands;
// the test hosts put a directory of their own in its place, so that the
// scripts meet a real shell, mkdir, stat and mv.
const base = "/KREMEDY-TEST-BASE"

// hosts are controller hosts, each with its own disk (a temporary
// directory), run by a real shell; down ones do not answer.
type hosts struct {
	mu   sync.Mutex
	dirs map[int32]string
	down map[int32]error
	sh   steptest.LocalShell
}

func newHosts(t *testing.T, ids ...int32) *hosts {
	h := &hosts{dirs: map[int32]string{}, down: map[int32]error{}, sh: steptest.LocalShell{Shell: "/bin/sh"}}
	for _, id := range ids {
		h.dirs[id] = t.TempDir()
	}
	return h
}

func (h *hosts) Run(ctx context.Context, id int32, cmd string, out func(ports.Line)) error {
	h.mu.Lock()
	err, dir := h.down[id], h.dirs[id]
	h.mu.Unlock()
	if err != nil {
		return err
	}
	return h.sh.Run(ctx, id, strings.ReplaceAll(cmd, base, dir), out)
}

func (h *hosts) Check(context.Context, int32) error { return nil }

// RunInput is never used by the lease: it writes nothing from stdin.
func (h *hosts) RunInput(context.Context, int32, string, []byte, func(ports.Line)) error {
	return errors.New("the lease sends no input to a host")
}
func (h *hosts) RunClient(context.Context, ports.Client, string, func(ports.Line)) error {
	return errors.New("no clients")
}

// holderFile is controller id's holder.json.
func (h *hosts) holderFile(id int32) string {
	return filepath.Join(h.dirs[id], "kremedy-lease-q1Zp0KkSRyGp_Tz3Jd-lYg", "holder.json")
}

// age makes controller id's holder.json d old by the host's clock (its
// holder stopped writing it d ago).
func (h *hosts) age(t *testing.T, id int32, d time.Duration) {
	t.Helper()
	at := time.Now().Add(-d)
	if err := os.Chtimes(h.holderFile(id), at, at); err != nil {
		t.Fatal(err)
	}
}

type kafkaID struct{ ports.Kafka }

func (kafkaID) DescribeCluster(context.Context) (ports.ClusterView, error) {
	return ports.ClusterView{ClusterID: "q1Zp0KkSRyGp_Tz3Jd-lYg"}, nil
}

// clock is an injected clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func kraftLease(h *hosts, c *clock) *KRaft {
	l := NewKRaft(h, kafkaID{}, []ports.Host{{ID: 3000, Host: "c1"}, {ID: 3001, Host: "c2"}, {ID: 3002, Host: "c3"}})
	l.Base, l.Every, l.Now = base, 0, c.now
	return l
}

func holder(run, token string, since time.Time) ports.Holder {
	return ports.Holder{RunID: run, Runbook: "kraft-rolling-restart", Operator: "op@laptop", Host: "laptop", PID: 7, Since: since, Token: token}
}

// TestKRaftLeaseOneHolder: the first run holds the lease on every
// controller host; a second is refused naming it, and takes it once the
// first gave it back.
func TestKRaftLeaseOneHolder(t *testing.T) {
	ctx := context.Background()
	h, c := newHosts(t, 3000, 3001, 3002), &clock{t0}
	l := kraftLease(h, c)
	a, err := l.Acquire(ctx, holder("run-a", "tok-a", t0))
	if err != nil {
		t.Fatal(err)
	}
	if w := a.Where(); !strings.Contains(w, "3 of 3 KRaft controller hosts") || !strings.Contains(w, "kremedy-lease-q1Zp0KkSRyGp_Tz3Jd-lYg") {
		t.Errorf("where: %s", w)
	}
	_, err = l.Acquire(ctx, holder("run-b", "tok-b", t0))
	var he *ports.LeaseHeldError
	if !errors.As(err, &he) || he.Holder.RunID != "run-a" || he.Holder.Operator != "op@laptop" {
		t.Fatalf("second acquire: %v, want run-a named", err)
	}
	if r, err := l.Read(ctx); err != nil || r == nil || r.RunID != "run-a" || r.Expired {
		t.Fatalf("read: %+v %v", r, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for id := range h.dirs {
		if _, err := os.Stat(filepath.Dir(h.holderFile(id))); !os.IsNotExist(err) {
			t.Errorf("controller %d still has the lock directory after the release (%v)", id, err)
		}
	}
	if r, err := l.Read(ctx); err != nil || r != nil {
		t.Fatalf("read after the release: %+v %v", r, err)
	}
	b, err := l.Acquire(ctx, holder("run-b", "tok-b", t0))
	if err != nil {
		t.Fatalf("acquire after the release: %v", err)
	}
	_ = b.Release(ctx)
}

// TestKRaftLeaseNeedsAMajority: a host that does not answer does not
// count: 2 of 3 hold the lease (the third is named), 1 of 3 is refused
// naming the hosts that did not answer, and gives back what it took.
func TestKRaftLeaseNeedsAMajority(t *testing.T) {
	ctx := context.Background()
	h, c := newHosts(t, 3000, 3001, 3002), &clock{t0}
	l := kraftLease(h, c)
	h.down[3002] = errors.New("dial tcp c3:22: connect: no route to host")
	a, err := l.Acquire(ctx, holder("run-a", "tok-a", t0))
	if err != nil {
		t.Fatalf("2 of 3: %v", err)
	}
	if w := a.Where(); !strings.Contains(w, "2 of 3") || !strings.Contains(w, "controller 3002 (c3): dial tcp c3:22") {
		t.Errorf("where does not name the host that did not answer: %s", w)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h.down[3001] = errors.New("ssh: handshake failed")
	_, err = l.Acquire(ctx, holder("run-a", "tok-a", t0))
	if !errors.Is(err, ports.ErrRefused) || !strings.Contains(err.Error(), "1 of 3") || !strings.Contains(err.Error(), "controller 3001 (c2): ssh: handshake failed") ||
		!strings.Contains(err.Error(), "controller 3002 (c3)") {
		t.Fatalf("1 of 3: %v, want a refusal naming the hosts that did not answer", err)
	}
	if _, err := os.Stat(h.holderFile(3000)); !os.IsNotExist(err) {
		t.Errorf("the lease taken on a minority was not given back (%v)", err)
	}
}

// TestKRaftLeaseExpiry: a holder that stops its heartbeat (its kremedy
// died) keeps the lease until its heartbeat is older than the TTL by both
// clocks; then the next run takes it over and says whose it took, and the
// dead holder's release finds it lost. Heartbeats keep a lease alive.
func TestKRaftLeaseExpiry(t *testing.T) {
	ctx := context.Background()
	h, c := newHosts(t, 3000, 3001, 3002), &clock{t0}
	l := kraftLease(h, c)
	a, err := l.Acquire(ctx, holder("run-a", "tok-a", t0))
	if err != nil {
		t.Fatal(err)
	}
	// A minute on: alive by both clocks.
	c.t = t0.Add(time.Minute)
	for id := range h.dirs {
		h.age(t, id, time.Minute)
	}
	var he *ports.LeaseHeldError
	if _, err := l.Acquire(ctx, holder("run-b", "tok-b", c.t)); !errors.As(err, &he) {
		t.Fatalf("a minute after the last heartbeat: %v, want refused", err)
	}
	// A beat at +90s, then the file ages on the hosts: kremedy's clock says
	// 90s, so it is alive (a host clock alone does not expire it).
	c.t = t0.Add(90 * time.Second)
	a.(*kraftHeld).beat(ctx)
	c.t = t0.Add(3 * time.Minute)
	for id := range h.dirs {
		h.age(t, id, 3*time.Minute)
	}
	if _, err := l.Acquire(ctx, holder("run-b", "tok-b", c.t)); !errors.As(err, &he) || !he.Holder.Heartbeat.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("90s after a heartbeat, the host's mtime 3 min old: %v, want refused naming the heartbeat", err)
	}
	// And a skewed laptop alone does not expire it: the host saw a write a
	// second ago.
	c.t = t0.Add(time.Hour)
	for id := range h.dirs {
		h.age(t, id, time.Second)
	}
	if _, err := l.Acquire(ctx, holder("run-b", "tok-b", c.t)); !errors.As(err, &he) {
		t.Fatalf("kremedy's clock an hour on, the host's file fresh: %v, want refused", err)
	}
	// Dead: nothing for 5 minutes by both clocks.
	c.t = t0.Add(90*time.Second + 5*time.Minute)
	for id := range h.dirs {
		h.age(t, id, 5*time.Minute)
	}
	if r, _ := l.Read(ctx); r == nil || r.RunID != "run-a" || !r.Expired {
		t.Fatalf("read of the expired lease: %+v, want run-a expired", r)
	}
	b, err := l.Acquire(ctx, holder("run-b", "tok-b", c.t))
	if err != nil {
		t.Fatalf("acquire of an expired lease: %v", err)
	}
	if old := b.TookOver(); old == nil || old.RunID != "run-a" {
		t.Fatalf("took over %+v, want run-a", old)
	}
	if r, _ := l.Read(ctx); r == nil || r.RunID != "run-b" {
		t.Fatalf("after the takeover the lease names %+v", r)
	}
	if err := a.Release(ctx); !errors.Is(err, ports.ErrLeaseLost) {
		t.Fatalf("the dead holder's release: %v, want ErrLeaseLost", err)
	}
	if r, _ := l.Read(ctx); r == nil || r.RunID != "run-b" {
		t.Fatalf("the dead holder's release removed run-b's lease: %+v", r)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestKRaftLeaseBreak: Break removes the lease whoever holds it and names
// the holder.
func TestKRaftLeaseBreak(t *testing.T) {
	ctx := context.Background()
	h, c := newHosts(t, 3000, 3001, 3002), &clock{t0}
	l := kraftLease(h, c)
	if _, err := l.Acquire(ctx, holder("run-a", "tok-a", t0)); err != nil {
		t.Fatal(err)
	}
	old, err := l.Break(ctx)
	if err != nil || old == nil || old.RunID != "run-a" {
		t.Fatalf("break: %+v %v", old, err)
	}
	if r, _ := l.Read(ctx); r != nil {
		t.Fatalf("after the break: %+v", r)
	}
	if old, err := l.Break(ctx); old != nil || err != nil {
		t.Fatalf("break of no lease: %+v %v", old, err)
	}
}

// TestKRaftLeaseSharedDisk: controller hosts that share one disk (the lab:
// every host is this machine) hold one lock directory, the holder's own.
func TestKRaftLeaseSharedDisk(t *testing.T) {
	ctx := context.Background()
	h, c := newHosts(t, 3000), &clock{t0}
	h.dirs[3001], h.dirs[3002] = h.dirs[3000], h.dirs[3000]
	l := kraftLease(h, c)
	a, err := l.Acquire(ctx, holder("run-a", "tok-a", t0))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.Where(), "3 of 3") {
		t.Errorf("where: %s", a.Where())
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestKRaftLeaseCheck: the run checks its lease before every change from
// what its heartbeats found: fine while a heartbeat reaches a majority;
// lost when none has for longer than the expiry (hosts silent), and lost
// at once when a heartbeat found another run's lease on a majority.
func TestKRaftLeaseCheck(t *testing.T) {
	ctx := context.Background()
	h, c := newHosts(t, 3000, 3001, 3002), &clock{t0}
	l := kraftLease(h, c)
	l.Every = time.Hour // the loop runs; its first tick is beyond the test
	a, err := l.Acquire(ctx, holder("run-a", "tok-a", t0))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	held := a.(*kraftHeld)
	c.t = t0.Add(90 * time.Second)
	held.beat(ctx)
	c.t = t0.Add(90*time.Second + DefaultTTL)
	if retaken, err := a.Check(ctx); err != nil || retaken {
		t.Fatalf("a heartbeat reached every host one expiry ago: %v %v, want held", retaken, err)
	}
	// Two of three hosts silent: the beat reaches a minority only.
	h.mu.Lock()
	h.down[3001], h.down[3002] = errors.New("no route to host"), errors.New("no route to host")
	h.mu.Unlock()
	held.beat(ctx)
	if _, err := a.Check(ctx); err != nil {
		t.Fatalf("the last majority heartbeat is exactly one expiry old: %v, want held", err)
	}
	c.t = c.t.Add(time.Second)
	if _, err := a.Check(ctx); !errors.Is(err, ports.ErrLeaseLost) || !strings.Contains(err.Error(), "no heartbeat") {
		t.Fatalf("no heartbeat reached a majority for longer than the expiry: %v, want ErrLeaseLost", err)
	}

	// Another run broke the lease and took it: the next heartbeat finds it.
	h2, c2 := newHosts(t, 3000, 3001, 3002), &clock{t0}
	l2 := kraftLease(h2, c2)
	l2.Every = time.Hour
	b, err := l2.Acquire(ctx, holder("run-b", "tok-b", t0))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	if _, err := l2.Break(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := kraftLease(h2, c2).Acquire(ctx, holder("run-c", "tok-c", t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Check(ctx); err != nil {
		t.Fatalf("before a heartbeat looked: %v", err)
	}
	b.(*kraftHeld).beat(ctx)
	if _, err := b.Check(ctx); !errors.Is(err, ports.ErrLeaseLost) || !strings.Contains(err.Error(), "fewer than a majority") {
		t.Fatalf("a heartbeat found run-c's lease on every host: %v, want ErrLeaseLost", err)
	}
}
