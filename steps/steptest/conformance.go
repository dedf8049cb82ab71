package steptest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
)

// CoordinatorConformance checks the ports.ZooKeeper contract the step
// kinds rely on (the suite keeps the name of that port's first version,
// Coordinator). The fake ZK passes it, and so must the real adapter
// against a real ZooKeeper. root is an existing, empty, chroot-relative
// path the suite may use. Its cases (coordCases) run in order, each on the
// tree under root+"/t" that the ones before it left; the first to fail
// ends the suite and the test.
func CoordinatorConformance(t *testing.T, c ports.ZooKeeper, root string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := root + "/t"
	for _, tc := range coordCases {
		if !t.Run(tc.name, func(t *testing.T) { tc.run(ctx, t, c, p) }) {
			t.FailNow()
		}
	}
}

// coordCase is one named case of CoordinatorConformance: run checks c on
// the tree under p.
type coordCase struct {
	name string
	run  func(ctx context.Context, t *testing.T, c ports.ZooKeeper, p string)
}

// coordCases are CoordinatorConformance's cases, in the order they run.
var coordCases = []coordCase{
	{"create, children and get", coordCreate},
	{"versions", coordVersions},
	{"missing nodes and ACLs", coordMissing},
	{"WaitChildren sees a later child", coordWaitChildren},
	{"DeleteAll is one transaction", coordDeleteAll},
	{"ephemeral nodes", coordEphemeral},
	{"delete what is left", coordCleanup},
}

// coordCreate creates p ("v0") with children b and a ("x"): children come
// back sorted, a node's data at version 0.
func coordCreate(ctx context.Context, t *testing.T, c ports.ZooKeeper, p string) {
	if err := c.Create(ctx, p, []byte("v0"), nil); err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	if err := c.Create(ctx, p+"/b", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, p+"/a", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	kids, err := c.Children(ctx, p)
	if err != nil || !slices.Equal(kids, []string{"a", "b"}) {
		t.Fatalf("children %v %v: want sorted [a b]", kids, err)
	}
	b, st, err := c.Get(ctx, p)
	if err != nil || string(b) != "v0" || st.Version != 0 {
		t.Fatalf("get: %q %+v %v", b, st, err)
	}
}

// coordVersions: a set at the node's version bumps it, a stale version is
// a bad-version error for set and delete, and a node with children is not
// deleted.
func coordVersions(ctx context.Context, t *testing.T, c ports.ZooKeeper, p string) {
	if st, err := c.Set(ctx, p, []byte("v1"), 0); err != nil || st.Version != 1 {
		t.Fatalf("set: %+v %v", st, err)
	}
	if _, err := c.Set(ctx, p, []byte("v2"), 0); !c.IsBadVersion(err) {
		t.Fatalf("set with a stale version: %v, want a bad-version error", err)
	}
	if err := c.Delete(ctx, p+"/a", 5); !c.IsBadVersion(err) {
		t.Fatalf("delete with a wrong version: %v", err)
	}
	if err := c.Delete(ctx, p, -1); err == nil {
		t.Fatal("delete of a node with children succeeded")
	}
}

// coordMissing: a missing node is a no-node error for Get and a plain
// false for Exists; a node has an ACL.
func coordMissing(ctx context.Context, t *testing.T, c ports.ZooKeeper, p string) {
	if _, _, err := c.Get(ctx, p+"/nope"); !c.IsNoNode(err) {
		t.Fatalf("get of a missing node: %v", err)
	}
	if ok, _, err := c.Exists(ctx, p+"/nope"); ok || err != nil {
		t.Fatalf("exists of a missing node: %v %v", ok, err)
	}
	if acl, err := c.GetACL(ctx, p); err != nil || len(acl) == 0 {
		t.Fatalf("acl: %v %v", acl, err)
	}
}

// coordWaitChildren: WaitChildren returns soon after another call adds a
// child (c). The child is added only once WaitChildren has read p's
// children without it (its first call of cond), so the wait must notice a
// later change.
func coordWaitChildren(ctx context.Context, t *testing.T, c ports.ZooKeeper, p string) {
	done := make(chan []string, 1)
	read := make(chan struct{})
	var first sync.Once
	go func() {
		kids, _ := c.WaitChildren(ctx, p, func(k []string) bool {
			first.Do(func() { close(read) })
			return slices.Contains(k, "c")
		})
		done <- kids
	}()
	select {
	case <-read:
	case kids := <-done:
		t.Fatalf("WaitChildren returned %v before it read the children", kids)
	case <-time.After(5 * time.Second):
		t.Fatal("WaitChildren did not read the children within 5s")
	}
	if err := c.Create(ctx, p+"/c", nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case kids := <-done:
		if !slices.Contains(kids, "c") {
			t.Fatalf("watch returned %v", kids)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitChildren did not notice a new child within 5s")
	}
}

// coordDeleteAll: DeleteAll is one transaction — a wrong version anywhere
// deletes nothing; then all at once.
func coordDeleteAll(ctx context.Context, t *testing.T, c ports.ZooKeeper, p string) {
	if err := c.DeleteAll(ctx, []string{p + "/a", p + "/b"}, []int32{-1, 7}); !c.IsBadVersion(err) {
		t.Fatalf("delete-all with one wrong version: %v, want a bad-version error", err)
	}
	if ok, _, _ := c.Exists(ctx, p+"/a"); !ok {
		t.Fatal("delete-all with one wrong version deleted another node of the transaction")
	}
	if err := c.DeleteAll(ctx, []string{p + "/a", p + "/b"}, []int32{0, 0}); err != nil {
		t.Fatalf("delete-all: %v", err)
	}
	if kids, _ := c.Children(ctx, p); !slices.Equal(kids, []string{"c"}) {
		t.Fatalf("after delete-all: children %v, want [c]", kids)
	}
}

// coordEphemeral: an ephemeral node belongs to this session; a second
// create of it fails and leaves it as it was, it may have no children,
// and it can be deleted like any node (a released lease).
func coordEphemeral(ctx context.Context, t *testing.T, c ports.ZooKeeper, p string) {
	e := p + "/lease"
	if err := c.CreateEphemeral(ctx, e, []byte(`{"run_id":"r1"}`), nil); err != nil {
		t.Fatalf("create ephemeral %s: %v", e, err)
	}
	if b, st, err := c.Get(ctx, e); err != nil || string(b) != `{"run_id":"r1"}` || st.EphemeralOwner == 0 {
		t.Fatalf("get ephemeral: %q %+v %v, want its data and a non-zero ephemeral owner", b, st, err)
	}
	if _, st, _ := c.Get(ctx, p); st.EphemeralOwner != 0 {
		t.Fatalf("a persistent node has ephemeral owner %#x", st.EphemeralOwner)
	}
	if err := c.CreateEphemeral(ctx, e, []byte(`{"run_id":"r2"}`), nil); err == nil || c.IsNoNode(err) {
		t.Fatalf("second create of ephemeral %s: %v, want node-exists", e, err)
	}
	if b, _, _ := c.Get(ctx, e); string(b) != `{"run_id":"r1"}` {
		t.Fatalf("a refused create changed the ephemeral node: %q", b)
	}
	if err := c.Create(ctx, e+"/child", nil, nil); err == nil {
		t.Fatal("a child was created under an ephemeral node")
	}
	if err := c.CreateEphemeral(ctx, p+"/nope/lease", nil, nil); !c.IsNoNode(err) {
		t.Fatalf("ephemeral under a missing parent: %v, want no-node", err)
	}
	if err := c.Delete(ctx, e, 0); err != nil {
		t.Fatalf("delete ephemeral: %v", err)
	}
}

// coordCleanup deletes what the cases left: p and its child c.
func coordCleanup(ctx context.Context, t *testing.T, c ports.ZooKeeper, p string) {
	for _, n := range []string{"/c", ""} {
		if err := c.Delete(ctx, p+n, -1); err != nil {
			t.Fatalf("cleanup %s: %v", p+n, err)
		}
	}
}
