package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/signoff"
)

const teamInventory = `name: prod
zookeeper:
  connect: 127.0.0.1:1/kafka
kafka:
  bootstrap: [127.0.0.1:1]
ssh:
  known_hosts: /dev/null
brokers:
  - id: 1
    host: h
    stop: s
    start: s
`

// TestTeamFlagsAndPolicyRefusedBeforeAnything: a --notify that cannot be
// used, a token on the command line, or a policy the run cannot enforce
// exit 2 before any run directory exists.
func TestTeamFlagsAndPolicyRefusedBeforeAnything(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory.yaml")
	os.WriteFile(inv, []byte(teamInventory), 0o600)
	policy := filepath.Join(dir, "policy.yaml")
	os.WriteFile(policy, []byte(teamInventory+"policy:\n  approvals: 2\n  allowed_signers: signers\n"), 0o600)
	runDir := filepath.Join(dir, "run")
	base := []string{"run", "rolling-restart", "--headless", "--yes", "--confirm", "prod", "--run-dir", runDir, "--inventory"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{inv, "--notify", "ftp://x/y"}, "--notify: not a webhook kremedy can notify: ftp://x/… : use an http:// or https:// URL"},
		{[]string{inv, "--notify", "https://u:pw@x.example/y"}, "has a user or password in it"},
		{[]string{inv, "--notify", "env:KREMEDY_TEST_UNSET_HOOK"}, "the environment variable KREMEDY_TEST_UNSET_HOOK is not set"},
		{[]string{inv, "--notify", "file:" + filepath.Join(dir, "none")}, "no such file"},
		{[]string{inv, "--notify", "https://x.example/y", "--notify-token", "hunter2"}, "write env:NAME or file:PATH; a token on the command line is seen"},
		{[]string{inv, "--notify", "http://x.example/y", "--notify-token", "env:HOME"}, "a token is sent over https only"},
		{[]string{inv, "--notify-token", "env:HOME"}, "there are none"},
		{[]string{policy}, "pass --key KEY, your signing key"},
		{[]string{policy, "--key", filepath.Join(dir, "nokey")}, "--key: stat"},
		{[]string{policy, "--key", inv}, "policy.allowed_signers: stat " + filepath.Join(dir, "signers")},
	} {
		args := append(slices.Clone(base), tc.args...)
		r := kremedy(t, args...)
		want := strings.ReplaceAll(tc.want, "ftp://x/… :", "ftp://x/…:")
		if r.code != 2 || !strings.Contains(r.out, want) {
			t.Errorf("kremedy %s: exit %d, want 2 with %q\n%s", strings.Join(args, " "), r.code, want, r.out)
		}
		if strings.Contains(r.out, "hunter2") || strings.Contains(r.out, ":pw@") {
			t.Errorf("the error shows a secret: %s", r.out)
		}
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Fatalf("a refused run created its run directory: %v", err)
	}
}

// TestResolveTeam: the inventory's webhooks that cannot be used are
// warnings (the run goes on), secrets are collected for redaction, and a
// lab's policy is not enforced unless it asks.
func TestResolveTeam(t *testing.T) {
	t.Setenv("KREMEDY_TEST_HOOK", "https://hooks.slack.com/services/T/B/SECRET")
	t.Setenv("KREMEDY_TEST_TOKEN", "s3cret")
	signers := filepath.Join(t.TempDir(), "signers")
	os.WriteFile(signers, []byte("\n"), 0o600)
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte("x"), 0o600)
	for _, tc := range []struct {
		name                     string
		inv                      inventory.Inventory
		f                        runFlags
		targets                  int
		warnings, notes, secrets []string
		policy                   bool
		wantErr                  string
	}{
		{name: "the inventory's webhooks", inv: inventory.Inventory{Path: "inv.yaml", Notify: []inventory.Notify{
			{URLEnv: "KREMEDY_TEST_HOOK"}, {URL: "https://ops.example.com/h", TokenEnv: "KREMEDY_TEST_TOKEN"}, {URLEnv: "KREMEDY_TEST_UNSET"}}},
			targets: 2, warnings: []string{"inv.yaml: notify[2] is not notified: a webhook's credential is missing: environment variable KREMEDY_TEST_UNSET is not set"},
			secrets: []string{"https://hooks.slack.com/services/T/B/SECRET", "s3cret"}},
		{name: "flags and the inventory", inv: inventory.Inventory{Notify: []inventory.Notify{{URL: "https://ops.example.com/h"}}},
			f: runFlags{notify: []string{"env:KREMEDY_TEST_HOOK", "http://127.0.0.1:9/h"}, notifyToken: "env:KREMEDY_TEST_TOKEN"}, targets: 3,
			secrets: []string{"s3cret", "https://hooks.slack.com/services/T/B/SECRET"}},
		{name: "a lab ignores the policy", inv: inventory.Inventory{Path: "lab.yaml", Lab: true, Policy: &inventory.Policy{Approvals: 2, AllowedSigners: signers}},
			notes: []string{"the approval policy of lab.yaml (approvals: 2) is not enforced on a lab: set policy.in_lab: true to rehearse it"}},
		{name: "a lab that asks", inv: inventory.Inventory{Lab: true, Policy: &inventory.Policy{Approvals: 2, AllowedSigners: signers, InLab: true}},
			f: runFlags{key: key}, policy: true},
		{name: "a live cluster", inv: inventory.Inventory{Policy: &inventory.Policy{Approvals: 2, AllowedSigners: signers}}, f: runFlags{key: key}, policy: true},
		{name: "--key without a policy", inv: inventory.Inventory{Path: "inv.yaml"}, f: runFlags{key: key},
			notes: []string{"has no approval policy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tcfg, err := resolveTeam(context.Background(), &tc.inv, tc.f, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(tcfg.targets) != tc.targets || (tcfg.policy != nil) != tc.policy {
				t.Errorf("%d targets, policy %v", len(tcfg.targets), tcfg.policy)
			}
			for _, pair := range []struct{ got, want []string }{{tcfg.warnings, tc.warnings}, {tcfg.notes, tc.notes}} {
				if len(pair.got) != len(pair.want) {
					t.Errorf("got %q, want %q", pair.got, pair.want)
					continue
				}
				for i := range pair.want {
					if !strings.Contains(pair.got[i], pair.want[i]) {
						t.Errorf("got %q, want %q", pair.got[i], pair.want[i])
					}
				}
			}
			for _, s := range tc.secrets {
				if !slices.Contains(tcfg.secrets, s) {
					t.Errorf("secret %q not kept out of the journal: %q", s, tcfg.secrets)
				}
			}
		})
	}
}

// TestApproveCommand: `kremedy approve` shows the plan the run waits for
// and signs it with an allowed key that is not the operator's; it refuses
// a key not allowed, the operator's own, and a step that does not wait;
// the run then finishes, and its report says who approved.
func TestApproveCommand(t *testing.T) {
	keys := t.TempDir()
	var lines []string
	for _, name := range []string{"alice", "bob", "carol"} {
		k := filepath.Join(keys, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen (OpenSSH's client tools are needed: apt-get install openssh-client): %v\n%s", err, out)
		}
		if name != "carol" {
			pub, _ := os.ReadFile(k + ".pub")
			f := strings.Fields(string(pub))
			lines = append(lines, name+"@example.com "+f[0]+" "+f[1])
		}
	}
	signers := filepath.Join(keys, "allowed_signers")
	os.WriteFile(signers, []byte(strings.Join(lines, "\n")+"\n"), 0o600)

	dir := filepath.Join(t.TempDir(), "run")
	applied := make(chan struct{}, 1)
	rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "prod", Noun: "cluster"}, Steps: []steps.Step{
		{Info: steps.Info{ID: "stop-brokers", Kind: "k", Title: "Stop every broker", Risk: steps.Destructive, Confirm: steps.ConfirmTyped},
			Kind: fakeStop{applied: applied}}}}
	s, err := steps.Create(dir, rb, steps.Meta{ID: "run-1", Runbook: "test", Cluster: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := &signoff.Approver{Inner: headlessApprover{w: &bytes.Buffer{}, yes: true, confirm: "prod"}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: signers},
		Run: "run-1", Dir: dir, Key: filepath.Join(keys, "alice"), Signer: signoff.Keygen{}, Log: func(step, text string) { s.Notef(step, "%s", text) }, Poll: 50 * time.Millisecond}
	done := make(chan steps.Outcome)
	go func() { done <- s.Run(context.Background(), ports.Cluster{}, a, nil) }()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := signoff.Requests(dir, ""); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the run never asked for an approval")
		}
	}
	approve := func(args ...string) (string, int) {
		var out bytes.Buffer
		root := newRoot()
		root.SetArgs(append([]string{"approve", dir}, args...))
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.ExecuteContext(context.Background())
		if err != nil {
			fmt.Fprintln(&out, err)
		}
		return out.String(), exitCode(context.Background(), err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--key", filepath.Join(keys, "carol"), "--yes"}, 1, "is not in the allowed signers"},
		{[]string{"--key", filepath.Join(keys, "alice"), "--yes"}, 1, "the operator of this run"},
		{[]string{"--key", filepath.Join(keys, "bob"), "--step", "other", "--yes"}, 1, "does not wait for an approval of other now"},
		{[]string{"--key", filepath.Join(keys, "bob")}, 2, "pass --yes once you have read the plan"},
		{[]string{"--yes"}, 2, "--key KEY is required"},
	} {
		out, code := approve(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("approve %v: exit %d, want %d with %q\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
	select {
	case <-applied:
		t.Fatal("the step ran before a second approval")
	default:
	}
	if sigs, _ := filepath.Glob(filepath.Join(dir, signoff.Dir, "*.sig")); len(sigs) != 1 {
		t.Fatalf("refused approvals wrote signatures: %v", sigs)
	}
	out, code := approve("--key", filepath.Join(keys, "bob"), "--yes")
	if code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	for _, w := range []string{"step stop-brokers — Stop every broker [destructive]", "confirmed by alice@example.com", "→ ssh b1: stop", "the plan you sign, as the run's journal has it", "signed: bob@example.com (key SHA256:"} {
		if !strings.Contains(out, w) {
			t.Errorf("approve's output lacks %q:\n%s", w, out)
		}
	}
	o := <-done
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	report, _ := os.ReadFile(s.ReportPath())
	if !strings.Contains(string(report), "bob@example.com, key SHA256:") {
		t.Errorf("the report does not say bob approved:\n%s", report)
	}
	if _, code := approve("--key", filepath.Join(keys, "bob"), "--yes"); code != 1 {
		t.Errorf("approving a run that waits for nothing: exit %d", code)
	}
}

type fakeStop struct{ applied chan struct{} }

func (fakeStop) Plan(context.Context, *steps.Env) (*steps.Plan, error) {
	return &steps.Plan{Summary: "stop 1 broker", Actions: []steps.Action{{ID: "stop-1", Op: steps.OpSSH, Target: "b1", Detail: "stop"}}}, nil
}

func (k fakeStop) Apply(context.Context, *steps.Env, *steps.Plan) error {
	k.applied <- struct{}{}
	return nil
}

func (fakeStop) Verify(context.Context, *steps.Env) ([]steps.Check, error) {
	return []steps.Check{{Name: "stopped", OK: true}}, nil
}
