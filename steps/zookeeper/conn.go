package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"path"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"

	"github.com/go-zookeeper/zk"
)

// Errors callers match with errors.Is; they are go-zookeeper's own values so
// that wrapped errors from either package compare equal.
var (
	ErrNoNode     = zk.ErrNoNode
	ErrNodeExists = zk.ErrNodeExists
	ErrBadVersion = zk.ErrBadVersion
	ErrNotEmpty   = zk.ErrNotEmpty
	ErrNoAuth     = zk.ErrNoAuth
	// ErrNoSession means no ZooKeeper server granted a session before the
	// deadline: the ensemble is unreachable or has no quorum.
	ErrNoSession = errors.New("no zookeeper session")
)

// DefaultOpTimeout bounds a single operation whose context has no deadline.
// go-zookeeper calls take no context; this adapter bounds them.
const DefaultOpTimeout = 15 * time.Second

func statOf(s *zk.Stat) kafkazk.ZStat {
	if s == nil {
		return kafkazk.ZStat{}
	}
	return kafkazk.ZStat{
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		Ctime: time.UnixMilli(s.Ctime), Mtime: time.UnixMilli(s.Mtime),
		EphemeralOwner: s.EphemeralOwner, NumChildren: s.NumChildren,
	}
}

func toZK(acl []kafkazk.ACL) []zk.ACL {
	out := make([]zk.ACL, len(acl))
	for i, a := range acl {
		out[i] = zk.ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out
}

// IsNoNode reports a missing znode.
func (c *Conn) IsNoNode(err error) bool { return errors.Is(err, zk.ErrNoNode) }

// IsBadVersion reports a version-check failure.
func (c *Conn) IsBadVersion(err error) bool { return errors.Is(err, zk.ErrBadVersion) }

// Options tune a connection.
type Options struct {
	SessionTimeout time.Duration // default 10s (the server clamps it)
	// Digest auth ("user:password"), sent after the session is established.
	DigestAuth string
	// Starting: the servers are being started (the lab waiting for its
	// quorum): refused connections are retried until ctx ends instead of
	// failing as soon as every server has refused.
	Starting bool
	// Log, when set, receives go-zookeeper's own log (kremedy -v).
	Log io.Writer
	// TLS, when set, speaks TLS to the servers (their secureClientPort),
	// as the brokers' zookeeper.ssl.* settings say.
	TLS *tls.Config
	// MaxInFlight caps ReadState's reads in flight (ScanOptions.Concurrency);
	// 0 is DefaultScanConcurrency.
	MaxInFlight int
}

// Conn is a ZooKeeper session rooted at a chroot. Every path given to its
// methods is relative to the chroot ("/brokers/ids"); go-zookeeper has no
// chroot support of its own.
type Conn struct {
	zc      *zk.Conn
	chroot  string
	servers []string
	opts    Options  // as dialled, for the extra sessions of a Scan
	sib     siblings // those sessions
	rd      readers  // its bulk-read sessions (multiRead)
	notify  *atomic.Pointer[func(string)]
}

// OnSession makes the connection report what happens to its session after
// Dial (connection lost, re-established, expired, replaced) to f, so that a
// run's journal says when ZooKeeper went away under it. f must not block.
func (c *Conn) OnSession(f func(msg string)) {
	if f == nil {
		c.notify.Store(nil)
		return
	}
	c.notify.Store(&f)
}

// sessionNotifier turns go-zookeeper's session events into sentences for
// the Conn's OnSession function. The events before the first session (the
// dial itself) are not reported.
func sessionNotifier(notify *atomic.Pointer[func(string)], timeout time.Duration) func(zk.Event) {
	var had, lost, expired bool
	return func(ev zk.Event) {
		if ev.Type != zk.EventSession {
			return
		}
		var msg string
		switch ev.State {
		case zk.StateHasSession:
			switch {
			case expired:
				msg = fmt.Sprintf("ZooKeeper: a NEW session was established via %s after the old one expired", ev.Server)
			case lost:
				msg = fmt.Sprintf("ZooKeeper: session re-established via %s", ev.Server)
			}
			had, lost, expired = true, false, false
		case zk.StateDisconnected:
			if had && !lost && !expired {
				msg = fmt.Sprintf("ZooKeeper: connection to %s lost; reconnecting (the session survives if a server is reached within %s)", ev.Server, timeout)
				lost = true
			}
		case zk.StateExpired:
			if had {
				msg = "ZooKeeper: the session EXPIRED (no server was reached within the session timeout): an operation in flight has an unknown outcome and watches were lost; kremedy reads versions again before any further change"
				expired = true
			}
		}
		if f := notify.Load(); f != nil && msg != "" {
			(*f)(msg)
		}
	}
}

// Dial opens a session on the ensemble named by a Kafka-style connect string
// and waits until a server grants it, or ctx ends.
func Dial(ctx context.Context, connect string, o Options) (*Conn, error) {
	servers, chroot, err := kafkazk.ParseConnect(connect)
	if err != nil {
		return nil, err
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Second
	}
	notify := &atomic.Pointer[func(string)]{}
	refused := newRefusals(len(servers))
	refused.tls = o.TLS
	logTo := io.Discard
	if o.Log != nil {
		logTo = o.Log
	}
	zc, events, err := zk.Connect(servers, o.SessionTimeout,
		zk.WithLogger(log.New(logTo, "zookeeper: ", log.LstdFlags|log.Lmicroseconds)), zk.WithLogInfo(o.Log != nil), zk.WithDialer(refused.dial),
		zk.WithEventCallback(sessionNotifier(notify, o.SessionTimeout)))
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(servers, ","), err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultOpTimeout)
		defer cancel()
	}
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				c := &Conn{zc: zc, chroot: chroot, servers: servers, opts: o, notify: notify}
				if o.DigestAuth != "" {
					if err := zc.AddAuth("digest", []byte(o.DigestAuth)); err != nil {
						zc.Close()
						return nil, fmt.Errorf("zookeeper digest auth: %w", err)
					}
				}
				return c, nil
			}
			if ev.State == zk.StateAuthFailed {
				zc.Close()
				return nil, fmt.Errorf("zookeeper %s: authentication failed", strings.Join(servers, ","))
			}
		case <-refused.changed:
			if who := refused.all(); who != "" && !o.Starting {
				zc.Close()
				if err := refused.lastTLS(); err != nil {
					return nil, fmt.Errorf("zookeeper %s: %w: %v: check the zookeeper.ssl.* settings (truststore, the servers' certificates, the secureClientPort in zookeeper.connect)", strings.Join(servers, ","), ErrNoSession, err)
				}
				return nil, fmt.Errorf("zookeeper %s: %w: connection refused by every server (%s): is ZooKeeper running there, and is zookeeper.connect right?", strings.Join(servers, ","), ErrNoSession, who)
			}
		case <-ctx.Done():
			zc.Close()
			if err := refused.lastTLS(); err != nil {
				return nil, fmt.Errorf("zookeeper %s: %w: %v: check the zookeeper.ssl.* settings (truststore, the servers' certificates, the secureClientPort in zookeeper.connect)", strings.Join(servers, ","), ErrNoSession, err)
			}
			hint := ""
			if o.TLS == nil {
				hint = " (no server answered ZooKeeper's protocol: if the port is a TLS secureClientPort, set zookeeper.tls_config_file)"
			}
			return nil, fmt.Errorf("zookeeper %s: %w (%v)%s", strings.Join(servers, ","), ErrNoSession, ctx.Err(), hint)
		}
	}
}

// Session names the session and the server it is connected to now, for
// the journal ("0x1000a2b3c4d0005 via 127.0.2.1:2181").
func (c *Conn) Session() string {
	return fmt.Sprintf("0x%x via %s", c.zc.SessionID(), c.zc.Server())
}

// SessionTimeout is the session timeout kremedy asked for (the server may
// clamp it to [2, 20] ticks): how long after this process dies its
// ephemeral znodes outlive it.
func (c *Conn) SessionTimeout() time.Duration { return c.opts.SessionTimeout }

// Chroot is the path prefix this connection applies ("" for none).
func (c *Conn) Chroot() string { return c.chroot }

// Servers lists the ensemble's host:port entries.
func (c *Conn) Servers() []string { return c.servers }

// Close ends the session, and the extra sessions its scans opened;
// ephemeral nodes it owns disappear.
func (c *Conn) Close() {
	c.closeSiblings()
	c.closeReaders()
	c.zc.Close()
}

// Full returns the absolute server-side path for a chroot-relative path.
func (c *Conn) Full(p string) string {
	if c.chroot == "" {
		return p
	}
	if p == "/" {
		return c.chroot
	}
	return c.chroot + p
}

// bound runs f, returning early when ctx ends. go-zookeeper operations take
// no context, so an abandoned call finishes (or fails) in the background.
func bound[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultOpTimeout)
		defer cancel()
	}
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() { v, err := f(); ch <- res{v, err} }()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Get reads a znode's data and stat.
func (c *Conn) Get(ctx context.Context, p string) ([]byte, kafkazk.ZStat, error) {
	type gv struct {
		b []byte
		s *zk.Stat
	}
	r, err := bound(ctx, func() (gv, error) { b, s, err := c.zc.Get(c.Full(p)); return gv{b, s}, err })
	if err != nil {
		return nil, kafkazk.ZStat{}, fmt.Errorf("get %s: %w", c.Full(p), err)
	}
	return r.b, statOf(r.s), nil
}

// Exists reports whether a znode exists.
func (c *Conn) Exists(ctx context.Context, p string) (bool, kafkazk.ZStat, error) {
	type ev struct {
		ok bool
		s  *zk.Stat
	}
	r, err := bound(ctx, func() (ev, error) { ok, s, err := c.zc.Exists(c.Full(p)); return ev{ok, s}, err })
	if err != nil {
		return false, kafkazk.ZStat{}, fmt.Errorf("exists %s: %w", c.Full(p), err)
	}
	return r.ok, statOf(r.s), nil
}

// Children lists a znode's children, sorted.
func (c *Conn) Children(ctx context.Context, p string) ([]string, error) {
	kids, err := bound(ctx, func() ([]string, error) { k, _, err := c.zc.Children(c.Full(p)); return k, err })
	if err != nil {
		return nil, fmt.Errorf("children %s: %w", c.Full(p), err)
	}
	sort.Strings(kids)
	return kids, nil
}

// GetACL reads a znode's kafkazk.ACL.
func (c *Conn) GetACL(ctx context.Context, p string) ([]kafkazk.ACL, error) {
	acl, err := bound(ctx, func() ([]zk.ACL, error) { a, _, err := c.zc.GetACL(c.Full(p)); return a, err })
	if err != nil {
		return nil, fmt.Errorf("getacl %s: %w", c.Full(p), err)
	}
	out := make([]kafkazk.ACL, len(acl))
	for i, a := range acl {
		out[i] = kafkazk.ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out, nil
}

// Create makes a persistent znode with the given kafkazk.ACL (world-all when nil).
func (c *Conn) Create(ctx context.Context, p string, data []byte, acl []kafkazk.ACL) error {
	return c.create(ctx, p, data, acl, 0)
}

// CreateEphemeral makes an ephemeral znode of this session (the Conn's
// own, never a scan's sibling): it goes when the session is closed or
// expires. The chroot is applied as for every path.
func (c *Conn) CreateEphemeral(ctx context.Context, p string, data []byte, acl []kafkazk.ACL) error {
	return c.create(ctx, p, data, acl, zk.FlagEphemeral)
}

func (c *Conn) create(ctx context.Context, p string, data []byte, acl []kafkazk.ACL, flags int32) error {
	zacl := zk.WorldACL(zk.PermAll)
	if acl != nil {
		zacl = toZK(acl)
	}
	_, err := bound(ctx, func() (string, error) { return c.zc.Create(c.Full(p), data, flags, zacl) })
	if err != nil {
		return fmt.Errorf("create %s: %w", c.Full(p), err)
	}
	return nil
}

// Set writes a znode's data if its version still matches (-1: any).
func (c *Conn) Set(ctx context.Context, p string, data []byte, version int32) (kafkazk.ZStat, error) {
	s, err := bound(ctx, func() (*zk.Stat, error) { return c.zc.Set(c.Full(p), data, version) })
	if err != nil {
		return kafkazk.ZStat{}, fmt.Errorf("set %s (version %d): %w", c.Full(p), version, err)
	}
	return statOf(s), nil
}

// Delete removes one znode if its version still matches (-1: any).
func (c *Conn) Delete(ctx context.Context, p string, version int32) error {
	_, err := bound(ctx, func() (struct{}, error) { return struct{}{}, c.zc.Delete(c.Full(p), version) })
	if err != nil {
		return fmt.Errorf("delete %s (version %d): %w", c.Full(p), version, err)
	}
	return nil
}

// DeleteAll removes the znodes of paths in one transaction (ZooKeeper's
// multi): all or none.
func (c *Conn) DeleteAll(ctx context.Context, paths []string, versions []int32) error {
	if len(paths) != len(versions) {
		return fmt.Errorf("delete %v: %d paths, %d versions", paths, len(paths), len(versions))
	}
	ops := make([]any, len(paths))
	for i, p := range paths {
		ops[i] = &zk.DeleteRequest{Path: c.Full(p), Version: versions[i]}
	}
	res, err := bound(ctx, func() ([]zk.MultiResponse, error) { return c.zc.Multi(ops...) })
	for i, r := range res {
		if r.Error != nil {
			return fmt.Errorf("delete %s (version %d; one transaction with %v, nothing in it deleted): %w", c.Full(paths[i]), versions[i], paths, r.Error)
		}
	}
	if err != nil {
		return fmt.Errorf("delete %v in one transaction: %w", paths, err)
	}
	return nil
}

// Walk lists p and every descendant, parents before children. A node that
// vanishes during the walk is skipped.
func (c *Conn) Walk(ctx context.Context, p string) ([]string, error) {
	out := []string{p}
	kids, err := c.Children(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, k := range kids {
		sub, err := c.Walk(ctx, path.Join(p, k))
		if errors.Is(err, ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

// DeleteRecursive removes p and its subtree, children first, ignoring
// versions. It is what an engineer does by hand with `deleteall`; the
// runbook's own deletion is version-checked and planned instead.
func (c *Conn) DeleteRecursive(ctx context.Context, p string) error {
	nodes, err := c.Walk(ctx, p)
	if errors.Is(err, ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		if err := c.Delete(ctx, nodes[i], -1); err != nil && !errors.Is(err, ErrNoNode) {
			return err
		}
	}
	return nil
}

// waitEvery is how often WaitChildren and WaitExists read again. They poll
// rather than watch: go-zookeeper v1.0.4 (the newest release) reads
// Conn.lastZxid in sendSetWatches while the new connection's recvLoop writes
// it, unsynchronised, whenever it reconnects with watches outstanding
// (samuel/go-zookeeper#260, go-zookeeper/zk#35 unmerged); CI's race detector
// caught it during a lab scenario on a loaded machine. A session that never
// sets a watch never takes that path. Ten reads a second of one znode's
// children cost ZooKeeper next to nothing, and a broker's registration
// takes seconds to come or go.
const waitEvery = 100 * time.Millisecond

// WaitChildren blocks until cond holds for p's children, reading them every
// waitEvery. A missing p counts as no children.
func (c *Conn) WaitChildren(ctx context.Context, p string, cond func([]string) bool) ([]string, error) {
	return poll(ctx, func() ([]string, bool, error) {
		kids, err := c.Children(ctx, p)
		if errors.Is(err, ErrNoNode) {
			kids, err = nil, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("wait for the children of %s: %w", c.Full(p), err)
		}
		sort.Strings(kids)
		return kids, cond(kids), nil
	})
}

// WaitExists blocks until p exists (want=true) or is gone (want=false),
// reading it every waitEvery.
func (c *Conn) WaitExists(ctx context.Context, p string, want bool) error {
	_, err := poll(ctx, func() (struct{}, bool, error) {
		ok, _, err := c.Exists(ctx, p)
		if err != nil {
			return struct{}{}, false, fmt.Errorf("wait for %s: %w", c.Full(p), err)
		}
		return struct{}{}, ok == want, nil
	})
	return err
}

// poll calls read until it reports done, fails, or ctx ends; the last value
// read is returned in every case.
func poll[T any](ctx context.Context, read func() (T, bool, error)) (T, error) {
	t := time.NewTicker(waitEvery)
	defer t.Stop()
	for {
		v, done, err := read()
		if err != nil || done {
			return v, err
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}
