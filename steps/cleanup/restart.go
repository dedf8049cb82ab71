package cleanup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// stopBrokers stops every broker over SSH with its own stop command, the
// controller last, and waits for proof that each is gone: the command's exit
// status, its /brokers/ids/<id> znode vanishing (a ZooKeeper watch, not
// sleep-polling) and its Kafka port closing.
type stopBrokers struct{ o stopOpts }

type stopOpts struct {
	topicOpts
	modeOpts
	// Gone bounds the wait for a stopped broker's registration to vanish.
	Gone time.Duration `opt:"gone_timeout" default:"60s"`
}

// brokerArgs: the broker an action is about, and its listener.
type brokerArgs struct {
	Broker int32  `json:"broker"`
	Addr   string `json:"addr,omitempty"`
}

func (k *stopBrokers) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	f, err := facts(env)
	if err != nil {
		return nil, err
	}
	if f.Clean {
		return cleanNoOp(k.o.topicOpts, "stop brokers for"), nil
	}
	if k.o.Mode == modeRolling {
		return &steps.Plan{NoOp: true, Summary: "rolling mode: the brokers were restarted by the rolling step; none is stopped here"}, nil
	}
	if !env.Preview() {
		for _, t := range k.o.names() {
			if err := refuseRecreated(ctx, env, t, "Brokers were not stopped"); err != nil {
				return nil, err
			}
		}
	}
	reg, err := brokers.Registered(ctx, env.ZK)
	if err != nil {
		return nil, err
	}
	ctrl, err := brokers.Controller(ctx, env.ZK)
	if err != nil {
		return nil, err
	}
	var order, last []int32
	addrs := map[int32]string{}
	for _, id := range brokers.HostIDs(env.Target) {
		h, _ := env.Target.Host(id)
		addrs[id] = brokers.Addr(ctx, env.ZK, id, firstOf(f.Addrs[id], h.Addr))
		switch {
		case id == ctrl:
			last = append(last, id)
		case !slices.Contains(reg, id):
			order = append([]int32{id}, order...) // unregistered first: stop is idempotent
		default:
			order = append(order, id)
		}
	}
	order = append(order, last...)
	p := &steps.Plan{Summary: fmt.Sprintf("stop all %d brokers over SSH, controller (%d) last", len(order), ctrl)}
	running := 0
	for _, id := range order {
		h, _ := env.Target.Host(id)
		up := slices.Contains(reg, id) || (addrs[id] != "" && env.Kafka.Listening(ctx, addrs[id]))
		if up {
			running++
		}
		state := "registered"
		if !up {
			state = "not registered (stop is run anyway: it is idempotent)"
		}
		args := brokerArgs{Broker: id, Addr: addrs[id]}
		p.Actions = append(p.Actions,
			steps.Action{ID: fmt.Sprintf("stop-%d", id), Op: steps.OpSSH, Broker: id, Target: fmt.Sprintf("broker %d on %s", id, h.On()), Detail: h.Stop + "   # " + state, Args: args},
			steps.Action{ID: fmt.Sprintf("gone-%d", id), Op: steps.OpWait, Broker: id, Target: fmt.Sprintf("%s%s/%d", env.ZK.Chroot(), kafkazk.BrokerIDsPath, id), Detail: "znode gone, port " + text.OrDash(addrs[id]) + " closed", Args: args})
	}
	if running == 0 {
		p.NoOp = true
		p.Summary = "every broker is already stopped (none registered, no port open)"
	}
	return p, nil
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// rest lists the brokers of the plan's actions after index i.
func rest(p *steps.Plan, i int) []int32 {
	var out []int32
	for _, a := range p.Actions[i+1:] {
		if !slices.Contains(out, a.Broker) {
			out = append(out, a.Broker)
		}
	}
	return out
}

func (k *stopBrokers) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for i, a := range p.Actions {
		b, err := steps.ArgsOf[brokerArgs](a)
		if err != nil {
			return err
		}
		switch a.Op {
		case steps.OpSSH:
			h, _ := env.Target.Host(b.Broker)
			if err := env.Do(a, func() error { return roll.RunOn(ctx, env, b.Broker, h.Stop) }); err != nil {
				if code, ok := brokers.ExitStatus(err); ok {
					return fmt.Errorf("broker %d's stop command exited %d: the broker is probably still running. It and the brokers after it (%v) were not stopped, and no segment was wiped. %s: %w", b.Broker, code, rest(p, i), brokers.StuckStop("broker", b.Broker, h.Host), err)
				}
				return fmt.Errorf("stop broker %d: %w. Its state is unknown; the brokers after it (%v) were not stopped and no segment was wiped", b.Broker, err, rest(p, i))
			}
		case steps.OpWait:
			if err := env.Do(a, func() error { return roll.WaitGone(ctx, env, b.Broker, b.Addr, k.o.Gone) }); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k *stopBrokers) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	f, err := facts(env)
	if err != nil || f.Clean || k.o.Mode == modeRolling {
		return nil, err
	}
	reg, err := brokers.Registered(ctx, env.ZK)
	if err != nil {
		return nil, err
	}
	var up []int32
	for _, id := range brokers.HostIDs(env.Target) {
		if slices.Contains(reg, id) {
			up = append(up, id)
		}
	}
	return []steps.Check{{Name: "no broker of the inventory is registered", OK: len(up) == 0, Detail: "registered: " + fmt.Sprint(up)}}, nil
}

// startBrokers starts every broker and holds a health gate: all registered,
// a controller, no offline or under-replicated partition anywhere, and every
// broker's own metadata agreeing, for N consecutive checks.
type startBrokers struct{ o startOpts }

type startOpts struct {
	modeOpts
	Checks  int           `opt:"health_checks"`
	Timeout time.Duration `opt:"health_timeout"`
	// Grace: partitions of other topics already unhealthy before the run
	// are counted during it, then named and excused while no worse.
	Grace time.Duration `opt:"health_grace"`
	// Parallel is how many start commands run at once: a hundred brokers
	// registering together would storm ZooKeeper and the controller.
	Parallel int `opt:"start_parallel" default:"10"`
}

// refuseRecreated refuses when the topic reappeared after this run deleted
// its znodes: a client (auto-create) is still attached, and wiping now
// would empty a live topic. notDone says what was not done.
func refuseRecreated(ctx context.Context, env *steps.Env, t, notDone string) error {
	if ok, err := exists(ctx, env, kafkazk.TopicPath(t)); err != nil {
		return err
	} else if ok && env.History().Done("delete-znodes") {
		return fmt.Errorf("%w: %s%s exists again after kremedy deleted it — a client recreated %q (auto.create.topics.enable?). %s. Detach every client, then resume", steps.ErrRefused, env.ZK.Chroot(), kafkazk.TopicPath(t), t, notDone)
	}
	return nil
}

func (k *startBrokers) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	reg, err := brokers.Registered(ctx, env.ZK)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Summary: "start every stopped broker, then wait until the whole cluster is healthy and every broker's metadata agrees"}
	// In rolling mode the brokers were started one by one; a preview lists
	// no start (a real run still starts a broker it finds down).
	preview := env.Preview() && k.o.Mode != modeRolling
	for _, id := range brokers.HostIDs(env.Target) {
		if slices.Contains(reg, id) && !preview {
			continue
		}
		h, _ := env.Target.Host(id)
		p.Actions = append(p.Actions, steps.Action{ID: fmt.Sprintf("start-%d", id), Op: steps.OpSSH, Broker: id, Target: fmt.Sprintf("broker %d on %s", id, h.On()), Detail: h.Start, Args: brokerArgs{Broker: id}})
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
		p.Summary = "every broker is registered; checking cluster health"
	} else {
		if n := len(p.Actions); n > k.parallel() {
			p.Notes = append(p.Notes, fmt.Sprintf("the %d start commands run %d at a time (start_parallel), so that the brokers do not all register with ZooKeeper and the controller at once", n, k.parallel()))
		}
		p.Actions = append(p.Actions, steps.Action{ID: "registered", Op: steps.OpWait, Target: "cluster", Detail: fmt.Sprintf("every broker registered (a ZooKeeper watch), at most %s", k.o.Timeout)})
		p.Notes = append(p.Notes, fmt.Sprintf("then the health gate: all registered, a controller, no offline/under-replicated partitions, all brokers' metadata equal, %d checks in a row, at most %s", k.checks(), k.o.Timeout))
	}
	return p, nil
}

func (k *startBrokers) checks() int { return max(1, k.o.Checks) }

func (k *startBrokers) parallel() int { return max(1, k.o.Parallel) }

func (k *startBrokers) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	// Start commands run in parallel, as a full restart does, at most
	// start_parallel at once; each is journaled on its own. A failure is
	// reported after all have returned.
	var starts []int32
	byBroker := map[int32]steps.Action{}
	for _, a := range p.Actions {
		if a.Op != steps.OpSSH {
			continue
		}
		b, err := steps.ArgsOf[brokerArgs](a)
		if err != nil {
			return err
		}
		starts, byBroker[b.Broker] = append(starts, b.Broker), a
	}
	errs := par.EachN(k.parallel(), starts, func(id int32) error {
		h, _ := env.Target.Host(id)
		if err := env.Do(byBroker[id], func() error { return roll.RunOn(ctx, env, id, h.Start) }); err != nil {
			return fmt.Errorf("broker %d did not start: %w (its log is on %s)", id, err, h.Host)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w. The other brokers were started and keep running; nothing after this step ran. Fix the cause and resume", err)
	}
	for _, a := range p.Actions {
		if a.Op != steps.OpWait {
			continue
		}
		start := env.Now()
		want := brokers.HostIDs(env.Target)
		stop := env.ProgressEvery(5*time.Second, func() string {
			reg, _ := brokers.Registered(ctx, env.ZK)
			return fmt.Sprintf("waiting for brokers to register: %s of %s registered, %s of %s", fmt.Sprint(reg), fmt.Sprint(want), env.Now().Sub(start).Round(time.Second), k.o.Timeout)
		})
		err := env.Do(a, func() error { return brokers.WaitRegistered(ctx, env.ZK, want, k.o.Timeout) })
		stop()
		roll.ReportDown(ctx, env)
		if err != nil {
			return err
		}
		env.Logf("all brokers %s registered %s after the start commands", fmt.Sprint(want), env.Now().Sub(start).Round(time.Millisecond))
	}
	return nil
}

// Verify is the health gate.
func (k *startBrokers) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	f, err := facts(env)
	if err != nil {
		return nil, err
	}
	n, deadline := k.checks(), env.Now().Add(k.o.Timeout)
	if env.Rechecking() {
		// Resume asks whether the cluster is healthy now; if not, the step
		// runs again (starting what is stopped) and then waits. Waiting
		// here would only delay that by the whole health timeout.
		n, deadline = 1, env.Now()
	}
	// Partitions already unhealthy before the run are waited for like any
	// other during the grace (they usually heal when they were only
	// catching up), then no longer counted: a restart cannot repair them.
	excuseFrom := env.Now().Add(k.o.Grace)
	gate := roll.Gate{Want: brokers.HostIDs(env.Target)}
	streak, round := 0, 0
	var last []steps.Check
	for {
		gate.Excused = nil
		if env.Rechecking() || !env.Now().Before(excuseFrom) {
			gate.Excused = func(key string, p ports.PartitionView) bool {
				b, ok := f.UnhealthyBefore[key]
				return ok && len(p.ISR) >= b.ISR && (!p.IsOffline() || b.Offline)
			}
		}
		last = gate.Check(ctx, env.Cluster)
		if steps.AllOK(last) {
			streak++
			if streak >= n {
				return last, nil
			}
		} else {
			streak = 0
		}
		if round++; round%5 == 0 {
			env.Progress("%s", roll.GateProgress(last, streak, n, env.Now().Sub(deadline.Add(-k.o.Timeout)), k.o.Timeout))
		}
		if env.Now().After(deadline) || ctx.Err() != nil {
			return last, nil
		}
		_ = env.Sleep(ctx, time.Second) // a cancelled ctx ends the loop above
	}
}
