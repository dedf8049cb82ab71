package lab

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// Part is one process of the lab.
type Part struct {
	Kind    string // zookeeper, controller, broker, sshd
	N       int
	Addr    string
	PID     int
	Detail  string
	Healthy bool
}

// Status is what `kremedy lab status` shows.
type Status struct {
	Parts []Part
	// Registered are the brokers registered in ZooKeeper, or in a KRaft
	// lab registered and unfenced (DescribeCluster).
	Registered []int32
	// Controller is the ZooKeeper-mode controller, or in a KRaft lab the
	// quorum's leader (-1: none).
	Controller int32
	Healthy    bool
	// A KRaft lab's quorum (DescribeQuorum) and fenced brokers.
	Quorum    *ports.Quorum
	QuorumErr error
	Fenced    []int32
}

// Status inspects processes, ports and ZooKeeper registrations (in a
// KRaft lab: the quorum and the brokers' registrations).
func (l *Lab) Status(ctx context.Context) Status {
	c := l.State.Config
	if c.KRaft {
		return l.kraftStatus(ctx)
	}
	st := Status{Controller: -1, Healthy: true}
	for n := 1; n <= c.ZooKeepers; n++ {
		p := Part{Kind: "zookeeper", N: n, Addr: fmt.Sprintf("%s:%d", c.ZKHost(n), ZKPort), PID: l.zkPID(n)}
		if p.PID > 0 {
			srvr := fourLetter(c.ZKHost(n), ZKPort, "srvr")
			for _, line := range strings.Split(srvr, "\n") {
				if m, ok := strings.CutPrefix(line, "Mode: "); ok {
					p.Detail, p.Healthy = m, true
				}
			}
			if !p.Healthy {
				p.Detail = "running, not serving (no quorum?)"
			}
		} else {
			p.Detail = "not running"
		}
		st.Parts = append(st.Parts, p)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if zc, err := zookeeper.Dial(sctx, c.ZKConnect(), l.ZKOptions()); err == nil {
		st.Registered, _ = zc.BrokerIDs(sctx)
		st.Controller, _ = zc.Controller(sctx)
		zc.Close()
	}
	for n := 1; n <= c.Brokers; n++ {
		p := Part{Kind: "broker", N: n, Addr: fmt.Sprintf("%s:%d", c.BrokerHost(n), KafkaPort), PID: l.brokerPID(n)}
		reg := slices.Contains(st.Registered, int32(n))
		switch {
		case p.PID > 0 && reg:
			p.Detail, p.Healthy = "registered", true
			if st.Controller == int32(n) {
				p.Detail += ", controller"
			}
		case p.PID > 0:
			p.Detail = "running, not registered in ZooKeeper"
		default:
			p.Detail = "stopped"
			for _, a := range l.State.Scenarios {
				if a.DownBroker == int32(n) {
					p.Detail = fmt.Sprintf("stopped (left down by scenario %s on %q)", a.Scenario, a.Topic)
				}
			}
		}
		st.Parts = append(st.Parts, p, l.sshdPart(n))
	}
	for _, p := range st.Parts {
		st.Healthy = st.Healthy && p.Healthy
	}
	return st
}

// sshdPart is SSH host n's sshd.
func (l *Lab) sshdPart(n int) Part {
	host := l.hostAddr(n)
	s := Part{Kind: "sshd", N: n, Addr: fmt.Sprintf("%s:%d", host, SSHPort), PID: l.sshdPID(n)}
	if n > ctrlHostBase {
		s.N = n - ctrlHostBase
		s.Detail = "(controller host) "
	}
	s.Healthy = s.PID > 0 && listening(host, SSHPort)
	s.Detail += map[bool]string{true: "listening", false: "not running"}[s.Healthy]
	return s
}

// combinedRole is a combined node's place in the quorum, for its broker's
// line (a combined lab has no controller line of its own), and whether it
// is a healthy one.
func combinedRole(q ports.Quorum, qerr error, id int32, now time.Time) (string, bool) {
	switch {
	case qerr != nil:
		return "the quorum does not answer", false
	case q.Leader == id:
		return fmt.Sprintf("quorum leader (epoch %d)", q.Epoch), true
	case voterCaughtUp(q, id, now, 5*time.Second):
		return "voter, caught up", true
	}
	return "not a caught-up voter", false
}

// kraftStatus is a KRaft lab's Status: each controller with its place in
// the quorum, each broker registered, fenced or stopped, every sshd.
func (l *Lab) kraftStatus(ctx context.Context) Status {
	c := l.State.Config
	st := Status{Controller: -1, Healthy: true}
	sctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	q, qerr := l.Quorum(sctx)
	st.QuorumErr = qerr
	if qerr == nil {
		st.Quorum, st.Controller = &q, q.Leader
	}
	bs, berr := l.BrokerStates(sctx)
	st.Registered, st.Fenced = bs.Unfenced, bs.Fenced
	now := time.Now()
	for k := 1; k <= c.KRaftControllers; k++ {
		id := ControllerID(k)
		p := Part{Kind: "controller", N: k, Addr: fmt.Sprintf("%s:%d", c.ControllerHost(k), ControllerPort), PID: l.controllerPID(k)}
		switch {
		case p.PID == 0:
			p.Detail = fmt.Sprintf("node.id %d, stopped", id)
			for _, a := range l.State.Scenarios {
				if a.DownController == id {
					p.Detail = fmt.Sprintf("node.id %d, stopped (left down by scenario %s)", id, a.Scenario)
				}
			}
		case qerr != nil:
			p.Detail = fmt.Sprintf("node.id %d, running; the quorum does not answer", id)
		case q.Leader == id:
			p.Detail, p.Healthy = fmt.Sprintf("node.id %d, quorum leader (epoch %d)", id, q.Epoch), true
		case voterCaughtUp(q, id, now, 5*time.Second):
			p.Detail, p.Healthy = fmt.Sprintf("node.id %d, voter, caught up", id), true
		default:
			p.Detail = fmt.Sprintf("node.id %d, running, not a caught-up voter", id)
		}
		st.Parts = append(st.Parts, p)
	}
	for n := 1; n <= c.Brokers; n++ {
		p := Part{Kind: "broker", N: n, Addr: fmt.Sprintf("%s:%d", c.BrokerHost(n), KafkaPort), PID: l.brokerPID(n)}
		switch {
		case p.PID > 0 && slices.Contains(st.Registered, int32(n)):
			p.Detail, p.Healthy = "registered, unfenced", true
		case p.PID > 0 && slices.Contains(st.Fenced, int32(n)):
			p.Detail = "running, registered but fenced"
		case p.PID > 0 && berr != nil:
			p.Detail = "running; DescribeCluster does not answer"
		case p.PID > 0:
			p.Detail = "running, not registered and unfenced"
		default:
			p.Detail = "stopped"
			for _, a := range l.State.Scenarios {
				if a.DownBroker == int32(n) {
					p.Detail = fmt.Sprintf("stopped (left down by scenario %s on %q)", a.Scenario, a.Topic)
				}
			}
		}
		if c.Combined && p.PID > 0 {
			role, ok := combinedRole(q, qerr, int32(n), now)
			p.Detail, p.Healthy = p.Detail+"; "+role, p.Healthy && ok
		}
		st.Parts = append(st.Parts, p)
	}
	for _, n := range l.sshHosts() {
		st.Parts = append(st.Parts, l.sshdPart(n))
	}
	for _, p := range st.Parts {
		st.Healthy = st.Healthy && p.Healthy
	}
	return st
}

// Print writes the status as a table an operator can read.
func (l *Lab) Print(w io.Writer, st Status) {
	c := l.State.Config
	if c.KRaft {
		q := "controller.quorum.voters " + c.Voters()
		if c.DynamicQuorum() {
			q = "a dynamic quorum (controller.quorum.bootstrap.servers " + strings.Join(c.controllerAddrs(), ",") + "), formatted with --initial-controllers " + l.State.initialControllers()
		}
		fmt.Fprintf(w, "lab %s (KRaft, cluster id %s)\n  %s%s\n", l.Dir, l.State.ClusterID, q, ibpNote(l.State))
	} else {
		fmt.Fprintf(w, "lab %s\n  zookeeper.connect %s%s\n", l.Dir, c.ZKConnect(), ibpNote(l.State))
	}
	for _, p := range st.Parts {
		pid := "-"
		if p.PID > 0 {
			pid = fmt.Sprint(p.PID)
		}
		mark := "ok  "
		if !p.Healthy {
			mark = "DOWN"
		}
		fmt.Fprintf(w, "  %s %-10s %d  %-18s pid %-7s %s\n", mark, p.Kind, p.N, p.Addr, pid, p.Detail)
	}
	ctrl := "none"
	if st.Controller >= 0 {
		ctrl = fmt.Sprint(st.Controller)
	}
	if c.KRaft {
		var q ports.Quorum
		if st.Quorum != nil {
			q = *st.Quorum
		}
		fmt.Fprintf(w, "  quorum: %s\n  registered and unfenced brokers %v, fenced %v\n", quorumLine(q, st.QuorumErr, time.Now()), st.Registered, st.Fenced)
	} else {
		fmt.Fprintf(w, "  registered brokers %v, controller %s\n", st.Registered, ctrl)
	}
	for _, a := range l.State.Scenarios {
		fmt.Fprintf(w, "  broken on purpose: %s on topic %q at %s\n", a.Scenario, a.Topic, a.At.Local().Format(time.DateTime))
	}
	fmt.Fprintf(w, "  inventory %s\n", l.InventoryPath())
}
