package space

import (
	"context"
	"fmt"
	"slices"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// brokerOpts names the broker whose log dir is full.
type brokerOpts struct {
	Broker int `opt:"broker"`
}

// look is what every kind of the pack reads first: the broker's host and
// dirs, whether it is registered, a live broker's view of the partitions
// in its dirs, and the dirs' space over SSH.
type look struct {
	id         int32
	host       ports.Host
	up         bool
	registered []int32
	space      []brokers.Space
	view       ports.BrokerView // a live broker's metadata of the topics in the dirs
	topics     []string
}

func (o brokerOpts) look(ctx context.Context, env *steps.Env) (*look, error) {
	id := int32(o.Broker)
	h, ok := env.Target.Host(id)
	if !ok {
		return nil, fmt.Errorf("%w: broker %d is not in the inventory; nothing was changed. Name a broker of the inventory with --set broker=N", steps.ErrRefused, id)
	}
	if len(h.LogDirs) == 0 {
		return nil, fmt.Errorf("%w: the inventory names no log_dirs for broker %d, and a broker that is down cannot say; nothing was changed. Add its log.dirs to the inventory (log_dirs:)", steps.ErrRefused, id)
	}
	reg, err := live(ctx, env)
	if err != nil {
		return nil, err
	}
	l := &look{id: id, host: h, up: slices.Contains(reg, id), registered: reg}
	if l.space, err = brokers.ReadSpace(ctx, env.Hosts, id, h.LogDirs); err != nil {
		return nil, fmt.Errorf("%w; nothing was changed. Fix SSH to broker %d's host and run again", err, id)
	}
	seen := map[string]bool{}
	for _, s := range l.space {
		for _, p := range s.Partitions {
			if !seen[p.Topic] {
				seen[p.Topic] = true
				l.topics = append(l.topics, p.Topic)
			}
		}
	}
	slices.Sort(l.topics)
	if len(l.topics) == 0 {
		return l, nil
	}
	for _, b := range reg {
		if b == id && len(reg) > 1 {
			continue // ask another broker: this one's dir may be offline
		}
		if l.view, err = env.Kafka.BrokerView(ctx, b, l.topics...); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no registered broker answered Metadata for %d topics: %w; nothing was changed", len(l.topics), err)
}

// partition is a live broker's view of one partition in the dirs.
func (l *look) partition(p brokers.PartitionSpace) (ports.PartitionView, bool) {
	pv, ok := l.view.Topics[p.Topic].Partitions[p.Partition]
	return pv, ok
}

// elsewhere reports whether partition p has a live leader other than the
// broker and an in-sync replica that is not it: its data survives on
// another broker.
func (l *look) elsewhere(pv ports.PartitionView) bool {
	if pv.Leader < 0 || pv.Leader == l.id || !slices.Contains(l.registered, pv.Leader) {
		return false
	}
	for _, r := range pv.ISR {
		if r != l.id && slices.Contains(l.registered, r) {
			return true
		}
	}
	return false
}

func (l *look) dfFacts() []string {
	var out []string
	for _, s := range l.space {
		out = append(out, fmt.Sprintf("broker %d %s: %d%% used, %s free of %s (filesystem %s)", l.id, s.Dir, s.UsedPercent(), brokers.Bytes(s.Avail), brokers.Bytes(s.Size), s.Mount))
	}
	return out
}
