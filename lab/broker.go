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
// its output, then waits until ZooKeeper agrees: the broker's
// /brokers/ids/<id> is gone after a stop, present after a start.
func (l *Lab) BrokerCommand(ctx context.Context, id int32, action string, out func(string)) error {
	inv, err := inventory.Load(l.InventoryPath())
	if err != nil {
		return err
	}
	b, ok := inv.Broker(id)
	if !ok {
		return fmt.Errorf("%w: broker %d is not in %s", ErrWrongLab, id, l.InventoryPath())
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
		return fmt.Errorf("broker %d %s not run: %w", id, action, err)
	}
	defer cl.Close()
	out(fmt.Sprintf("[%s@%s] $ %s", s.User, cl.Addr(), cmd))
	if s.Become == inventory.BecomeSudo {
		cmd = remote.Sudo(cmd)
	}
	start := time.Now()
	if _, err := cl.Run(ctx, cmd, func(ln remote.Line) { out(fmt.Sprintf("[broker %d] %s", id, ln.Text)) }); err != nil {
		return fmt.Errorf("broker %d %s: %w", id, action, err)
	}
	zc, err := zookeeper.Dial(ctx, inv.ZooKeeper.Connect, l.ZKOptions())
	if err != nil {
		return err
	}
	defer zc.Close()
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	want := action == "start"
	_, err = zc.WaitBrokers(wctx, func(ids []int32) bool { return slices.Contains(ids, id) == want })
	if err != nil {
		return fmt.Errorf("broker %d: %s command succeeded but /brokers/ids/%d is %s after 90s: %w", id, action, id,
			map[bool]string{true: "still missing", false: "still present"}[want], err)
	}
	verb := map[bool]string{true: "registered in ZooKeeper", false: "gone from ZooKeeper"}[want]
	out(fmt.Sprintf("broker %d %s %.1fs after the %s command began", id, verb, time.Since(start).Seconds(), action))
	return nil
}
