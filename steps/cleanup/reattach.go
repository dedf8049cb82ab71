package cleanup

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// reattach starts again, with their inventory start commands, the clients
// this run's detach step stopped — after verify, so that they find the
// topic repaired (or gone). A client the detach did not stop (or that an
// earlier attempt of this step already started) is left alone.
type reattach struct{ o reattachOpts }

type reattachOpts struct {
	topicOpts
	// Recreate: the topic exists again after verify; without it, a client
	// that produces to it may recreate it with the broker defaults.
	Recreate bool `opt:"recreate"`
	// DetachStep is the step whose stop-client actions are undone.
	DetachStep string `opt:"detach_step" default:"detach-clients"`
}

// stopped are the clients the detach step stopped (ended well), and those
// this step already started in an earlier attempt.
func (k *reattach) stopped(env *steps.Env) (todo []ports.Client, started []string) {
	h := env.History()
	for _, a := range h.Actions(env.Step().ID) {
		if a.Ended && a.OK {
			started = append(started, a.Action.Target)
		}
	}
	for _, a := range h.Actions(k.o.DetachStep) {
		if a.Action.Op != steps.OpSSH || !a.Ended || !a.OK {
			continue
		}
		// The journal holds the arguments as JSON.
		var c ports.Client
		b, err := json.Marshal(a.Action.Args)
		if err != nil || json.Unmarshal(b, &c) != nil || c.Name == "" || slices.Contains(started, "client "+c.Name) {
			continue
		}
		todo = append(todo, c)
	}
	return todo, started
}

func (k *reattach) Plan(_ context.Context, env *steps.Env) (*steps.Plan, error) {
	todo, started := k.stopped(env)
	p := &steps.Plan{Summary: fmt.Sprintf("start again the %d clients this run stopped", len(todo))}
	if len(started) > 0 {
		p.Facts = append(p.Facts, fmt.Sprintf("already started again by an earlier attempt: %v", started))
	}
	if len(todo) == 0 {
		p.NoOp = true
		p.Summary = "this run stopped no client: nothing to start again"
		return p, nil
	}
	for _, c := range todo {
		if c.Start == "" {
			p.Notes = append(p.Notes, fmt.Sprintf("client %s has no start command in the inventory: start it yourself", c.Name))
			continue
		}
		p.Actions = append(p.Actions, steps.Action{ID: "start-client-" + c.Name, Op: steps.OpSSH, Target: "client " + c.Name,
			Detail: fmt.Sprintf("%s on %s (start client %s)", c.Start, c.On(), c.Name), Args: c})
	}
	if !k.o.Recreate && len(p.Actions) > 0 {
		// The safer reading: a producer would recreate the topic with the
		// brokers' defaults where auto.create.topics.enable is on.
		var cmds []string
		for _, a := range p.Actions {
			cmds = append(cmds, a.Detail)
		}
		p.Actions, p.NoOp = nil, true
		p.Summary = fmt.Sprintf("%s not recreated: the clients stay stopped (a producer would recreate a topic with the brokers' defaults). Start them yourself once the topic exists: %s", k.o.quoted()+map[bool]string{false: " was", true: " were"}[k.o.several()], strings.Join(cmds, "; "))
		return p, nil
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
	}
	return p, nil
}

func (k *reattach) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		c, err := steps.ArgsOf[ports.Client](a)
		if err != nil {
			return err
		}
		if err := env.Do(a, func() error {
			return env.Hosts.RunClient(ctx, c, c.Start, func(l ports.Line) { env.Output(c.Name+" ("+c.Host+")", l) })
		}); err != nil {
			return fmt.Errorf("start client %s: %w. The clients before it were started; start it by hand, or fix the cause and resume", c.Name, err)
		}
	}
	return nil
}

// Verify: every client the detach stopped was started again (its start
// command succeeded; whether it attaches is the client's own business) —
// or, without recreate, deliberately left stopped.
func (k *reattach) Verify(_ context.Context, env *steps.Env) ([]steps.Check, error) {
	todo, started := k.stopped(env)
	if !k.o.Recreate {
		return []steps.Check{{Name: "the clients stay stopped: the topic was not recreated", OK: true, Detail: fmt.Sprintf("%d stopped by this run", len(todo))}}, nil
	}
	var missing []string
	for _, c := range todo {
		if c.Start != "" {
			missing = append(missing, c.Name)
		}
	}
	return []steps.Check{{Name: "every client this run stopped was started again", OK: len(missing) == 0, Detail: fmt.Sprintf("started %v; not started %v", started, missing)}}, nil
}
