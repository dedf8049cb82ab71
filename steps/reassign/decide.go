package reassign

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// Action is what reassign-unstick does to one partition's move.
type Action string

// The actions; Auto picks, per partition, the safest that works.
const (
	Auto     Action = "auto"
	Cancel   Action = "cancel"   // AlterPartitionReassignments with null replicas
	Retarget Action = "retarget" // a new target of live brokers
	Raise    Action = "raise"    // the throttle rate on the move's brokers raised
	Leave    Action = "leave"    // nothing: it moves; the sweep waits for it
)

// Actions are the values the runbook's action parameter takes.
var Actions = []Action{Auto, Cancel, Retarget, Raise}

// Choice is what is done to one move, and why.
type Choice struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Action    Action  `json:"action"`
	Original  []int32 `json:"original"`
	Target    []int32 `json:"target"`
	// Replicas is a retarget's new target.
	Replicas []int32 `json:"replicas,omitempty"`
	// Rate and Brokers: a raise's new rate and the brokers it is set on
	// (the leader's leader rate, the adding replicas' follower rate).
	Rate    int64   `json:"rate,omitempty"`
	Leader  int32   `json:"leader"`
	Brokers []int32 `json:"brokers,omitempty"`
	Why     string  `json:"why"`
}

// Name is "topic-partition".
func (c Choice) Name() string { return fmt.Sprintf("%s-%d", c.Topic, c.Partition) }

// Decide is what is done to move m when the operator asked want: a
// refusal (wrapping ports.ErrRefused) names why and the way forward.
// Cancel only when every original replica is live and in the ISR
// (KAFKA-14424); retarget replaces each dead target broker with a live
// one, the move's own original replicas in sync first (they hold the
// data); raise only when every target broker is live.
func Decide(m brokers.Moving, want Action, live []int32, rate int64) (Choice, error) {
	c := Choice{Topic: m.Topic, Partition: m.Partition, Original: m.Original(), Target: m.Target(), Leader: m.Leader}
	dead := m.TargetDead()
	okCancel, bad := m.OriginalInSync()
	switch want {
	case Cancel:
		if !okCancel {
			return c, refuseCancel(m, bad)
		}
		return c.with(Cancel, "cancelled: its original replicas "+ids(c.Original)+" are live and in the ISR, so they stay the assignment"), nil
	case Retarget:
		if len(dead) == 0 {
			return c.with(Leave, "no target broker of it is down: it keeps moving, and the sweep waits for it"), nil
		}
		return c.retarget(m, live)
	case Raise:
		if len(dead) > 0 {
			return c, fmt.Errorf("%w: raising the throttle of %s would not help: target broker %s is down and copies nothing. Nothing was changed; cancel it (--set action=cancel) or retarget it away from the dead broker (--set action=retarget)", ports.ErrRefused, c.Name(), ids(dead))
		}
		return c.raise(m, rate), nil
	case Auto:
		return c.auto(m, live, rate, okCancel, bad)
	}
	return c, fmt.Errorf("%w: action %q is not one of %v; nothing was changed", ports.ErrRefused, want, Actions)
}

func (c Choice) auto(m brokers.Moving, live []int32, rate int64, okCancel bool, bad []int32) (Choice, error) {
	switch {
	case len(m.TargetDead()) > 0 && okCancel:
		return c.with(Cancel, m.Why+"; cancelled (the safest that works): its original replicas "+ids(c.Original)+" are live and in the ISR"), nil
	case len(m.TargetDead()) > 0:
		r, err := c.retarget(m, live)
		if err != nil {
			return c, fmt.Errorf("%w; and cancelling it is refused too: %w", err, refuseCancel(m, bad))
		}
		r.Why = m.Why + "; retargeted, because cancelling is unsafe: original replica " + ids(bad) + " is down or out of the ISR (KAFKA-14424)"
		return r, nil
	case strings.HasPrefix(m.Why, "throttle too low"):
		return c.raise(m, rate), nil
	case m.Why != "":
		return c, fmt.Errorf("%w: %s is stuck (%s) and none of cancel, retarget or raise mends that. Nothing was changed; bring its replicas' brokers back (`kremedy diagnose` names them) and run again", ports.ErrRefused, c.Name(), m.Why)
	}
	return c.with(Leave, "it moves (no target broker down, no throttle too low): the sweep waits for it"), nil
}

func (c Choice) with(a Action, why string) Choice { c.Action, c.Why = a, why; return c }

func (c Choice) raise(m brokers.Moving, rate int64) Choice {
	c.Action, c.Rate = Raise, rate
	c.Brokers = append([]int32{m.Leader}, m.Adding...)
	c.Why = fmt.Sprintf("throttle raised to %d bytes/s on leader %d and target %s", rate, m.Leader, ids(m.Adding))
	if m.Why != "" {
		c.Why = m.Why + "; " + c.Why
	}
	return c
}

// retarget replaces each dead broker of the target, in place (the
// preferred leader keeps its position), with a live broker not in the
// set: the move's original replicas in the ISR first, then the others.
func (c Choice) retarget(m brokers.Moving, live []int32) (Choice, error) {
	var spare []int32
	for _, b := range m.Removing {
		if slices.Contains(live, b) && slices.Contains(m.ISR, b) {
			spare = append(spare, b)
		}
	}
	for _, b := range live {
		if !slices.Contains(spare, b) && !slices.Contains(m.Replicas, b) {
			spare = append(spare, b)
		}
	}
	next := slices.Clone(c.Target)
	for i, b := range next {
		if !slices.Contains(live, b) {
			if len(spare) == 0 {
				return c, fmt.Errorf("%w: %s cannot be retargeted away from broker %s: no live broker outside its target %s is left (live: %s). Nothing was changed; bring the broker back or add one", ports.ErrRefused, c.Name(), ids(m.TargetDead()), ids(c.Target), ids(live))
			}
			next[i], spare = spare[0], spare[1:]
		}
	}
	c.Action, c.Replicas = Retarget, next
	c.Why = fmt.Sprintf("retargeted from %s to %s: every broker of the new target is live", ids(c.Target), ids(next))
	return c, nil
}

func refuseCancel(m brokers.Moving, bad []int32) error {
	return fmt.Errorf("%w: cancelling the reassignment of %s-%d would make its original replicas %s the assignment again, and %s of them is down or out of the ISR %s: the partition would be left under-replicated or without a leader (KAFKA-14424). Nothing was changed; retarget it away from the dead broker instead (--set action=retarget), or bring broker %s back first",
		ports.ErrRefused, m.Topic, m.Partition, ids(m.Original()), ids(bad), ids(m.ISR), ids(bad))
}

func ids(s []int32) string {
	parts := make([]string, len(s))
	for i, b := range s {
		parts[i] = fmt.Sprint(b)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
