package roll

// This file holds the rule a roll applies: the Guard that reads a
// Snapshot of the cluster, what stopping nodes would break (Risks,
// RisksOf), the partitions no restart can keep available, and the
// operator's acceptance of them.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// Guard is a Nodes that can read what a stop must not break. Rolls of
// brokers have one: each stop is planned only when the one stop-safety
// rule (brokers.StopRisks) allows it, and is read again right before it
// (the PhaseSafe action). A roll whose Nodes is no Guard has no safe
// action.
type Guard interface {
	Snapshot(ctx context.Context, env *steps.Env) (*Snapshot, error)
}

// Snapshot is the cluster as a Guard read it at one moment.
type Snapshot struct {
	// Problems say why the cluster is not whole besides its partitions (a
	// broker not registered, one that does not list another).
	Problems   []string
	Partitions []brokers.Partition
	MinISR     brokers.MinISR
	// Quorum is the KRaft metadata quorum a controller roll judges (nil
	// in a roll of brokers), Margin what each voter's stop leaves of it.
	Quorum *ports.Quorum
	Margin brokers.QuorumMargin
}

// Without is the snapshot without the partitions of topics (topics about
// to be deleted: their own partitions do not count).
func (s *Snapshot) Without(topics ...string) *Snapshot {
	c := *s
	c.Partitions = slices.DeleteFunc(slices.Clone(s.Partitions), func(p brokers.Partition) bool { return slices.Contains(topics, p.Topic) })
	return &c
}

// Broken says why the cluster is not whole: its problems, and the
// partitions already offline or under-replicated.
func (s *Snapshot) Broken() string {
	why := slices.Clone(s.Problems)
	if short := brokers.Short(s.Partitions); len(short) > 0 {
		why = append(why, "partitions already short: "+text.Summarize(short))
	}
	return strings.Join(why, "; ")
}

// Risks is what stopping node id now would break (the one rule), with the
// partitions no restart can keep available (brokers.Unavailables) that
// accept does not cover.
func (s *Snapshot) Risks(id int32, accept brokers.Accept) []string {
	rs := brokers.StopRisks(s.Partitions, []int32{id}, s.MinISR)
	if s.Quorum != nil {
		if r := s.Margin.StopRisk(*s.Quorum, id); r != "" {
			rs = append(rs, r)
		}
	}
	for _, u := range brokers.Unavailables(s.Partitions, []int32{id}, s.MinISR) {
		if !accept.Covers(u.Topic) {
			rs = append(rs, u.String()+": no restart can keep it available")
		}
	}
	slices.Sort(rs)
	return rs
}

// RisksOf is what stopping the nodes of set at once would break: Risks
// for one node, the one rule applied to the whole set for a batch
// (brokers.SetRisks), with the partitions no restart can keep available
// that accept does not cover.
func (s *Snapshot) RisksOf(set []int32, accept brokers.Accept) []string {
	if len(set) == 1 {
		return s.Risks(set[0], accept)
	}
	rs := brokers.SetRisks(s.Partitions, set, s.MinISR)
	for _, u := range brokers.Unavailables(s.Partitions, set, s.MinISR) {
		if !accept.Covers(u.Topic) {
			rs = append(rs, u.String()+": no restart can keep it available")
		}
	}
	slices.Sort(rs)
	return rs
}

// Unavailable lists, by topic, the partitions no restart can keep
// available that the roll of ids takes out of service (each while one of
// its brokers is down), each partition once.
func (s *Snapshot) Unavailable(ids []int32) map[string][]brokers.Unavailable {
	out := map[string][]brokers.Unavailable{}
	seen := map[string]int{}
	for _, id := range ids {
		for _, u := range brokers.Unavailables(s.Partitions, []int32{id}, s.MinISR) {
			if i, ok := seen[u.Key()]; ok {
				out[u.Topic][i].Offline = out[u.Topic][i].Offline || u.Offline
				continue
			}
			seen[u.Key()] = len(out[u.Topic])
			out[u.Topic] = append(out[u.Topic], u)
		}
	}
	return out
}

// AcceptParam is the runbook parameter that accepts the partitions no
// restart can keep available (Roll.Accept).
const AcceptParam = brokers.AcceptParam

// checkAccept refuses an acceptance that names a topic the roll lists no
// such partition of (a typo must not silently accept nothing), and says
// which topics are still not accepted.
func checkAccept(accept brokers.Accept, unavail map[string][]brokers.Unavailable) (refusal string, unaccepted []string) {
	listed := slices.Sorted(maps.Keys(unavail))
	stray := accept.Unlisted(listed)
	for _, t := range listed {
		if !accept.Covers(t) {
			unaccepted = append(unaccepted, t)
		}
	}
	if len(stray) > 0 {
		what := "the roll takes no partition out of service that no restart can keep available"
		if len(listed) > 0 {
			what = "the topics whose partitions no restart can keep available are " + strings.Join(listed, ", ")
		}
		refusal = fmt.Sprintf("%s=%s names %s, but %s: a typo must not accept nothing. Correct it (or leave it out)", AcceptParam, strings.Join(accept, ","), strings.Join(stray, ", "), what)
	}
	return refusal, unaccepted
}
