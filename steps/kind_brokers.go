package steps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// stopBrokers stops every broker over SSH with its own stop command, the
// controller last, and waits for proof that each is gone: the command's exit
// status, its /brokers/ids/<id> znode vanishing (a ZooKeeper watch, not
// sleep-polling) and its Kafka port closing.
type stopBrokers struct{}

type stopPlan struct {
	Order []int32          `json:"order"`
	Addrs map[int32]string `json:"addrs"`
}

func (k *stopBrokers) Plan(ctx context.Context, r *Run) (*Plan, error) {
	if r.Facts.Clean {
		return r.cleanNoOp("stop brokers for"), nil
	}
	// A topic that reappeared after its znodes were deleted means a client
	// (auto-create) is still attached: stop, do not wipe a live topic.
	if !r.Preview {
		if ok, err := r.exists(ctx, TopicPath(r.Topic())); err != nil {
			return nil, err
		} else if ok && r.deletedZnodes() {
			return nil, fmt.Errorf("%w: %s%s exists again after kremedy deleted it — a client recreated %q (auto.create.topics.enable?). Brokers were not stopped. Detach every client, then resume", ErrRefused, r.ZK.Chroot(), TopicPath(r.Topic()), r.Topic())
		}
	}
	reg, err := r.registered(ctx)
	if err != nil {
		return nil, err
	}
	ctrl, err := r.controller(ctx)
	if err != nil {
		return nil, err
	}
	sp := stopPlan{Addrs: map[int32]string{}}
	var last []int32
	for _, id := range r.hostIDs() {
		sp.Addrs[id] = r.brokerAddr(ctx, id)
		switch {
		case id == ctrl:
			last = append(last, id)
		case !slices.Contains(reg, id):
			sp.Order = append([]int32{id}, sp.Order...) // unregistered first: stop is idempotent
		default:
			sp.Order = append(sp.Order, id)
		}
	}
	sp.Order = append(sp.Order, last...)
	p := &Plan{Summary: fmt.Sprintf("stop all %d brokers over SSH, controller (%d) last", len(sp.Order), ctrl)}
	running := 0
	for _, id := range sp.Order {
		h, _ := r.Target.Host(id)
		up := slices.Contains(reg, id) || (sp.Addrs[id] != "" && r.Kafka.Listening(ctx, sp.Addrs[id]))
		if up {
			running++
		}
		state := "registered"
		if !up {
			state = "not registered (stop is run anyway: it is idempotent)"
		}
		p.Actions = append(p.Actions, Action{Kind: "ssh", Broker: id, Target: fmt.Sprintf("broker %d on %s", id, h.Host), Detail: h.Stop + "   # " + state})
		p.Actions = append(p.Actions, Action{Kind: "wait", Broker: id, Target: fmt.Sprintf("%s%s/%d", r.ZK.Chroot(), BrokerIDsPath, id), Detail: "znode gone, port " + orDash(sp.Addrs[id]) + " closed"})
	}
	if running == 0 {
		p.NoOp = true
		p.Summary = "every broker is already stopped (none registered, no port open)"
	}
	p.Payload, _ = jsonRaw(sp)
	return p, nil
}

func (k *stopBrokers) Apply(ctx context.Context, r *Run, p *Plan) error {
	var sp stopPlan
	if err := fromRaw(p.Payload, &sp); err != nil {
		return err
	}
	for i, id := range sp.Order {
		h, _ := r.Target.Host(id)
		if err := r.Do(p.Actions[2*i], func() error { return r.RunOn(ctx, id, h.Stop) }); err != nil {
			if code, ok := exitStatus(err); ok {
				return fmt.Errorf("broker %d's stop command exited %d: the broker is probably still running. It and the brokers after it (%v) were not stopped, and no segment was wiped: %w", id, code, sp.Order[i+1:], err)
			}
			return fmt.Errorf("stop broker %d: %w. Its state is unknown; the brokers after it (%v) were not stopped and no segment was wiped", id, err, sp.Order[i+1:])
		}
		if err := r.Do(p.Actions[2*i+1], func() error { return r.waitGone(ctx, id, sp.Addrs[id]) }); err != nil {
			return err
		}
	}
	return nil
}

// waitGone waits for broker id's registration to vanish (watch) and its
// port to close, and logs how long after the command the watch fired.
func (r *Run) waitGone(ctx context.Context, id int32, addr string) error {
	start := r.now()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err := r.ZK.WaitChildren(wctx, BrokerIDsPath, func(kids []string) bool { return !slices.Contains(kids, fmt.Sprint(id)) })
	if err != nil {
		return fmt.Errorf("broker %d's stop command succeeded but %s%s/%d is still present after 60s: %w", id, r.ZK.Chroot(), BrokerIDsPath, id, err)
	}
	gone := r.now().Sub(start)
	if addr != "" {
		for i := 0; r.Kafka.Listening(ctx, addr); i++ {
			if i > 100 {
				return fmt.Errorf("broker %d: %s still accepts connections 10s after its registration vanished; something still runs there", id, addr)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	r.Logf("broker %d stopped: registration gone %s after the command returned, port %s closed", id, gone.Round(time.Millisecond), orDash(addr))
	return nil
}

func (k *stopBrokers) Verify(ctx context.Context, r *Run) ([]Check, error) {
	if r.Facts.Clean {
		return nil, nil
	}
	reg, err := r.registered(ctx)
	if err != nil {
		return nil, err
	}
	var up []int32
	for _, id := range r.hostIDs() {
		if slices.Contains(reg, id) {
			up = append(up, id)
		}
	}
	return []Check{{Name: "no broker of the inventory is registered", OK: len(up) == 0, Detail: "registered: " + i32s(up)}}, nil
}

// startBrokers starts every broker and holds a health gate: all registered,
// a controller, no offline or under-replicated partition anywhere, and every
// broker's own metadata agreeing, for N consecutive checks.
type startBrokers struct{}

func (k *startBrokers) Plan(ctx context.Context, r *Run) (*Plan, error) {
	reg, err := r.registered(ctx)
	if err != nil {
		return nil, err
	}
	p := &Plan{Summary: "start every stopped broker, then wait until the whole cluster is healthy and every broker's metadata agrees"}
	for _, id := range r.hostIDs() {
		if slices.Contains(reg, id) && !r.Preview {
			continue
		}
		h, _ := r.Target.Host(id)
		p.Actions = append(p.Actions, Action{Kind: "ssh", Broker: id, Target: fmt.Sprintf("broker %d on %s", id, h.Host), Detail: h.Start})
	}
	n := r.Meta.Params.Int("health_checks")
	if n <= 0 {
		n = 3
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
		p.Summary = "every broker is registered; checking cluster health"
	} else {
		p.Actions = append(p.Actions, Action{Kind: "wait", Target: "cluster", Detail: fmt.Sprintf("all registered, a controller, no offline/under-replicated partitions, all brokers' metadata equal, %d checks in a row", n)})
	}
	return p, nil
}

func (k *startBrokers) Apply(ctx context.Context, r *Run, p *Plan) error {
	// Start commands run in parallel, as a full restart does; each is
	// journaled on its own. A failure is reported after all have returned.
	var wg sync.WaitGroup
	errs := make([]error, len(p.Actions))
	for i, a := range p.Actions {
		if a.Kind != "ssh" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, _ := r.Target.Host(a.Broker)
			if err := r.Do(a, func() error { return r.RunOn(ctx, a.Broker, h.Start) }); err != nil {
				errs[i] = fmt.Errorf("broker %d did not start: %w (its log is on %s)", a.Broker, err, h.Host)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w. The other brokers were started and keep running; nothing after this step ran. Fix the cause and resume", err)
	}
	start := r.now()
	want := r.hostIDs()
	wctx, cancel := context.WithTimeout(ctx, r.Meta.Params.Duration("health_timeout", 3*time.Minute))
	defer cancel()
	_, err := r.ZK.WaitChildren(wctx, BrokerIDsPath, func(kids []string) bool {
		for _, id := range want {
			if !slices.Contains(kids, fmt.Sprint(id)) {
				return false
			}
		}
		return true
	})
	if err != nil {
		reg, _ := r.registered(ctx)
		return fmt.Errorf("%w: not every broker registered: %s of %s after %s", ErrCheckFailed, i32s(reg), i32s(want), r.now().Sub(start).Round(time.Second))
	}
	r.Logf("all brokers %s registered %s after the start commands", i32s(want), r.now().Sub(start).Round(time.Millisecond))
	return nil
}

// Verify is the health gate.
func (k *startBrokers) Verify(ctx context.Context, r *Run) ([]Check, error) {
	n := r.Meta.Params.Int("health_checks")
	if n <= 0 {
		n = 3
	}
	deadline := r.now().Add(r.Meta.Params.Duration("health_timeout", 3*time.Minute))
	if r.rechecking {
		// Resume asks whether the cluster is healthy now; if not, the step
		// runs again (starting what is stopped) and then waits. Waiting
		// here would only delay that by the whole health timeout.
		n, deadline = 1, r.now()
	}
	// Partitions already unhealthy before the run are waited for like any
	// other during the grace (they usually heal when they were only
	// catching up), then no longer counted: a restart cannot repair them.
	excuseFrom := r.now().Add(r.healthGrace())
	streak := 0
	var last []Check
	for {
		last = r.health(ctx, r.rechecking || !r.now().Before(excuseFrom))
		if allOK(last) {
			streak++
			if streak >= n {
				return last, nil
			}
		} else {
			streak = 0
		}
		if r.now().After(deadline) || ctx.Err() != nil {
			return last, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// health is one round of the cluster health checks. With excuse, the
// partitions preflight found unhealthy before the run are named and not
// counted.
func (r *Run) health(ctx context.Context, excuse bool) []Check {
	want := r.hostIDs()
	reg, err := r.registered(ctx)
	if err != nil {
		return []Check{{Name: "ZooKeeper answers", OK: false, Detail: err.Error()}}
	}
	ctrl, _ := r.controller(ctx)
	checks := []Check{
		{Name: "every broker registered", OK: slices.Equal(reg, want), Detail: "registered " + i32s(reg)},
		{Name: "a controller is elected", OK: ctrl >= 0, Detail: fmt.Sprintf("controller %d", ctrl)},
	}
	var offline, urp, disagree, before []string
	var ref *BrokerView
	for _, id := range want {
		v, err := r.Kafka.BrokerView(ctx, id)
		if err != nil {
			disagree = append(disagree, fmt.Sprintf("broker %d: %v", id, err))
			continue
		}
		for name, t := range v.Topics {
			for _, p := range t.Partitions {
				off, under := p.IsOffline(), p.UnderReplicated()
				if !off && !under {
					continue
				}
				key := fmt.Sprintf("%s-%d", name, p.Partition)
				if b, ok := r.Facts.UnhealthyBefore[key]; ok && excuse && len(p.ISR) >= b.ISR && (!off || b.Offline) {
					before = append(before, key) // no worse than before the run
				} else if off {
					offline = append(offline, key)
				} else {
					urp = append(urp, key)
				}
			}
		}
		if ref == nil {
			ref = &v
		} else if d := viewDiff(*ref, v); d != "" {
			disagree = append(disagree, d)
		}
	}
	slices.Sort(before)
	already := ""
	if before = slices.Compact(before); len(before) > 0 {
		already = "; no longer counted after the grace, already so before the run and no worse now: " + summarize(before)
	}
	checks = append(checks,
		Check{Name: "no offline partition", OK: len(offline) == 0, Detail: summarize(offline) + already},
		Check{Name: "no under-replicated partition", OK: len(urp) == 0, Detail: summarize(urp) + already},
		Check{Name: "every broker's metadata agrees", OK: len(disagree) == 0, Detail: summarize(disagree)},
	)
	return checks
}

// viewDiff describes the first differences between two brokers' views.
func viewDiff(a, b BrokerView) string {
	var d []string
	if a.Controller != b.Controller {
		d = append(d, fmt.Sprintf("controller %d vs %d", a.Controller, b.Controller))
	}
	if !slices.Equal(a.Brokers, b.Brokers) {
		d = append(d, fmt.Sprintf("live brokers %s vs %s", i32s(a.Brokers), i32s(b.Brokers)))
	}
	for name, ta := range a.Topics {
		tb, ok := b.Topics[name]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("%s known to broker %d only", name, a.Broker))
		case ta.ID != tb.ID:
			d = append(d, fmt.Sprintf("%s topic id %s vs %s", name, ta.ID, tb.ID))
		case len(ta.Partitions) != len(tb.Partitions):
			d = append(d, fmt.Sprintf("%s partitions %d vs %d", name, len(ta.Partitions), len(tb.Partitions)))
		default:
			for p, pa := range ta.Partitions {
				pb := tb.Partitions[p]
				if pa.Leader != pb.Leader || pa.LeaderEpoch != pb.LeaderEpoch || !slices.Equal(pa.ISR, pb.ISR) {
					d = append(d, fmt.Sprintf("%s-%d leader %d/epoch %d isr %s vs leader %d/epoch %d isr %s", name, p, pa.Leader, pa.LeaderEpoch, i32s(pa.ISR), pb.Leader, pb.LeaderEpoch, i32s(pb.ISR)))
				}
			}
		}
	}
	for name := range b.Topics {
		if _, ok := a.Topics[name]; !ok {
			d = append(d, fmt.Sprintf("%s known to broker %d only", name, b.Broker))
		}
	}
	if len(d) == 0 {
		return ""
	}
	slices.Sort(d)
	return fmt.Sprintf("broker %d vs %d: %s", a.Broker, b.Broker, summarize(d))
}

func summarize(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	slices.Sort(s)
	if len(s) > 6 {
		return strings.Join(s[:6], ", ") + fmt.Sprintf(" and %d more", len(s)-6)
	}
	return strings.Join(s, ", ")
}

// healthGrace is the health_grace param; 0 is a valid grace (none).
func (r *Run) healthGrace() time.Duration {
	if d, err := time.ParseDuration(r.Meta.Params["health_grace"]); err == nil && d >= 0 {
		return d
	}
	return 30 * time.Second
}
