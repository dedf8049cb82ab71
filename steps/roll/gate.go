package roll

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Gate is the health gate after brokers restart: every broker registered,
// a controller, no offline or under-replicated partition, and every
// broker's own metadata agreeing.
type Gate struct {
	// Want are the brokers that must be registered (the inventory's).
	Want []int32
	// Excused, when set, reports whether an unhealthy partition ("topic-p")
	// was already so before the run and is no worse: it is named, not
	// counted.
	Excused func(key string, p ports.PartitionView) bool
	// Rolling: brokers restart one at a time. A topic ZooKeeper does not
	// have is a stale entry in a broker's cache, which only that broker's
	// restart clears: on the brokers in Pending (not restarted yet) it is
	// named and not compared; on any other broker it fails the gate.
	Rolling bool
	Pending []int32
}

// Check is one round of the gate's checks.
func (g Gate) Check(ctx context.Context, c ports.Cluster) []steps.Check {
	checks, _ := g.round(ctx, c, func() time.Time { return time.Time{} }) // no pacing to measure
	return checks
}

// Hold holds the gate: n rounds in a row pass within timeout (Hold).
func (g Gate) Hold(ctx context.Context, env *steps.Env, n int, timeout time.Duration) ([]steps.Check, error) {
	return Hold(ctx, env, func() ([]steps.Check, time.Duration) { return g.round(ctx, env.Cluster, env.Now) }, n, timeout)
}

// round is one round of the gate's checks, and how long a broker
// typically took to answer in it (on now's clock).
func (g Gate) round(ctx context.Context, c ports.Cluster, now func() time.Time) ([]steps.Check, time.Duration) {
	reg, err := brokers.Registered(ctx, c.ZK)
	if err != nil {
		return []steps.Check{{Name: "ZooKeeper answers", OK: false, Detail: err.Error()}}, 0
	}
	ctrl, _ := brokers.Controller(ctx, c.ZK)
	checks := []steps.Check{
		{Name: "every broker registered", OK: slices.Equal(reg, g.Want), Detail: "registered " + fmt.Sprint(reg)},
		{Name: "a controller is elected", OK: ctrl >= 0, Detail: fmt.Sprintf("controller %d", ctrl)},
	}
	var inZK map[string]bool
	if g.Rolling {
		names, err := c.ZK.Children(ctx, kafkazk.TopicsPath)
		if err != nil && !c.ZK.IsNoNode(err) {
			return append(checks, steps.Check{Name: "ZooKeeper answers", OK: false, Detail: err.Error()}), 0
		}
		inZK = map[string]bool{}
		for _, n := range names {
			inZK[n] = true
		}
	}
	var offline, urp, disagree, before, stale, pendingStale []string
	var ref *ports.BrokerView
	// Every broker at once: a round reads as long as its slowest broker,
	// not their sum (a broker just restarted costs its first read a retry).
	views, errs, read := readViews(ctx, c.Kafka, g.Want, now)
	for i, id := range g.Want {
		v, err := views[i], errs[i]
		if err != nil {
			disagree = append(disagree, fmt.Sprintf("broker %d: %v", id, err))
			continue
		}
		for name, t := range v.Topics {
			if inZK != nil && !inZK[name] {
				if slices.Contains(g.Pending, id) {
					pendingStale = append(pendingStale, fmt.Sprintf("broker %d still serves %s (its restart clears it)", id, name))
				} else {
					stale = append(stale, fmt.Sprintf("broker %d serves %s, which ZooKeeper does not have", id, name))
				}
				delete(v.Topics, name)
				continue
			}
			for _, p := range t.Partitions {
				off, under := p.IsOffline(), p.UnderReplicated()
				if !off && !under {
					continue
				}
				key := fmt.Sprintf("%s-%d", name, p.Partition)
				switch {
				case g.Excused != nil && g.Excused(key, p):
					before = append(before, key) // no worse than before the run
				case off:
					offline = append(offline, key)
				default:
					urp = append(urp, key)
				}
			}
		}
		if ref == nil {
			ref = &v
		} else if d := brokers.ViewDiff(*ref, v); d != "" {
			disagree = append(disagree, d)
		}
	}
	slices.Sort(before)
	already := ""
	if before = slices.Compact(before); len(before) > 0 {
		already = "; no longer counted after the grace, already so before the run and no worse now: " + text.Summarize(before)
	}
	agree := text.Summarize(disagree)
	if len(pendingStale) > 0 {
		agree += "; not compared: " + text.Summarize(pendingStale)
	}
	checks = append(checks,
		steps.Check{Name: "no offline partition", OK: len(offline) == 0, Detail: text.Summarize(offline) + already},
		steps.Check{Name: "no under-replicated partition", OK: len(urp) == 0, Detail: text.Summarize(urp) + already},
		steps.Check{Name: "every broker's metadata agrees", OK: len(disagree) == 0, Detail: agree},
	)
	if g.Rolling {
		checks = append(checks, steps.Check{Name: "no restarted broker serves a topic ZooKeeper does not have", OK: len(stale) == 0, Detail: text.Summarize(stale)})
	}
	return checks, read
}
