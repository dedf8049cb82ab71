package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestZKLeaseReleaseIsTheHoldersOnly: a holder whose lease was lost (its
// session expired, another run broke it and took it) is told so on
// release, and never deletes the other run's lease.
func TestZKLeaseReleaseIsTheHoldersOnly(t *testing.T) {
	ctx := context.Background()
	z := steptest.NewZK(t, "/kafka")
	a, b := NewZK(z.As(0xa), 10*time.Second), NewZK(z.As(0xb), 10*time.Second)
	held, err := a.Acquire(ctx, holder("run-a", "tok-a", t0))
	if err != nil {
		t.Fatal(err)
	}
	z.Expire(0xa)
	if err := held.Release(ctx); !errors.Is(err, ports.ErrLeaseLost) {
		t.Fatalf("release after the session expired: %v, want ErrLeaseLost", err)
	}
	held, err = a.Acquire(ctx, holder("run-a", "tok-a2", t0))
	if err != nil {
		t.Fatal(err)
	}
	if old, err := b.Break(ctx); err != nil || old == nil || old.Token != "tok-a2" {
		t.Fatalf("break: %+v %v", old, err)
	}
	if _, err := b.Acquire(ctx, holder("run-b", "tok-b", t0)); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); !errors.Is(err, ports.ErrLeaseLost) {
		t.Fatalf("release of a broken lease: %v, want ErrLeaseLost", err)
	}
	if h, _ := a.Read(ctx); h == nil || h.RunID != "run-b" {
		t.Fatalf("run-b's lease after run-a's release: %+v", h)
	}
	// A znode that is not kremedy's JSON still holds the cluster.
	z.Remove(ZKPath)
	z.PutEphemeral(ZKPath, "garbage", 0xc)
	if _, err := a.Acquire(ctx, holder("run-a", "tok-a3", t0)); err == nil {
		t.Fatal("an unreadable lease was taken over")
	}
}
