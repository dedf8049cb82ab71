package diagnose

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/brokers"
)

// offlineReread is how long after the first reading the offline
// partitions are read again: only those offline both times count (an
// election in flight is not an outage).
const offlineReread = time.Second

// offlineLogEnds adds one offline-log-ends cause per set of dead brokers
// that leaves partitions without a leader: each with, per replica, its log
// end and last leader epoch read from its disk over SSH (a dead broker's
// when its host answers), and the offline-partitions runbook.
func (g *diagnoser) offlineLogEnds(ctx context.Context, live []int32, topics []string) {
	if len(live) == 0 {
		return
	}
	first, err := brokers.FindOffline(ctx, g.c.Kafka, live[0], live, topics...)
	if err != nil || len(first) == 0 {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(offlineReread):
	}
	again, err := brokers.FindOffline(ctx, g.c.Kafka, live[0], live, topics...)
	if err != nil {
		return
	}
	if kept, err := brokers.DropElectable(ctx, g.c.Kafka, again, live); err != nil {
		g.d.Methods = append(g.d.Methods, "offline partitions: "+err.Error()+" (diagnose lists them all)")
	} else {
		again = kept
	}
	offs := slices.DeleteFunc(again, func(o brokers.Offline) bool {
		return !slices.ContainsFunc(first, func(f brokers.Offline) bool { return f.Name() == o.Name() })
	})
	if len(offs) == 0 {
		return
	}
	brokers.ReadEnds(ctx, g.c, offs)
	groups := map[string][]brokers.Offline{}
	var keys []string
	for _, o := range offs {
		k := o.DeadSet()
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], o)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f := offlineFinding(groups[k])
		if g.c.ZK == nil {
			f.Runbook = "kraft-offline-partitions"
			f.Fix = strings.Replace(f.Fix, "run offline-partitions", "run kraft-offline-partitions", 1)
		}
		g.add(f)
	}
}

// offlineFinding is one group's finding.
func offlineFinding(offs []brokers.Offline) Finding {
	dead := slices.Clone(offs[0].Dead)
	slices.Sort(dead)
	var names, ev []string
	for _, o := range offs {
		names = append(names, o.Name())
		ch := o.Choose()
		for _, r := range o.Replicas {
			state := "live"
			if slices.Contains(o.Dead, r) {
				state = "dead"
			}
			if e, ok := o.Ends[r]; ok {
				ev = append(ev, fmt.Sprintf("%s broker %d: log end %d, last leader epoch %d (%s; read from %s)", o.Name(), r, e.End, e.Epoch, state, e.Dir))
			} else {
				ev = append(ev, fmt.Sprintf("%s broker %d: log end not read (%s): %s", o.Name(), r, state, o.Unread[r]))
			}
		}
		switch {
		case ch.Wait != 0:
			ev = append(ev, fmt.Sprintf("%s: dead broker %d holds the longest log (%d): start it and nothing is lost", o.Name(), ch.Wait, ch.Longest))
		case len(o.LiveUnread()) > 0:
			ev = append(ev, fmt.Sprintf("%s: the longest live log is not known: live broker(s) %v could not be read (above); kremedy elects nothing until they can be", o.Name(), o.LiveUnread()))
		case ch.Elect != 0:
			ev = append(ev, fmt.Sprintf("%s: the longest live log is broker %d's (%d); an unclean election of it loses %s records (%s)%s; Kafka's own would pick broker %d", o.Name(), ch.Elect, ch.ElectEnd, lostWord(ch), ch.Why, windowOf(ch), ch.FirstLive))
		}
	}
	return Finding{Kind: FindOfflineLogEnds, Severity: Critical, Brokers: dead,
		Summary:  fmt.Sprintf("%d partitions have no leader: every in-sync replica is on dead broker(s) %v (%s)", len(offs), dead, strings.Join(names, ", ")),
		Evidence: ev,
		Fix:      fmt.Sprintf("start broker(s) %v: nothing is lost. If they cannot come back, `kremedy run offline-partitions` elects the longest live log of each partition, after showing what each choice loses", dead),
		DoNot:    "do not set unclean.leader.election.enable=true or run kafka-leader-election --election-type unclean: Kafka picks the first live replica in assignment order, not the longest log",
		Runbook:  "offline-partitions"}
}

// windowOf is ", w" for the loss window of ch, "" when the logs do not say.
func windowOf(ch brokers.Choice) string {
	if w := ch.Window(); w != "" {
		return ", " + w
	}
	return ""
}

func lostWord(ch brokers.Choice) string {
	if ch.Exact {
		return fmt.Sprint(ch.Lost)
	}
	return fmt.Sprintf("at least %d", ch.Lost)
}
