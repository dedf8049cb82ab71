package brokers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
)

// FetchTimeout is controller.quorum.fetch.timeout.ms's default: a voter
// whose last caught-up time is further behind the leader's is not caught
// up (Strimzi's KafkaRoller rule for rolling controllers,
// docs/kraft-strays-research.md).
const FetchTimeout = 2 * time.Second

// Lagging are the voters of q not caught up with its leader: their last
// caught-up time further than timeout behind the leader's (the leader's
// own is now), or never, each with why.
func Lagging(q ports.Quorum, timeout time.Duration) map[int32]string {
	out := map[int32]string{}
	var leaderAt int64 = -1
	for _, v := range q.Voters {
		if v.ID == q.Leader {
			leaderAt = v.LastCaughtUpMs
		}
	}
	for _, v := range q.Voters {
		switch {
		case v.ID == q.Leader:
		case v.LastCaughtUpMs < 0:
			out[v.ID] = "never caught up"
		case leaderAt >= 0 && time.Duration(leaderAt-v.LastCaughtUpMs)*time.Millisecond > timeout:
			out[v.ID] = fmt.Sprintf("last caught up %s before the leader, log end offset %d of high watermark %d", (time.Duration(leaderAt-v.LastCaughtUpMs) * time.Millisecond).Round(time.Millisecond), v.LogEndOffset, q.HighWatermark)
		}
	}
	return out
}

// QuorumMargin is what a controller's stop leaves of the metadata quorum:
// the voters caught up without it against the majority the voter set
// needs. Down holds the voters not caught up now (Lagging, or not
// listening), with why.
type QuorumMargin struct {
	Voters   int
	Majority int
	// CaughtUp counts the voters caught up now, id included.
	CaughtUp int
	Down     map[int32]string
}

// MarginOf is q's margin with down the voters not caught up now.
func MarginOf(q ports.Quorum, down map[int32]string) QuorumMargin {
	m := QuorumMargin{Voters: len(q.Voters), Majority: len(q.Voters)/2 + 1, Down: down}
	for _, v := range q.Voters {
		if _, bad := down[v.ID]; !bad {
			m.CaughtUp++
		}
	}
	return m
}

// StopRisk is the one stop-safety rule for a KRaft controller: stopping
// voter id must leave a majority of voters caught up without it — else
// the quorum loses its leader or cannot commit, and no topic, ISR or
// config change happens until it is back. "" when it is safe (or id is no
// voter: its stop costs the quorum nothing).
func (m QuorumMargin) StopRisk(q ports.Quorum, id int32) string {
	voter := slices.ContainsFunc(q.Voters, func(v ports.Voter) bool { return v.ID == id })
	if !voter {
		return ""
	}
	left := m.CaughtUp
	if _, bad := m.Down[id]; !bad {
		left--
	}
	if left >= m.Majority {
		return ""
	}
	var down []string
	for _, d := range slices.Sorted(maps.Keys(m.Down)) {
		if d != id {
			down = append(down, fmt.Sprintf("controller %d %s", d, m.Down[d]))
		}
	}
	why := fmt.Sprintf("without controller %d, %d of %d voters are caught up and the quorum needs %d", id, left, m.Voters, m.Majority)
	if len(down) > 0 {
		why += " (" + strings.Join(down, "; ") + ")"
	}
	if m.Voters == 1 {
		why += ": a quorum of one voter has no margin — add voters first (kafka-metadata-quorum add-controller, KIP-853, Kafka 3.9+), or restart it by hand in a window where metadata may stand still"
	}
	return why
}
