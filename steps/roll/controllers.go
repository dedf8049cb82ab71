package roll

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// Controllers rolls the KRaft controllers one at a time, the quorum's
// leader last (the migration's finalize): a controller is up while its
// controller listener accepts connections, and the gate after each is a
// quorum leader with that controller a voter caught up to the high
// watermark, and the brokers healthy. As a Guard it reads the quorum
// right before each stop: a leader, every controller of the inventory a
// voter and caught up, and a majority of voters caught up without the one
// stopping (brokers.QuorumMargin.StopRisk).
type Controllers struct {
	HealthChecks  int
	HealthTimeout time.Duration
	// Header: each read of the quorum that changes what it shows puts
	// the leader, epoch and margin in the run's status line (the TUI's
	// header), for the roll of the controllers themselves.
	Header bool
	shown  string
}

func (c *Controllers) Noun() string { return "controller" }
func (c *Controllers) Hosts(env *steps.Env) []ports.Host {
	hs := slices.Clone(env.Target.Controllers)
	slices.SortFunc(hs, func(a, b ports.Host) int { return int(a.ID) - int(b.ID) })
	return hs
}
func (c *Controllers) Begin(context.Context, *steps.Env) error { return nil }

// Last is the quorum's leader, when the quorum answers.
func (c *Controllers) Last(ctx context.Context, env *steps.Env) (int32, string) {
	q, err := env.Kafka.Quorum(ctx, ControllerAddrs(env.Target))
	if err != nil || q.Leader < 0 {
		return -1, ""
	}
	return q.Leader, "the quorum's leader"
}

func (c *Controllers) Look(ctx context.Context, env *steps.Env, id int32) (Look, error) {
	h, _ := env.Target.Controller(id)
	up := env.Kafka.Listening(ctx, h.Addr)
	return Look{Up: up, New: up, Addr: h.Addr}, nil
}

func (c *Controllers) Plain(_ *steps.Env, ph Phase, a Args, timeout time.Duration) (string, string) {
	switch ph {
	case PhaseSafe:
		return fmt.Sprintf("controller %d", a.Node), fmt.Sprintf("read right before the stop, from the quorum: a leader, every controller a voter caught up (within %s of the leader, controller.quorum.fetch.timeout.ms's default), and a majority of voters caught up without it", brokers.FetchTimeout)
	case PhaseGone:
		return a.Addr, fmt.Sprintf("port closed, at most %s", timeout)
	case PhaseBack:
		return a.Addr, fmt.Sprintf("listening, at most %s", timeout)
	case PhaseGate:
		return "metadata quorum and brokers", fmt.Sprintf("a leader, controller %d a voter caught up to the high watermark, and the brokers healthy; at most %s", a.Node, c.HealthTimeout)
	}
	return "", ""
}

func (c *Controllers) Wait(ctx context.Context, env *steps.Env, a Args, timeout time.Duration) error {
	h, _ := env.Target.Controller(a.Node)
	switch a.Phase {
	case PhaseGone:
		err := WaitListening(ctx, env, h, false, timeout)
		if err == nil {
			c.showNow(ctx, env) // the margin while it is down
		}
		return err
	case PhaseBack:
		return WaitListening(ctx, env, h, true, timeout)
	case PhaseGate:
		id := a.Node
		if err := WaitQuorum(ctx, env, &id, c.HealthTimeout); err != nil {
			return err
		}
		c.showNow(ctx, env) // the margin back, or a new leader
		checks, err := HoldHealth(ctx, env, brokers.HostIDs(env.Target), max(1, c.HealthChecks), c.HealthTimeout)
		for _, ch := range checks {
			env.Check(ch)
		}
		return err
	}
	return fmt.Errorf("roll: controller %d: nothing to wait for in phase %s", a.Node, a.Phase)
}

// Verify: the brokers healthy (the kind checks the quorum).
func (c *Controllers) Verify(ctx context.Context, env *steps.Env) []steps.Check {
	return VerifyHealth(ctx, env, c.HealthChecks, c.HealthTimeout)
}

// Snapshot reads the metadata quorum: a voter seen not caught up (or a
// controller not listening) is read again a second later before it counts
// (a voter between two fetches is not a voter down). When a controller is
// a combined node (process.roles=broker,controller) its stop stops a
// broker too: the snapshot then holds the brokers' partitions as well, so
// that Risks judges both the quorum rule and the partition rule before
// each stop (as Strimzi's KafkaRoller: canRollController and the
// brokers' availability, KafkaRoller 785–790).
func (c *Controllers) Snapshot(ctx context.Context, env *steps.Env) (*Snapshot, error) {
	s, down, err := c.read(ctx, env)
	if err != nil {
		return nil, err
	}
	if len(down) > 0 {
		if err := env.Sleep(ctx, time.Second); err != nil {
			return nil, err
		}
		if s, _, err = c.read(ctx, env); err != nil {
			return nil, err
		}
	}
	c.show(env, s)
	if !slices.ContainsFunc(c.Hosts(env), func(h ports.Host) bool { return env.Target.Combined(h.ID) }) {
		return s, nil
	}
	b, err := (&KafkaBrokers{}).Snapshot(ctx, env)
	if err != nil {
		return nil, err
	}
	s.Problems = append(s.Problems, b.Problems...)
	s.Partitions, s.MinISR = b.Partitions, b.MinISR
	return s, nil
}

// show puts s in the run's status line, when the roll shows the quorum and
// the line changed.
func (c *Controllers) show(env *steps.Env, s *Snapshot) {
	if line := s.Status(); c.Header && line != c.shown {
		c.shown = line
		env.Status(line)
	}
}

// showNow reads the quorum once for the status line (a read that fails
// leaves the line as it was: the waits report their own errors).
func (c *Controllers) showNow(ctx context.Context, env *steps.Env) {
	if !c.Header {
		return
	}
	if s, _, err := c.read(ctx, env); err == nil {
		c.show(env, s)
	}
}

// Status is the quorum in one line: its leader and epoch, how many voters
// are caught up and how many could be lost, and who is not caught up.
func (s *Snapshot) Status() string {
	q, m := s.Quorum, s.Margin
	leader := "NO LEADER"
	if q.Leader >= 0 {
		leader = fmt.Sprintf("leader %d", q.Leader)
	}
	line := fmt.Sprintf("metadata quorum: %s, epoch %d · %d of %d voters caught up, a majority is %d · margin %d", leader, q.Epoch, m.CaughtUp, m.Voters, m.Majority, max(m.CaughtUp-m.Majority, 0))
	if len(m.Down) > 0 {
		var ids []string
		for _, id := range slices.Sorted(maps.Keys(m.Down)) {
			ids = append(ids, fmt.Sprint(id))
		}
		line += " · not caught up: " + strings.Join(ids, ", ")
	}
	return line
}

func (c *Controllers) read(ctx context.Context, env *steps.Env) (*Snapshot, map[int32]string, error) {
	q, err := env.Kafka.Quorum(ctx, ControllerAddrs(env.Target))
	if err != nil {
		return nil, nil, fmt.Errorf("the metadata quorum does not answer (%w): no controller can be stopped safely without it", err)
	}
	s := &Snapshot{Quorum: &q}
	if q.Leader < 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("the metadata quorum has no leader (epoch %d)", q.Epoch))
	}
	down := brokers.Lagging(q, brokers.FetchTimeout)
	var voters []int32
	for _, v := range q.Voters {
		voters = append(voters, v.ID)
	}
	for _, h := range c.Hosts(env) {
		switch {
		case !slices.Contains(voters, h.ID):
			s.Problems = append(s.Problems, fmt.Sprintf("controller %d is not a voter (voters %s)", h.ID, fmt.Sprint(voters)))
		case h.Addr != "" && !env.Kafka.Listening(ctx, h.Addr):
			down[h.ID] = "not listening on " + h.Addr
		}
	}
	for _, id := range slices.Sorted(maps.Keys(down)) {
		s.Problems = append(s.Problems, fmt.Sprintf("controller %d is not caught up: %s", id, down[id]))
	}
	s.Margin = brokers.MarginOf(q, down)
	return s, down, nil
}

var (
	_ Nodes = (*Controllers)(nil)
	_ Guard = (*Controllers)(nil)
)

// ControllerAddrs are the KRaft controllers' listeners.
func ControllerAddrs(t ports.Target) []string {
	var out []string
	for _, c := range t.Controllers {
		out = append(out, c.Addr)
	}
	return out
}

// WaitListening waits until controller c listens (want) or its port is
// closed (!want).
func WaitListening(ctx context.Context, env *steps.Env, c ports.Host, want bool, timeout time.Duration) error {
	what := fmt.Sprintf("controller %d to listen on %s", c.ID, c.Addr)
	if !want {
		what = fmt.Sprintf("controller %d's port %s to close", c.ID, c.Addr)
	}
	return WaitFor(ctx, env, timeout, what, func() (bool, string) {
		return env.Kafka.Listening(ctx, c.Addr) == want, map[bool]string{true: "still listening", false: "not listening"}[!want]
	})
}

// WaitQuorum waits for a leader and every controller a voter; with
// caughtUp, controller id's log must also reach the high watermark the
// quorum had when the wait began.
func WaitQuorum(ctx context.Context, env *steps.Env, caughtUp *int32, timeout time.Duration) error {
	var ids []int32
	for _, c := range env.Target.Controllers {
		ids = append(ids, c.ID)
	}
	var hw int64 = -1
	return WaitFor(ctx, env, timeout, "the KRaft quorum", func() (bool, string) {
		q, err := env.Kafka.Quorum(ctx, ControllerAddrs(env.Target))
		if err != nil {
			return false, err.Error()
		}
		if q.Leader < 0 {
			return false, "no leader"
		}
		var voters []int32
		for _, v := range q.Voters {
			voters = append(voters, v.ID)
		}
		for _, id := range ids {
			if !slices.Contains(voters, id) {
				return false, fmt.Sprintf("controller %d is not a voter (voters %s)", id, fmt.Sprint(voters))
			}
		}
		if caughtUp == nil {
			env.Logf("KRaft quorum: leader %d, epoch %d, voters %s", q.Leader, q.Epoch, fmt.Sprint(voters))
			return true, ""
		}
		if hw < 0 {
			hw = q.HighWatermark
		}
		for _, v := range q.Voters {
			if v.ID == *caughtUp {
				if v.LogEndOffset >= hw {
					env.Logf("controller %d caught up: log end offset %d ≥ %d (leader %d)", v.ID, v.LogEndOffset, hw, q.Leader)
					return true, ""
				}
				return false, fmt.Sprintf("controller %d at offset %d of %d", v.ID, v.LogEndOffset, hw)
			}
		}
		return false, "not a voter"
	})
}
