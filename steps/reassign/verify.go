package reassign

import (
	"context"
	"fmt"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
)

// verify checks the end state: no move in flight, no partition without a
// leader, no throttle config anywhere. It changes nothing.
type verify struct{ o verifyOpts }

type verifyOpts struct{}

func (k *verify) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	return &steps.Plan{NoOp: true, Summary: "read-only: no reassignment in flight, no leaderless partition, no throttle config"}, nil
}

func (k *verify) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

func (k *verify) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	st, err := brokers.ReadReassigning(ctx, env.Cluster)
	if err != nil {
		return nil, err
	}
	var moving []string
	for _, m := range st.Moves {
		moving = append(moving, fmt.Sprintf("%s-%d", m.Topic, m.Partition))
	}
	return []steps.Check{
		{Name: "no reassignment in flight", OK: len(moving) == 0, Detail: detailOr(moving, "ListPartitionReassignments lists none")},
		{Name: "no partition without a leader", OK: len(st.Leaderless) == 0, Detail: detailOr(st.Leaderless, "every partition has a leader")},
		noThrottle(st),
	}, nil
}
