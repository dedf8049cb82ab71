package quorum

import (
	"fmt"
	"slices"
)

// Rejoin is where the quorum stands while quorum-recovery brings the other
// controllers back empty around the seed: the full voter set they come
// back with, the seed's controller, whether it runs and leads (alone, as
// its rewritten voter set says), which voters run and which of them hold
// the seed's log up to its end (the seed itself, and an empty voter once it
// has fetched that far).
type Rejoin struct {
	Voters    []int32
	Seed      int32
	SeedLeads bool
	Running   []int32
	Holding   []int32
}

// StartRisk is the one rule for starting an empty voter during the
// recovery: refused unless the seed runs and leads, and unless the running
// voters that lack the seed's log — this one included — stay fewer than a
// majority of the full voter set. Two empty voters of three running without
// the seed are a majority: they elect a leader whose log holds nothing, and
// the committed metadata is gone from the quorum ("If a majority of the
// controllers were able to start with an empty log directory, a leader
// might be able to be elected with missing committed data", Apache Kafka,
// docs/operations, KRaft). "" when it is safe, else why not.
func (r Rejoin) StartRisk(node int32) string {
	if !r.SeedLeads || !slices.Contains(r.Running, r.Seed) {
		return fmt.Sprintf("controller %d would start empty while the seed (controller %d) does not run and lead: the empty voters could elect a leader without the committed metadata. Start the seed first", node, r.Seed)
	}
	lacking := r.lacking(append(slices.Clone(r.Running), node))
	if len(lacking) >= r.majority() {
		return fmt.Sprintf("controllers %v would run without the seed's log, a majority of the %d voters (%d): they could elect a leader without the committed metadata. Wait until the voters started before hold the seed's log (caught up to its end)", lacking, len(r.Voters), r.majority())
	}
	return ""
}

// StopSeedRisk is the rule for restarting the seed with the full voter
// set (its last step): refused while the other voters running are a
// majority of the full set. A one-voter leader commits alone, a NoOp record
// every metadata.max.idle.interval.ms (500 ms), so no other voter is ever
// known to hold everything it committed: two others running while it
// restarts elect a leader without its last records, and every broker that
// fetched them dies ("The leader requested truncation to offset N, which
// is below the current high watermark", seen on 3.9.2 in the lab). With
// fewer than a majority running, no leader comes until the seed is back,
// and then the seed wins: its log is the longest of the last epoch.
func (r Rejoin) StopSeedRisk() string {
	var others []int32
	for _, v := range r.Running {
		if v != r.Seed && slices.Contains(r.Voters, v) {
			others = append(others, v)
		}
	}
	if len(others) >= r.majority() {
		return fmt.Sprintf("controllers %v run besides the seed, a majority of the %d voters (%d): restarted, the seed could come back to a leader elected without the last records it committed alone. Stop all but %d of them first", others, len(r.Voters), r.majority(), r.majority()-1)
	}
	return ""
}

func (r Rejoin) majority() int { return len(r.Voters)/2 + 1 }

// lacking are the voters among running that do not hold the seed's log.
func (r Rejoin) lacking(running []int32) []int32 {
	var out []int32
	for _, v := range running {
		if slices.Contains(r.Voters, v) && !slices.Contains(r.Holding, v) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}
