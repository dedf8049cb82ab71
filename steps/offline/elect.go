package offline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/roll"
)

var _ = roll.TypeTopics // the "topics" option type

// elect is offline-elect: per partition, the longest live log first in
// its replica list, then one UNCLEAN election per topic.
type elect struct {
	o       electOpts
	elected []Elected
}

type electOpts struct {
	Topics []string `opt:"topics" type:"topics" default:""`
	// Gone are dead brokers the operator says will not come back: an
	// election does not wait for their longer logs (ChooseWithout).
	Gone []int32 `opt:"lost_brokers" type:"brokers" default:""`
}

// reorderArgs are a reorder action's: the replica list read and the one
// set (the same brokers, the chosen first).
type reorderArgs struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	From      []int32 `json:"from"`
	To        []int32 `json:"to"`
}

// electArgs are an election action's: the partitions and whom each must
// end up led by.
type electArgs struct {
	Topic   string          `json:"topic"`
	Leaders map[int32]int32 `json:"leaders"`
	// Replicas are each partition's replica list as the reorder left it
	// (the chosen leader first): re-checked right before the election.
	Replicas map[int32][]int32 `json:"replicas"`
}

func (k *elect) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	offs, _, err := look(ctx, env.Cluster, k.o.Topics)
	if err != nil {
		return &steps.Plan{}, err
	}
	p, elected, err := electPlan(offs, k.o.Gone)
	k.elected = elected
	return p, err
}

// electPlan is offline-elect's plan for the offline partitions offs: per
// partition a reorder (when the longest live log is not first already),
// then one unclean election per topic; the loss figures in its notes and
// summary. It refuses when a dead broker whose host answered holds a
// longest log.
func electPlan(offs []brokers.Offline, gone []int32) (*steps.Plan, []Elected, error) {
	p := &steps.Plan{}
	if len(offs) == 0 {
		p.NoOp, p.Summary = true, "no partition is offline (any elected earlier now has a leader): nothing to elect"
		return p, nil, nil
	}
	byTopic := map[string]map[int32]int32{}
	lists := map[string]map[int32][]int32{}
	var total int64
	exact := true
	var elected []Elected
	for _, o := range offs {
		ch := o.ChooseWithout(gone)
		if un := o.LiveUnread(); len(un) > 0 {
			return p, nil, refuseUnread(o, un)
		}
		switch {
		case ch.Wait != 0:
			return p, nil, fmt.Errorf("%w: %s: dead broker %d holds the longest log and its host answers: start it and nothing is lost. Nothing was changed. If it cannot be started, run again with --set lost_brokers=%d: the longest live log is elected and what only broker %d holds is lost (the plan lists it before the confirmation)", steps.ErrRefused, o.Name(), ch.Wait, ch.Wait, ch.Wait)
		case ch.Elect == 0:
			p.Notes = append(p.Notes, fmt.Sprintf("%s: no live replica's log could be read: not elected; bring back one of brokers %v", o.Name(), o.Dead))
			continue
		}
		to := append([]int32{ch.Elect}, slices.DeleteFunc(slices.Clone(o.Replicas), func(r int32) bool { return r == ch.Elect })...)
		if !slices.Equal(to, o.Replicas) {
			p.Actions = append(p.Actions, steps.Action{ID: "reorder-" + o.Name(), Op: steps.OpKafka, Target: o.Name(),
				Detail: fmt.Sprintf("replicas %v → %v (the same brokers, broker %d first: no data moves)", o.Replicas, to, ch.Elect),
				Args:   reorderArgs{Topic: o.Topic, Partition: o.Partition, From: o.Replicas, To: to}})
		}
		if byTopic[o.Topic] == nil {
			byTopic[o.Topic], lists[o.Topic] = map[int32]int32{}, map[int32][]int32{}
		}
		byTopic[o.Topic][o.Partition] = ch.Elect
		lists[o.Topic][o.Partition] = to
		total += ch.Lost
		exact = exact && ch.Exact
		elected = append(elected, Elected{Topic: o.Topic, Partition: o.Partition, Leader: ch.Elect, End: ch.ElectEnd, Longest: ch.Longest, Lost: ch.Lost, Exact: ch.Exact, Replicas: to, Window: ch.Window()})
		p.Notes = append(p.Notes, fmt.Sprintf("%s: elect broker %d (log end %d; Kafka alone would pick broker %d): LOSES %s records, offsets %d to %d (%s)%s",
			o.Name(), ch.Elect, ch.ElectEnd, ch.FirstLive, lost(ch), ch.ElectEnd, ch.Longest-1, ch.Why, windowNote(ch.Window())))
	}
	for _, t := range sortedKeys(byTopic) {
		var ps []string
		for _, pt := range sortedKeys(byTopic[t]) {
			ps = append(ps, fmt.Sprintf("%d→broker %d", pt, byTopic[t][pt]))
		}
		p.Actions = append(p.Actions, steps.Action{ID: "elect-" + t, Op: steps.OpKafka, Target: t,
			Detail: "ElectLeaders UNCLEAN for exactly partitions " + strings.Join(ps, ", "), Args: electArgs{Topic: t, Leaders: byTopic[t], Replicas: lists[t]}})
	}
	word := fmt.Sprint(total)
	if !exact {
		word = "at least " + word
	}
	p.Summary = fmt.Sprintf("elect the longest live log of %d offline partitions: %s records lost in all", len(elected), word)
	return p, elected, nil
}

// refuseUnread refuses to elect on o while the log ends of live replicas
// un could not be read: the longest live log is not known.
func refuseUnread(o brokers.Offline, un []int32) error {
	var why []string
	for _, b := range un {
		why = append(why, fmt.Sprintf("broker %d (%s)", b, o.Unread[b]))
	}
	return fmt.Errorf("%w: %s: the log end of live %s could not be read, so the longest live log is not known and electing another could lose records only it holds. Nothing was changed. Fix SSH to its host (or name its log dirs in the inventory's log_dirs), then run again; --set lost_brokers is for dead brokers and does not apply to one that serves",
		steps.ErrRefused, o.Name(), strings.Join(why, ", "))
}

// Apply reorders, waits until no reassignment of those partitions is in
// flight, then elects; each action first checks whether it is done.
func (k *elect) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	adm, ok := env.Kafka.(Admin)
	if !ok {
		return fmt.Errorf("%w: this cluster's Kafka client cannot reorder replicas or elect leaders; nothing was changed", steps.ErrRefused)
	}
	el := k.elected
	if el == nil { // a plan from the journal: its elections, without the loss figures
		for _, a := range p.Actions {
			if ea, err := steps.ArgsOf[electArgs](a); err == nil && strings.HasPrefix(a.ID, "elect-") {
				for pt, l := range ea.Leaders {
					el = append(el, Elected{Topic: ea.Topic, Partition: pt, Leader: l, End: -1, Longest: -1, Replicas: ea.Replicas[pt]})
				}
			}
		}
	}
	var earlier []Elected // an earlier attempt's: offline-after looks at them too
	if _, err := env.Load(electedKey, &earlier); err != nil {
		return err
	}
	for _, e := range earlier {
		if !slices.ContainsFunc(el, func(x Elected) bool { return x.Topic == e.Topic && x.Partition == e.Partition }) {
			el = append(el, e)
		}
	}
	if err := env.Save(electedKey, el); err != nil {
		return err
	}
	for _, a := range p.Actions {
		var err error
		if strings.HasPrefix(a.ID, "reorder-") {
			err = env.Do(a, func() error { return reorder(ctx, env, adm, a) })
		} else {
			err = env.Do(a, func() error { return electTopic(ctx, env, adm, a) })
		}
		if err != nil {
			return err
		}
	}
	return env.Save(steps.ReportKey+"Records lost to the unclean election", lossLines(el))
}

// windowNote is ": w" for a loss window w, "" for none.
func windowNote(w string) string {
	if w == "" {
		return ""
	}
	return ": " + w
}

// lossLines are the report's lines on what the election lost.
func lossLines(el []Elected) []string {
	var out []string
	var total int64
	for _, e := range el {
		if e.End < 0 { // no figures: a plan from the journal
			out = append(out, fmt.Sprintf("%s-%d: elected broker %d", e.Topic, e.Partition, e.Leader))
			continue
		}
		floor := ""
		if !e.Exact {
			floor = "at least "
		}
		total += e.Lost
		out = append(out, fmt.Sprintf("%s-%d: elected broker %d (log end %d): %s%d records lost (offsets %d to %d)%s", e.Topic, e.Partition, e.Leader, e.End, floor, e.Lost, e.End, e.Longest-1, windowNote(e.Window)))
	}
	return append(out, fmt.Sprintf("records lost in all: %d", total))
}

func reorder(ctx context.Context, env *steps.Env, adm Admin, a steps.Action) error {
	ra, err := steps.ArgsOf[reorderArgs](a)
	if err != nil {
		return err
	}
	errs, err := adm.Reorder(ctx, ra.Topic, map[int32][]int32{ra.Partition: ra.To})
	if err != nil {
		return err
	}
	if err := errs[ra.Partition]; err != nil {
		return fmt.Errorf("reorder %s-%d: %w; its replica list may be unchanged: run again to re-read it", ra.Topic, ra.Partition, err)
	}
	for deadline := env.Now().Add(time.Minute); ; {
		inFlight, err := adm.Reassigning(ctx, ra.Topic, []int32{ra.Partition})
		if err == nil && len(inFlight) == 0 {
			return nil
		}
		if env.Now().After(deadline) {
			return fmt.Errorf("%s-%d: the reordering is still in flight after a minute (%v, %v): the set was not the same? Nothing was elected", ra.Topic, ra.Partition, inFlight, err)
		}
		if err := env.Sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

func electTopic(ctx context.Context, env *steps.Env, adm Admin, a steps.Action) error {
	ea, err := steps.ArgsOf[electArgs](a)
	if err != nil {
		return err
	}
	// A broker's metadata can lag the reorder by a moment: a replica list
	// that differs alone is read again, a few seconds at most.
	for i := 0; ; i++ {
		lag, err := stillAsPlanned(ctx, env, ea)
		if err == nil {
			break
		}
		if !lag || i >= 10 {
			return err
		}
		if err := env.Sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	errs, err := adm.ElectUnclean(ctx, ea.Topic, sortedKeys(ea.Leaders))
	if err != nil {
		return err
	}
	var bad []error
	for _, e := range errs {
		if e != nil && !errors.Is(e, kerr.ElectionNotNeeded) {
			bad = append(bad, e)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("unclean election on %s: %w", ea.Topic, errors.Join(bad...))
	}
	env.Logf("ElectLeaders UNCLEAN on %s answered for partitions %v", ea.Topic, sortedKeys(ea.Leaders))
	return nil
}

// stillAsPlanned re-reads, right before the election, each partition of
// ea: still without a leader, its replica list the one the plan set (the
// chosen leader first) and the chosen leader live. Kafka elects the first
// live replica in the list, so a chosen broker that died or was fenced
// since the confirmation would have Kafka elect a shorter log, losing more
// than the plan listed: that is steps.ErrStalePlan (the step plans again,
// and the new losses are confirmed). A partition already led by its chosen
// broker is an earlier attempt's election (ELECTION_NOT_NEEDED).
//
// lag is true when only replica lists differ (metadata that may yet catch
// up with the reorder).
func stillAsPlanned(ctx context.Context, env *steps.Env, ea electArgs) (lag bool, err error) {
	cv, err := env.Kafka.DescribeCluster(ctx)
	if err != nil {
		return false, fmt.Errorf("re-read which brokers serve before electing on %s (DescribeCluster): %w; nothing on %s was elected: run again", ea.Topic, err, ea.Topic)
	}
	var live []int32
	for _, b := range cv.Brokers {
		if !b.Fenced {
			live = append(live, b.ID)
		}
	}
	slices.Sort(live)
	if len(live) == 0 {
		return false, fmt.Errorf("%w: no broker serves any more; nothing on %s was elected: start one, then run again (it plans again)", steps.ErrStalePlan, ea.Topic)
	}
	asked := live[0]
	if slices.Contains(live, cv.Controller) {
		asked = cv.Controller
	}
	v, err := env.Kafka.BrokerView(ctx, asked, ea.Topic)
	if err != nil {
		return false, fmt.Errorf("re-read %s's partitions before electing (broker %d's metadata): %w; nothing on %s was elected: run again", ea.Topic, asked, err, ea.Topic)
	}
	var changed []string
	lag = true
	for _, p := range sortedKeys(ea.Leaders) {
		leader, name := ea.Leaders[p], fmt.Sprintf("%s-%d", ea.Topic, p)
		pv, ok := v.Topics[ea.Topic].Partitions[p]
		want, listed := ea.Replicas[p]
		switch {
		case !ok:
			changed = append(changed, name+" is no longer in the metadata")
		case pv.Leader == leader:
			continue // elected by an earlier attempt
		case !pv.IsOffline():
			changed = append(changed, fmt.Sprintf("%s has a leader now (broker %d)", name, pv.Leader))
		case !listed:
			changed = append(changed, name+": the plan (from an older kremedy) does not say its replica list")
		case !slices.Equal(pv.Replicas, want):
			changed = append(changed, fmt.Sprintf("%s's replicas are %v now, the plan set %v", name, pv.Replicas, want))
			continue
		case !slices.Contains(live, leader):
			changed = append(changed, fmt.Sprintf("%s: broker %d, the chosen leader, no longer serves (dead or fenced; serving: %v), so Kafka would elect the next live replica in %v, a shorter log", name, leader, live, pv.Replicas))
		default:
			continue // as planned
		}
		lag = false // anything but a replica list: no waiting mends it
	}
	if len(changed) > 0 {
		return lag, fmt.Errorf("%w: %s. Nothing on %s was elected; the step plans again from the cluster as it is now and asks for the confirmation of the new losses (a resume re-plans too)", steps.ErrStalePlan, strings.Join(changed, "; "), ea.Topic)
	}
	return false, nil
}

// Verify: every partition elected has the leader chosen.
func (k *elect) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	var el []Elected
	if _, err := env.Load(electedKey, &el); err != nil {
		return nil, err
	}
	var checks []steps.Check
	for i := 0; ; i++ {
		checks = checks[:0]
		ok := true
		for _, e := range el {
			c := leaderCheck(ctx, env, e)
			checks = append(checks, c)
			ok = ok && c.OK
		}
		if ok || env.Rechecking() || i >= 30 {
			return checks, nil
		}
		if err := env.Sleep(ctx, time.Second); err != nil {
			return checks, err
		}
	}
}

func leaderCheck(ctx context.Context, env *steps.Env, e Elected) steps.Check {
	name := fmt.Sprintf("%s-%d is led by broker %d, the longest live log", e.Topic, e.Partition, e.Leader)
	v, err := env.Kafka.BrokerView(ctx, e.Leader, e.Topic)
	if err != nil {
		return steps.Check{Name: name, Detail: err.Error()}
	}
	pv := v.Topics[e.Topic].Partitions[e.Partition]
	return steps.Check{Name: name, OK: pv.Leader == e.Leader, Detail: fmt.Sprintf("leader %d, replicas %v, isr %v", pv.Leader, pv.Replicas, pv.ISR)}
}

func sortedKeys[K int32 | string, V any](m map[K]V) []K {
	var out []K
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
