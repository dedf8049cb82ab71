package brokers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/kremedy/kremedy/internal/kafkaver"
	"github.com/kremedy/kremedy/steps/ports"
)

// Releases is what the brokers said about their releases (the capability
// probe). Every decision that depends on a version asks it, and the
// answer is the safe one when a broker did not answer: a broker kremedy
// could not ask may be the oldest.
type Releases []ports.BrokerRelease

// Probe asks the brokers for their API versions and IBP.
func Probe(ctx context.Context, k ports.Kafka, ids []int32) Releases {
	return Releases(k.Releases(ctx, ids))
}

// answered reports whether every broker answered ApiVersions.
func (r Releases) answered() bool {
	for _, b := range r {
		if b.Guess == "" {
			return false
		}
	}
	return len(r) > 0
}

// all reports whether every broker answered and satisfies ok (false when
// one did not answer: it may be the oldest).
func (r Releases) all(ok func(ports.BrokerRelease) bool) bool {
	if !r.answered() {
		return false
	}
	for _, b := range r {
		if !ok(b) {
			return false
		}
	}
	return true
}

// DescribeProducers reports whether every broker answers DescribeProducers
// (2.8+). When false, producers are judged by watching log end offsets.
func (r Releases) DescribeProducers() bool {
	return r.all(func(b ports.BrokerRelease) bool { return b.DescribeProducers })
}

// TopicIDs reports whether the cluster keeps topic IDs: every broker's
// software (Metadata v10+) and IBP are 2.8 or later. Unknown is false.
func (r Releases) TopicIDs() bool {
	return r.all(func(b ports.BrokerRelease) bool {
		ibp, err := kafkaver.Parse(b.IBP)
		return b.MetadataIDs && err == nil && ibp.AtLeast(2, 8)
	})
}

// WritesIDAtCreation reports whether a broker writes partition.metadata when
// it creates a partition's log (3.0+ with topic IDs). Kafka 2.8 writes it
// only at the partition's next LeaderAndIsr after the log exists
// (Partition.checkOrSetTopicId at 2.8), so a topic just created has none.
func (r Releases) WritesIDAtCreation() bool { return r.RefusesStaleLog() }

// RefusesStaleLog reports whether a restarted broker refuses a directory
// whose partition.metadata names another topic ID (INCONSISTENT_TOPIC_ID,
// 3.0+ with topic IDs); otherwise the recreated topic adopts it silently.
func (r Releases) RefusesStaleLog() bool {
	return r.TopicIDs() && r.all(func(b ports.BrokerRelease) bool { return b.Release30 })
}

// String says, grouped, which brokers run what ("brokers 1-3: Kafka v2.8,
// IBP 2.8-IV1"), then what kremedy does differently because of it.
func (r Releases) String() string {
	groups := map[string][]int32{}
	for _, b := range r {
		k := "no answer (" + b.Err + ")"
		if b.Guess != "" {
			ibp := b.IBP
			if ibp == "" {
				ibp = "unread"
			}
			k = fmt.Sprintf("Kafka %s, inter.broker.protocol.version %s", b.Guess, ibp)
			if b.Err != "" {
				k += " (" + b.Err + ")"
			}
		}
		groups[k] = append(groups[k], b.Broker)
	}
	var out []string
	for k, ids := range groups {
		out = append(out, fmt.Sprintf("broker %s: %s", fmt.Sprint(ids), k))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// Methods names, for the operator and the journal, the method kremedy uses
// for each version-dependent capability on this cluster.
func (r Releases) Methods() []string {
	var m []string
	if r.DescribeProducers() {
		m = append(m, "producers: DescribeProducers on every partition's replicas")
	} else {
		m = append(m, "producers: no DescribeProducers on every broker (Kafka < 2.8, or a broker unanswered): every partition's log end offset is watched for producer_idle; any movement holds the detach gate")
	}
	switch {
	case r.RefusesStaleLog():
		m = append(m, "topic IDs: kept; a stale directory is refused (INCONSISTENT_TOPIC_ID); partition.metadata written when a log is created")
	case r.TopicIDs():
		m = append(m, "topic IDs: kept, but Kafka 2.8 adopts a stale directory after a restart and writes partition.metadata only at a partition's second LeaderAndIsr: adoption judged from offsets and record times; a directory without partition.metadata is accepted")
	default:
		m = append(m, "topic IDs: none (software or IBP < 2.8, or a broker unanswered): adoption judged from offsets and record times, never from partition.metadata")
	}
	return m
}
