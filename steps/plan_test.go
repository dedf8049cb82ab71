package steps

import (
	"encoding/json"
	"testing"
)

// TestArgsOfJournal: an action read back from the journal has JSON args;
// ArgsOf decodes them into the kind's type, strictly: another kind's args
// (a field the type lacks) are an error, never a value of zeros.
func TestArgsOfJournal(t *testing.T) {
	type mine struct {
		Node int32  `json:"node"`
		Addr string `json:"addr,omitempty"`
	}
	type theirs struct {
		Node int32  `json:"node"`
		Path string `json:"path"`
	}
	roundTrip := func(a Action) Action {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var back Action
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		return back
	}
	a := roundTrip(Action{ID: "x-1", Op: OpSSH, Args: mine{Node: 1, Addr: "b1:9092"}})
	if got, err := ArgsOf[mine](a); err != nil || got != (mine{1, "b1:9092"}) {
		t.Fatalf("from the journal: %+v %v", got, err)
	}
	b := roundTrip(Action{ID: "y-1", Op: OpSSH, Args: theirs{Node: 1, Path: "/etc/kafka"}})
	if got, err := ArgsOf[mine](b); err == nil {
		t.Fatalf("another kind's args decoded as mine: %+v", got)
	}
	if got, err := ArgsOf[mine](Action{Args: mine{Node: 2}}); err != nil || got.Node != 2 {
		t.Fatalf("typed: %+v %v", got, err)
	}
	if _, err := ArgsOf[mine](Action{}); err == nil {
		t.Fatal("no args decoded")
	}
}
