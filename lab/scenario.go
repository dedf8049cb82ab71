package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// ErrWrongLab means a scenario does not apply to this lab's settings.
var ErrWrongLab = errors.New("scenario does not fit this lab")

// ErrNotObserved means a scenario ran but its symptom did not show within
// its deadline: the lab is not in the state the scenario promises.
var ErrNotObserved = errors.New("expected symptom not observed")

// MessagesPerPartition is how many "old" messages a scenario writes.
const MessagesPerPartition = 20

// Scenario breaks the lab the way one part of the incident report did.
type Scenario struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, l *Lab, topic string, out io.Writer) (*Report, error)
}

// ScenarioOrder lists the scenarios in the order the report tells them.
var ScenarioOrder = []string{"stuck-delete", "ghost-topic", "reused-segments", "stale-metadata", "partition-increase", "ghost-assignment", "broker-crash"}

// Scenarios by name.
var Scenarios = map[string]Scenario{
	"stuck-delete": {Name: "stuck-delete", Run: runStuckDelete,
		Summary: "T (replicated, with messages) is deleted while one replica's broker is down: T vanishes from listings, its znodes stay pending deletion, creating T again is refused"},
	"ghost-topic": {Name: "ghost-topic", Run: runGhostTopic,
		Summary: "after stuck-delete: T's znodes deleted by hand, the down broker returns with its old segments, T recreated: on 3.x INCONSISTENT_TOPIC_ID, NotLeaderOrFollower, under-replicated partitions; on 2.7–2.8 silent adoption; on 2.4–2.6 no leaders at all"},
	"reused-segments": {Name: "reused-segments", Run: runReusedSegments,
		Summary: "(a lab whose brokers adopt a stale directory: Kafka < 3.0, or --ibp 2.7) the same sequence: the recreated T silently adopts the old segments and consumers read old messages"},
	"stale-metadata": {Name: "stale-metadata", Run: runStaleMetadata,
		Summary: "T's znodes deleted by hand while brokers run: brokers still list T; after one broker restarts, brokers disagree about T"},
	"partition-increase": {Name: "partition-increase", Run: runPartitionIncrease,
		Summary: "T (2 partitions) raised to 3 by hand in ZooKeeper over a leftover state znode: ZooKeeper lists partition 2, no broker serves it (report 000, problem 4)"},
	"broker-crash": {Name: "broker-crash", Run: runBrokerCrash,
		Summary: "(report 001) T with 10 partitions replicated on every broker (up to 4), then broker 1 killed with SIGKILL: new leaders, broker 1 out of every ISR, messages still flow; the cause is one broker down, nothing to clean up"},
	"ghost-assignment": {Name: "ghost-assignment", Run: runGhostAssignment,
		Summary: "T's assignment rewritten by hand to name a broker that does not exist: ZooKeeper and every broker disagree about T's replicas"},
}

// Observation is one symptom a scenario checked with a real client.
type Observation struct {
	What     string
	Seen     bool
	Evidence string
	Optional bool // evidence that helps but is not the promised symptom
}

// Report says what a scenario did and what an operator now observes.
type Report struct {
	Scenario string
	Topic    string
	// Release is the lab's Kafka, IBP and what they do with a stale
	// directory: the symptoms observed are this version's.
	Release  string
	Did      []string
	Observed []Observation
	Took     time.Duration
	Next     string
	// Facts the tests and later scenarios use.
	Victim    int32            // the broker the scenario stopped or restarted
	OldID     string           // T's topic ID before the deletion ("" on IBP < 2.8)
	NewID     string           // T's topic ID after recreation
	Leaders   map[int32]int32  // partition -> preferred leader of the assignment
	Assign    [][]int32        // the assignment used for T
	Messages  map[int32]int    // partition -> messages written before the break
	Bystander string           // the sibling topic that shares T's prefix
	extra     map[string]int64 // internal
}

// Print writes the report for an operator.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n== %s on topic %q (%.1fs)\n", r.Scenario, r.Topic, r.Took.Seconds())
	if r.Release != "" {
		fmt.Fprintf(w, "On %s: the symptoms below are this version's.\n", r.Release)
	}
	fmt.Fprintln(w, "What was done:")
	for i, d := range r.Did {
		fmt.Fprintf(w, "  %2d. %s\n", i+1, d)
	}
	fmt.Fprintln(w, "What an operator now observes:")
	for _, o := range r.Observed {
		mark := "SEEN    "
		if !o.Seen {
			mark = "NOT SEEN"
			if o.Optional {
				mark = "(absent)"
			}
		}
		fmt.Fprintf(w, "  [%s] %s\n", mark, o.What)
		if o.Evidence != "" {
			fmt.Fprintf(w, "             %s\n", strings.ReplaceAll(o.Evidence, "\n", "\n             "))
		}
	}
	if r.Next != "" {
		fmt.Fprintf(w, "Next: %s\n", r.Next)
	}
}
