package reassign

import (
	"context"
	"fmt"
	"os"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
)

// save keeps the assignment before the move and every throttle config, in
// the run directory, before anything changes: the rollback. A resumed run
// keeps what the first attempt saved (the state before the run, not the
// state half-way through it).
type save struct{ o saveOpts }

type saveOpts struct{}

// RollbackFile is the rollback artifact: kafka-reassign-partitions'
// --reassignment-json-file form, each partition with its original
// replicas, and what kremedy saw beside it.
type RollbackFile struct {
	Version    int                 `json:"version"` // 1
	Partitions []RollbackPartition `json:"partitions"`
}

// RollbackPartition is one partition's assignment before the move.
type RollbackPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// ThrottlesFile is the throttles artifact.
type ThrottlesFile struct {
	Throttles []brokers.Throttle `json:"throttles"`
	Moves     []brokers.Moving   `json:"moves"`
}

type saveArgs struct {
	File string `json:"file"`
}

func (k *save) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := brokers.ReadReassigning(ctx, env.Cluster)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Summary: fmt.Sprintf("%d reassignments in flight, %d throttle configs set: save them before anything changes", len(st.Moves), len(st.Throttles))}
	p.Facts = facts(st)
	if len(st.Moves) == 0 && len(st.Throttles) == 0 {
		p.NoOp, p.EndsRun = true, true
		p.Summary = "no reassignment in flight and no throttle config set: nothing to unstick"
		return p, nil
	}
	for _, id := range []string{ArtRollback, ArtThrottles} {
		path := env.Artifact(id)
		if _, err := os.Stat(path); err == nil {
			p.Facts = append(p.Facts, fmt.Sprintf("%s kept as an earlier attempt saved it (the state before the run)", path))
			continue
		}
		what := "the assignment before the move (original replicas of every partition moving), in kafka-reassign-partitions' JSON"
		if id == ArtThrottles {
			what = "every throttle config with its value, and every move as read now"
		}
		p.Actions = append(p.Actions, steps.Action{ID: "save-" + id, Op: steps.OpSave, Target: path, Detail: what, Args: saveArgs{File: id}})
	}
	p.NoOp = len(p.Actions) == 0
	return p, nil
}

func (k *save) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	st, err := brokers.ReadReassigning(ctx, env.Cluster)
	if err != nil {
		return err
	}
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[saveArgs](a)
		if err != nil {
			return err
		}
		var v any = ThrottlesFile{Throttles: st.Throttles, Moves: st.Moves}
		if args.File == ArtRollback {
			rf := RollbackFile{Version: 1, Partitions: []RollbackPartition{}}
			for _, m := range st.Moves {
				rf.Partitions = append(rf.Partitions, RollbackPartition{Topic: m.Topic, Partition: m.Partition, Replicas: m.Original()})
			}
			v = rf
		}
		if err := env.Do(a, func() error { return atomicfile.WriteJSON(a.Target, v) }); err != nil {
			return fmt.Errorf("save %s: %w", a.Target, err)
		}
	}
	return nil
}

func (k *save) Verify(_ context.Context, env *steps.Env) ([]steps.Check, error) {
	var cs []steps.Check
	for _, id := range []string{ArtRollback, ArtThrottles} {
		_, err := os.Stat(env.Artifact(id))
		cs = append(cs, steps.Check{Name: id + " saved", OK: err == nil, Detail: env.Artifact(id)})
	}
	return cs, nil
}

// facts are what a plan says it saw: each move and each throttle.
func facts(st *brokers.Reassigning) []string {
	out := []string{fmt.Sprintf("live brokers %s", ids(st.Live))}
	for _, m := range st.Moves {
		why := m.Why
		if why == "" {
			why = "moving"
		}
		out = append(out, fmt.Sprintf("%s-%d: original %s → target %s (adding %s, removing %s); leader %d, ISR %s, down %s: %s",
			m.Topic, m.Partition, ids(m.Original()), ids(m.Target()), ids(m.Adding), ids(m.Removing), m.Leader, ids(m.ISR), ids(m.Dead), why))
	}
	for _, t := range st.Throttles {
		out = append(out, "throttle "+throttleName(t)+" = "+t.Value)
	}
	return out
}

func throttleName(t brokers.Throttle) string {
	name := t.Name
	if t.Resource == "broker" && name == "" {
		name = "(cluster default)"
	}
	s := fmt.Sprintf("%s %s %s", t.Resource, name, t.Key)
	if t.ZKVersion != nil {
		s += " (broker down: in ZooKeeper " + brokersPath(t.Name) + ")"
	}
	return s
}
