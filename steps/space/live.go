package space

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/roll"
)

// live are the brokers that serve: registered in ZooKeeper, or on a KRaft
// cluster (no ZooKeeper) listed unfenced by DescribeCluster.
func live(ctx context.Context, env *steps.Env) ([]int32, error) {
	if env.ZK != nil {
		return brokers.Registered(ctx, env.ZK)
	}
	cv, err := env.Kafka.DescribeCluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("describe the cluster: %w", err)
	}
	var out []int32
	for _, b := range cv.Brokers {
		if !b.Fenced {
			out = append(out, b.ID)
		}
	}
	slices.Sort(out)
	return out, nil
}

// waitLive waits until broker id serves (want) or no longer does (!want):
// its ZooKeeper registration, or on KRaft DescribeCluster and its
// listener.
func waitLive(ctx context.Context, env *steps.Env, id int32, want bool, timeout time.Duration) error {
	if env.ZK != nil {
		if want {
			return brokers.WaitRegistered(ctx, env.ZK, []int32{id}, timeout)
		}
		h, _ := env.Target.Host(id)
		return roll.WaitGone(ctx, env, id, h.Addr, timeout)
	}
	what := fmt.Sprintf("broker %d unfenced", id)
	if !want {
		what = fmt.Sprintf("broker %d stopped", id)
	}
	addr := roll.BrokerAddr(ctx, env, id)
	return roll.WaitFor(ctx, env, timeout, what, func() (bool, string) {
		ids, err := live(ctx, env)
		if err != nil {
			return false, err.Error()
		}
		if !want {
			up := env.Kafka.Listening(ctx, addr)
			return !up && !slices.Contains(ids, id), fmt.Sprintf("serving %v, %s listening: %v", ids, addr, up)
		}
		return slices.Contains(ids, id), fmt.Sprintf("serving %v", ids)
	})
}

// health is the gate after the start: every inventory broker serving, no
// offline or under-replicated partition, the brokers' metadata agreeing
// (ZooKeeper's gate, or on KRaft the brokers' Metadata alone).
func health(ctx context.Context, env *steps.Env, n int, timeout time.Duration) ([]steps.Check, error) {
	want := brokers.HostIDs(env.Target)
	if env.ZK == nil {
		return roll.HoldHealth(ctx, env, want, n, timeout)
	}
	return roll.Gate{Want: want}.Hold(ctx, env, n, timeout)
}
