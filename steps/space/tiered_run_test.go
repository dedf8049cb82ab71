package space_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestLowerLocalRunsAndSetsBack: on a running broker whose full dir holds
// a tiered topic's uploaded segments, the run sets its local retention to
// 0 (it had no override); the broker has not deleted the copies when the
// wait ends, so the step fails naming them and the resume; once they are
// gone the resume goes on, and the last step deletes the override again.
// An override changed by someone else meanwhile is left as it is.
func TestLowerLocalRunsAndSetsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := fullBroker1(t)
		r := steptest.NewReassigning(g.Kafka)
		g.Ports.Kafka = r
		g.Kafka.TieredUpTo = map[string]map[int32]int64{"orders": {0: 34}}
		rb, err := runbooks.Get("disk-full")
		must(t, err)
		bound, err := rb.Bind(map[string]string{"broker": "1", "health_timeout": "1s", "free_timeout": "1m"}, g.Ports.Target.Name)
		must(t, err)
		s, err := steps.Create(t.TempDir(), bound, steps.Meta{ID: "tier1", Runbook: rb.Name, Params: bound.Params, Cluster: g.Ports.Target.Name})
		must(t, err)
		defer s.Close()
		ctx := context.Background()
		out := s.Run(ctx, g.Ports, &typing{plans: map[string]*steps.Plan{}}, nil)
		if out.Failed != "lower-local" || out.Err == nil || !strings.Contains(out.Err.Error(), "orders-0 (2.0 MiB of copies)") || !strings.Contains(out.Err.Error(), "`kremedy resume`") {
			t.Fatalf("want lower-local failing on the copies still there, naming the resume: %+v", out)
		}
		if !slices.Contains(r.Done, "set topic orders local.retention.bytes=0") {
			t.Fatalf("the config was not lowered: %v", r.Done)
		}
		// The broker deletes orders-0's segments 0 and 20.
		var kept []string
		for _, l := range g.Hosts.Space[1]["/data/k1"] {
			if !strings.Contains(l, "orders-0/00000000000000000000.") && !strings.Contains(l, "orders-0/00000000000000000020.") {
				kept = append(kept, l)
			}
		}
		g.Hosts.Space[1]["/data/k1"] = kept
		time.Sleep(time.Second)
		out = s.Run(ctx, g.Ports, &typing{plans: map[string]*steps.Plan{}}, nil)
		if out.Err != nil && out.Failed == "lower-local" || !slices.Contains(out.Done, "restore-local") {
			t.Fatalf("resume: %+v", out)
		}
		if !slices.Contains(r.Done, "delete topic orders local.retention.bytes") {
			t.Fatalf("the override the run set was not deleted (there was none before): %v", r.Done)
		}
		if ov, _ := r.Overrides(ctx, []string{"local.retention.bytes"}, nil, []string{"orders"}); len(ov) != 0 {
			t.Fatalf("orders keeps an override: %+v", ov)
		}
	})
}
