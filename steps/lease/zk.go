package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// ZKPath is where the ZooKeeper-mode lease lives, under the chroot.
const (
	ZKParent = "/kremedy"
	ZKPath   = ZKParent + "/lease"
)

// ZK is the ZooKeeper-mode lease: an ephemeral znode, ZKPath under the
// cluster's chroot, holding the Holder as JSON. It belongs to the run's
// own long-lived ZooKeeper session (zk must be that session, never a
// scan's), so a holder that crashes loses it when its session expires,
// SessionTimeout after its last word to ZooKeeper; a holder that ends
// deletes it. ZooKeeper decides who created it first: there is no window
// in which two runs both hold it.
type ZK struct {
	zk ports.ZooKeeper
	// timeout is the session timeout, for the operator (Expiry).
	timeout time.Duration
}

// NewZK is the lease of the cluster zk is a session of.
func NewZK(zk ports.ZooKeeper, sessionTimeout time.Duration) *ZK {
	return &ZK{zk: zk, timeout: sessionTimeout}
}

var _ ports.Lease = (*ZK)(nil)

func (l *ZK) where() string { return l.zk.Chroot() + ZKPath }

// Expiry: a dead holder's session expires after the session timeout.
func (l *ZK) Expiry() string {
	return fmt.Sprintf("when its ZooKeeper session expires, %s after its kremedy stopped (the session timeout)", l.timeout)
}

// Acquire creates the ephemeral znode; one that exists is another run's
// lease (*ports.LeaseHeldError). The parent is created persistent, with
// the chroot's own ACL (as every znode kremedy writes gets the ACL of what
// it stands for), when missing.
func (l *ZK) Acquire(ctx context.Context, h ports.Holder) (ports.Held, error) {
	data, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	acl, err := l.zk.GetACL(ctx, "/")
	if err != nil {
		return nil, fmt.Errorf("read the ACL of %s: %w", rootOf(l.zk.Chroot()), err)
	}
	if len(acl) == 0 {
		acl = nil
	}
	if ok, _, err := l.zk.Exists(ctx, ZKParent); err != nil {
		return nil, err
	} else if !ok {
		// A concurrent run may create it first: then it exists, as wanted.
		if err := l.zk.Create(ctx, ZKParent, nil, acl); err != nil {
			if ok, _, e := l.zk.Exists(ctx, ZKParent); e != nil || !ok {
				return nil, fmt.Errorf("create %s%s: %w", l.zk.Chroot(), ZKParent, err)
			}
		}
	}
	for range 3 {
		cerr := l.zk.CreateEphemeral(ctx, ZKPath, data, acl)
		if cerr == nil {
			held := &zkHeld{l: l, token: h.Token, data: data, acl: acl}
			if _, st, err := l.zk.Get(ctx, ZKPath); err == nil {
				// Else created, so held: the session it belongs to is not
				// known.
				held.session = st.EphemeralOwner
			}
			return held, nil
		}
		other, err := l.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w; then %w", l.where(), cerr, err)
		}
		if other != nil {
			return nil, &ports.LeaseHeldError{Holder: *other, Where: "ZooKeeper " + l.where()}
		}
		if l.zk.IsNoNode(cerr) {
			return nil, fmt.Errorf("create %s: %w", l.where(), cerr)
		}
		// Gone between the create and the read (its holder ended): again.
	}
	return nil, fmt.Errorf("%w: %s was taken and released three times while kremedy tried to take it; try again", ports.ErrRefused, l.where())
}

// Read returns the holder the znode names (nil when there is none).
func (l *ZK) Read(ctx context.Context) (*ports.Holder, error) {
	h, _, err := l.read(ctx)
	return h, err
}

func (l *ZK) read(ctx context.Context) (*ports.Holder, int32, error) {
	b, st, err := l.zk.Get(ctx, ZKPath)
	if l.zk.IsNoNode(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var h ports.Holder
	if err := json.Unmarshal(b, &h); err != nil || h.RunID == "" {
		// Still a lease: whoever wrote it holds the cluster.
		h = ports.Holder{RunID: "(unreadable)", Runbook: "?", Operator: fmt.Sprintf("ZooKeeper session 0x%x", st.EphemeralOwner), Since: st.Ctime}
	}
	return &h, st.Version, nil
}

// Break deletes the znode whoever's it is.
func (l *ZK) Break(ctx context.Context) (*ports.Holder, error) {
	h, version, err := l.read(ctx)
	if err != nil || h == nil {
		return nil, err
	}
	if err := l.zk.Delete(ctx, ZKPath, version); err != nil && !l.zk.IsNoNode(err) {
		return nil, fmt.Errorf("break the lease of %s: %w", *h, err)
	}
	return h, nil
}

type zkHeld struct {
	l       *ZK
	token   string
	session int64
	// data and acl are the znode as created, to take it again (Check).
	data []byte
	acl  []kafkazk.ACL
}

func (h *zkHeld) Where() string {
	if h.session == 0 {
		return "ZooKeeper " + h.l.where() + ", an ephemeral znode of this kremedy's session"
	}
	return fmt.Sprintf("ZooKeeper %s, an ephemeral znode of this kremedy's session 0x%x", h.l.where(), h.session)
}

func (h *zkHeld) TookOver() *ports.Holder { return nil }

// Check reads the znode: still this holder's, nil. Gone — the run's
// ZooKeeper session expired (go-zookeeper then opens a new one) or someone
// broke the lease — and nobody took it since: this holder creates it again
// on the session it has now, and says so. Another run's: ErrLeaseLost
// naming that run.
func (h *zkHeld) Check(ctx context.Context) (bool, error) {
	cur, _, err := h.l.read(ctx)
	switch {
	case err != nil:
		return false, fmt.Errorf("read the lease %s: %w", h.l.where(), err)
	case cur != nil && cur.Token == h.token:
		return false, nil
	case cur != nil:
		return false, h.lostTo(*cur)
	}
	cerr := h.l.zk.CreateEphemeral(ctx, ZKPath, h.data, h.acl)
	if cerr != nil {
		if other, err := h.l.Read(ctx); err == nil && other != nil && other.Token != h.token {
			return false, h.lostTo(*other)
		}
		return false, fmt.Errorf("%w: %s was gone and could not be taken again: %w", ports.ErrLeaseLost, h.l.where(), cerr)
	}
	if _, st, err := h.l.zk.Get(ctx, ZKPath); err == nil {
		h.session = st.EphemeralOwner
	}
	return true, nil
}

// lostTo: the lease is another run's now.
func (h *zkHeld) lostTo(other ports.Holder) error {
	return fmt.Errorf("%w: %s is now held by %s (the lease lapsed or was broken during the run)", ports.ErrLeaseLost, h.l.where(), other)
}

// Release deletes the znode if it is still this holder's.
func (h *zkHeld) Release(ctx context.Context) error {
	cur, version, err := h.l.read(ctx)
	switch {
	case err != nil:
		return err
	case cur == nil:
		return fmt.Errorf("%w: %s was gone (the ZooKeeper session expired during the run, or someone broke the lease)", ports.ErrLeaseLost, h.l.where())
	case cur.Token != h.token:
		return h.lostTo(*cur)
	}
	if err := h.l.zk.Delete(ctx, ZKPath, version); err != nil && !h.l.zk.IsNoNode(err) {
		return fmt.Errorf("delete %s: %w", h.l.where(), err)
	}
	return nil
}

func rootOf(chroot string) string {
	if chroot == "" {
		return "/"
	}
	return chroot
}
