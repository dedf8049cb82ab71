package quorum

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// verify is quorum-verify: read-only. The quorum leads with every voter
// back, and every broker of the inventory is registered and unfenced
// again (a broker finds the new leader by itself; it waits for that).
type verify struct{ o opts }

func (k *verify) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	return &steps.Plan{Summary: "check the quorum and every broker (changes nothing)", Actions: []steps.Action{
		{ID: "quorum", Op: steps.OpCheck, Target: "the KRaft quorum", Detail: "a leader, every voter caught up"},
		{ID: "brokers", Op: steps.OpWait, Target: "every broker", Detail: "registered and unfenced (DescribeCluster)"},
	}}, nil
}

func (k *verify) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	if env.Rechecking() {
		return nil
	}
	return roll.WaitFor(ctx, env, k.o.StartTimeout, "every broker unfenced and the quorum back", func() (bool, string) {
		cs, err := k.Verify(ctx, env)
		if err != nil {
			return false, err.Error()
		}
		return steps.AllOK(cs), steps.Failing(cs)
	})
}

func (k *verify) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	var r Recovery
	if ok, err := env.Load(stateKey, &r); err != nil || !ok {
		return nil, fmt.Errorf("%w: the run has not read the copies (the backup step): nothing to verify", steps.ErrRefused)
	}
	want := append([]int32{r.Seed.Node}, r.others()...)
	ok, detail := quorumBack(ctx, env, want)
	out := []steps.Check{{Name: "the quorum has a leader and every voter back, caught up", OK: ok, Detail: detail}}
	cv, err := env.Kafka.DescribeCluster(ctx)
	bc := steps.Check{Name: "every broker registered and unfenced"}
	if err != nil {
		bc.Detail = err.Error()
	} else {
		var missing []string
		for _, h := range env.Target.Hosts {
			in := slices.ContainsFunc(cv.Brokers, func(b ports.BrokerNode) bool { return b.ID == h.ID && !b.Fenced })
			if !in {
				missing = append(missing, fmt.Sprint(h.ID))
			}
		}
		bc.OK = len(missing) == 0
		bc.Detail = "all serve"
		if !bc.OK {
			bc.Detail = "not (yet) unfenced: brokers " + strings.Join(missing, ", ")
		}
	}
	out = append(out, bc)
	var lost []string
	if _, err := env.Load(LostKey, &lost); err == nil && len(lost) > 0 {
		out = append(out, steps.Check{Name: "topics the recovery discarded named for stray-cleanup", OK: true, Detail: strings.Join(lost, ", ") + ": their logs on the brokers become -stray at a start; kremedy run stray-cleanup offers them, never deleting"})
	}
	return out, nil
}
