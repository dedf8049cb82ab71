package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
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
	// Mode is the kind of lab it breaks: ZooKeeperMode or KRaftMode. Run
	// refuses a lab of the other kind (ErrWrongLab) before it touches it.
	Mode Modes
	Run  func(ctx context.Context, l *Lab, topic string, out io.Writer) (*Report, error)
}

// ScenarioOrder lists the scenarios in the order the report tells them.
var ScenarioOrder []string

// Scenarios by name.
var Scenarios = map[string]Scenario{}

// scenarioRank is each registered scenario's place in ScenarioOrder.
var scenarioRank = map[string]int{}

// register adds the scenario name to Scenarios and ScenarioOrder. Each
// scenario_<name>.go calls it once, from its init. rank places it in the
// report's story (lower comes first; the built-in ones use multiples of
// 10, so that a new one fits between two); run is its body, wrapped in the
// prologue every scenario shares (onReady or withEnv). A name or a rank
// taken twice panics when the package loads, in every test binary.
func register(rank int, name string, run play, summary string) {
	registerFor(ZooKeeperMode, rank, name, run, summary)
}

// registerKRaft is register for a scenario that breaks KRaft labs
// (`lab up --kraft`); its body is wrapped in onKRaft or withEnv.
func registerKRaft(rank int, name string, run play, summary string) {
	registerFor(KRaftMode, rank, name, run, summary)
}

func registerFor(mode Modes, rank int, name string, run play, summary string) {
	if _, dup := Scenarios[name]; dup {
		panic(fmt.Sprintf("lab: scenario %q registered twice", name))
	}
	for n, r := range scenarioRank {
		if r == rank {
			panic(fmt.Sprintf("lab: scenarios %q and %q both have rank %d", n, name, rank))
		}
	}
	Scenarios[name] = Scenario{Name: name, Summary: summary, Mode: mode, Run: forMode(mode, name, run(name))}
	scenarioRank[name] = rank
	ScenarioOrder = append(ScenarioOrder, name)
	slices.SortFunc(ScenarioOrder, func(a, b string) int { return cmp.Compare(scenarioRank[a], scenarioRank[b]) })
}

// forMode refuses, before run touches anything, a lab of the other mode:
// a ZooKeeper scenario edits znodes and reads /brokers/ids, a KRaft one
// needs the quorum and the brokers' KRaft registrations.
func forMode(mode Modes, name string, run runFunc) runFunc {
	return func(ctx context.Context, l *Lab, t string, out io.Writer) (*Report, error) {
		switch kraft := l.State.KRaft(); {
		case mode == ZooKeeperMode && kraft:
			return nil, fmt.Errorf("%w: %s reproduces a ZooKeeper-mode incident (it works on znodes and /brokers/ids), and this lab (%s) runs KRaft with no ZooKeeper. On a KRaft lab: %s; or start a ZooKeeper lab (`kremedy lab up --dir OTHER`)",
				ErrWrongLab, name, strings.TrimPrefix(ibpNote(l.State), ", "), strings.Join(ScenariosFor(KRaftMode), ", "))
		case mode == KRaftMode && !kraft:
			return nil, fmt.Errorf("%w: %s breaks a KRaft cluster, and this lab (%s) runs in ZooKeeper mode. Start a KRaft lab (`kremedy lab up --kraft --dir OTHER`, Kafka %s or 4.x), or on this lab: %s",
				ErrWrongLab, name, strings.TrimPrefix(ibpNote(l.State), ", "), KafkaVersion, strings.Join(ScenariosFor(ZooKeeperMode), ", "))
		}
		return run(ctx, l, t, out)
	}
}

// ScenariosFor lists, in the report's order, the scenarios of labs of mode.
func ScenariosFor(mode Modes) []string {
	var out []string
	for _, n := range ScenarioOrder {
		if Scenarios[n].Mode == mode {
			out = append(out, n)
		}
	}
	return out
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
	Victim    int32           // the broker the scenario stopped or restarted
	OldID     string          // T's topic ID before the deletion ("" on IBP < 2.8)
	NewID     string          // T's topic ID after recreation
	Leaders   map[int32]int32 // partition -> preferred leader of the assignment
	Assign    [][]int32       // the assignment used for T
	Messages  map[int32]int   // partition -> messages written before the break
	Bystander string          // the sibling topic that shares T's prefix
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
