package roll

import (
	"encoding/json"
	"fmt"
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

// TestRollTypes: the roll's parameter types, registered by this pack, read
// what the engine's options read before they moved here, with the same
// messages: a batch (1, N, auto) and a list of broker ids (empty: every
// broker; no id twice).
func TestRollTypes(t *testing.T) {
	for _, tc := range []struct {
		typ     steps.ValueType
		in      string
		wantErr string
	}{
		{TypeBatch, "auto", ""},
		{TypeBatch, " 3 ", ""},
		{TypeBatch, "0", `"0" is not a batch size: 1 (one broker at a time), a number of brokers such as 3, or auto (the largest batches the stop-safety rule allows)`},
		{TypeBrokers, "", ""},
		{TypeBrokers, "3, 1", ""},
		{TypeBrokers, "1,1", `"1,1" names broker 1 twice`},
		{TypeBrokers, "1,-2", `"1,-2" is not a list of broker ids such as 1,2,3 (empty: every broker)`},
		{TypeTopics, "*", ""},
		{TypeTopics, "orders,orders", `"orders,orders" names topic orders twice`},
	} {
		err := tc.typ.Check(tc.in)
		if got := fmt.Sprint(err); tc.wantErr == "" && err != nil || tc.wantErr != "" && got != tc.wantErr {
			t.Errorf("%s %q: %v, want %q", tc.typ, tc.in, err, tc.wantErr)
		}
	}
	type opts struct {
		Batch int     `opt:"batch" type:"batch"`
		Only  []int32 `opt:"only" type:"brokers"`
	}
	r := steps.NewRegistry()
	var got opts
	steps.Register(r, "k", nil, func(o opts) steps.Kind { got = o; return nil })
	spec, _ := r.Lookup("k")
	if _, err := spec.New(map[string]string{"batch": "auto", "only": "3,1"}); err != nil || got.Batch != BatchAuto || !reflect.DeepEqual(got.Only, []int32{3, 1}) {
		t.Errorf("options %+v, %v", got, err)
	}
}
