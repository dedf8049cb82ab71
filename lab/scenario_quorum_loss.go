package lab

import (
	"context"
	"fmt"
	"strings"
	"time"
)

func init() {
	registerKRaft(128, "quorum-loss", onKRaft((*env).quorumLoss),
		"a majority of the KRaft quorum lost: topics T-00… created in a loop while a follower voter is stopped, then the leader stopped and its disk wiped (`lab controller wipe`); no leader, no majority, every metadata write blocks; the way back is quorum-recovery")
}

// quorumLossTopics is how many topics quorum-loss creates before and after
// it stops the first voter.
const quorumLossTopics = 5

// quorumLoss loses a majority of a 3-voter quorum the way a lost disk
// does: a follower voter F is stopped (its log whole but behind), more
// topics are created (committed by the leader and the other follower),
// then the leader is stopped and wiped. One voter runs alone: no leader.
// The survivors' copies of __cluster_metadata-0 differ (F's ends before
// the second batch of topics), which is what the quorum-recovery runbook
// reads to pick its seed.
func (e *env) quorumLoss(ids []int32) error {
	c := e.l.State.Config
	if c.KRaftControllers != 3 || c.Combined {
		return fmt.Errorf("%w: quorum-loss needs a quorum of 3 controllers of their own (`lab up --kraft`, the default --kraft-controllers 3; this lab has %d%s)", ErrWrongLab, c.KRaftControllers, map[bool]string{true: ", combined"}[c.Combined])
	}
	q, err := e.quorum()
	if err != nil {
		return err
	}
	leader := int(q.Leader - controllerIDBase)
	var followers []int
	for k := 1; k <= 3; k++ {
		if k != leader {
			followers = append(followers, k)
		}
	}
	if err := e.createLoop(ids, 0); err != nil {
		return err
	}
	say := func(s string) { fmt.Fprintf(e.out, "    %s\n", s) }
	if err := e.l.ControllerCommand(e.ctx, followers[0], "stop", say); err != nil {
		return err
	}
	e.did("stopped kraft controller %d (a follower voter) with its stop command; its log is whole but stops here", ControllerID(followers[0]))
	if err := e.createLoop(ids, quorumLossTopics); err != nil {
		return err
	}
	if err := e.l.WipeController(e.ctx, leader, say); err != nil {
		return err
	}
	e.did("stopped kraft controller %d (the leader) and removed its metadata dir %s: a lost disk", ControllerID(leader), e.l.controllerMetadataDir(leader))
	if err := e.record(Applied{DownController: ControllerID(leader)}); err != nil {
		return err
	}
	e.quorumLossSymptoms(followers[1])
	e.rep.Next = fmt.Sprintf("%s names quorum-lost (voter %d wiped, voter %d stopped with its log); the way back is `kremedy run quorum-recovery --inventory %s` (docs/quorum-recovery.md). `lab up` refuses the wiped controller",
		e.diagnoseNext(), ControllerID(leader), ControllerID(followers[0]), e.l.InventoryPath())
	return e.verdict()
}

// createLoop creates topics T-from … T-(from+quorumLossTopics-1), one
// after the other, each committed by the quorum before the next.
func (e *env) createLoop(ids []int32, from int) error {
	var names []string
	for i := from; i < from+quorumLossTopics; i++ {
		name := fmt.Sprintf("%s-%02d", e.t, i)
		if _, err := e.kc.CreateTopic(e.ctx, name, assignment(ids), 0, 0, nil); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		names = append(names, name)
	}
	e.did("created topics %s, one after the other (each committed by the quorum)", strings.Join(names, ", "))
	return nil
}

// quorumLossSymptoms observes the lost quorum: the one voter left runs
// alone with no leader, and a metadata write does not commit.
func (e *env) quorumLossSymptoms(alone int) {
	e.observe(fmt.Sprintf("no leader: kraft controller %d runs alone, one voter of 3 (a majority is 2)", ControllerID(alone)), 30*time.Second, false, func() (bool, string) {
		q, err := e.quorum()
		if err != nil {
			return e.l.controllersRunning() == 1, fmt.Sprintf("DescribeQuorum answers nothing (%v); controllers running: %d", err, e.l.controllersRunning())
		}
		return q.Leader < 0 && e.l.controllersRunning() == 1, quorumLine(q, nil, time.Now())
	})
	e.observe(fmt.Sprintf("metadata writes block: creating %s-late does not commit within 10 s", e.t), 0, false, func() (bool, string) {
		ids := e.l.State.Config.brokerIDs()
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		_, err := e.kc.CreateTopic(ctx, e.t+"-late", assignment(ids), 0, 0, nil)
		return err != nil, fmt.Sprintf("CreateTopics: %v", err)
	})
}
