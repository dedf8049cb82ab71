package lab

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"
)

func init() {
	registerKRaft(100, "controller-down", onKRaft((*env).controllerDown),
		"one follower voter killed with SIGKILL: the quorum keeps its leader with one fewer voter and metadata still commits; the margin left (3 voters: one more failure stops metadata)")
}

// controllerDown kills a follower voter of the metadata quorum. The
// leader keeps a majority and metadata still commits, but the quorum has
// lost its margin: with 3 voters one more failure leaves no majority and
// every metadata change (topics, ISR, configs) stops, while brokers keep
// serving their current leaders.
func (e *env) controllerDown(ids []int32) error {
	c := e.l.State.Config
	if c.KRaftControllers < 3 {
		return fmt.Errorf("%w: controller-down needs a quorum of 3 or 5 voters (this lab has %d: its one voter down stops the cluster's metadata outright)", ErrWrongLab, c.KRaftControllers)
	}
	q, err := e.quorum()
	if err != nil {
		return err
	}
	k := 0
	for i := c.KRaftControllers; i >= 1; i-- {
		if ControllerID(i) != q.Leader {
			k = i
			break
		}
	}
	id := ControllerID(k)
	e.rep.Victim = id
	pid := e.l.controllerPID(k)
	if pid <= 0 {
		return fmt.Errorf("%w: kraft controller %d has no process", ErrWrongLab, id)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL kraft controller %d (pid %d): %w", id, pid, err)
	}
	e.did("killed kraft controller %d (a follower voter; the leader is %d) with SIGKILL (pid %d; no shutdown)", id, q.Leader, pid)
	if err := e.record(Applied{DownController: id}); err != nil {
		return err
	}
	addr := net.JoinHostPort(c.ControllerHost(k), strconv.Itoa(ControllerPort))
	e.observe(fmt.Sprintf("kraft controller %d is gone: no process, %s refuses connections", id, addr), 10*time.Second, false, func() (bool, string) {
		gone := e.l.controllerPID(k) == 0 && !listening(c.ControllerHost(k), ControllerPort)
		return gone, fmt.Sprintf("process running: %v, listening: %v", e.l.controllerPID(k) > 0, listening(c.ControllerHost(k), ControllerPort))
	})
	var after, majority, up int
	e.observe(fmt.Sprintf("the quorum keeps a leader with one fewer voter: voter %d no longer fetches (last caught up beyond controller.quorum.fetch.timeout.ms, 2 s)", id), 30*time.Second, false, func() (bool, string) {
		q, err := e.quorum()
		if err != nil {
			return false, err.Error()
		}
		now := time.Now()
		up = 0
		for _, v := range q.Voters {
			if voterCaughtUp(q, v.ID, now, 3*time.Second) {
				up++
			}
		}
		majority = len(q.Voters)/2 + 1
		after = up - majority
		return q.Leader >= 0 && q.Leader != id && !voterCaughtUp(q, id, now, 3*time.Second) && up == len(q.Voters)-1, quorumLine(q, nil, now)
	})
	e.observe(fmt.Sprintf("metadata still commits: %q is created (a write through the quorum) and every broker serves it", e.t), 30*time.Second, false, func() (bool, string) {
		if _, err := e.kc.CreateTopic(e.ctx, e.t, assignment(ids), 0, 0, nil); err != nil {
			return false, err.Error()
		}
		if err := e.waitServed(e.t, len(assignment(ids))); err != nil {
			return false, err.Error()
		}
		return true, fmt.Sprintf("CreateTopics of %q committed; every broker lists it with leaders", e.t)
	})
	e.observe(fmt.Sprintf("the margin: %d voters, a majority is %d, %d caught up: %s", c.KRaftControllers, majority, up, marginText(after)), 0, false, func() (bool, string) {
		return up > 0, fmt.Sprintf("voters %d, caught up %d, majority %d: %d more may fail before metadata stops", c.KRaftControllers, up, majority, after)
	})
	e.rep.Next = fmt.Sprintf("%s names voter %d and the margin; start it again with `kremedy lab controller start %d --dir %s` (or `kremedy lab up --dir %s`)",
		e.diagnoseNext(), id, id, e.l.Dir, e.l.Dir)
	return e.verdict()
}

func marginText(left int) string {
	switch {
	case left < 0:
		return "no majority: metadata has stopped"
	case left == 0:
		return "one more controller failure stops metadata (no topic, ISR or config change; brokers keep serving their current leaders)"
	}
	return fmt.Sprintf("%d more controller failures are tolerated", left)
}
