package quorum

import (
	"encoding/json"
	"fmt"
)

// quorumState is a KRaft node's quorum-state file (QuorumStateData, the
// version 0 shape 3.9 writes for a static quorum: the election it last
// saw and the voters).
type quorumState struct {
	ClusterID     string        `json:"clusterId"`
	LeaderID      int32         `json:"leaderId"`
	LeaderEpoch   int32         `json:"leaderEpoch"`
	VotedID       int32         `json:"votedId"`
	AppliedOffset int64         `json:"appliedOffset"`
	CurrentVoters []quorumVoter `json:"currentVoters"`
	DataVersion   int           `json:"data_version"`
}

type quorumVoter struct {
	VoterID int32 `json:"voterId"`
}

// StateEpoch is the epoch a quorum-state file holds.
func StateEpoch(b []byte) (int32, error) {
	var s quorumState
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("quorum-state: %w", err)
	}
	return s.LeaderEpoch, nil
}

// SeedState is the quorum-state the seed starts from as the one voter of
// a static quorum: no leader and no vote, at epoch — the highest epoch
// any node's quorum-state holds, never lower. Raft epochs never go back:
// the brokers and controllers that watched the lone survivor stand for
// election again and again hold a higher epoch than its log's, and they
// ignore a leader of a lower one (on 3.9.2 a broker stays Unattached at
// its epoch and never fetches again). Nor may the file keep the seed's
// own vote: 3.9.2 started as the only voter from a state where it voted
// for itself dies ("IllegalStateException: Cannot transition to
// Candidate … already a Leader"). Unattached at that epoch, the seed
// stands at epoch+1 and leads.
func SeedState(seed, epoch int32) []byte {
	b, _ := json.Marshal(quorumState{LeaderID: -1, LeaderEpoch: epoch, VotedID: -1,
		CurrentVoters: []quorumVoter{{VoterID: seed}}})
	return b
}
