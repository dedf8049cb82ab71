package diagnose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/kremedy/kremedy/steps/brokers"
)

const unstickFix = "run the %[1]s runbook: `kremedy run %[1]s --inventory " + InventoryMark + "` (it saves the assignment before the move, then per partition cancels the move when the original replicas are live and in the ISR, retargets it away from a dead broker otherwise, or raises a throttle that is too low — --set action=cancel|retarget|raise to choose — and then removes every replication throttle and verifies)"

// reassignments reports the moves in flight that cannot finish and the
// throttles left behind with no move in flight. A move is read twice, the
// settle window apart: only one still in flight with the same target, and
// still stuck, counts (a move that finishes meanwhile was only slow).
func (g *diagnoser) reassignments(ctx context.Context) {
	st, err := brokers.ReadReassigning(ctx, g.c)
	if errors.Is(err, brokers.ErrNoReassigner) {
		return
	}
	if err == nil && g.o.Topic != "" {
		st.Moves = slices.DeleteFunc(st.Moves, func(m brokers.Moving) bool { return m.Topic != g.o.Topic })
	}
	if err == nil && len(st.Moves) > 0 {
		first := st
		if !sleep(ctx, g.settleWindow()) {
			return
		}
		if st, err = brokers.ReadReassigning(ctx, g.c); err == nil {
			st.Moves = slices.DeleteFunc(st.Moves, func(m brokers.Moving) bool { return m.Why == "" || !inBoth(first, m) })
			if g.o.Topic != "" {
				st.Moves = slices.DeleteFunc(st.Moves, func(m brokers.Moving) bool { return m.Topic != g.o.Topic })
			}
			g.stuckMoves(st)
		}
	}
	if err != nil {
		g.d.Methods = append(g.d.Methods, "reassignments not read: "+err.Error())
		return
	}
	g.d.Methods = append(g.d.Methods, fmt.Sprintf("reassignments read twice, %s apart (ListPartitionReassignments; liveness from DescribeCluster; bytes left from DescribeLogDirs); throttle configs read with DescribeConfigs, a down broker's from ZooKeeper", g.settleWindow()))
	if len(st.Moves) == 0 && g.o.Topic == "" && len(st.Throttles) > 0 {
		g.throttlesLeftTwice(ctx, st)
	}
}

// throttlesLeftTwice reports the throttles of read st (no move in flight)
// only if a second read, the settle window later, still has them and no
// move: kafka-reassign-partitions --execute sets its throttles before it
// submits its moves, so one read can fall between the two.
func (g *diagnoser) throttlesLeftTwice(ctx context.Context, st *brokers.Reassigning) {
	if !sleep(ctx, g.settleWindow()) {
		return
	}
	again, err := brokers.ReadReassigning(ctx, g.c)
	switch {
	case err != nil:
		g.d.Methods = append(g.d.Methods, "throttle configs not read again: "+err.Error()+"; not reported")
		return
	case len(again.Moves) > 0:
		g.d.Methods = append(g.d.Methods, fmt.Sprintf("a reassignment started between two reads %s apart: its throttles are not reported as left behind", g.settleWindow()))
		return
	}
	again.Throttles = slices.DeleteFunc(again.Throttles, func(t brokers.Throttle) bool {
		return !slices.ContainsFunc(st.Throttles, func(f brokers.Throttle) bool { return f.Resource == t.Resource && f.Name == t.Name && f.Key == t.Key })
	})
	g.d.Methods = append(g.d.Methods, fmt.Sprintf("throttle configs with no move in flight read twice, %s apart: only those in both reads count", g.settleWindow()))
	g.throttlesLeft(again)
}

func (g *diagnoser) settleWindow() time.Duration {
	if g.o.Settle > 0 {
		return g.o.Settle
	}
	return DefaultSettle
}

// unstickRunbook is the runbook for the cluster's mode.
func (g *diagnoser) unstickRunbook() string {
	if g.c.ZK == nil {
		return "kraft-reassignment-unstick"
	}
	return "reassignment-unstick"
}

// inBoth: the first read had the same move (partition and target).
func inBoth(first *brokers.Reassigning, m brokers.Moving) bool {
	return slices.ContainsFunc(first.Moves, func(f brokers.Moving) bool {
		return f.Topic == m.Topic && f.Partition == m.Partition && slices.Equal(f.Target(), m.Target())
	})
}

// stuckMoves is one finding per topic with stuck moves.
func (g *diagnoser) stuckMoves(st *brokers.Reassigning) {
	byTopic := map[string][]brokers.Moving{}
	for _, m := range st.Moves {
		byTopic[m.Topic] = append(byTopic[m.Topic], m)
	}
	for _, topic := range sortedKeys(byTopic) {
		f := Finding{Kind: FindStuckReassignment, Severity: Warning, Topic: topic, Runbook: g.unstickRunbook(),
			Fix:   fmt.Sprintf(unstickFix, g.unstickRunbook()),
			DoNot: "do not delete /admin/reassign_partitions or restart the controller to clear it, and do not cancel by hand (kafka-reassign-partitions --cancel) before checking that the original replicas are live and in the ISR (KAFKA-14424)"}
		for _, m := range byTopic[topic] {
			f.Partitions = append(f.Partitions, m.Partition)
			f.Brokers = append(f.Brokers, m.Dead...)
			if len(m.TargetDead()) > 0 {
				f.Severity = Critical
			}
			f.Evidence = append(f.Evidence, moveEvidence(m, st.Live))
		}
		f.Summary = fmt.Sprintf("the reassignment of %d partition(s) of %q cannot finish: %s", len(f.Partitions), topic, byTopic[topic][0].Why)
		g.add(f)
	}
}

// moveEvidence says one move's replicas: adding and removing, each live
// or down and in the ISR or not, and why it is stuck.
func moveEvidence(m brokers.Moving, live []int32) string {
	state := func(bs []int32) string {
		s := ""
		for i, b := range bs {
			if i > 0 {
				s += ", "
			}
			s += strconv.Itoa(int(b))
			switch {
			case !slices.Contains(live, b):
				s += " (down)"
			case slices.Contains(m.ISR, b):
				s += " (live, in ISR)"
			default:
				s += " (live, not in ISR)"
			}
		}
		return "[" + s + "]"
	}
	ok, _ := m.OriginalInSync()
	cancel := "a cancel is safe: the original replicas are live and in the ISR"
	if !ok {
		cancel = "a cancel is NOT safe: an original replica is down or out of the ISR (KAFKA-14424)"
	}
	left := ""
	switch {
	case m.Left >= 0 && m.Rate > 0:
		left = fmt.Sprintf("%d bytes left at a throttle of %d bytes/s; ", m.Left, m.Rate)
	case m.Left >= 0:
		left = fmt.Sprintf("%d bytes left, no throttle on it; ", m.Left)
	}
	why := m.Why
	if why == "" {
		why = "moving"
	}
	return fmt.Sprintf("%s-%d: original %s → target %s; adding %s, removing %s; leader %d, ISR %v; %s%s; %s",
		m.Topic, m.Partition, state(m.Original()), state(m.Target()), state(m.Adding), state(m.Removing), m.Leader, m.ISR, left, why, cancel)
}

// throttlesLeft is one finding for every throttle config set while no
// move is in flight.
func (g *diagnoser) throttlesLeft(st *brokers.Reassigning) {
	if len(st.Throttles) == 0 {
		return
	}
	f := Finding{Kind: FindThrottleLeft, Severity: Warning, Runbook: g.unstickRunbook(),
		Summary: fmt.Sprintf("%d replication throttle configs are set and no reassignment is in flight: any replica catching up (after a restart, a new replica) is held to them", len(st.Throttles)),
		Fix:     fmt.Sprintf(unstickFix, g.unstickRunbook()),
		DoNot:   "do not leave them: kafka-reassign-partitions removes them only in --verify, once every move is done"}
	for _, t := range st.Throttles {
		name := t.Name
		if t.Resource == "broker" {
			if name == "" {
				name = "(cluster default)"
			} else if id, err := strconv.Atoi(name); err == nil {
				f.Brokers = append(f.Brokers, int32(id))
			}
		}
		where := ""
		if t.ZKVersion != nil {
			where = " (broker down; in ZooKeeper " + brokers.BrokerConfigPath(mustID(t.Name)) + ")"
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s %s: %s=%s%s", t.Resource, name, t.Key, t.Value, where))
	}
	g.add(f)
}

func mustID(s string) int32 {
	n, _ := strconv.Atoi(s)
	return int32(n)
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
