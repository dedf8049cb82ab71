package diagnose

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps/brokers"
)

// fewer collects, across the topics of one diagnosis, the partitions whose
// replication factor is below their min.insync.replicas: one finding for
// all of them (finish), never one "restore the missing replicas" per topic.
type fewer struct {
	topics map[string]*fewerTopic
}

type fewerTopic struct {
	rf         int // the smallest replication factor among them
	minISR     int
	override   bool // the topic's own min.insync.replicas, not the brokers' default
	partitions int
}

// below reports whether partition p of topic (replicas reps) is one of
// them, and records it.
func (f *fewer) below(topic string, reps int, m brokers.MinISR) bool {
	minISR := m.Of(topic)
	if reps == 0 || reps >= minISR {
		return false
	}
	if f.topics == nil {
		f.topics = map[string]*fewerTopic{}
	}
	t, ok := f.topics[topic]
	if !ok {
		_, own := m.Topics[topic]
		t = &fewerTopic{rf: reps, minISR: minISR, override: own}
		f.topics[topic] = t
	}
	t.rf = min(t.rf, reps)
	t.partitions++
	return true
}

// finding is the one cause, nil when no topic has such partitions.
func (f *fewer) finding(m brokers.MinISR) *Finding {
	if len(f.topics) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(f.topics))
	var ev []string
	parts, fromDefault := 0, 0
	for _, n := range names {
		t := f.topics[n]
		parts += t.partitions
		src := "the brokers' default"
		if t.override {
			src = "its own override"
		} else {
			fromDefault++
		}
		ev = append(ev, fmt.Sprintf("%s: %d partitions of replication factor %d < min.insync.replicas %d (%s)", n, t.partitions, t.rf, t.minISR, src))
	}
	config := fmt.Sprintf("min.insync.replicas=%d, the brokers' default", m.Default)
	if fromDefault < len(names) {
		config = "min.insync.replicas (the brokers' default or the topics' own)"
	}
	example := names[0]
	return &Finding{Kind: FindFewerReplicas, Severity: Critical, Partitions: nil,
		Summary:  fmt.Sprintf("%s (%d partitions) have fewer replicas than the %s in force: acks=all writes to them can never succeed; no replica is missing", text.Count(len(names), "topic"), parts, config),
		Evidence: ev,
		Fix:      fmt.Sprintf("a configuration to correct, per topic: set its min.insync.replicas to at most its replication factor (kafka-configs --bootstrap-server B --alter --entity-type topics --entity-name %s --add-config min.insync.replicas=1), or raise its replication factor with a reviewed reassignment (kafka-reassign-partitions --generate, review the plan, --execute). Topics: %s", example, strings.Join(names, ", ")),
		DoNot:    "do not restore replicas or run topic-cleanup for them: none is missing, and a cleanup deletes the topic's data"}
}
