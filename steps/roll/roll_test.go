package roll

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kremedy/kremedy/steps"
)

// TestPhaseText: a phase is journaled by its name and read back; the zero
// phase (not a roller action) has no name to write.
func TestPhaseText(t *testing.T) {
	for p := PhaseSafe; p <= PhaseGate; p++ {
		b, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Phase
		if err := back.UnmarshalText(b); err != nil || back != p {
			t.Fatalf("%s: read back %v %v", b, back, err)
		}
	}
	if _, err := phaseNone.MarshalText(); err == nil {
		t.Fatal("the zero phase marshalled")
	}
	var p Phase
	if err := p.UnmarshalText([]byte("reboot")); err == nil {
		t.Fatal("an unknown phase read")
	}
}

// TestActionFromJournal: a roller action read back from the journal is
// found by its phase and node, whatever its ID says.
func TestActionFromJournal(t *testing.T) {
	a := Action(PhaseStop, 3, "b3:9092", steps.OpSSH, "broker 3 on b3", "systemctl stop kafka")
	a.ID = "anything"
	b, _ := json.Marshal(a)
	var back steps.Action
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := steps.ArgsOf[Args](back)
	if err != nil || !reflect.DeepEqual(got, Args{Phase: PhaseStop, Node: 3, Addr: "b3:9092"}) {
		t.Fatalf("%+v %v", got, err)
	}
	// A batch's gate names its set: read back, each of its nodes is gated.
	g := steps.Action{ID: "gate-2+5", Args: Args{Phase: PhaseGate, Node: 2, Batch: 1, Set: []int32{2, 5}}}
	b, _ = json.Marshal(g)
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got, err = steps.ArgsOf[Args](back); err != nil || !reflect.DeepEqual(got.Nodes(), []int32{2, 5}) || got.Batch != 1 {
		t.Fatalf("%+v %v", got, err)
	}
}
