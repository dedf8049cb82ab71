package restart_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kremedy/kremedy/steps"
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
				var logs []string
				var mu sync.Mutex
				start := time.Now()
				var verified time.Duration
				out := f.s.Run(context.Background(), f.Ports, typing, steps.ReporterFunc(func(ev steps.Event) {
					mu.Lock()
					defer mu.Unlock()
					logs = append(logs, ev.Text)
					verified = time.Since(start)
				}))
				if out.Err != nil {
					t.Fatal(out.Err)
				}
				all := strings.Join(logs, "\n")
				if got := strings.Contains(all, said); got != tc.once {
					t.Fatalf("said %q: %v, want %v (took %s)\n%s", said, got, tc.once, verified, all)
				}
			})
		})
	}
}
