package lab

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestScenarioRegistry holds the registry to what adding a scenario relies
// on: each registered scenario is in ScenarioOrder once, by rank, lives in
// its own scenario_<name>.go, and the story keeps its order.
func TestScenarioRegistry(t *testing.T) {
	if len(ScenarioOrder) != len(Scenarios) {
		t.Fatalf("ScenarioOrder %v, Scenarios has %d", ScenarioOrder, len(Scenarios))
	}
	for i, n := range ScenarioOrder {
		s, ok := Scenarios[n]
		if !ok || s.Name != n || s.Run == nil || s.Summary == "" {
			t.Errorf("Scenarios[%q] = %+v, %v", n, s, ok)
		}
		if i > 0 && scenarioRank[ScenarioOrder[i-1]] >= scenarioRank[n] {
			t.Errorf("%s (rank %d) after %s (rank %d)", n, scenarioRank[n], ScenarioOrder[i-1], scenarioRank[ScenarioOrder[i-1]])
		}
		file := "scenario_" + strings.ReplaceAll(n, "-", "_") + ".go"
		if _, err := os.Stat(file); err != nil {
			t.Errorf("scenario %s: %v (one file per scenario)", n, err)
		}
	}
	// The report's story: a later scenario may start with an earlier one
	// (ghost-topic and reused-segments begin with stuck-delete).
	story := []string{"stuck-delete", "ghost-topic", "reused-segments", "stale-metadata", "partition-increase", "ghost-assignment", "broker-crash"}
	var got []string
	for _, n := range ScenarioOrder {
		if slices.Contains(story, n) {
			got = append(got, n)
		}
	}
	if !slices.Equal(got, story) {
		t.Errorf("built-in scenarios in order %v, want %v", got, story)
	}
}
