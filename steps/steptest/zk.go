// Package steptest has strict fakes of the engine's ports for fast unit
// tests: an in-memory ZooKeeper with versions and watches, a scripted Kafka
// and a scripted SSH fleet. Strict means an unexpected call fails the test,
// and an expected call that never came fails it at cleanup. Behaviour that
// lives in Kafka, ZooKeeper or sshd is tested against the real lab instead.
package steptest

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Errors the fake ZooKeeper returns (the adapter uses go-zookeeper's).
var (
	ErrNoNode     = errors.New("zk: node does not exist")
	ErrBadVersion = errors.New("zk: version conflict")
	ErrNotEmpty   = errors.New("zk: node has children")
	ErrNodeExists = errors.New("zk: node already exists")
	// ErrNoChildrenForEphemerals: ZooKeeper refuses a child under an
	// ephemeral node.
	ErrNoChildrenForEphemerals = errors.New("zk: ephemeral nodes may not have children")
)

// Session is the session id the fake's own ephemerals belong to
// (CreateEphemeral); As gives another session's view.
const Session int64 = 0x5e55

type znode struct {
	data []byte
	acl  []kafkazk.ACL
	stat kafkazk.ZStat
	kids map[string]bool
}

// ZK is an in-memory ZooKeeper tree (chroot-relative) implementing
// ports.ZooKeeper. Mutations are logged in Ops.
type ZK struct {
	t      testing.TB
	mu     sync.Mutex
	nodes  map[string]*znode
	chroot string
	Ops    []string
	// Hook runs before every mutation; returning an error fails it (to
	// inject faults such as a concurrent change).
	Hook    func(op, path string) error
	changed chan struct{}
}

// NewZK returns an empty tree with only "/".
func NewZK(t testing.TB, chroot string) *ZK {
	z := &ZK{t: t, chroot: chroot, nodes: map[string]*znode{"/": {kids: map[string]bool{}}}, changed: make(chan struct{})}
	return z
}

func (z *ZK) notify() {
	close(z.changed)
	z.changed = make(chan struct{})
}

// Put creates p (and missing parents) with data, for test setup.
func (z *ZK) Put(p string, data string) *ZK {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.put(p, []byte(data))
	return z
}

func (z *ZK) put(p string, data []byte) {
	if p == "/" {
		return
	}
	parent := path.Dir(p)
	if _, ok := z.nodes[parent]; !ok {
		z.put(parent, nil)
	}
	if n, ok := z.nodes[p]; ok {
		n.data = data
		n.stat.Version++
		return
	}
	z.nodes[p] = &znode{data: data, kids: map[string]bool{}, acl: []kafkazk.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}},
		stat: kafkazk.ZStat{Ctime: longAgo, Mtime: longAgo}}
	z.nodes[parent].kids[path.Base(p)] = true
	z.nodes[parent].stat.Cversion++
}

// PutEphemeral creates or replaces p as an ephemeral node of session owner
// (a broker's registration), for test setup and the fake hosts.
func (z *ZK) PutEphemeral(p, data string, owner int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.put(p, []byte(data))
	z.nodes[p].stat.EphemeralOwner = owner
	z.notify()
}

// SetACL sets p's ACL (a chroot whose znodes are ACLed), for test setup.
func (z *ZK) SetACL(p string, acl []kafkazk.ACL) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.nodes[p].acl = acl
}

// longAgo is a znode's ctime and mtime unless a test sets them (Created):
// long before now, on the real clock and on a testing/synctest bubble's,
// which starts at 2000-01-01.
var longAgo = time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)

// Created sets p's ctime (a znode created at t, by ZooKeeper's clock).
func (z *ZK) Created(p string, t time.Time) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.nodes[p].stat.Ctime = t
}

// Bump changes p's data version (someone else wrote it).
func (z *ZK) Bump(p string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.nodes[p].stat.Version++
}

// Remove deletes p's subtree without checks (another actor did it).
func (z *ZK) Remove(p string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.remove(p)
	z.notify()
}

func (z *ZK) remove(p string) {
	n, ok := z.nodes[p]
	if !ok {
		return
	}
	for k := range n.kids {
		z.remove(path.Join(p, k))
	}
	delete(z.nodes, p)
	if par, ok := z.nodes[path.Dir(p)]; ok {
		delete(par.kids, path.Base(p))
	}
}

// Has reports whether p exists.
func (z *ZK) Has(p string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	_, ok := z.nodes[p]
	return ok
}

// Paths lists every node, sorted.
func (z *ZK) Paths() []string {
	z.mu.Lock()
	defer z.mu.Unlock()
	var out []string
	for p := range z.nodes {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func (z *ZK) Chroot() string              { return z.chroot }
func (z *ZK) IsNoNode(err error) bool     { return errors.Is(err, ErrNoNode) }
func (z *ZK) IsBadVersion(err error) bool { return errors.Is(err, ErrBadVersion) }

func (z *ZK) Get(_ context.Context, p string) ([]byte, kafkazk.ZStat, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	n, ok := z.nodes[p]
	if !ok {
		return nil, kafkazk.ZStat{}, fmt.Errorf("get %s: %w", p, ErrNoNode)
	}
	st := n.stat
	st.NumChildren = int32(len(n.kids))
	return slices.Clone(n.data), st, nil
}

func (z *ZK) Exists(ctx context.Context, p string) (bool, kafkazk.ZStat, error) {
	_, st, err := z.Get(ctx, p)
	if errors.Is(err, ErrNoNode) {
		return false, st, nil
	}
	return err == nil, st, err
}

func (z *ZK) Children(_ context.Context, p string) ([]string, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	n, ok := z.nodes[p]
	if !ok {
		return nil, fmt.Errorf("children %s: %w", p, ErrNoNode)
	}
	var out []string
	for k := range n.kids {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

func (z *ZK) GetACL(_ context.Context, p string) ([]kafkazk.ACL, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	n, ok := z.nodes[p]
	if !ok {
		return nil, fmt.Errorf("getacl %s: %w", p, ErrNoNode)
	}
	return slices.Clone(n.acl), nil
}

func (z *ZK) hook(op, p string) error {
	if z.Hook != nil {
		return z.Hook(op, p)
	}
	return nil
}

func (z *ZK) Create(_ context.Context, p string, data []byte, acl []kafkazk.ACL) error {
	return z.create(p, data, acl, 0)
}

// CreateEphemeral creates p as an ephemeral node of the fake's session
// (Session); Expire removes it as ZooKeeper would.
func (z *ZK) CreateEphemeral(_ context.Context, p string, data []byte, acl []kafkazk.ACL) error {
	return z.create(p, data, acl, Session)
}

func (z *ZK) create(p string, data []byte, acl []kafkazk.ACL, owner int64) error {
	op := "create"
	if owner != 0 {
		op = "create-ephemeral"
	}
	if err := z.hook(op, p); err != nil {
		return err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if _, ok := z.nodes[p]; ok {
		return fmt.Errorf("create %s: %w", p, ErrNodeExists)
	}
	parent, ok := z.nodes[path.Dir(p)]
	if !ok {
		return fmt.Errorf("create %s: %w (parent)", p, ErrNoNode)
	}
	if parent.stat.EphemeralOwner != 0 {
		return fmt.Errorf("create %s: %w", p, ErrNoChildrenForEphemerals)
	}
	z.put(p, data)
	z.nodes[p].stat.EphemeralOwner = owner
	if acl != nil {
		z.nodes[p].acl = acl
	}
	z.Ops = append(z.Ops, op+" "+p)
	z.notify()
	return nil
}

// As is the tree seen through another session (another kremedy
// process): its ephemerals belong to session owner.
func (z *ZK) As(owner int64) ports.ZooKeeper { return sessionOf{z, owner} }

type sessionOf struct {
	*ZK
	owner int64
}

func (s sessionOf) CreateEphemeral(_ context.Context, p string, data []byte, acl []kafkazk.ACL) error {
	return s.create(p, data, acl, s.owner)
}

// Expire ends session owner as ZooKeeper does when its timeout passes
// without a word from it: its ephemeral nodes go.
func (z *ZK) Expire(owner int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	var gone []string
	for p, n := range z.nodes {
		if n.stat.EphemeralOwner == owner {
			gone = append(gone, p)
		}
	}
	for _, p := range gone {
		z.remove(p)
	}
	z.notify()
}

func (z *ZK) Set(_ context.Context, p string, data []byte, version int32) (kafkazk.ZStat, error) {
	if err := z.hook("set", p); err != nil {
		return kafkazk.ZStat{}, err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	n, ok := z.nodes[p]
	if !ok {
		return kafkazk.ZStat{}, fmt.Errorf("set %s: %w", p, ErrNoNode)
	}
	if version != -1 && version != n.stat.Version {
		return kafkazk.ZStat{}, fmt.Errorf("set %s: %w", p, ErrBadVersion)
	}
	n.data = data
	n.stat.Version++
	z.Ops = append(z.Ops, "set "+p)
	return n.stat, nil
}

func (z *ZK) Delete(_ context.Context, p string, version int32) error {
	if err := z.hook("delete", p); err != nil {
		return err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	n, ok := z.nodes[p]
	switch {
	case !ok:
		return fmt.Errorf("delete %s: %w", p, ErrNoNode)
	case version != -1 && version != n.stat.Version:
		return fmt.Errorf("delete %s (version %d): %w", p, version, ErrBadVersion)
	case len(n.kids) > 0:
		return fmt.Errorf("delete %s: %w", p, ErrNotEmpty)
	}
	z.remove(p)
	z.Ops = append(z.Ops, "delete "+p)
	z.notify()
	return nil
}

// DeleteAll removes paths in one transaction: each is checked as Delete
// checks it, and nothing is removed unless all pass.
func (z *ZK) DeleteAll(_ context.Context, paths []string, versions []int32) error {
	for _, p := range paths {
		if err := z.hook("delete", p); err != nil {
			return err
		}
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	for i, p := range paths {
		n, ok := z.nodes[p]
		switch {
		case !ok:
			return fmt.Errorf("delete %s (one transaction, nothing deleted): %w", p, ErrNoNode)
		case versions[i] != -1 && versions[i] != n.stat.Version:
			return fmt.Errorf("delete %s (version %d; one transaction, nothing deleted): %w", p, versions[i], ErrBadVersion)
		case len(n.kids) > 0:
			return fmt.Errorf("delete %s (one transaction, nothing deleted): %w", p, ErrNotEmpty)
		}
	}
	for _, p := range paths {
		z.remove(p)
		z.Ops = append(z.Ops, "delete "+p)
	}
	z.notify()
	return nil
}

func (z *ZK) WaitChildren(ctx context.Context, p string, cond func([]string) bool) ([]string, error) {
	for {
		z.mu.Lock()
		ch := z.changed
		z.mu.Unlock()
		kids, err := z.Children(ctx, p)
		if err != nil && !errors.Is(err, ErrNoNode) {
			return nil, err
		}
		if cond(kids) {
			return kids, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return kids, ctx.Err()
		}
	}
}

// Deleted lists the paths deleted, in order.
func (z *ZK) Deleted() []string {
	z.mu.Lock()
	defer z.mu.Unlock()
	var out []string
	for _, op := range z.Ops {
		if p, ok := strings.CutPrefix(op, "delete "); ok {
			out = append(out, p)
		}
	}
	return out
}

var _ ports.ZooKeeper = (*ZK)(nil)
