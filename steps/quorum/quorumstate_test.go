package quorum

import "testing"

func TestSeedState(t *testing.T) {
	// The file 3.9.2 wrote on the lab's seed after a crashed start.
	e, err := StateEpoch([]byte(`{"clusterId":"","leaderId":3003,"leaderEpoch":30,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":3003}],"data_version":0}`))
	if err != nil || e != 30 {
		t.Fatalf("epoch %d, %v", e, err)
	}
	got := string(SeedState(3002, 41))
	want := `{"clusterId":"","leaderId":-1,"leaderEpoch":41,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":3002}],"data_version":0}`
	if got != want {
		t.Fatalf("seed state\n%s\nwant\n%s", got, want)
	}
	if _, err := StateEpoch([]byte("{")); err == nil {
		t.Fatal("a torn quorum-state parsed")
	}
}
