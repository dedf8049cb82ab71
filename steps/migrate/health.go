package migrate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// health is the cluster as the brokers themselves describe it (Metadata,
// asked of each broker): the one view that holds in every phase of a
// migration — ZooKeeper registrations vanish once a broker is a KRaft
// broker.
type health struct {
	want  []int32
	views map[int32]ports.BrokerView
	errs  map[int32]string
}

func readHealth(ctx context.Context, env *steps.Env, want []int32) *health {
	h := &health{want: want, views: map[int32]ports.BrokerView{}, errs: map[int32]string{}}
	type got struct {
		v   ports.BrokerView
		err error
	}
	res := brokers.EachID(want, func(id int32) got {
		v, err := env.Kafka.BrokerView(ctx, id)
		return got{v, err}
	})
	for i, r := range res {
		if r.err != nil {
			h.errs[want[i]] = r.err.Error()
			continue
		}
		h.views[want[i]] = r.v
	}
	return h
}

// checks are one round of the gate: every broker answers and lists every
// broker, no partition offline or under-replicated in any broker's view,
// and the brokers agree on the topics.
func (h *health) checks() []steps.Check {
	var silent, missing, offline, urp, disagree []string
	var ref []string
	refID := int32(-1)
	for _, id := range h.want {
		v, ok := h.views[id]
		if !ok {
			silent = append(silent, fmt.Sprintf("broker %d: %s", id, h.errs[id]))
			continue
		}
		for _, w := range h.want {
			if !slices.Contains(v.Brokers, w) {
				missing = append(missing, fmt.Sprintf("broker %d does not list broker %d", id, w))
			}
		}
		var names []string
		for name, t := range v.Topics {
			names = append(names, name)
			for _, p := range t.Partitions {
				key := fmt.Sprintf("%s-%d (broker %d's view)", name, p.Partition, id)
				switch {
				case p.IsOffline():
					offline = append(offline, key)
				case p.UnderReplicated():
					urp = append(urp, key)
				}
			}
		}
		slices.Sort(names)
		if refID < 0 {
			ref, refID = names, id
		} else if !slices.Equal(ref, names) {
			disagree = append(disagree, fmt.Sprintf("brokers %d and %d list different topics", refID, id))
		}
	}
	return []steps.Check{
		{Name: "every broker answers Metadata", OK: len(silent) == 0, Detail: orNone(silent)},
		{Name: "every broker lists every broker", OK: len(missing) == 0, Detail: orNone(missing)},
		{Name: "no partition offline", OK: len(offline) == 0, Detail: orNone(offline)},
		{Name: "no partition under-replicated", OK: len(urp) == 0, Detail: orNone(urp)},
		{Name: "the brokers agree on the topics", OK: len(disagree) == 0, Detail: orNone(disagree)},
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return brokers.Summarize(s)
}

// stopRisks says what stopping broker id breaks, seen by another broker:
// a partition whose in-sync replicas would fall below min.insync.replicas
// (or to none).
func (h *health) stopRisks(id int32, minISR func(topic string) int) []string {
	var v *ports.BrokerView
	for _, o := range h.want {
		if vv, ok := h.views[o]; ok && o != id {
			v = &vv
			break
		}
	}
	if v == nil {
		return []string{"no other broker answers Metadata"}
	}
	var out []string
	for name, t := range v.Topics {
		for _, p := range t.Partitions {
			if !slices.Contains(p.ISR, id) {
				continue
			}
			left := len(p.ISR) - 1
			if left < max(1, min(minISR(name), len(p.Replicas))) {
				out = append(out, fmt.Sprintf("%s-%d keeps %d in-sync replicas (min.insync.replicas %d)", name, p.Partition, left, minISR(name)))
			}
		}
	}
	slices.Sort(out)
	return out
}

// minISR returns each topic's min.insync.replicas: its override in
// ZooKeeper (still written in dual-write), else the brokers' default.
func minISR(ctx context.Context, env *steps.Env, asked int32) (func(string) int, error) {
	def := 1
	v, err := env.Kafka.BrokerConfig(ctx, asked, "min.insync.replicas")
	if err != nil {
		return nil, fmt.Errorf("broker %d's min.insync.replicas: %w; kremedy cannot tell which stop is safe", asked, err)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		def = n
	}
	over := map[string]int{}
	if st, err := env.ZK.ReadState(ctx); err == nil {
		for name, t := range st.Topics {
			if n, err := strconv.Atoi(t.Config["min.insync.replicas"]); err == nil {
				over[name] = n
			}
		}
	}
	return func(topic string) int {
		if n, ok := over[topic]; ok {
			return n
		}
		return def
	}, nil
}

// holdHealth runs the gate until n rounds in a row pass, or timeout.
func holdHealth(ctx context.Context, env *steps.Env, want []int32, n int, timeout time.Duration) ([]steps.Check, error) {
	return brokers.Hold(ctx, env, func() []steps.Check { return readHealth(ctx, env, want).checks() }, n, timeout)
}

// waitFor polls cond once a second until it holds or timeout passes,
// reporting progress.
func waitFor(ctx context.Context, env *steps.Env, timeout time.Duration, what string, cond func() (bool, string)) error {
	start := env.Now()
	for round := 1; ; round++ {
		ok, why := cond()
		if ok {
			return nil
		}
		if round%5 == 0 {
			env.Progress("waiting for %s: %s (%s of %s)", what, why, env.Now().Sub(start).Round(time.Second), timeout)
		}
		if env.Now().Sub(start) > timeout {
			return fmt.Errorf("%w: %s not within %s: %s", steps.ErrCheckFailed, what, timeout, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
