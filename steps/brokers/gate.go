package brokers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
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

// Hold runs check once a second until n rounds in a row pass, or timeout
// (then ErrCheckFailed naming what failed last), reporting progress every
// five rounds.
func Hold(ctx context.Context, env *steps.Env, check func() []steps.Check, n int, timeout time.Duration) ([]steps.Check, error) {
	start := env.Now()
	streak := 0
	var last []steps.Check
	for round := 1; ; round++ {
		last = check()
		if steps.AllOK(last) {
			if streak++; streak >= n {
				return last, nil
			}
		} else {
			streak = 0
		}
		if round%5 == 0 {
			env.Progress("%s", GateProgress(last, streak, n, env.Now().Sub(start), timeout))
		}
		if env.Now().Sub(start) > timeout || ctx.Err() != nil {
			return last, fmt.Errorf("%w: the cluster was not healthy within %s: %s", steps.ErrCheckFailed, timeout, steps.Failing(last))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// Check is one round of the gate's checks.
func (g Gate) Check(ctx context.Context, c ports.Cluster) []steps.Check {
	reg, err := Registered(ctx, c.ZK)
	if err != nil {
		return []steps.Check{{Name: "ZooKeeper answers", OK: false, Detail: err.Error()}}
	}
	ctrl, _ := Controller(ctx, c.ZK)
	checks := []steps.Check{
		{Name: "every broker registered", OK: slices.Equal(reg, g.Want), Detail: "registered " + I32s(reg)},
		{Name: "a controller is elected", OK: ctrl >= 0, Detail: fmt.Sprintf("controller %d", ctrl)},
	}
	var inZK map[string]bool
	if g.Rolling {
		names, err := c.ZK.Children(ctx, kafkazk.TopicsPath)
		if err != nil && !c.ZK.IsNoNode(err) {
			return append(checks, steps.Check{Name: "ZooKeeper answers", OK: false, Detail: err.Error()})
		}
		inZK = map[string]bool{}
		for _, n := range names {
			inZK[n] = true
		}
	}
	var offline, urp, disagree, before, stale, pendingStale []string
	var ref *ports.BrokerView
	for _, id := range g.Want {
		v, err := c.Kafka.BrokerView(ctx, id)
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
		} else if d := ViewDiff(*ref, v); d != "" {
			disagree = append(disagree, d)
		}
	}
	slices.Sort(before)
	already := ""
	if before = slices.Compact(before); len(before) > 0 {
		already = "; no longer counted after the grace, already so before the run and no worse now: " + Summarize(before)
	}
	agree := Summarize(disagree)
	if len(pendingStale) > 0 {
		agree += "; not compared: " + Summarize(pendingStale)
	}
	checks = append(checks,
		steps.Check{Name: "no offline partition", OK: len(offline) == 0, Detail: Summarize(offline) + already},
		steps.Check{Name: "no under-replicated partition", OK: len(urp) == 0, Detail: Summarize(urp) + already},
		steps.Check{Name: "every broker's metadata agrees", OK: len(disagree) == 0, Detail: agree},
	)
	if g.Rolling {
		checks = append(checks, steps.Check{Name: "no restarted broker serves a topic ZooKeeper does not have", OK: len(stale) == 0, Detail: Summarize(stale)})
	}
	return checks
}

// ViewDiff describes the first differences between two brokers' views.
func ViewDiff(a, b ports.BrokerView) string {
	var d []string
	if a.Controller != b.Controller {
		d = append(d, fmt.Sprintf("controller %d vs %d", a.Controller, b.Controller))
	}
	if !slices.Equal(a.Brokers, b.Brokers) {
		d = append(d, fmt.Sprintf("live brokers %s vs %s", I32s(a.Brokers), I32s(b.Brokers)))
	}
	for name, ta := range a.Topics {
		tb, ok := b.Topics[name]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("%s known to broker %d only", name, a.Broker))
		case ta.ID != tb.ID:
			d = append(d, fmt.Sprintf("%s topic id %s vs %s", name, ta.ID, tb.ID))
		case len(ta.Partitions) != len(tb.Partitions):
			d = append(d, fmt.Sprintf("%s partitions %d vs %d", name, len(ta.Partitions), len(tb.Partitions)))
		default:
			for p, pa := range ta.Partitions {
				pb := tb.Partitions[p]
				if pa.Leader != pb.Leader || pa.LeaderEpoch != pb.LeaderEpoch || !slices.Equal(pa.ISR, pb.ISR) {
					d = append(d, fmt.Sprintf("%s-%d leader %d/epoch %d isr %s vs leader %d/epoch %d isr %s", name, p, pa.Leader, pa.LeaderEpoch, I32s(pa.ISR), pb.Leader, pb.LeaderEpoch, I32s(pb.ISR)))
				}
			}
		}
	}
	for name := range b.Topics {
		if _, ok := a.Topics[name]; !ok {
			d = append(d, fmt.Sprintf("%s known to broker %d only", name, b.Broker))
		}
	}
	if len(d) == 0 {
		return ""
	}
	slices.Sort(d)
	return fmt.Sprintf("broker %d vs %d: %s", a.Broker, b.Broker, Summarize(d))
}

// GateProgress says, while the health gate waits, what it waits for: the
// checks that fail now with their details, or the passing rounds still
// needed.
func GateProgress(last []steps.Check, streak, need int, waited, timeout time.Duration) string {
	var bad []string
	for _, c := range last {
		if !c.OK {
			bad = append(bad, fmt.Sprintf("%s (%s)", c.Name, c.Detail))
		}
	}
	head := fmt.Sprintf("health gate, %s of %s: ", waited.Round(time.Second), timeout)
	if len(bad) == 0 {
		return head + fmt.Sprintf("healthy, %d of %d checks in a row", streak, need)
	}
	return head + "waiting for: " + strings.Join(bad, "; ")
}
