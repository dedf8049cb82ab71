package steps

import (
	"encoding/json"
	"slices"
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

// TestDigestRoundTrip: a plan read back from the journal digests as the
// plan that was made — arguments whose struct fields are not in sorted
// order, an int64 past float64's precision, notes, facts and the rollback
// note — and every part the approver reads changes the digest.
func TestDigestRoundTrip(t *testing.T) {
	type args struct {
		Zeta  string `json:"zeta"`
		Alpha int64  `json:"alpha"`
		Mid   []int  `json:"mid,omitempty"`
	}
	p := &Plan{Step: "s", Kind: "k", Summary: "delete <payments> & more", Actions: []Action{{ID: "a", Op: OpZKDelete, Target: "/t",
		Args: args{Zeta: "z", Alpha: 1<<62 + 1, Mid: []int{3, 1}}}}, Notes: []string{"n"}, Facts: []string{"f"}, Rollback: "r"}
	digest := p.Digest()
	raw, err := json.Marshal(planRecord{Plan: p, Digest: digest, Ahead: true})
	if err != nil {
		t.Fatal(err)
	}
	// As History and the TUI read it: into maps (float64 numbers).
	var back planRecord
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	again, err := DigestJSON(raw)
	if err != nil || again != digest {
		t.Fatalf("journaled bytes digest %s (%v), the plan %s", again, err, digest)
	}
	// Re-marshalled from the decoded plan (args as maps, keys sorted, the
	// int64 as a float): the struct-order digest of v1 differed here; the
	// canonical one does not lose the int64 silently either — it differs,
	// which is why approve reads the journaled bytes, not a re-encoding.
	if back.Plan.Digest() == digest {
		t.Fatalf("a plan whose int64 argument went through float64 digests as the original: the digest does not bind the argument")
	}
	for name, edit := range map[string]func(*Plan){
		"summary":  func(q *Plan) { q.Summary += "!" },
		"note":     func(q *Plan) { q.Notes = append(q.Notes, "x") },
		"fact":     func(q *Plan) { q.Facts[0] = "g" },
		"rollback": func(q *Plan) { q.Rollback = "" },
		"args":     func(q *Plan) { q.Actions[0].Args = args{Zeta: "z", Alpha: 1 << 62, Mid: []int{3, 1}} },
		"target":   func(q *Plan) { q.Actions[0].Target = "/u" },
	} {
		q := *p
		q.Notes, q.Facts, q.Actions = slices.Clone(p.Notes), slices.Clone(p.Facts), slices.Clone(p.Actions)
		edit(&q)
		if q.Digest() == digest {
			t.Errorf("changing the %s leaves the digest as it was", name)
		}
	}
}
