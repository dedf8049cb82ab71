package reassign

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// sweep waits until no move is in flight (a throttle removed while one
// copies would let it flood the network) and then removes every throttle
// config: the brokers' rates (over Kafka; in ZooKeeper mode a broker that
// is down has them removed from its /config/brokers/<id>, which it reads
// when it starts) and the topics' throttled replicas.
type sweep struct{ o sweepOpts }

type sweepOpts struct {
	Wait time.Duration `opt:"wait" default:"10m"`
}

type controllerArgs struct {
	Broker int32 `json:"broker"`
}

type removeArgs struct {
	Throttle brokers.Throttle `json:"throttle"`
	// Keys are the keys removed from a dead broker's znode at once.
	Keys []string `json:"keys,omitempty"`
}

func (k *sweep) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := brokers.ReadReassigning(ctx, env.Cluster)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Facts: facts(st)}
	// The wait is planned even with no move in flight now: one can start
	// before the sweep runs (kafka-reassign-partitions --execute sets its
	// throttles before it submits its moves).
	if len(st.Throttles)+len(st.Unread) > 0 {
		p.Actions = append(p.Actions, steps.Action{ID: "wait-moves", Op: steps.OpWait, Target: "reassignments",
			Detail: fmt.Sprintf("until no reassignment is in flight (%d now), at most %s; the throttles stay until then, and the reassignments are listed again before each removal", len(st.Moves), k.o.Wait)})
	}
	znodes := map[string]*steps.Action{}
	for _, t := range st.Throttles {
		if t.ZKVersion == nil {
			p.Actions = append(p.Actions, steps.Action{ID: "remove-" + t.Resource + "-" + t.Name + "-" + t.Key, Op: steps.OpKafka,
				Target: t.Resource + " " + nameOr(t.Name), Detail: fmt.Sprintf("delete %s (was %s)", t.Key, t.Value), Args: removeArgs{Throttle: t}})
			continue
		}
		path := brokersPath(t.Name)
		if a, ok := znodes[path]; ok {
			args := a.Args.(removeArgs)
			args.Keys = append(args.Keys, t.Key)
			a.Args, a.Detail = args, a.Detail+fmt.Sprintf(", %s (was %s)", t.Key, t.Value)
			continue
		}
		v := *t.ZKVersion
		znodes[path] = &steps.Action{ID: "remove-zk-broker-" + t.Name, Op: steps.OpZKSet, Target: path, Version: &v,
			Detail: fmt.Sprintf("broker %s is down: its znode rewritten without %s (was %s)", t.Name, t.Key, t.Value), Args: removeArgs{Throttle: t, Keys: []string{t.Key}}}
	}
	for _, path := range slices.Sorted(maps.Keys(znodes)) {
		p.Actions = append(p.Actions, *znodes[path])
	}
	for _, b := range st.Unread {
		p.Actions = append(p.Actions, steps.Action{ID: fmt.Sprintf("remove-at-controllers-broker-%d", b), Op: steps.OpKafka, Broker: b,
			Target: fmt.Sprintf("broker %d (at the controllers)", b), Args: controllerArgs{Broker: b},
			Detail: fmt.Sprintf("broker %d is down, and a KRaft broker describes only its own configs: delete its %s and %s at the active controller (a key not set is left as is)", b, brokers.LeaderRate, brokers.FollowerRate)})
	}
	p.Summary = fmt.Sprintf("remove %d throttle configs once no move is in flight", len(st.Throttles))
	if len(st.Throttles) == 0 {
		p.Summary = "no throttle config is set"
	}
	p.NoOp = len(p.Actions) == 0
	return p, nil
}

func nameOr(n string) string {
	if n == "" {
		return "(cluster default)"
	}
	return n
}

func brokersPath(id string) string { return "/config/brokers/" + id }

func (k *sweep) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	ra, err := brokers.Reassigner(env.Cluster)
	if err != nil {
		return err
	}
	for _, a := range p.Actions {
		var f func() error
		switch a.Op {
		case steps.OpWait:
			f = func() error { return k.wait(ctx, env, ra) }
		case steps.OpZKSet:
			f = func() error { return removeZK(ctx, env.ZK, a) }
		case steps.OpKafka:
			if strings.HasPrefix(a.ID, "remove-at-controllers-") {
				f = func() error { return removeAtControllers(ctx, env, a) }
				break
			}
			f = func() error { return removeKafka(ctx, ra, a) }
		default:
			return fmt.Errorf("sweep: action %s has op %s", a.ID, a.Op)
		}
		if a.Op != steps.OpWait {
			remove := f
			f = func() error {
				if err := noMoveStarted(ctx, ra, a); err != nil {
					return err
				}
				return remove()
			}
		}
		if err := env.Do(a, f); err != nil {
			return err
		}
	}
	return nil
}

// noMoveStarted lists the reassignments right before removal a: one in
// flight now (started after the wait) would be let flood the network by
// the removal, so it is steps.ErrStalePlan: the sweep plans again and
// waits for it.
func noMoveStarted(ctx context.Context, ra ports.Reassigner, a steps.Action) error {
	moves, err := ra.Reassignments(ctx)
	if err != nil {
		return fmt.Errorf("list the reassignments before %s: %w; it was not done: run again", a.ID, err)
	}
	if len(moves) == 0 {
		return nil
	}
	var names []string
	for _, m := range moves {
		names = append(names, fmt.Sprintf("%s-%d", m.Topic, m.Partition))
	}
	return fmt.Errorf("%w: %d reassignments started after the wait (%v): %s was not done, so they do not flood the network; the sweep plans again and waits for them (a resume does too)", steps.ErrStalePlan, len(moves), names, a.Detail)
}

func removeKafka(ctx context.Context, ra ports.Reassigner, a steps.Action) error {
	r, err := steps.ArgsOf[removeArgs](a)
	if err != nil {
		return err
	}
	return ra.SetConfig(ctx, r.Throttle.Resource, r.Throttle.Name, r.Throttle.Key, nil)
}

// removeAtControllers deletes a down KRaft broker's rates at the
// controllers (the inventory's controller listeners).
func removeAtControllers(ctx context.Context, env *steps.Env, a steps.Action) error {
	r, err := steps.ArgsOf[controllerArgs](a)
	if err != nil {
		return err
	}
	cc, ok := env.Kafka.(ports.ControllerConfigs)
	if !ok {
		return fmt.Errorf("%w: the Kafka client (%T) cannot reach the controllers; broker %d's throttles were not removed: remove them when it is back (run reassignment-unstick again)", steps.ErrRefused, env.Kafka, r.Broker)
	}
	var addrs []string
	for _, c := range env.Target.Controllers {
		addrs = append(addrs, c.Addr)
	}
	return cc.DeleteAtControllers(ctx, addrs, r.Broker, brokers.BrokerThrottleKeys)
}

// wait polls the reassignments every 2 s until none is in flight.
func (k *sweep) wait(ctx context.Context, env *steps.Env, ra ports.Reassigner) error {
	deadline := env.Now().Add(k.o.Wait)
	for {
		moves, err := ra.Reassignments(ctx)
		if err != nil {
			return err
		}
		if len(moves) == 0 {
			return nil
		}
		if env.Now().After(deadline) {
			var names []string
			for _, m := range moves {
				names = append(names, fmt.Sprintf("%s-%d", m.Topic, m.Partition))
			}
			return fmt.Errorf("%w: %d reassignments still in flight after %s (%v): no throttle was removed, so they do not flood the network. Watch them with `kremedy diagnose`, then `kremedy resume %s`; to stop them instead, run reassignment-unstick again with --set action=cancel",
				steps.ErrCheckFailed, len(moves), k.o.Wait, names, env.RunDir())
		}
		env.Progress("waiting for %d reassignments to finish", len(moves))
		if err := env.Sleep(ctx, 2*time.Second); err != nil {
			return err
		}
	}
}

// removeZK rewrites a down broker's /config/brokers/<id> without the
// throttle keys, at the version the plan read.
func removeZK(ctx context.Context, zk ports.ZooKeeper, a steps.Action) error {
	r, err := steps.ArgsOf[removeArgs](a)
	if err != nil {
		return err
	}
	b, _, err := zk.Get(ctx, a.Target)
	if err != nil {
		return fmt.Errorf("read %s: %w", a.Target, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("read %s: %w", a.Target, err)
	}
	var cfg map[string]string
	if err := json.Unmarshal(raw["config"], &cfg); err != nil {
		return fmt.Errorf("read %s's config: %w", a.Target, err)
	}
	for _, key := range r.Keys {
		delete(cfg, key)
	}
	if raw["config"], err = json.Marshal(cfg); err != nil {
		return err
	}
	out, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	if _, err := zk.Set(ctx, a.Target, out, *a.Version); err != nil {
		return fmt.Errorf("rewrite %s at version %d (broker %s down): %w", a.Target, *a.Version, r.Throttle.Name, err)
	}
	return nil
}

// Verify: no throttle config is left anywhere.
func (k *sweep) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	st, err := brokers.ReadReassigning(ctx, env.Cluster)
	if err != nil {
		return nil, err
	}
	return []steps.Check{noThrottle(st)}, nil
}

func noThrottle(st *brokers.Reassigning) steps.Check {
	var left []string
	for _, t := range st.Throttles {
		left = append(left, throttleName(t)+"="+t.Value)
	}
	none := "none on the live brokers (" + ids(st.Live) + "), the topics or a down broker's znode"
	if len(st.Unread) > 0 {
		none = "none on the live brokers (" + ids(st.Live) + ") or the topics; down KRaft broker " + ids(st.Unread) + " describes no configs while it is down (the sweep deleted its rates at the controllers): `kremedy diagnose` once it is back reads them"
	}
	return steps.Check{Name: "no throttle config on any broker or topic", OK: len(left) == 0, Detail: detailOr(left, none)}
}

func detailOr(items []string, none string) string {
	if len(items) == 0 {
		return none
	}
	return fmt.Sprint(items)
}
