package steps

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
)

// BreakLease makes the next attempt (Run) break the cluster's lease,
// whoever holds it, before it takes it (`--break-lease`): for a holder the
// operator made sure is dead. The journal names the holder it broke.
func (s *Session) BreakLease() { s.breakLease = true }

// leaseHolder is this attempt as the lease names it.
func (s *Session) leaseHolder() ports.Holder {
	dir, err := filepath.Abs(s.run.dir)
	if err != nil {
		dir = s.run.dir
	}
	return newHolder(s.run.meta.ID, s.run.meta.Runbook, dir, s.run.rec.clock().UTC())
}

// newHolder names this process as a lease holder: the run (or command),
// the user at this machine, its pid, a fresh token.
func newHolder(runID, runbook, dir string, since time.Time) ports.Holder {
	host, _ := os.Hostname()
	op := "unknown"
	if u, err := user.Current(); err == nil {
		op = u.Username
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return ports.Holder{RunID: runID, Runbook: runbook, Operator: op + "@" + host, Host: host, PID: os.Getpid(),
		Dir: dir, Since: since, Token: hex.EncodeToString(b)}
}

// takeLease takes the cluster's lease before the attempt's first change
// and returns what gives it back (safe to call more than once). There is
// none to take for a dry run or a cluster without one (c.Lease nil). A
// lease held by an earlier attempt of this same run (killed before its
// lease lapsed) is taken back; one held by another run refuses the
// attempt, naming that run and the ways forward.
func (s *Session) takeLease(ctx context.Context, c ports.Cluster) (release func(), err error) {
	release = func() {}
	if c.Lease == nil || s.run.meta.DryRun || s.run.preview {
		return release, nil
	}
	l := c.Lease
	brk := s.breakLease
	s.breakLease = false // once: a retry must not break a lease taken since
	if brk {
		old, err := l.Break(ctx)
		if err != nil {
			return release, fmt.Errorf("--break-lease: %w; %w", err, ErrNothingDone)
		}
		if old != nil {
			s.Notef("lease", "--break-lease: broke the cluster's lease held by %s", old)
		} else {
			s.Notef("lease", "--break-lease: no lease was held on the cluster")
		}
	}
	me := s.leaseHolder()
	held, err := l.Acquire(ctx, me)
	var he *ports.LeaseHeldError
	if errors.As(err, &he) && he.Holder.SameRun(me) {
		// This run's own lease (its id, its run directory, this machine):
		// an earlier attempt was killed and its lease has not lapsed yet.
		// The journal's lock proves no other kremedy runs this run now.
		if _, err := l.Break(ctx); err != nil {
			return release, fmt.Errorf("take back this run's own lease (%s): %w; %w", he.Holder, err, ErrNothingDone)
		}
		s.Notef("lease", "the cluster's lease was still held by an earlier attempt of this run (%s): taken back", he.Holder)
		held, err = l.Acquire(ctx, me)
	}
	if errors.As(err, &he) {
		s.Notef("lease", "refused: %s holds the cluster's lease (%s); nothing was done", he.Holder, he.Where)
		return release, fmt.Errorf("%w: %w; %w.\n  Wait for that run to end. If it is dead (its kremedy killed, its machine gone), its lease lapses by itself %s; "+
			"or, once you have made sure it is not going on, pass --break-lease to `kremedy run` or `kremedy resume` (the journal records whose lease was broken)",
			ErrRefused, he, ErrNothingDone, l.Expiry())
	}
	if err != nil {
		s.Notef("lease", "could not take the cluster's lease: %v; nothing was done", err)
		return release, fmt.Errorf("take the cluster's lease: %w; %w", err, ErrNothingDone)
	}
	if old := held.TookOver(); old != nil {
		s.Notef("lease", "took over the EXPIRED lease of %s (no heartbeat for longer than its expiry: its kremedy died)", old)
	}
	s.Notef("lease", "took the cluster's lease: %s; held at %s, until this attempt ends", me, held.Where())
	s.run.held = held
	var once sync.Once
	return func() {
		once.Do(func() {
			// Given back even when the attempt was cancelled (Ctrl-C).
			s.run.held = nil
			if err := giveBack(ctx, held); err != nil {
				s.Notef("lease", "the cluster's lease was not given back cleanly: %v", err)
				return
			}
			// Said, not journaled: the run's last record (its end, its
			// interruption) already says when the attempt ended.
			s.run.rec.emit(Event{Step: "lease", Kind: EvLog, Text: "gave the cluster's lease back"})
		})
	}, nil
}

// checkLease makes sure, before step changes the cluster, that the lease
// this attempt took is still its own (nil when it took none: a dry run, a
// cluster without one). A lease that lapsed with nobody taking it (the
// ZooKeeper session expired) is taken again, and the journal says so; one
// that is lost stops the step before that change, naming the way forward;
// done says what of the step was done.
func (r *run) checkLease(ctx context.Context, step, done string) error {
	held := r.held
	if held == nil {
		return nil
	}
	retaken, err := held.Check(ctx)
	if err == nil {
		if retaken {
			r.notef("lease", "the cluster's lease had lapsed during the run (this kremedy's ZooKeeper session expired, or someone broke the lease) and no other run had taken it: taken again in step %s, before its next change (%s)", step, held.Where())
		}
		return nil
	}
	r.notef("lease", "step %s, before its next change: %v; the step goes no further", step, err)
	return fmt.Errorf("%w: %w; step %s goes no further: %s.\n  Another kremedy run may be changing this cluster now: see who holds the lease (`kremedy diagnose` names it) and wait for that run to end; "+
		"then `kremedy resume %s` takes the lease again and re-checks every step already done", ErrRefused, err, step, done, r.dir)
}

// HoldLease runs fn while holding the cluster's lease for a command that
// changes the cluster outside a run (`znodes restore`, `segments
// restore`): what says what it is. A lease another run holds refuses,
// naming it and the ways forward, before fn runs; brk breaks it first
// (`--break-lease`, said on out). A cluster without a lease (l nil) runs
// fn as it is.
func HoldLease(ctx context.Context, l ports.Lease, what string, brk bool, out io.Writer, fn func() error) error {
	if l == nil {
		return fn()
	}
	if brk {
		old, err := l.Break(ctx)
		if err != nil {
			return fmt.Errorf("--break-lease: %w; %w", err, ErrNothingDone)
		}
		if old != nil {
			fmt.Fprintf(out, "--break-lease: broke the cluster's lease held by %s\n", old)
		}
	}
	now := time.Now().UTC()
	me := newHolder(now.Format("20060102T150405Z")+"-"+strings.ReplaceAll(what, " ", "-"), what, "", now)
	held, err := l.Acquire(ctx, me)
	var he *ports.LeaseHeldError
	if errors.As(err, &he) {
		return fmt.Errorf("%w: %w; %w.\n  A run may be changing this cluster now: wait for it to end (a dead holder's lease lapses by itself %s); "+
			"or, once you have made sure it is not going on, pass --break-lease", ErrRefused, he, ErrNothingDone, l.Expiry())
	}
	if err != nil {
		return fmt.Errorf("take the cluster's lease: %w; %w", err, ErrNothingDone)
	}
	fmt.Fprintf(out, "took the cluster's lease for %s: %s\n", what, held.Where())
	ferr := fn()
	if err := giveBack(ctx, held); err != nil {
		fmt.Fprintf(out, "the cluster's lease was not given back cleanly: %v\n", err)
	}
	return ferr
}

// giveBack releases held, even when ctx was cancelled (Ctrl-C), within
// 30 s.
func giveBack(ctx context.Context, held ports.Held) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return held.Release(rctx)
}
