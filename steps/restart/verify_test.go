package restart_test

import (
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
)

// TestRollVerifyAfterItsLastGate: right after the gate that followed the
// last restart held its rounds, with every broker a new process, the
// roll's Verify reads the cluster once more rather than holding the same
// rounds again, and says so. A subset roll (brokers not restarted), or a
// cluster that no longer reads healthy at that one read, gets the whole
// hold.
func TestRollVerifyAfterItsLastGate(t *testing.T) {
	const said = "the cluster read healthy again: the health gate after the last restart held 3 rounds in a row"
	for _, tc := range []struct {
		name   string
		params map[string]string
		short  bool // a partition falls behind right after the last gate, healed 2 s later
		once   bool
	}{
		{"every broker", nil, false, true},
		{"a subset", map[string]string{"brokers": "1,3"}, false, false},
		{"short at the one read", nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				params := map[string]string{"health_checks": "3", "health_timeout": "30s"}
				for k, v := range tc.params {
					params[k] = v
				}
				f := newFixture(t, params)
				if tc.short {
					fallBehind(f, "gate-3", 2*time.Second)
				}
				out, all := f.runLogged()
				if out.Err != nil {
					t.Fatal(out.Err)
				}
				took := verifyTook(t, f)
				if got := strings.Contains(all, said); got != tc.once {
					t.Fatalf("said %q: %v, want %v (verify took %s)\n%s", said, got, tc.once, took, all)
				}
				// One read takes no time on the test's clock; the whole
				// hold, 3 rounds a second apart, at least 2 s.
				if tc.once && took >= time.Second || !tc.once && took < 2*time.Second {
					t.Fatalf("verify took %s after the last gate (one read: %v)", took, tc.once)
				}
			})
		})
	}
}

// verifyTook is the time on the run's clock from the roll's last action's
// end to the roll step's end: its Verify.
func verifyTook(t *testing.T, f *fixture) time.Duration {
	t.Helper()
	recs, err := journal.Read(filepath.Join(f.s.Dir(), steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	var last, done time.Time
	for _, r := range recs {
		if r.Step != "roll" {
			continue
		}
		switch r.Type {
		case journal.ActionEnd:
			last = r.Time
		case journal.StepDone:
			done = r.Time
		}
	}
	if last.IsZero() || done.IsZero() {
		t.Fatal("no roll action or no end of the roll step in the journal")
	}
	return done.Sub(last)
}
