package roll

// This file holds the vocabulary every roller action carries: its Phase,
// its typed Args, the Action constructor, and Began, which reads the
// journal by phase and node.

import (
	"fmt"

	"github.com/kremedy/kremedy/steps"
)

// Phase is what one roller action does to its node. Every roller action
// carries it in its Args: Apply switches on it, and the run's history is
// read by step, phase and node — never by the action's ID.
type Phase int

const (
	phaseNone  Phase = iota // not a roller action (a While action, another kind's record)
	PhaseSafe               // read right before the stop: may the node stop now (the one stop-safety rule)
	PhaseStop               // the node's own stop command, over SSH
	PhaseGone               // wait: the node is gone
	PhaseStart              // the node's own start command
	PhaseBack               // wait: it serves again, a new process
	PhaseGate               // the health gate before the next node
)

var phaseNames = [...]string{"", "safe", "stop", "gone", "start", "back", "gate"}

func (p Phase) String() string {
	if p <= phaseNone || int(p) >= len(phaseNames) {
		return fmt.Sprintf("Phase(%d)", int(p))
	}
	return phaseNames[p]
}

// MarshalText writes the phase's name (the journal stays readable).
func (p Phase) MarshalText() ([]byte, error) {
	if p <= phaseNone || int(p) >= len(phaseNames) {
		return nil, fmt.Errorf("roll: no phase %d", int(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText reads a phase's name.
func (p *Phase) UnmarshalText(b []byte) error {
	for i, n := range phaseNames {
		if i > 0 && n == string(b) {
			*p = Phase(i)
			return nil
		}
	}
	return fmt.Errorf("roll: unknown phase %q", b)
}

// Args are a roller action's typed arguments: its phase, its node, and
// the address its waits watch.
type Args struct {
	Phase Phase  `json:"phase"`
	Node  int32  `json:"node"`
	Addr  string `json:"addr,omitempty"`
	// Batch numbers the batch of a batch roll (1, 2, …; 0 when the node
	// rolls alone): the stops, waits and starts of one phase and batch
	// run at once.
	Batch int `json:"batch,omitempty"`
	// Set is the batch's nodes on the actions done once for all of them
	// (the safety check right before the stops, the health gate after).
	Set []int32 `json:"set,omitempty"`
}

// Nodes are the nodes the action is about: its Set, else its Node.
func (a Args) Nodes() []int32 {
	if len(a.Set) > 0 {
		return a.Set
	}
	return []int32{a.Node}
}

// Who names the action's nodes in a plan: "broker 3", "brokers [2 5]".
func (a Args) Who(noun string) string {
	if len(a.Set) > 1 {
		return fmt.Sprintf("%ss %v", noun, a.Set)
	}
	return fmt.Sprintf("%s %d", noun, a.Node)
}

// Action is the roller action of phase ph for node id (its ID, "stop-3",
// is for people and the journal; nothing dispatches on it).
func Action(ph Phase, id int32, addr string, op steps.Op, target, detail string) steps.Action {
	return steps.Action{ID: fmt.Sprintf("%s-%d", ph, id), Op: op, Broker: id, Target: target, Detail: detail, Args: Args{Phase: ph, Node: id, Addr: addr}}
}

// Began reports whether this step, in any attempt of the run, began the
// roller action of phase ph for node id (read by phase and node, from the
// journal).
func Began(env *steps.Env, ph Phase, id int32) bool {
	for _, rec := range env.History().Actions(env.Step().ID) {
		if a, err := steps.ArgsOf[Args](rec.Action); err == nil && a.Phase == ph && a.Node == id {
			return true
		}
	}
	return false
}
