package quorum

import (
	"strings"
	"testing"
)

// TestStartRisk: the empty voters come back one at a time, each only
// while the seed leads and the ones before hold its log; never two empty
// voters of three running without the seed's log.
func TestStartRisk(t *testing.T) {
	v := []int32{3001, 3002, 3003}
	for _, tc := range []struct {
		name string
		r    Rejoin
		node int32
		want string // "" safe; else a piece of the refusal
	}{
		{"the first empty voter beside the leading seed", Rejoin{Voters: v, Seed: 3003, SeedLeads: true, Running: []int32{3003}, Holding: []int32{3003}}, 3001, ""},
		{"the second once the first holds the log", Rejoin{Voters: v, Seed: 3003, SeedLeads: true, Running: []int32{3003, 3001}, Holding: []int32{3003, 3001}}, 3002, ""},
		{"the second while the first is still empty", Rejoin{Voters: v, Seed: 3003, SeedLeads: true, Running: []int32{3003, 3001}, Holding: []int32{3003}}, 3002, "controllers [3001 3002] would run without the seed's log, a majority of the 3 voters (2)"},
		{"an empty voter while the seed is down", Rejoin{Voters: v, Seed: 3003, Running: nil, Holding: []int32{3003}}, 3001, "does not run and lead"},
		{"an empty voter while the seed runs but does not lead", Rejoin{Voters: v, Seed: 3003, Running: []int32{3003}, Holding: []int32{3003}}, 3001, "Start the seed first"},
		{"five voters: the second empty one while the first is empty", Rejoin{Voters: []int32{1, 2, 3, 4, 5}, Seed: 1, SeedLeads: true, Running: []int32{1, 2}, Holding: []int32{1}}, 3, ""},
		{"five voters: the third empty one", Rejoin{Voters: []int32{1, 2, 3, 4, 5}, Seed: 1, SeedLeads: true, Running: []int32{1, 2, 3}, Holding: []int32{1}}, 4, "a majority of the 5 voters (3)"},
	} {
		got := tc.r.StartRisk(tc.node)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestStopSeedRisk(t *testing.T) {
	v := []int32{3001, 3002, 3003}
	for _, tc := range []struct {
		name string
		r    Rejoin
		want string
	}{
		{"both others running, even caught up", Rejoin{Voters: v, Seed: 3003, SeedLeads: true, Running: []int32{3001, 3002, 3003}, Holding: v}, "controllers [3001 3002] run besides the seed, a majority of the 3 voters (2)"},
		{"one other running", Rejoin{Voters: v, Seed: 3003, SeedLeads: true, Running: []int32{3001, 3003}, Holding: []int32{3001, 3003}}, ""},
		{"no other running", Rejoin{Voters: v, Seed: 3003, SeedLeads: true, Running: []int32{3003}, Holding: []int32{3003}}, ""},
		{"five voters, two others running", Rejoin{Voters: []int32{1, 2, 3, 4, 5}, Seed: 1, Running: []int32{1, 2, 3}}, ""},
		{"five voters, three others running", Rejoin{Voters: []int32{1, 2, 3, 4, 5}, Seed: 1, Running: []int32{1, 2, 3, 4}}, "Stop all but 2 of them first"},
	} {
		got := tc.r.StopSeedRisk()
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
