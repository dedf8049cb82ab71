package diagnose_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/lease"
	"github.com/kremedy/kremedy/steps/ports"
)

// TestLeaseHeldIsANote: a run holding the cluster's lease is an info
// finding of its own naming it (the diagnosis stays healthy, nothing is
// written); a run's own diagnosis (Options.Lease false) does not report
// it.
func TestLeaseHeldIsANote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		alice := ports.Holder{RunID: "20261205T101010Z-rolling-restart-prod", Runbook: "rolling-restart", Operator: "alice@bastion", Host: "bastion",
			PID: 4242, Since: time.Date(2026, 12, 5, 10, 10, 10, 0, time.UTC), Token: "a11ce"}
		if _, err := lease.NewZK(f.zk.As(0xa11ce), 10*time.Second).Acquire(context.Background(), alice); err != nil {
			t.Fatal(err)
		}
		ops := slices.Clone(f.zk.Ops)
		f.Ports.Lease = lease.NewZK(f.zk, 10*time.Second)
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2", Lease: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(d); !slices.Equal(got, []string{"lease-held:"}) || !d.Healthy {
			t.Fatalf("findings %v (healthy %v), want lease-held alone, healthy", got, d.Healthy)
		}
		fd := d.Findings[0]
		if fd.Severity != diagnose.Info || fd.Summary != "a kremedy run holds this cluster: run 20261205T101010Z-rolling-restart-prod (rolling-restart) by alice@bastion since 2026-12-05 10:10:10 UTC" {
			t.Errorf("finding %s %q", fd.Severity, fd.Summary)
		}
		if !strings.Contains(fd.Fix, "10s after its kremedy stopped") || !strings.Contains(fd.Fix, "--break-lease") || !strings.Contains(fd.Evidence[0], "pid 4242 on bastion") {
			t.Errorf("fix %q, evidence %q", fd.Fix, fd.Evidence)
		}
		if !slices.Equal(f.zk.Ops, ops) {
			t.Fatalf("diagnose changed something: %v", f.zk.Ops[len(ops):])
		}
		d, err = diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2"})
		if err != nil || len(d.Findings) != 0 {
			t.Fatalf("a run's own diagnosis: %v %v, want no finding", kinds(d), err)
		}
	})
}
