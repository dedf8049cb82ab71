package lab

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/zookeeper"
)

// Part is one process of the lab.
type Part struct {
	Kind    string // zookeeper, broker, sshd
	N       int
	Addr    string
	PID     int
	Detail  string
	Healthy bool
}

// Status is what `kremedy lab status` shows.
type Status struct {
	Parts      []Part
	Registered []int32
	Controller int32
	Healthy    bool
}

// Status inspects processes, ports and ZooKeeper registrations.
func (l *Lab) Status(ctx context.Context) Status {
	c := l.State.Config
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
		st.Parts = append(st.Parts, p)
		s := Part{Kind: "sshd", N: n, Addr: fmt.Sprintf("%s:%d", c.BrokerHost(n), SSHPort), PID: l.sshdPID(n)}
		s.Healthy = s.PID > 0 && listening(c.BrokerHost(n), SSHPort)
		s.Detail = map[bool]string{true: "listening", false: "not running"}[s.Healthy]
		st.Parts = append(st.Parts, s)
	}
	for _, p := range st.Parts {
		st.Healthy = st.Healthy && p.Healthy
	}
	return st
}

// Print writes the status as a table an operator can read.
func (l *Lab) Print(w io.Writer, st Status) {
	c := l.State.Config
	fmt.Fprintf(w, "lab %s\n  zookeeper.connect %s%s\n", l.Dir, c.ZKConnect(), ibpNote(l.State))
	for _, p := range st.Parts {
		pid := "-"
		if p.PID > 0 {
			pid = fmt.Sprint(p.PID)
		}
		mark := "ok  "
		if !p.Healthy {
			mark = "DOWN"
		}
		fmt.Fprintf(w, "  %s %-9s %d  %-18s pid %-7s %s\n", mark, p.Kind, p.N, p.Addr, pid, p.Detail)
	}
	ctrl := "none"
	if st.Controller >= 0 {
		ctrl = fmt.Sprint(st.Controller)
	}
	fmt.Fprintf(w, "  registered brokers %v, controller %s\n", st.Registered, ctrl)
	for _, a := range l.State.Scenarios {
		fmt.Fprintf(w, "  broken on purpose: %s on topic %q at %s\n", a.Scenario, a.Topic, a.At.Local().Format(time.DateTime))
	}
	fmt.Fprintf(w, "  inventory %s\n", l.InventoryPath())
}
