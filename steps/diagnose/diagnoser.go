package diagnose

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// diagnoser is what the two diagnosers share, embedded in both: diagnosis
// (ZooKeeper mode, zkmode.go) and kraftDiag (KRaft mode, kraft.go). Run
// picks one by the inventory's mode.
type diagnoser struct {
	c     ports.Cluster
	o     Options
	d     *Diagnosis
	views map[int32]ports.BrokerView // each broker's own metadata
	// the cluster's min.insync.replicas, read once, and the partitions
	// with fewer replicas than it
	minISR brokers.MinISR
	fewer  fewer
}

func (g *diagnoser) add(f Finding) { g.d.Findings = appendFinding(g.d.Findings, f) }

// topicNames are the topics any broker serves and the ones ZooKeeper has
// (zk: nil in KRaft mode), sorted, or the one asked for.
func (g *diagnoser) topicNames(zk map[string]*kafkazk.TopicState) []string {
	if g.o.Topic != "" {
		return []string{g.o.Topic}
	}
	names := map[string]bool{}
	for n := range zk {
		names[n] = true
	}
	for _, v := range g.views {
		for n, tv := range v.Topics {
			if tv.Present() {
				names[n] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(names))
}

// brokerViews asks every broker for its own metadata, at most 16 at a time.
func brokerViews(ctx context.Context, kc ports.Kafka, ids []int32, topics []string) (map[int32]ports.BrokerView, map[int32]error) {
	type answer struct {
		v   ports.BrokerView
		err error
	}
	got := par.Each(ids, func(id int32) answer {
		v, err := kc.BrokerView(ctx, id, topics...)
		return answer{v, err}
	})
	views, errs := map[int32]ports.BrokerView{}, map[int32]error{}
	for i, id := range ids {
		if got[i].err != nil {
			errs[id] = got[i].err
		} else {
			views[id] = got[i].v
		}
	}
	return views, errs
}

func sortedIDs(m map[int32]ports.BrokerView) []int32 {
	var out []int32
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// sleep waits d, or less when ctx ends first; it reports whether the whole
// d passed (the diagnosers' waits between two reads of the cluster).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
