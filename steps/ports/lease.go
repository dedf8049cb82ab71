package ports

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lease is the cluster's lease: at most one kremedy run changes a cluster
// at a time. It is held on the cluster itself (an ephemeral znode in
// ZooKeeper mode, a lock directory on a majority of the KRaft controller
// hosts), so that two operators with two run directories, or one operator
// in two terminals, meet it; a lock on one run's own journal cannot see
// the other run. The adapters are in steps/lease.
type Lease interface {
	// Acquire takes the lease for h. A lease another run holds is a
	// *LeaseHeldError naming it; one that cannot be taken for another
	// reason (the controller hosts did not answer) wraps ErrRefused.
	Acquire(ctx context.Context, h Holder) (Held, error)
	// Read returns the holder of the lease, nil when it is free.
	Read(ctx context.Context) (*Holder, error)
	// Break removes the lease whoever holds it and returns who did (nil:
	// nobody). It is for a holder the operator made sure is dead.
	Break(ctx context.Context) (*Holder, error)
	// Expiry says when a dead holder's lease lapses by itself, for the
	// operator ("with its ZooKeeper session, 10s after its kremedy
	// stopped").
	Expiry() string
}

// Held is a lease this run holds.
type Held interface {
	// Where says where the lease is held ("ZooKeeper /kafka/kremedy/lease,
	// an ephemeral znode of session 0x…"), for the journal.
	Where() string
	// TookOver is the expired lease of a dead run this one replaced (nil:
	// the lease was free).
	TookOver() *Holder
	// Check says whether the lease is still this run's, before a step
	// changes the cluster. A lease that lapsed while nobody took it is
	// taken again (retaken true: in ZooKeeper mode the run's session
	// expired and the client opened a new one). One another run holds, or
	// one this run cannot be sure of any more (no heartbeat reached a
	// majority of the controller hosts within the expiry), is an error
	// wrapping ErrLeaseLost; one that cannot be read is another error.
	Check(ctx context.Context) (retaken bool, err error)
	// Release gives the lease up. A lease that was lost meanwhile (its
	// session expired, another run broke it) is an error wrapping
	// ErrLeaseLost.
	Release(ctx context.Context) error
}

// Holder is who holds a lease: the run, the person and the machine.
type Holder struct {
	RunID   string `json:"run_id"`
	Runbook string `json:"runbook"`
	// Operator is the user running kremedy, at the machine it runs on
	// (user@host); Host that machine, PID its process.
	Operator string `json:"operator"`
	Host     string `json:"host"`
	PID      int    `json:"pid,omitempty"`
	// Dir is the run directory (absolute): with Host and RunID it names
	// the run (two runs started in the same second can share an id).
	Dir   string    `json:"dir,omitempty"`
	Since time.Time `json:"since"`
	// Heartbeat is the holder's last heartbeat (KRaft mode; a ZooKeeper
	// session is its own heartbeat).
	Heartbeat time.Time `json:"heartbeat,omitzero"`
	// Token tells this holder's lease from any other, the same run's
	// earlier attempt's included.
	Token string `json:"token"`
	// Expired: Read found the holder's heartbeat older than the expiry
	// (the lease lapsed; a new run takes it over).
	Expired bool `json:"-"`
}

// SameRun reports whether o is the lease of the same run as h: the same
// id, in the same run directory on the same machine (a resume of it).
func (h Holder) SameRun(o Holder) bool {
	return h.RunID == o.RunID && h.Dir == o.Dir && h.Host == o.Host
}

// String names the holder for a person: "run R (runbook B) by op@host
// since 2026-12-05 16:11:35 UTC".
func (h Holder) String() string {
	s := fmt.Sprintf("run %s (%s) by %s", h.RunID, h.Runbook, h.Operator)
	if h.PID != 0 {
		s += fmt.Sprintf(", pid %d on %s", h.PID, h.Host)
	}
	s += " since " + h.Since.UTC().Format("2006-01-02 15:04:05 UTC")
	if !h.Heartbeat.IsZero() {
		s += ", last heartbeat " + h.Heartbeat.UTC().Format("15:04:05 UTC")
	}
	return s
}

// ErrLeaseHeld: another kremedy run holds the cluster's lease.
var ErrLeaseHeld = errors.New("another kremedy run holds the cluster's lease")

// ErrLeaseLost: the lease this run held was gone when it looked again.
var ErrLeaseLost = errors.New("the cluster's lease was lost")

// LeaseHeldError names the run that holds the lease.
type LeaseHeldError struct {
	Holder Holder
	// Where the lease was found held.
	Where string
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%v: %s (%s)", ErrLeaseHeld, e.Holder, e.Where)
}

func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }
