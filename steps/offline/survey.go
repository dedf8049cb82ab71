package offline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// survey is offline-survey: read-only.
type survey struct {
	o surveyOpts
	// waits is the plan's word when a dead broker whose host answers
	// holds a longest log: the step then fails its check (the partitions
	// stay offline until that broker starts), "" otherwise.
	waits string
}

type surveyOpts struct {
	Topics []string `opt:"topics" type:"topics" default:""`
	Gone   []int32  `opt:"lost_brokers" type:"brokers" default:""`
}

// look finds the offline partitions (of topics, or every topic) and reads
// their replicas' log ends.
func look(ctx context.Context, c ports.Cluster, topics []string) ([]brokers.Offline, []int32, error) {
	cv, err := c.Kafka.DescribeCluster(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("which brokers serve (DescribeCluster): %w", err)
	}
	var live []int32
	for _, b := range cv.Brokers {
		if !b.Fenced {
			live = append(live, b.ID)
		}
	}
	if len(live) == 0 {
		return nil, nil, fmt.Errorf("%w: no broker serves: start one first; nothing was changed", steps.ErrRefused)
	}
	slices.Sort(live)
	offs, err := brokers.FindOffline(ctx, c.Kafka, live[0], live, topics...)
	if err != nil {
		return nil, live, err
	}
	if offs, err = brokers.DropElectable(ctx, c.Kafka, offs, live); err != nil {
		return nil, live, err
	}
	brokers.ReadEnds(ctx, c, offs)
	return offs, live, nil
}

// describe is one offline partition, its replicas' ends and its choices,
// for a plan's facts.
func describe(o brokers.Offline, ch brokers.Choice) string {
	var reps []string
	for _, r := range o.Replicas {
		state := "live"
		if slices.Contains(o.Dead, r) {
			state = "dead"
		}
		if e, ok := o.Ends[r]; ok {
			reps = append(reps, fmt.Sprintf("broker %d (%s): log end %d, last leader epoch %d", r, state, e.End, e.Epoch))
		} else {
			reps = append(reps, fmt.Sprintf("broker %d (%s): not read (%s)", r, state, o.Unread[r]))
		}
	}
	s := fmt.Sprintf("%s: replicas %v, isr %v, no leader; %s", o.Name(), o.Replicas, o.ISR, strings.Join(reps, "; "))
	if ch.FirstLive != 0 {
		s += fmt.Sprintf("; Kafka's own unclean election would pick broker %d (the first live replica in assignment order)", ch.FirstLive)
	}
	return s
}

// choices says what each way out loses, for a plan's notes.
func choices(o brokers.Offline, ch brokers.Choice) string {
	var opts []string
	for _, d := range o.Dead {
		switch e, ok := o.Ends[d]; {
		case ch.Wait == d && e.End < ch.Longest:
			opts = append(opts, fmt.Sprintf("wait for broker %d (its log, to %d, is the newest: last leader epoch %d): nothing is lost — RECOMMENDED", d, e.End, e.Epoch))
		case ch.Wait == d:
			opts = append(opts, fmt.Sprintf("wait for broker %d (its log, to %d, is the longest): nothing is lost — RECOMMENDED", d, e.End))
		case ok:
			opts = append(opts, fmt.Sprintf("wait for broker %d (its log ends at %d)", d, e.End))
		default:
			opts = append(opts, fmt.Sprintf("wait for broker %d (its host did not answer: its log end is unknown)", d))
		}
	}
	if un := o.LiveUnread(); len(un) > 0 {
		opts = append(opts, fmt.Sprintf("elect: not until live broker(s) %v can be read (the longest live log is not known; fix SSH to its host, then run again)", un))
		return o.Name() + ": " + strings.Join(opts, "; or ")
	}
	if ch.Elect != 0 && ch.Wait != 0 {
		g := o.ChooseWithout([]int32{ch.Wait})
		opts = append(opts, fmt.Sprintf("if broker %d cannot come back (--set lost_brokers=%d): elect broker %d, the longest live log (end %d): loses %s records (%s)%s", ch.Wait, ch.Wait, g.Elect, g.ElectEnd, lost(g), g.Why, windowNote(g.Window())))
	}
	if ch.Elect != 0 && ch.Wait == 0 {
		opts = append(opts, fmt.Sprintf("elect broker %d, the longest live log (end %d): loses %s records (%s)%s", ch.Elect, ch.ElectEnd, lost(ch), ch.Why, windowNote(ch.Window())))
	} else if ch.Elect == 0 {
		opts = append(opts, "no live replica's log could be read: nothing to elect")
	}
	return o.Name() + ": " + strings.Join(opts, "; or ")
}

// idList is ids as a --set value: 3,5.
func idList(ids []int32) string {
	var s []string
	for _, id := range ids {
		s = append(s, fmt.Sprint(id))
	}
	return strings.Join(s, ",")
}

func lost(ch brokers.Choice) string {
	if ch.Exact {
		return fmt.Sprint(ch.Lost)
	}
	return fmt.Sprintf("at least %d", ch.Lost)
}

func (k *survey) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	offs, live, err := look(ctx, env.Cluster, k.o.Topics)
	if err != nil {
		return &steps.Plan{NoOp: true}, err
	}
	p := surveyPlan(offs, live, k.o.Gone)
	k.waits = ""
	if p.EndsRun && len(offs) > 0 {
		k.waits = p.Summary
	}
	return p, nil
}

// surveyPlan is the survey's plan: a no-op that lists the offline
// partitions, their replicas' ends and the choices; it ends the run when
// none is offline, or when a dead broker whose host answered holds a
// partition's longest log (start it: nothing is lost).
func surveyPlan(offs []brokers.Offline, live, gone []int32) *steps.Plan {
	p := &steps.Plan{NoOp: true}
	p.Facts = append(p.Facts, fmt.Sprintf("brokers serving: %v", live))
	if len(offs) == 0 {
		p.Summary, p.EndsRun = "no partition is offline: nothing to do", true
		return p
	}
	var wait []int32
	for _, o := range offs {
		ch := o.ChooseWithout(gone)
		p.Facts = append(p.Facts, describe(o, ch))
		p.Notes = append(p.Notes, choices(o, ch))
		if ch.Wait != 0 && !slices.Contains(wait, ch.Wait) {
			wait = append(wait, ch.Wait)
		}
	}
	p.Summary = fmt.Sprintf("%d partitions have no leader; their replicas' log ends were read from disk", len(offs))
	if len(wait) > 0 {
		slices.Sort(wait)
		p.EndsRun = true
		p.Summary = fmt.Sprintf("%d partitions have no leader, and dead broker(s) %v hold their longest logs and their hosts answer: start them — nothing is lost. The run stops here; nothing was changed. If a broker cannot be started (its host answers, the broker does not run), `--set lost_brokers=%s` elects the longest live logs without it, losing what only it holds (each partition's figure is in this plan's notes)", len(offs), wait, idList(wait))
	}
	return p
}

func (k *survey) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

// Verify fails when the plan waits for a dead broker: the partitions are
// still offline, so the run cannot end as if it had nothing to do (exit
// 0). Its plan, shown first, has every replica's end and what each choice
// loses.
func (k *survey) Verify(context.Context, *steps.Env) ([]steps.Check, error) {
	if k.waits == "" {
		return nil, nil
	}
	return []steps.Check{{Name: "no offline partition waits for a dead broker whose host answers", Detail: k.waits}}, nil
}
