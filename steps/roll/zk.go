package roll

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// ZooKeeperBrokers rolls the brokers of a ZooKeeper-mode cluster: a broker
// is up while it is registered in /brokers/ids, a new process when its
// registration's ZooKeeper session differs from the one it had when the
// roll first planned, and the cluster is read from ZooKeeper's partition
// states (rolling-restart, topic-cleanup's rolling mode).
type ZooKeeperBrokers struct {
	// Key names the run fact holding the brokers' ZooKeeper sessions when
	// the roll first planned.
	Key string
	// The health gate after each broker: HealthChecks healthy rounds in a
	// row, one a second, within HealthTimeout.
	HealthChecks  int
	HealthTimeout time.Duration

	sessions map[int32]int64
	// held is when this attempt's gate last passed with no broker still
	// under the ZooKeeper session it had when the roll began (zero: not in
	// this attempt).
	held time.Time
}

func (z *ZooKeeperBrokers) Noun() string                      { return "broker" }
func (z *ZooKeeperBrokers) Hosts(env *steps.Env) []ports.Host { return brokerHosts(env) }

// brokerHosts are the inventory's brokers, ascending.
func brokerHosts(env *steps.Env) []ports.Host {
	hs := slices.Clone(env.Target.Hosts)
	slices.SortFunc(hs, func(a, b ports.Host) int { return int(a.ID) - int(b.ID) })
	return hs
}

// Begin: the brokers' ZooKeeper sessions when the roll first planned,
// saved in the run's history then: every later plan, apply and resume
// measures "a new process" against them.
func (z *ZooKeeperBrokers) Begin(ctx context.Context, env *steps.Env) error {
	var s map[int32]int64
	if ok, err := env.Load(z.Key, &s); err != nil || ok {
		z.sessions = s
		return err
	}
	s = map[int32]int64{}
	for _, id := range brokers.HostIDs(env.Target) {
		_, session, ok, err := brokers.Registration(ctx, env.ZK, id)
		if err != nil {
			return err
		}
		if ok {
			s[id] = session
		}
	}
	z.sessions = s
	return env.Save(z.Key, s)
}

func (z *ZooKeeperBrokers) Last(ctx context.Context, env *steps.Env) (int32, string) {
	ctrl, err := brokers.Controller(ctx, env.ZK)
	if err != nil {
		return -1, ""
	}
	return ctrl, "the controller"
}

func (z *ZooKeeperBrokers) Look(ctx context.Context, env *steps.Env, id int32) (Look, error) {
	reg, session, ok, err := brokers.Registration(ctx, env.ZK, id)
	if err != nil {
		return Look{}, err
	}
	h, _ := env.Target.Host(id)
	l := Look{Up: ok, New: ok && session != z.sessions[id], Addr: h.Addr}
	if ok {
		l.Addr = reg.Addr()
	}
	return l, nil
}

func (z *ZooKeeperBrokers) Plain(env *steps.Env, ph Phase, a Args, timeout time.Duration) (string, string) {
	zn := fmt.Sprintf("%s%s/%d", env.ZK.Chroot(), kafkazk.BrokerIDsPath, a.Node)
	switch ph {
	case PhaseSafe:
		return a.Who("broker"), "read right before the stop: every broker registered, no partition short, and stopping " + them(a) + " leaves every partition online and at or above min.insync.replicas"
	case PhaseGone:
		return zn, fmt.Sprintf("znode gone, port %s closed, at most %s", text.OrDash(a.Addr), timeout)
	case PhaseBack:
		return zn, fmt.Sprintf("registered again under a new session, at most %s", timeout)
	case PhaseGate:
		return "cluster", fmt.Sprintf("health gate: every broker registered, a controller, no offline or under-replicated partition, the brokers' metadata agreeing; %d checks in a row, at most %s", max(1, z.HealthChecks), z.HealthTimeout)
	}
	return "", ""
}

func (z *ZooKeeperBrokers) Wait(ctx context.Context, env *steps.Env, a Args, timeout time.Duration) error {
	switch a.Phase {
	case PhaseGone:
		return WaitGone(ctx, env, a.Node, a.Addr, timeout)
	case PhaseBack:
		return z.waitBack(ctx, env, a.Node, timeout)
	case PhaseGate:
		return z.gate(ctx, env)
	}
	return fmt.Errorf("roll: broker %d: nothing to wait for in phase %s", a.Node, a.Phase)
}

// waitBack waits for broker id to register again under a new session.
func (z *ZooKeeperBrokers) waitBack(ctx context.Context, env *steps.Env, id int32, timeout time.Duration) error {
	start := env.Now()
	old := z.sessions[id]
	stop := env.ProgressEvery(5*time.Second, func() string {
		return fmt.Sprintf("waiting for broker %d to register: %s of %s", id, env.Now().Sub(start).Round(time.Second), timeout)
	})
	err := brokers.WaitRegistered(ctx, env.ZK, []int32{id}, timeout)
	stop()
	ReportDown(ctx, env)
	if err != nil {
		return fmt.Errorf("broker %d did not register again within %s after its start command: %w", id, timeout, err)
	}
	_, session, ok, err := brokers.Registration(ctx, env.ZK, id)
	switch {
	case err != nil:
		return err
	case !ok || session == old:
		return fmt.Errorf("%w: broker %d is registered under the ZooKeeper session it had before its stop (%#x): it was not restarted", steps.ErrCheckFailed, id, old)
	}
	env.Logf("broker %d registered again %s after its start command (session %#x)", id, env.Now().Sub(start).Round(time.Millisecond), session)
	return nil
}

// gate holds the health gate after a broker's restart: the brokers that
// are new processes must serve no topic ZooKeeper lacks; the others, still
// the processes the roll began with, may (only their restart clears it).
func (z *ZooKeeperBrokers) gate(ctx context.Context, env *steps.Env) error {
	inv := brokers.HostIDs(env.Target)
	var pending []int32
	for _, id := range inv {
		if _, session, ok, err := brokers.Registration(ctx, env.ZK, id); err == nil && ok && session == z.sessions[id] {
			pending = append(pending, id)
		}
	}
	g := Gate{Want: inv, Rolling: true, Pending: pending}
	checks, err := g.Hold(ctx, env, max(1, z.HealthChecks), z.HealthTimeout)
	for _, c := range checks {
		env.Check(c)
	}
	if err == nil && len(pending) == 0 {
		z.held = env.Now()
	}
	return err
}

// Verify: the whole cluster healthy with every broker's metadata agreeing
// about every topic.
func (z *ZooKeeperBrokers) Verify(ctx context.Context, env *steps.Env) []steps.Check {
	n, timeout := max(1, z.HealthChecks), z.HealthTimeout
	if env.Rechecking() {
		n, timeout = 1, 0
	}
	g := Gate{Want: brokers.HostIDs(env.Target)}
	if n > 1 && !z.held.IsZero() && env.Now().Sub(z.held) < time.Second {
		// The roll's last gate held these checks (and more: no restarted
		// broker serves a stale topic) n rounds in a row just now, no
		// broker under its first session: one more round re-reads that
		// state; a round that fails falls back to the whole hold.
		if checks, _ := g.round(ctx, env.Cluster, env.Now); steps.AllOK(checks) {
			env.Logf("the cluster read healthy again: the health gate after the last restart held %d rounds in a row %s before", n, env.Now().Sub(z.held).Round(time.Millisecond))
			return checks
		}
	}
	checks, _ := g.Hold(ctx, env, n, timeout)
	return checks
}

// Snapshot reads ZooKeeper's view of every partition and the brokers'
// min.insync.replicas: the cluster is whole when every inventory broker
// is registered (and no partition is short).
func (z *ZooKeeperBrokers) Snapshot(ctx context.Context, env *steps.Env) (*Snapshot, error) {
	st, err := env.ZK.ReadState(ctx)
	if err != nil {
		return nil, fmt.Errorf("read ZooKeeper %s: %w", env.Target.ZKConnect, err)
	}
	s := &Snapshot{Partitions: brokers.PartitionsOfState(st)}
	var down []int32
	for _, id := range brokers.HostIDs(env.Target) {
		if !slices.Contains(st.Brokers, id) {
			down = append(down, id)
		}
	}
	if len(down) > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("brokers %s are not registered", fmt.Sprint(down)))
	}
	if s.MinISR, err = brokers.ReadMinISR(ctx, env.Kafka, st.Brokers, brokers.OverridesOf(st)); err != nil {
		return nil, err
	}
	return s, nil
}

var (
	_ Nodes = (*ZooKeeperBrokers)(nil)
	_ Guard = (*ZooKeeperBrokers)(nil)
)
