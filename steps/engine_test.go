package steps_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	_ "github.com/kremedy/kremedy/steps/cleanup" // registers the topic type
	"github.com/kremedy/kremedy/steps/ports"
	_ "github.com/kremedy/kremedy/steps/roll" // registers the brokers, topics and batch types
)

// fakeKind is a step kind that counts what the engine asks of it. Its
// postcondition holds only once it was applied in this process, so that a
// resume's re-check fails and re-does it unless the engine trusts the
// journal.
type fakeKind struct {
	applied, verified int
	plan              func() *steps.Plan
	apply             func(env *steps.Env, p *steps.Plan) error
}

func (k *fakeKind) Plan(context.Context, *steps.Env) (*steps.Plan, error) {
	if k.plan != nil {
		return k.plan(), nil
	}
	return &steps.Plan{Summary: "act", Actions: []steps.Action{{ID: "a", Op: steps.OpSSH, Target: "x"}}}, nil
}

func (k *fakeKind) Apply(_ context.Context, env *steps.Env, p *steps.Plan) error {
	k.applied++
	if k.apply != nil {
		return k.apply(env, p)
	}
	return nil
}

func (k *fakeKind) Verify(context.Context, *steps.Env) ([]steps.Check, error) {
	k.verified++
	return []steps.Check{{Name: "postcondition", OK: k.applied > 0}}, nil
}

type approveFunc func(info steps.Info, p *steps.Plan) steps.Approval

func (a approveFunc) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	return a(info, p), nil
}

// approveAll approves every plan it is shown, typing "word".
var approveAll = approveFunc(func(_ steps.Info, p *steps.Plan) steps.Approval {
	return steps.Approval{Decision: steps.Approve, Typed: "word", By: "test", Digest: p.Digest()}
})

func session(t *testing.T, ss ...steps.Step) *steps.Session {
	t.Helper()
	rb := &steps.Runbook{Name: "test", Steps: ss, Confirm: steps.Confirmation{Word: "word", Noun: "thing"},
		Artifacts: []steps.Artifact{{ID: "backup", What: "a backup", Path: "backup/b.json"}}}
	s, err := steps.Create(t.TempDir(), rb, steps.Meta{ID: "r", Runbook: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func step(id string, risk steps.Risk, confirm steps.Confirm, k steps.Kind) steps.Step {
	return steps.Step{Info: steps.Info{ID: id, Kind: "fake", Title: id, Risk: risk, Confirm: confirm}, Kind: k}
}

// TestResumeDoesNotRedoAStepALaterStepUndid: on resume, a destructive step
// followed by a completed step is trusted from the journal, not re-checked
// and re-done (a second stop of a restarted cluster, a znode deletion of
// the topic verify just made); the last completed step is still re-checked.
func TestResumeDoesNotRedoAStepALaterStepUndid(t *testing.T) {
	stop, start, last := &fakeKind{}, &fakeKind{}, &fakeKind{}
	s := session(t, step("stop", steps.Destructive, steps.ConfirmTyped, stop), step("start", steps.Low, steps.ConfirmYes, start),
		step("last", steps.Destructive, steps.ConfirmTyped, last))
	if out := s.Run(context.Background(), ports.Cluster{}, approveAll, nil); out.Err != nil {
		t.Fatal(out.Err)
	}
	// A new process: nothing applied in it yet, the journal says all done.
	stop.applied, start.applied, last.applied = 0, 0, 0
	if out := s.Run(context.Background(), ports.Cluster{}, approveAll, nil); out.Err != nil {
		t.Fatal(out.Err)
	}
	if stop.applied != 0 {
		t.Errorf("stop (undone on purpose by the completed start) was re-done %d times", stop.applied)
	}
	if start.applied != 1 || last.applied != 1 {
		t.Errorf("start re-done %d, last re-done %d times; want each once: their failing checks are re-checked, then re-done", start.applied, last.applied)
	}
}

// TestApprovalIsForThePlanShown: the engine applies a plan only with an
// approval carrying its digest, and never a plan that changed after the
// approval.
func TestApprovalIsForThePlanShown(t *testing.T) {
	for name, a := range map[string]approveFunc{
		"no digest": func(_ steps.Info, p *steps.Plan) steps.Approval {
			return steps.Approval{Decision: steps.Approve, Typed: "word", By: "test"}
		},
		"another plan's digest": func(_ steps.Info, p *steps.Plan) steps.Approval {
			other := *p
			other.Actions = append(slices.Clone(p.Actions), steps.Action{ID: "b", Op: steps.OpMove, Target: "y"})
			return steps.Approval{Decision: steps.Approve, Typed: "word", By: "test", Digest: other.Digest()}
		},
		"plan changed after approval": func(_ steps.Info, p *steps.Plan) steps.Approval {
			d := p.Digest()
			p.Actions[0].Target = "somewhere else"
			return steps.Approval{Decision: steps.Approve, Typed: "word", By: "test", Digest: d}
		},
		"args changed after approval": func(_ steps.Info, p *steps.Plan) steps.Approval {
			d := p.Digest()
			p.Actions[0].Args = map[string]string{"to": "/"}
			return steps.Approval{Decision: steps.Approve, Typed: "word", By: "test", Digest: d}
		},
	} {
		t.Run(name, func(t *testing.T) {
			k := &fakeKind{}
			s := session(t, step("act", steps.Destructive, steps.ConfirmTyped, k))
			out := s.Run(context.Background(), ports.Cluster{}, a, nil)
			if !errors.Is(out.Err, steps.ErrNotApproved) || k.applied != 0 || out.Failed != "act" {
				t.Fatalf("err %v, applied %d, outcome %+v: want ErrNotApproved and nothing applied", out.Err, k.applied, out)
			}
		})
	}
}

// TestTypedConfirmationIsTheRunbooksWord: a destructive step needs the
// runbook's confirmation word, exactly.
func TestTypedConfirmationIsTheRunbooksWord(t *testing.T) {
	for _, typed := range []string{"", "wor", "Word", " word", "word ", "thing"} {
		k := &fakeKind{}
		s := session(t, step("act", steps.Destructive, steps.ConfirmTyped, k))
		out := s.Run(context.Background(), ports.Cluster{}, approveFunc(func(_ steps.Info, p *steps.Plan) steps.Approval {
			return steps.Approval{Decision: steps.Approve, Typed: typed, Digest: p.Digest()}
		}), nil)
		if !errors.Is(out.Err, steps.ErrNotApproved) || k.applied != 0 {
			t.Fatalf("typed %q: %v (applied %d)", typed, out.Err, k.applied)
		}
		if !strings.Contains(out.Err.Error(), `thing name "word"`) {
			t.Errorf("the refusal does not say what to type: %v", out.Err)
		}
	}
}

// TestHistoryAndFacts: a kind sees what earlier steps and attempts did
// through its Env, never through the engine's state.
func TestHistoryAndFacts(t *testing.T) {
	first := &fakeKind{apply: func(env *steps.Env, p *steps.Plan) error {
		if err := env.Save("seen", map[string]int{"n": 7}); err != nil {
			return err
		}
		return env.Do(p.Actions[0], func() error { return nil })
	}}
	var done bool
	var seen map[string]int
	var actions []steps.ActionRecord
	second := &fakeKind{apply: func(env *steps.Env, p *steps.Plan) error {
		done = env.History().Done("fake")
		actions = env.History().Actions("first")
		_, err := env.Load("seen", &seen)
		if env.Artifact("backup") == "" || !strings.HasSuffix(env.Artifact("backup"), "backup/b.json") {
			t.Errorf("artifact path %q", env.Artifact("backup"))
		}
		return err
	}}
	s := session(t, step("first", steps.Low, steps.ConfirmNone, first), step("second", steps.Low, steps.ConfirmNone, second))
	if out := s.Run(context.Background(), ports.Cluster{}, nil, nil); out.Err != nil {
		t.Fatal(out.Err)
	}
	if !done || seen["n"] != 7 || len(actions) != 1 || !actions[0].OK || actions[0].Action.Op != steps.OpSSH {
		t.Fatalf("done %v seen %v actions %+v", done, seen, actions)
	}
}

// TestOpsAreTyped: ops marshal as their names and only known names decode.
func TestOpsAreTyped(t *testing.T) {
	b, err := json.Marshal(steps.Action{ID: "x", Op: steps.OpZKDelete})
	if err != nil || !strings.Contains(string(b), `"op":"zk-delete"`) {
		t.Fatalf("%s %v", b, err)
	}
	var a steps.Action
	if err := json.Unmarshal([]byte(`{"id":"x","op":"rm -rf"}`), &a); err == nil {
		t.Fatal("an unknown op decoded")
	}
	for _, o := range []steps.Op{steps.OpCheck, steps.OpWait} {
		if o.Changes() {
			t.Errorf("%s changes things", o)
		}
	}
}

type opts struct {
	Topic   string        `opt:"topic" type:"topic"`
	N       int           `opt:"n" default:"3"`
	Wait    time.Duration `opt:"wait" default:"5s"`
	On      bool          `opt:"on"`
	Brokers []int32       `opt:"brokers" type:"brokers" default:""`
}

// TestRegistryOptions: a kind's options are decoded from text, defaults
// filled, required ones demanded, unknown ones refused.
func TestRegistryOptions(t *testing.T) {
	r := steps.NewRegistry()
	var got opts
	steps.Register(r, "k", nil, func(o opts) steps.Kind { got = o; return &fakeKind{} })
	spec, ok := r.Lookup("k")
	if !ok || len(spec.Options) != 5 {
		t.Fatalf("spec %+v", spec)
	}
	if _, err := spec.New(map[string]string{"topic": "orders", "on": "true", "brokers": "3,1"}); err != nil {
		t.Fatal(err)
	}
	if got.Topic != "orders" || got.N != 3 || got.Wait != 5*time.Second || !got.On || !slices.Equal(got.Brokers, []int32{3, 1}) {
		t.Fatalf("options %+v", got)
	}
	for _, bad := range []map[string]string{
		{"on": "true"},                                     // topic is required
		{"topic": "../x", "on": "true"},                    // not a topic
		{"topic": "t", "on": "yes"},                        // not a bool
		{"topic": "t", "on": "true", "n": "x"},             // not a number
		{"topic": "t", "on": "true", "brokers": "1,1"},     // twice
		{"topic": "t", "on": "true", "nope": "1"},          // unknown
		{"topic": "t", "on": "true", "wait": "-1s"},        // negative
		{"topic": "t", "on": "true", "brokers": "1,two,3"}, // not ids
	} {
		if _, err := spec.New(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestEngineImportsNoClientOrKind: the engine reaches clusters only through
// the ports, and knows no step kind. The guard is an allowlist: the
// standard library and exactly these packages of the module; a new
// dependency of the engine is a decision, made here.
func TestEngineImportsNoClientOrKind(t *testing.T) {
	allowed := []string{"github.com/kremedy/kremedy/steps", "github.com/kremedy/kremedy/steps/journal", "github.com/kremedy/kremedy/steps/ports",
		"github.com/kremedy/kremedy/steps/kafkazk", "github.com/kremedy/kremedy/internal/atomicfile", "github.com/kremedy/kremedy/internal/shell"}
	for _, dep := range deps(t, ".") {
		if std(dep) || slices.Contains(allowed, dep) {
			continue
		}
		t.Errorf("package steps depends on %s, which is not in the engine's allowlist", dep)
	}
}

// TestEngineNamesNoPacksType: the engine knows no topic, broker or batch:
// the packs register those parameter types (steps.RegisterType), so the
// engine's own files import no Kafka data model (kafkazk reaches it only
// through the ports' types).
func TestEngineNamesNoPacksType(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	if imports := strings.Fields(string(out)); slices.Contains(imports, "github.com/kremedy/kremedy/steps/kafkazk") {
		t.Errorf("package steps imports steps/kafkazk itself: a parameter type of a pack belongs to the pack (steps.RegisterType)")
	}
}

// TestReadOnlyPackagesDoNotDependOnTheEngine: diagnose, the lab, the
// inventory's live checks and the shared broker reads see clusters through
// the ports only; the engine, the roller and the kind packs are above them.
func TestReadOnlyPackagesDoNotDependOnTheEngine(t *testing.T) {
	const mod = "github.com/kremedy/kremedy/"
	above := []string{"steps", "steps/roll", "steps/cleanup", "steps/restart", "steps/migrate", "runbooks", "tui"}
	for _, pkg := range []string{"steps/diagnose", "lab", "inventory/live", "steps/brokers"} {
		for _, dep := range deps(t, mod+pkg) {
			for _, a := range above {
				if dep == mod+a {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}

func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

// std: a standard-library package (no dot in its first path element).
func std(pkg string) bool {
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".")
}

// TestAPlanWithASecretIsNeverConfirmed: the journal redacts a registered
// secret, so a plan that carries one would be shown in clear to the
// operator and approvers while its journaled copy no longer digests as it:
// the engine refuses it before asking, and nothing runs.
func TestAPlanWithASecretIsNeverConfirmed(t *testing.T) {
	k := &fakeKind{plan: func() *steps.Plan {
		return &steps.Plan{Summary: "edit", Actions: []steps.Action{{ID: "a", Op: steps.OpSSH, Target: "x", Args: map[string]string{"content": "password=hunter2-secret"}}}}
	}}
	s := session(t, step("edit", steps.Destructive, steps.ConfirmTyped, k))
	s.Redact("hunter2-secret")
	asked := false
	out := s.Run(context.Background(), ports.Cluster{}, approveFunc(func(_ steps.Info, p *steps.Plan) steps.Approval {
		asked = true
		return approveAll(steps.Info{}, p)
	}), nil)
	if !errors.Is(out.Err, steps.ErrRefused) || !strings.Contains(out.Err.Error(), "contains a secret") {
		t.Fatalf("a plan with a secret: %v", out.Err)
	}
	if asked || k.applied != 0 {
		t.Fatalf("asked %v, applied %d", asked, k.applied)
	}
}

// TestRedactingReporterHidesWhatTheJournalHides: the events a run sends
// outside the process (jsonl, webhooks) carry no registered secret in
// their text or error, while errors.Is still sees through them.
func TestRedactingReporterHidesWhatTheJournalHides(t *testing.T) {
	k := &fakeKind{apply: func(env *steps.Env, _ *steps.Plan) error {
		env.Logf("connected with password hunter2-secret")
		return fmt.Errorf("login as hunter2-secret failed: %w", steps.ErrCheckFailed)
	}}
	s := session(t, step("s", steps.Low, steps.ConfirmNone, k))
	s.Redact("hunter2-secret")
	var got []steps.Event
	out := s.Run(context.Background(), ports.Cluster{}, approveAll, s.Redacting(steps.ReporterFunc(func(e steps.Event) { got = append(got, e) })))
	if !errors.Is(out.Err, steps.ErrCheckFailed) {
		t.Fatalf("run: %v", out.Err)
	}
	sawErr := false
	for _, e := range got {
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "hunter2") {
			t.Fatalf("an event carries the secret: %s", b)
		}
		if e.Err != nil {
			sawErr = true
			if !errors.Is(e.Err, steps.ErrCheckFailed) || !strings.Contains(e.Err.Error(), "[redacted]") {
				t.Errorf("the redacted error: %v", e.Err)
			}
		}
	}
	if !sawErr {
		t.Fatal("no event carried the step's error")
	}
}
