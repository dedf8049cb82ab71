package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps/remote"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// BrokerCommand runs broker id's stop or start command from the lab's
// inventory over SSH — verified host key, the lab user's key — streaming
// its output, then waits until the cluster agrees: in ZooKeeper mode the
// broker's /brokers/ids/<id> is gone after a stop, present after a start;
// in a KRaft lab it leaves, or joins, the registered and unfenced brokers
// (DescribeCluster).
func (l *Lab) BrokerCommand(ctx context.Context, id int32, action string, out func(string)) error {
	if err := l.runNodeCommand(ctx, id, false, action, fmt.Sprintf("broker %d", id), out); err != nil {
		return err
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	want := action == "start"
	if l.State.KRaft() {
		kc, err := l.kafkaClient()
		if err != nil {
			return err
		}
		defer kc.Close()
		var st BrokerStates
		var serr error
		err = waitFor(wctx, 200*time.Millisecond, func() bool {
			st, serr = kraftBrokers(wctx, kc)
			return serr == nil && slices.Contains(st.Unfenced, id) == want
		})
		if err != nil {
			return fmt.Errorf("broker %d: %s command succeeded but after 90s it is %s (unfenced %v, fenced %v, %v)", id, action,
				map[bool]string{true: "still not registered and unfenced", false: "still unfenced"}[want], st.Unfenced, st.Fenced, serr)
		}
		verb := map[bool]string{true: "registered and unfenced", false: "fenced or gone (not among the unfenced brokers)"}[want]
		out(fmt.Sprintf("broker %d %s %.1fs after the %s command began", id, verb, time.Since(start).Seconds(), action))
		return nil
	}
	inv, err := inventory.Load(l.InventoryPath())
	if err != nil {
		return err
	}
	zc, err := zookeeper.Dial(ctx, inv.ZooKeeper.Connect, l.ZKOptions())
	if err != nil {
		return err
	}
	defer zc.Close()
	_, err = zc.WaitBrokers(wctx, func(ids []int32) bool { return slices.Contains(ids, id) == want })
	if err != nil {
		return fmt.Errorf("broker %d: %s command succeeded but /brokers/ids/%d is %s after 90s: %w", id, action, id,
			map[bool]string{true: "still missing", false: "still present"}[want], err)
	}
	verb := map[bool]string{true: "registered in ZooKeeper", false: "gone from ZooKeeper"}[want]
	out(fmt.Sprintf("broker %d %s %.1fs after the %s command began", id, verb, time.Since(start).Seconds(), action))
	return nil
}

// runNodeCommand runs a broker's (or, with controller, a KRaft
// controller's) stop or start command from the lab's inventory over SSH,
// streaming its output.
func (l *Lab) runNodeCommand(ctx context.Context, id int32, controller bool, action, label string, out func(string)) error {
	inv, err := inventory.Load(l.InventoryPath())
	if err != nil {
		return err
	}
	b, ok := inv.Broker(id)
	if controller {
		ok = false
		for _, c := range inv.KRaftControllers {
			if c.ID == id {
				b, ok = c, true
			}
		}
	}
	if !ok {
		return fmt.Errorf("%w: %s is not in %s", ErrWrongLab, label, l.InventoryPath())
	}
	cmd := b.Start
	if action == "stop" {
		cmd = b.Stop
	}
	s := inv.SSHFor(b)
	t := remote.Target{Host: b.Host, Port: s.Port, User: s.User, KnownHostsFiles: []string{s.KnownHosts},
		ConnectTimeout: s.ConnectTimeout.Duration, UseAgent: s.Agent, ProxyJump: s.ProxyJump}
	if s.IdentityFile != "" {
		t.IdentityFiles = []string{s.IdentityFile}
	}
	cl, err := remote.Dial(ctx, t)
	if err != nil {
		return fmt.Errorf("%s %s not run: %w", label, action, err)
	}
	defer cl.Close()
	out(fmt.Sprintf("[%s@%s] $ %s", s.User, cl.Addr(), cmd))
	if s.Become == inventory.BecomeSudo {
		cmd = remote.Sudo(cmd)
	}
	if _, err := cl.Run(ctx, cmd, func(ln remote.Line) { out(fmt.Sprintf("[%s] %s", label, ln.Text)) }); err != nil {
		return fmt.Errorf("%s %s: %w", label, action, err)
	}
	return nil
}
