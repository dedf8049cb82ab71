package space

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// start is space-start: the broker started again (a running broker with
// an offline dir restarted: ZooKeeper-mode Kafka brings a dir back only
// at a start), then its dirs online and every partition back in ISR.
type start struct{ o startOpts }

type startOpts struct {
	brokerOpts
	StopTimeout   time.Duration `opt:"stop_timeout" default:"5m"`
	StartTimeout  time.Duration `opt:"start_timeout" default:"5m"`
	HealthTimeout time.Duration `opt:"health_timeout" default:"10m"`
}

// phase is what one of start's actions does.
type phase string

const (
	phaseStop   phase = "stop"
	phaseGone   phase = "gone"
	phaseStart  phase = "start"
	phaseOnline phase = "online"
	phaseISR    phase = "isr"
)

type startArgs struct {
	Phase phase `json:"phase"`
}

func (k *start) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	id := int32(k.o.Broker)
	h, ok := env.Target.Host(id)
	if !ok {
		return nil, fmt.Errorf("%w: broker %d is not in the inventory; nothing was changed", steps.ErrRefused, id)
	}
	reg, err := live(ctx, env)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{}
	act := func(ph phase, op steps.Op, detail string) {
		p.Actions = append(p.Actions, steps.Action{ID: fmt.Sprintf("broker-%d/%s", id, ph), Op: op, Broker: id, Target: fmt.Sprintf("broker %d", id), Detail: detail, Args: startArgs{Phase: ph}})
	}
	if slices.Contains(reg, id) {
		offline, err := offlineDirs(ctx, env, id)
		if err != nil {
			return nil, err
		}
		if len(offline) == 0 {
			p.NoOp, p.Summary = true, fmt.Sprintf("broker %d runs with every log dir online: nothing to start", id)
			return p, nil
		}
		if err := safeToStop(ctx, env, id); err != nil {
			return nil, err
		}
		p.Summary = fmt.Sprintf("restart broker %d: its log dirs %s are offline, and a ZooKeeper-mode broker brings a dir back only when it starts", id, strings.Join(offline, ", "))
		act(phaseStop, steps.OpSSH, h.Stop+" on "+h.On())
		act(phaseGone, steps.OpWait, fmt.Sprintf("broker %d stops serving (at most %s)", id, k.o.StopTimeout))
	} else {
		p.Summary = fmt.Sprintf("start broker %d again (down: its log dir failed)", id)
	}
	act(phaseStart, steps.OpSSH, h.Start+" on "+h.On())
	act(phaseOnline, steps.OpWait, fmt.Sprintf("broker %d serves again and DescribeLogDirs reports every dir online (at most %s)", id, k.o.StartTimeout))
	act(phaseISR, steps.OpWait, fmt.Sprintf("every broker registered, no offline or under-replicated partition: broker %d caught up (at most %s)", id, k.o.HealthTimeout))
	return p, nil
}

// offlineDirs are broker id's log dirs DescribeLogDirs reports offline,
// each with its error.
func offlineDirs(ctx context.Context, env *steps.Env, id int32) ([]string, error) {
	states, err := offlineStates(ctx, env, id)
	var out []string
	for _, s := range states {
		out = append(out, s.Dir+" ("+s.Err+")")
	}
	return out, err
}

// offlineStates are broker id's log dirs DescribeLogDirs reports offline.
func offlineStates(ctx context.Context, env *steps.Env, id int32) ([]ports.LogDirState, error) {
	rec, ok := env.Kafka.(ports.Records)
	if !ok {
		return nil, fmt.Errorf("%w: this Kafka client cannot send DescribeLogDirs; nothing was changed", ports.ErrUnsupported)
	}
	states, err := rec.DescribeLogDirs(ctx, id)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(states, func(s ports.LogDirState) bool { return s.Err == "" }), nil
}

// safeToStop refuses to stop running broker id when the one stop-safety
// rule (brokers.StopRisks) says the stop would take a partition offline or
// below min.insync.replicas, naming them. The partitions in its offline
// dirs are left out: the broker serves none of them, and the restart is
// what brings them back.
func safeToStop(ctx context.Context, env *steps.Env, id int32) error {
	risks, err := stopRisks(ctx, env, id)
	if err != nil {
		return fmt.Errorf("%w: the stop-safety rule could not be read (%w); broker %d was not stopped. Run again once the cluster answers", steps.ErrRefused, err, id)
	}
	if len(risks) > 0 {
		return fmt.Errorf("%w: stopping broker %d now would break: %s; broker %d was not stopped and its offline dirs stay offline. Bring those partitions' other replicas back in sync (`kremedy diagnose` names them), then run again or `kremedy resume`", steps.ErrRefused, id, text.Summarize(risks), id)
	}
	return nil
}

// stopRisks is what stopping broker id now would break by the one rule,
// without the partitions in its offline dirs (read over SSH).
func stopRisks(ctx context.Context, env *steps.Env, id int32) ([]string, error) {
	var g roll.Guard = &roll.ZooKeeperBrokers{}
	if env.ZK == nil {
		g = &roll.KafkaBrokers{}
	}
	snap, err := g.Snapshot(ctx, env)
	if err != nil {
		return nil, err
	}
	off, err := offlineStates(ctx, env, id)
	if err != nil {
		return nil, err
	}
	skip := map[string]bool{}
	if len(off) > 0 {
		var dirs []string
		for _, s := range off {
			dirs = append(dirs, s.Dir)
		}
		sp, err := brokers.ReadSpace(ctx, env.Hosts, id, dirs)
		if err != nil {
			return nil, err
		}
		for _, d := range sp {
			for _, p := range d.Partitions {
				skip[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = true
			}
		}
	}
	parts := slices.DeleteFunc(slices.Clone(snap.Partitions), func(p brokers.Partition) bool { return skip[p.Key()] })
	return brokers.StopRisks(parts, []int32{id}, snap.MinISR), nil
}

func (k *start) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[startArgs](a)
		if err != nil {
			return err
		}
		if err := env.Do(a, func() error { return k.do(ctx, env, a.Broker, args.Phase) }); err != nil {
			return err
		}
	}
	return nil
}

func (k *start) do(ctx context.Context, env *steps.Env, id int32, ph phase) error {
	h, _ := env.Target.Host(id)
	switch ph {
	case phaseStop:
		if reg, err := live(ctx, env); err == nil && !slices.Contains(reg, id) {
			env.Logf("broker %d serves no more: not stopped again", id)
			return nil
		}
		if err := safeToStop(ctx, env, id); err != nil { // read again right before the stop
			return err
		}
		return roll.RunOn(ctx, env, id, h.Stop)
	case phaseGone:
		return waitLive(ctx, env, id, false, k.o.StopTimeout)
	case phaseStart:
		if reg, err := live(ctx, env); err == nil && slices.Contains(reg, id) {
			env.Logf("broker %d serves already: not started again", id)
			return nil
		}
		return roll.RunOn(ctx, env, id, h.Start)
	case phaseOnline:
		if err := waitLive(ctx, env, id, true, k.o.StartTimeout); err != nil {
			return fmt.Errorf("broker %d did not serve again within %s after its start command: %w. Read its server.log: a dir still full fails the start again", id, k.o.StartTimeout, err)
		}
		return roll.WaitFor(ctx, env, k.o.StartTimeout, fmt.Sprintf("broker %d's log dirs online", id), func() (bool, string) {
			off, err := offlineDirs(ctx, env, id)
			if err != nil {
				return false, err.Error()
			}
			return len(off) == 0, "offline: " + strings.Join(off, ", ")
		})
	case phaseISR:
		checks, err := health(ctx, env, 3, k.o.HealthTimeout)
		for _, c := range checks {
			env.Check(c)
		}
		return err
	}
	return fmt.Errorf("space-start: unknown phase %q", ph)
}

// Verify: the broker registered with every dir online, the cluster
// healthy.
func (k *start) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	id := int32(k.o.Broker)
	reg, err := live(ctx, env)
	if err != nil {
		return nil, err
	}
	checks := []steps.Check{{Name: fmt.Sprintf("broker %d serves", id), OK: slices.Contains(reg, id), Detail: fmt.Sprint(reg)}}
	if off, err := offlineDirs(ctx, env, id); err == nil {
		checks = append(checks, steps.Check{Name: fmt.Sprintf("broker %d's log dirs online (DescribeLogDirs)", id), OK: len(off) == 0, Detail: "offline: " + orNoneList(off)})
	} else {
		checks = append(checks, steps.Check{Name: fmt.Sprintf("broker %d's log dirs online (DescribeLogDirs)", id), OK: false, Detail: err.Error()})
	}
	gate, _ := health(ctx, env, 1, 0)
	return append(checks, gate...), nil
}
