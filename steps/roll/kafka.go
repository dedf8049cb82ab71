package roll

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// Health is the cluster as the brokers themselves describe it (Metadata,
// asked of each broker): the one view that holds in every phase of a
// ZooKeeper → KRaft migration — ZooKeeper registrations vanish once a
// broker is a KRaft broker.
type Health struct {
	Want  []int32
	Views map[int32]ports.BrokerView
	Errs  map[int32]string
	// Read is how long the round typically took to read (readViews).
	Read time.Duration
}

// ReadHealth asks every broker of want for its Metadata, at once.
func ReadHealth(ctx context.Context, env *steps.Env, want []int32) *Health {
	h := &Health{Want: want, Views: map[int32]ports.BrokerView{}, Errs: map[int32]string{}}
	views, errs, read := readViews(ctx, env.Kafka, want, env.Now)
	h.Read = read
	for i, id := range want {
		if errs[i] != nil {
			h.Errs[id] = errs[i].Error()
			continue
		}
		h.Views[id] = views[i]
	}
	return h
}

// readViews asks every broker of ids for its Metadata, par.Limit at once (a
// round of up to that many brokers takes as long as its slowest, not their
// sum), answers in ids' order, with how long a round typically takes to
// read (on now's clock): the median time a broker took, once per wave of
// par.Limit brokers.
func readViews(ctx context.Context, k ports.Kafka, ids []int32, now func() time.Time) ([]ports.BrokerView, []error, time.Duration) {
	type got struct {
		v    ports.BrokerView
		err  error
		took time.Duration
	}
	res := par.Each(ids, func(id int32) got {
		start := now()
		v, err := k.BrokerView(ctx, id)
		return got{v, err, now().Sub(start)}
	})
	views, errs := make([]ports.BrokerView, len(ids)), make([]error, len(ids))
	took := make([]time.Duration, len(ids))
	for i, r := range res {
		views[i], errs[i], took[i] = r.v, r.err, r.took
	}
	slices.Sort(took)
	var typical time.Duration
	if len(took) > 0 {
		waves := (len(took) + par.Limit - 1) / par.Limit
		typical = took[len(took)/2] * time.Duration(waves)
	}
	return views, errs, typical
}

// Checks are one round of the gate: every broker answers and lists every
// broker, no partition offline or under-replicated in any broker's view,
// and the brokers agree on the topics.
func (h *Health) Checks() []steps.Check {
	var silent, missing, offline, urp, disagree []string
	var ref []string
	refID := int32(-1)
	for _, id := range h.Want {
		v, ok := h.Views[id]
		if !ok {
			silent = append(silent, fmt.Sprintf("broker %d: %s", id, h.Errs[id]))
			continue
		}
		for _, w := range h.Want {
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

// First is the view of the first broker of Want that answered.
func (h *Health) First() (ports.BrokerView, bool) {
	for _, id := range h.Want {
		if v, ok := h.Views[id]; ok {
			return v, true
		}
	}
	return ports.BrokerView{}, false
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return text.Summarize(s)
}

// HoldHealth runs the Metadata gate until n rounds in a row pass, or
// timeout.
func HoldHealth(ctx context.Context, env *steps.Env, want []int32, n int, timeout time.Duration) ([]steps.Check, error) {
	return Hold(ctx, env, func() ([]steps.Check, time.Duration) {
		h := ReadHealth(ctx, env, want)
		return h.Checks(), h.Read
	}, n, timeout)
}

// KafkaBrokers rolls brokers seen only through Kafka (the migration's
// rolls: a broker in KRaft mode no longer registers in ZooKeeper): a
// broker is up while its listener accepts connections, back when another
// broker lists it again, and the cluster is read from the brokers' own
// Metadata. It cannot tell a new process from an old one: only this run's
// own stop and start count.
type KafkaBrokers struct {
	HealthChecks  int
	HealthTimeout time.Duration
	// SkipCombined: a roll whose controllers' pass restarts the combined
	// nodes (kraft-rolling-restart) leaves them out of the brokers' pass.
	// Any other roll restarts them as brokers, or refuses them itself.
	SkipCombined bool
}

func (k *KafkaBrokers) Noun() string                            { return "broker" }
func (k *KafkaBrokers) Hosts(env *steps.Env) []ports.Host       { return brokerHosts(env) }
func (k *KafkaBrokers) Begin(context.Context, *steps.Env) error { return nil }
func (k *KafkaBrokers) Look(ctx context.Context, env *steps.Env, id int32) (Look, error) {
	addr := BrokerAddr(ctx, env, id)
	up := env.Kafka.Listening(ctx, addr)
	return Look{Up: up, New: up, Addr: addr}, nil
}

// Skip: with SkipCombined, a combined node (process.roles=broker,controller)
// restarts with the controllers (Controllers judges its stop by the quorum
// rule and the partition rule both), so the brokers' roll does not restart
// it again.
func (k *KafkaBrokers) Skip(_ context.Context, env *steps.Env, id int32) (string, error) {
	if k.SkipCombined && env.Target.Combined(id) {
		return "a combined node (process.roles=broker,controller): it restarts with the controllers, its stop judged by the quorum rule and the partition rule both", nil
	}
	return "", nil
}

// Last is ZooKeeper's controller while ZooKeeper answers (in dual-write a
// KRaft controller holds /controller: no broker goes last).
func (k *KafkaBrokers) Last(ctx context.Context, env *steps.Env) (int32, string) {
	if env.ZK == nil {
		return -1, ""
	}
	ctrl, err := brokers.Controller(ctx, env.ZK)
	if err != nil {
		return -1, ""
	}
	return ctrl, "the controller"
}

// BrokerAddr is broker id's Kafka listener: its ZooKeeper registration
// (on KRaft, its entry in DescribeCluster), else the bootstrap server on its host, else the inventory's address.
func BrokerAddr(ctx context.Context, env *steps.Env, id int32) string {
	h, _ := env.Target.Host(id)
	fallback := h.Addr
	for _, b := range env.Target.Bootstrap {
		if strings.HasPrefix(b, h.Host+":") {
			fallback = b
		}
	}
	if env.ZK == nil {
		// KRaft: the listener the cluster's metadata gives it (an
		// inventory's bootstrap may name one broker of many).
		// A broker down is not listed: its inventory host on the port the
		// listed brokers share, unless the inventory names its address.
		cv, err := env.Kafka.DescribeCluster(ctx)
		if err != nil {
			return fallback
		}
		portsSeen := map[int32]bool{}
		for _, b := range cv.Brokers {
			if b.ID == id && b.Host != "" {
				return net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
			}
			portsSeen[b.Port] = true
		}
		if fallback == "" && len(portsSeen) == 1 && h.Host != "" {
			for p := range portsSeen {
				return net.JoinHostPort(h.Host, fmt.Sprint(p))
			}
		}
		return fallback
	}
	return brokers.Addr(ctx, env.ZK, id, fallback)
}

func (k *KafkaBrokers) Plain(_ *steps.Env, ph Phase, a Args, timeout time.Duration) (string, string) {
	switch ph {
	case PhaseSafe:
		return a.Who("broker"), "read right before the stop, from the brokers: every broker lists every broker, no partition offline or under-replicated, and stopping " + them(a) + " keeps every partition at min.insync.replicas"
	case PhaseGone:
		return a.Addr, fmt.Sprintf("port closed, at most %s", timeout)
	case PhaseBack:
		return a.Addr, fmt.Sprintf("listening and listed by the other brokers again, at most %s", timeout)
	case PhaseGate:
		return "cluster", fmt.Sprintf("health gate from the brokers: every broker answers and lists every broker, no offline or under-replicated partition, the same topics; %d checks in a row, at most %s", max(1, k.HealthChecks), k.HealthTimeout)
	}
	return "", ""
}

func (k *KafkaBrokers) Wait(ctx context.Context, env *steps.Env, a Args, timeout time.Duration) error {
	want := brokers.HostIDs(env.Target)
	switch a.Phase {
	case PhaseGone:
		err := WaitFor(ctx, env, timeout, fmt.Sprintf("broker %d's port %s to close", a.Node, a.Addr), func() (bool, string) {
			return !env.Kafka.Listening(ctx, a.Addr), "still listening"
		})
		k.reportDown(ctx, env)
		return err
	case PhaseBack:
		err := WaitFor(ctx, env, timeout, fmt.Sprintf("broker %d to serve again", a.Node), func() (bool, string) {
			if !env.Kafka.Listening(ctx, a.Addr) {
				return false, "not listening on " + a.Addr
			}
			for _, o := range want {
				if o == a.Node {
					continue
				}
				v, err := env.Kafka.BrokerView(ctx, o)
				if err == nil && slices.Contains(v.Brokers, a.Node) {
					return true, ""
				}
			}
			return false, "listening, but no other broker lists it yet"
		})
		k.reportDown(ctx, env)
		return err
	case PhaseGate:
		checks, err := HoldHealth(ctx, env, want, max(1, k.HealthChecks), k.HealthTimeout)
		for _, c := range checks {
			env.Check(c)
		}
		return err
	}
	return fmt.Errorf("roll: broker %d: nothing to wait for in phase %s", a.Node, a.Phase)
}

// reportDown says how many of the inventory's brokers do not listen now.
func (k *KafkaBrokers) reportDown(ctx context.Context, env *steps.Env) {
	ids := brokers.HostIDs(env.Target)
	down := 0
	for _, id := range ids {
		if !env.Kafka.Listening(ctx, BrokerAddr(ctx, env, id)) {
			down++
		}
	}
	env.BrokersDown(down, len(ids))
}

func (k *KafkaBrokers) Verify(ctx context.Context, env *steps.Env) []steps.Check {
	return VerifyHealth(ctx, env, k.HealthChecks, k.HealthTimeout)
}

// VerifyHealth is the Metadata gate as a step's Verify holds it: n rounds
// in a row within timeout, or one round when the engine only re-checks.
func VerifyHealth(ctx context.Context, env *steps.Env, n int, timeout time.Duration) []steps.Check {
	n = max(1, n)
	if env.Rechecking() {
		n, timeout = 1, 0
	}
	checks, _ := HoldHealth(ctx, env, brokers.HostIDs(env.Target), n, timeout)
	return checks
}

// Snapshot reads every broker's Metadata: the cluster is whole when the
// Metadata gate passes; the partitions are the first answering broker's
// view (they agree when it passes), min.insync.replicas its default from
// the brokers and the topics' overrides from ZooKeeper (still written in
// dual-write).
func (k *KafkaBrokers) Snapshot(ctx context.Context, env *steps.Env) (*Snapshot, error) {
	want := brokers.HostIDs(env.Target)
	h := ReadHealth(ctx, env, want)
	s := &Snapshot{}
	for _, c := range h.Checks() {
		if !c.OK { // every broker's view: a partition short in any of them
			s.Problems = append(s.Problems, c.Name+": NO ("+c.Detail+")")
		}
	}
	v, ok := h.First()
	if !ok {
		s.Problems = append(s.Problems, "no broker answers Metadata")
	}
	s.Partitions = brokers.PartitionsOfView(v)
	overrides := map[string]string{}
	if env.ZK != nil {
		if st, err := env.ZK.ReadState(ctx); err == nil {
			overrides = brokers.OverridesOf(st)
		}
	} else {
		// KRaft: the topics' overrides are the controllers' (DescribeConfigs).
		seen := map[string]bool{}
		for _, p := range s.Partitions {
			seen[p.Topic] = true
		}
		o, err := env.Kafka.TopicOverrides(ctx, "min.insync.replicas", slices.Sorted(maps.Keys(seen)))
		if err != nil {
			return nil, fmt.Errorf("read the topics' min.insync.replicas over Kafka: %w", err)
		}
		overrides = o
	}
	var err error
	if s.MinISR, err = brokers.ReadMinISR(ctx, env.Kafka, want, overrides); err != nil {
		return nil, err
	}
	return s, nil
}

var (
	_ Nodes = (*KafkaBrokers)(nil)
	_ Guard = (*KafkaBrokers)(nil)
)
