package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/signoff"
)

// deleteArgs are a kind's typed arguments whose fields are not in sorted
// order and carry an int64 past float64's precision: the two things that
// made a digest of Go-struct JSON differ from the journal's copy.
type deleteArgs struct {
	Znode   string `json:"znode"`
	Version int64  `json:"version"`
	Backup  string `json:"backup"`
}

type deleteTopic struct {
	topic   string
	applied chan string
}

func (k deleteTopic) Plan(context.Context, *steps.Env) (*steps.Plan, error) {
	return &steps.Plan{Summary: "delete the znodes of topic " + k.topic,
		Actions: []steps.Action{{ID: "delete-1", Op: steps.OpZKDelete, Target: "/brokers/topics/" + k.topic,
			Args: deleteArgs{Znode: "/brokers/topics/" + k.topic, Version: 1<<62 + 1, Backup: "backup.json"}}},
		Notes: []string{"nothing else is touched"}, Facts: []string{"the topic has 3 partitions"}}, nil
}

func (k deleteTopic) Apply(_ context.Context, _ *steps.Env, p *steps.Plan) error {
	a, err := steps.ArgsOf[deleteArgs](p.Actions[0])
	if err != nil {
		return err
	}
	k.applied <- a.Znode
	return nil
}

func (deleteTopic) Verify(context.Context, *steps.Env) ([]steps.Check, error) {
	return []steps.Check{{Name: "deleted", OK: true}}, nil
}

// TestApproveRefusesAnEditedPlan closes H1 of the security review: a second
// approver was shown one plan and signed another, because approve trusted
// the digest written beside the journal's plan. Now approve recomputes the
// digest from the journaled plan it shows: a journal whose plan was edited
// after the operator confirmed it ("delete payments" made to read "delete
// scratch-test", its digest field left as it was) is refused, naming the
// step, and nothing is signed; the untouched plan round-trips through the
// journal to the digest the run waits for, and its arguments are shown.
func TestApproveRefusesAnEditedPlan(t *testing.T) {
	keys := t.TempDir()
	signers := approvalKeys(t, keys, []string{"alice", "bob"}, "alice", "bob")

	dir := filepath.Join(t.TempDir(), "run")
	applied := make(chan string, 1)
	rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "prod", Noun: "cluster"}, Steps: []steps.Step{
		{Info: steps.Info{ID: "delete-znodes", Kind: "k", Title: "Delete the topic's znodes", Risk: steps.Destructive, Confirm: steps.ConfirmTyped},
			Kind: deleteTopic{topic: "payments", applied: applied}}}}
	s, err := steps.Create(dir, rb, steps.Meta{ID: "run-1", Runbook: "test", Cluster: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := &signoff.Approver{Inner: headlessApprover{w: &bytes.Buffer{}, yes: true, confirm: "prod"}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: signers, Timeout: time.Minute},
		Run: "run-1", Dir: dir, Key: filepath.Join(keys, "alice"), Signer: signoff.Keygen{}, Log: func(step, text string) { s.Notef(step, "%s", text) }, Poll: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan steps.Outcome, 1)
	go func() { done <- s.Run(ctx, ports.Cluster{}, a, nil) }()
	var req signoff.Request
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if rs, err := signoff.Requests(dir, ""); err == nil {
			req = rs[0]
			break
		}
		if time.Now().After(end) {
			t.Fatal("the run never asked for an approval")
		}
	}

	// The plan read back from the journal digests as the plan that runs.
	v, err := steps.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	pv := v.Step("delete-znodes").LastPlan()
	if pv == nil || !pv.Intact() || pv.Recomputed != req.Digest {
		t.Fatalf("the journal's plan does not round-trip to the digest the run waits for: %+v, request %s", pv, req.Digest)
	}

	approve := func() (string, int) { return inProcess("approve", dir, "--key", filepath.Join(keys, "bob"), "--yes") }

	// Edit the journal's plan after the operator's confirmation: what the
	// approver would read now says scratch-test.
	jpath := filepath.Join(dir, steps.JournalFile)
	orig, err := os.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.ReplaceAll(orig, []byte("topics/payments"), []byte("topics/scratch-test"))
	edited = bytes.ReplaceAll(edited, []byte("topic payments"), []byte("topic scratch-test"))
	if bytes.Equal(edited, orig) {
		t.Fatal("the test's edit changed nothing in the journal")
	}
	if err := os.WriteFile(jpath, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := approve()
	if code != 1 || !strings.Contains(out, "refused: the journal's plan of step delete-znodes") || !strings.Contains(out, "nothing was signed") {
		t.Fatalf("approve of an edited plan: exit %d, want 1 naming the step:\n%s", code, out)
	}
	if strings.Contains(out, "signed:") {
		t.Fatalf("approve signed an edited plan:\n%s", out)
	}
	if sigs, _ := filepath.Glob(filepath.Join(dir, signoff.Dir, "*.sig")); len(sigs) != 1 {
		t.Fatalf("the refused approval wrote a signature: %v", sigs)
	}

	// The journal as the run wrote it: approved, with the arguments shown.
	if err := os.WriteFile(jpath, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = approve()
	if code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	for _, w := range []string{"recomputed here from what is shown below: equal", "digest " + req.Digest, `args {"backup":"backup.json","version":4611686018427387905,"znode":"/brokers/topics/payments"}`} {
		if !strings.Contains(out, w) {
			t.Errorf("approve's output lacks %q:\n%s", w, out)
		}
	}
	select {
	case o := <-done:
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not finish after the approval")
	}
	if got := <-applied; got != "/brokers/topics/payments" {
		t.Fatalf("applied %q", got)
	}
	// The report checks every applied plan against its approval.
	report, _ := os.ReadFile(s.ReportPath())
	if !strings.Contains(string(report), "every approved plan digests, recomputed from this journal, as approved") {
		t.Errorf("the report does not say the approved plans were recomputed:\n%s", report)
	}
}
