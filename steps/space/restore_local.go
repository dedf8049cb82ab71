package space

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// restoreLocal is space-restore-local: each local retention the run
// lowered set back to what it was before the run (the override deleted
// when there was none). One changed since by someone else (not 0 any
// more) is left as it is, and so is a topic deleted since.
type restoreLocal struct{}

type restoreArgs struct {
	Topic string `json:"topic"`
	Had   bool   `json:"had"`
	Old   string `json:"old,omitempty"`
}

// was says a topic's local retention before the run.
func was(d lowered) string {
	if !d.Had {
		return "no override (the broker's log.local.retention.bytes, -2 by default: the topic's retention.bytes)"
	}
	return d.Old
}

// localNow is one topic's local.retention.bytes override now: its value,
// whether one is set, whether the topic is gone.
type localNow struct {
	value     string
	set, gone bool
}

// readLocal reads each topic's override, one at a time: a topic deleted
// since is gone, not an error.
func readLocal(ctx context.Context, rs ports.Reassigner, topics []string) (map[string]localNow, error) {
	out := map[string]localNow{}
	for _, t := range topics {
		es, err := rs.Overrides(ctx, []string{localKey}, nil, []string{t})
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			out[t] = localNow{gone: true}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s of %s: %w; nothing was changed", localKey, t, err)
		}
		n := localNow{}
		for _, e := range es {
			if e.Resource == ports.ResourceTopic && e.Name == t && e.Key == localKey {
				n.value, n.set = e.Value, true
			}
		}
		out[t] = n
	}
	return out, nil
}

// asBefore reports whether n is the override d kept from before the run.
func asBefore(n localNow, d lowered) bool { return n.set == d.Had && (!n.set || n.value == d.Old) }

func (k *restoreLocal) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	p := &steps.Plan{NoOp: true}
	var done []lowered
	if _, err := env.Load(loweredKey, &done); err != nil {
		return nil, err
	}
	rs, ok := env.Kafka.(ports.Reassigner)
	if len(done) == 0 || !ok {
		p.Summary = "this run lowered no local retention: nothing to set back"
		return p, nil
	}
	cur, err := readLocal(ctx, rs, topicsLowered(done))
	if err != nil {
		return nil, err
	}
	for _, d := range done {
		n := cur[d.Topic]
		switch {
		case n.gone:
			p.Facts = append(p.Facts, fmt.Sprintf("%s: deleted since it was lowered: nothing to set back", d.Topic))
		case !asBefore(n, d) && (!n.set || n.value != "0"):
			p.Notes = append(p.Notes, fmt.Sprintf("%s: %s was changed since this run set it to 0 (now %q): left as it is; before the run it was %s", d.Topic, localKey, n.value, was(d)))
		default:
			// At the run's 0, or reading as before the run already: set
			// back either way (a broker's metadata follows the
			// controller's by a moment, so "as before" may be a stale
			// read; setting the old value again changes nothing).
			p.Actions = append(p.Actions, steps.Action{ID: "restore-local/" + d.Topic, Op: steps.OpKafka, Target: d.Topic,
				Detail: fmt.Sprintf("set %s of %s back to %s", localKey, d.Topic, was(d)), Args: restoreArgs{Topic: d.Topic, Had: d.Had, Old: d.Old}})
		}
	}
	if len(p.Actions) == 0 {
		p.Summary = "every local retention this run lowered was changed since, or its topic deleted: nothing to set back"
		return p, nil
	}
	p.NoOp = false
	p.Summary = fmt.Sprintf("set %s back on %d tiered topics, as it was before this run", localKey, len(p.Actions))
	return p, nil
}

func topicsLowered(done []lowered) []string {
	var out []string
	for _, d := range done {
		out = append(out, d.Topic)
	}
	return out
}

func (k *restoreLocal) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	rs := env.Kafka.(ports.Reassigner)
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[restoreArgs](a)
		if err != nil {
			return err
		}
		var v *string
		if args.Had {
			v = &args.Old
		}
		if err := env.Do(a, func() error { return rs.SetConfig(ctx, ports.ResourceTopic, args.Topic, localKey, v) }); err != nil {
			return fmt.Errorf("set %s of %s back: %w; `kremedy resume` tries again, or set it by hand (kafka-configs.sh --alter --entity-type topics --entity-name %s)", localKey, args.Topic, err, args.Topic)
		}
	}
	return nil
}

// Verify: no topic this run lowered is still at the run's 0 (each as
// before the run, changed by someone else since, or deleted). A broker
// answers DescribeConfigs from its metadata, which follows the
// controller's by a moment: read again for up to configSettle.
func (k *restoreLocal) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	var done []lowered
	if _, err := env.Load(loweredKey, &done); err != nil || len(done) == 0 {
		return nil, err
	}
	rs, ok := env.Kafka.(ports.Reassigner)
	if !ok {
		return nil, nil
	}
	deadline := env.Now().Add(configSettle)
	for {
		cur, err := readLocal(ctx, rs, topicsLowered(done))
		if err != nil {
			return nil, err
		}
		var checks []steps.Check
		all := true
		for _, d := range done {
			n := cur[d.Topic]
			ok := n.gone || !(n.set && n.value == "0") || asBefore(n, d)
			all = all && ok
			checks = append(checks, steps.Check{Name: fmt.Sprintf("%s of %s no longer at this run's 0", localKey, d.Topic), OK: ok,
				Detail: fmt.Sprintf("now %q (set: %v), before the run %s", n.value, n.set, was(d))})
		}
		if all || !env.Now().Before(deadline) {
			return checks, nil
		}
		if err := env.Sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// configSettle is how long a config change may take to reach the broker
// that answers DescribeConfigs.
const configSettle = 30 * time.Second
