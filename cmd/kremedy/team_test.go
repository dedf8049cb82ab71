package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	// lab: true, but no `kremedy lab up` wrote it: the policy holds.
	notLab := filepath.Join(dir, "notlab.yaml")
	os.WriteFile(notLab, []byte(teamInventory+"lab: true\npolicy:\n  approvals: 2\n  allowed_signers: signers\n"), 0o600)
	// An allowed signer named by a pattern.
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "wild")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, _ := os.ReadFile(filepath.Join(dir, "wild.pub"))
	os.WriteFile(filepath.Join(dir, "wild_signers"), []byte("# ops\n*@example.com "+string(pub)), 0o600)
	wild := filepath.Join(dir, "wild.yaml")
	os.WriteFile(wild, []byte(teamInventory+"policy:\n  approvals: 2\n  allowed_signers: wild_signers\n"), 0o600)
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
		{[]string{notLab}, "pass --key KEY, your signing key"},
		{[]string{notLab}, "(the policy is enforced: the inventory says lab: true, but no lab marker vouches for it: " + notLab + " has no kremedy-lab.marker beside it"},
		{[]string{wild, "--key", inv}, "allowed_signers names principals by a pattern: " + filepath.Join(dir, "wild_signers") + " line 2 (*@example.com)"},
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
	sum, _ := signoff.SignersDigest(signers)
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte("x"), 0o600)
	labInv := filepath.Join(t.TempDir(), "lab.yaml") // as `kremedy lab up` leaves it: with its marker
	os.WriteFile(labInv, []byte("lab: true\n"), 0o600)
	if err := inventory.WriteLabMarker(labInv); err != nil {
		t.Fatal(err)
	}
	writable := "warning: you, the operator, can write " + signers + " (the file is writable by you): you could change who approves. The run journals its sha256 (" + sum[:12] + ")"
	for _, tc := range []struct {
		name                     string
		inv                      inventory.Inventory
		f                        runFlags
		targets                  int
		warnings, notes, secrets []string
		policy                   bool
		record                   steps.PolicyRecord
		wantErr                  string
	}{
		{name: "the inventory's webhooks", inv: inventory.Inventory{Path: "inv.yaml", Notify: []inventory.Notify{
			{URLEnv: "KREMEDY_TEST_HOOK"}, {URL: "https://ops.example.com/h", TokenEnv: "KREMEDY_TEST_TOKEN"}, {URLEnv: "KREMEDY_TEST_UNSET"}}},
			targets: 2, warnings: []string{"inv.yaml: notify[2] is not notified: a webhook's credential is missing: environment variable KREMEDY_TEST_UNSET is not set"},
			secrets: []string{"https://hooks.slack.com/services/T/B/SECRET", "s3cret"}},
		{name: "flags and the inventory", inv: inventory.Inventory{Notify: []inventory.Notify{{URL: "https://ops.example.com/h"}}},
			f: runFlags{notify: []string{"env:KREMEDY_TEST_HOOK", "http://127.0.0.1:9/h"}, notifyToken: "env:KREMEDY_TEST_TOKEN"}, targets: 3,
			secrets: []string{"s3cret", "https://hooks.slack.com/services/T/B/SECRET"}},
		{name: "a lab ignores the policy", inv: inventory.Inventory{Path: labInv, Lab: true, Policy: &inventory.Policy{Approvals: 2, AllowedSigners: signers}},
			notes:  []string{"the approval policy of " + labInv + " (approvals: 2) is not enforced on a lab: set policy.in_lab: true to rehearse it (waived on a lab: kremedy-lab.marker vouches"},
			record: steps.PolicyRecord{Approvals: 2, AllowedSigners: signers, SignersSHA256: sum, Why: "waived on a lab: kremedy-lab.marker vouches that `kremedy lab up` wrote " + labInv}},
		{name: "lab: true without lab up's marker: enforced", inv: inventory.Inventory{Path: "prod.yaml", Lab: true, Policy: &inventory.Policy{Approvals: 2, AllowedSigners: signers}},
			f: runFlags{key: key}, policy: true,
			notes:  []string{"the approval policy of prod.yaml (approvals: 2) is enforced: the inventory says lab: true, but no lab marker vouches for it: prod.yaml has no kremedy-lab.marker beside it", writable},
			record: steps.PolicyRecord{Approvals: 2, AllowedSigners: signers, SignersSHA256: sum, Enforced: true, Why: "the inventory says lab: true, but no lab marker vouches for it: prod.yaml has no kremedy-lab.marker beside it (`kremedy lab up` writes one with the inventory it generates); a policy is waived only on a lab `kremedy lab up` made"}},
		{name: "a lab that asks", inv: inventory.Inventory{Lab: true, Policy: &inventory.Policy{Approvals: 2, AllowedSigners: signers, InLab: true}},
			f: runFlags{key: key}, policy: true, notes: []string{"is enforced: a lab's inventory that asks for it (policy.in_lab: true)", writable},
			record: steps.PolicyRecord{Approvals: 2, AllowedSigners: signers, SignersSHA256: sum, Enforced: true, Why: "a lab's inventory that asks for it (policy.in_lab: true)"}},
		{name: "a live cluster", inv: inventory.Inventory{Policy: &inventory.Policy{Approvals: 2, AllowedSigners: signers}}, f: runFlags{key: key}, policy: true,
			notes: []string{writable}, record: steps.PolicyRecord{Approvals: 2, AllowedSigners: signers, SignersSHA256: sum, Enforced: true}},
		{name: "--key without a policy", inv: inventory.Inventory{Path: "inv.yaml"}, f: runFlags{key: key},
			notes: []string{"has no approval policy"}, record: steps.PolicyRecord{Approvals: 1}},
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
			want := tc.record
			if want.Approvals == 0 {
				want.Approvals = 1
			}
			if *tcfg.record != want {
				t.Errorf("the policy journaled at the run's start: %+v, want %+v", *tcfg.record, want)
			}
			if tc.policy && tcfg.policy.SignersSHA256 != sum {
				t.Errorf("the enforced policy checks allowed_signers against %q, want %q", tcfg.policy.SignersSHA256, sum)
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
	signers := approvalKeys(t, keys, []string{"alice", "bob", "carol"}, "alice", "bob")

	dir := filepath.Join(t.TempDir(), "run")
	applied := make(chan struct{}, 1)
	rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "prod", Noun: "cluster"}, Steps: []steps.Step{
		{Info: steps.Info{ID: "stop-brokers", Kind: "k", Title: "Stop every broker", Risk: steps.Destructive, Confirm: steps.ConfirmTyped},
			Kind: fakeStop{applied: applied}}}}
	sum, err := signoff.SignersDigest(signers)
	if err != nil {
		t.Fatal(err)
	}
	s, err := steps.Create(dir, rb, steps.Meta{ID: "run-1", Runbook: "test", Cluster: "prod",
		Policy: &steps.PolicyRecord{Approvals: 2, AllowedSigners: signers, SignersSHA256: sum, Enforced: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := &signoff.Approver{Inner: headlessApprover{w: &bytes.Buffer{}, yes: true, confirm: "prod"}, Policy: signoff.Policy{Approvals: 2, AllowedSigners: signers, SignersSHA256: sum},
		Run: "run-1", Dir: dir, Key: filepath.Join(keys, "alice"), Signer: signoff.Keygen{}, Log: func(step, text string) { s.Notef(step, "%s", text) }, Poll: 50 * time.Millisecond}
	done := make(chan steps.Outcome)
	go func() { done <- s.Run(context.Background(), ports.Cluster{}, a, nil) }()
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
	approve := func(args ...string) (string, int) { return inProcess(append([]string{"approve", dir}, args...)...) }
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
	// The allowed signers changed since the run started: approve signs
	// nothing (the run would count nothing either).
	orig, _ := os.ReadFile(signers)
	os.WriteFile(signers, append(orig, "# edited\n"...), 0o600)
	if out, code := approve("--key", filepath.Join(keys, "bob"), "--yes"); code != 1 || !strings.Contains(out, signers+" changed since run run-1 started (sha256 "+sum[:12]) {
		t.Errorf("approve under other allowed signers: exit %d\n%s", code, out)
	}
	os.WriteFile(signers, orig, 0o600)
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
	for _, w := range []string{"step stop-brokers — Stop every broker [destructive]", "confirmed by alice@example.com", "→ ssh b1: stop", "the plan you sign, as the run's journal has it", "signed: bob@example.com (key SHA256:",
		"answering its request " + req.Nonce} {
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
	if w := "- approval policy: 2 approvals of each destructive step, allowed signers " + signers + " (sha256 " + sum + "), enforced\n"; !strings.Contains(string(report), w) {
		t.Errorf("the report does not state the policy %q:\n%s", w, report)
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

// TestApproveRefusesAHostileRequest (review L5): a request whose step,
// digest or nonce could name a file outside approvals/ is refused before
// anything is signed or written.
func TestApproveRefusesAHostileRequest(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "run")
	rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "prod", Noun: "cluster"}, Steps: []steps.Step{
		{Info: steps.Info{ID: "roll", Kind: "k", Title: "Roll", Risk: steps.Destructive, Confirm: steps.ConfirmTyped}, Kind: fakeStop{}}}}
	s, err := steps.Create(dir, rb, steps.Meta{ID: "run-1", Runbook: "test", Cluster: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ok := signoff.Request{Run: "run-1", Step: "roll", Digest: strings.Repeat("a", 64), Nonce: strings.Repeat("b", 32), AllowedSigners: "/dev/null"}
	for _, tc := range []struct {
		edit func(*signoff.Request)
		want string
	}{
		{func(r *signoff.Request) { r.Step = "../../x" }, "step \"../../x\" is not a step id"},
		{func(r *signoff.Request) { r.Digest = "../../" + strings.Repeat("a", 58) }, "is not a sha256 in hex"},
		{func(r *signoff.Request) { r.Nonce = "" }, "nonce \"\" is not 32 hex digits"},
		{func(r *signoff.Request) { r.Nonce = "../x" }, "is not 32 hex digits"},
	} {
		r := ok
		tc.edit(&r)
		b, _ := json.Marshal(r)
		os.RemoveAll(filepath.Join(dir, signoff.Dir))
		os.MkdirAll(filepath.Join(dir, signoff.Dir), 0o700)
		if err := os.WriteFile(signoff.RequestPath(dir, "roll"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		before := tree(t, root)
		var out bytes.Buffer
		cmd := newRoot()
		cmd.SetArgs([]string{"approve", dir, "--key", filepath.Join(root, "nokey"), "--yes"})
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.ExecuteContext(context.Background())
		if code := exitCode(context.Background(), err); code != 1 || err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was signed") {
			t.Errorf("%+v: exit %d, %v; want %q\n%s", r, code, err, tc.want, out.String())
		}
		if after := tree(t, root); !slices.Equal(before, after) {
			t.Errorf("%+v: approve wrote %v", r, after)
		}
	}
}

// tree lists every path under root.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		out = append(out, p)
		return err
	})
	return out
}

// TestResumeRefusesAWeakerPolicy (review M6): the run-start record keeps
// the policy; `kremedy resume` under a weaker one — none, waived on a
// (genuine) lab, other allowed signers — is refused before anything is
// done, naming both and the way forward, and the journal is untouched.
func TestResumeRefusesAWeakerPolicy(t *testing.T) {
	dir := t.TempDir()
	signers := filepath.Join(dir, "signers")
	os.WriteFile(signers, []byte("# nobody yet\n"), 0o600)
	sum, _ := signoff.SignersDigest(signers)
	key := filepath.Join(dir, "key")
	os.WriteFile(key, []byte("x"), 0o600)
	invPath := filepath.Join(dir, "inventory.yaml")
	withPolicy := teamInventory + "policy:\n  approvals: 2\n  allowed_signers: signers\n"
	os.WriteFile(invPath, []byte(withPolicy), 0o600)
	rb, inv, err := bindRunbook("rolling-restart", nil, invPath, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		inventory string
		signers   string
		marker    bool
		args      []string
		want      string
	}{
		{name: "no policy now", inventory: teamInventory, want: "Resumed now, the policy would not be enforced: none: the operator's confirmation alone."},
		{name: "waived on a lab now", inventory: withPolicy + "lab: true\n", marker: true,
			want: "Resumed now, the policy would not be enforced: 2 approvals of each destructive step, allowed signers " + signers + " (sha256 " + sum + "), NOT enforced: waived on a lab: kremedy-lab.marker vouches"},
		{name: "other allowed signers", inventory: withPolicy, signers: "# somebody else\n", args: []string{"--key", key},
			want: "Resumed now, its allowed signers are not the ones the run started with (sha256 " + sum[:12] + " then, "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := filepath.Join(t.TempDir(), "run")
			meta := steps.NewMeta(rb, inv.Path, inv.Name, inv.Lab, version, time.Now())
			meta.Policy = &steps.PolicyRecord{Approvals: 2, AllowedSigners: signers, SignersSHA256: sum, Enforced: true}
			s, err := steps.Create(run, rb, meta)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			journal, _ := os.ReadFile(filepath.Join(run, steps.JournalFile))
			os.WriteFile(invPath, []byte(tc.inventory), 0o600)
			os.Remove(filepath.Join(dir, inventory.LabMarkerFile))
			if tc.marker {
				if err := inventory.WriteLabMarker(invPath); err != nil {
					t.Fatal(err)
				}
			}
			if tc.signers != "" {
				os.WriteFile(signers, []byte(tc.signers), 0o600)
			}
			t.Cleanup(func() {
				os.WriteFile(invPath, []byte(withPolicy), 0o600)
				os.WriteFile(signers, []byte("# nobody yet\n"), 0o600)
			})
			r := kremedy(t, append([]string{"resume", run, "--headless", "--yes"}, tc.args...)...)
			for _, w := range []string{"run " + meta.ID + " started under the approval policy 2 approvals of each destructive step, allowed signers " + signers + " (sha256 " + sum + "), enforced.",
				tc.want, "Nothing was done: restore " + signers + " and the policy of " + invPath + " as they were, or start a new run (`kremedy run rolling-restart --inventory " + invPath + "`)"} {
				if r.code != 2 || !strings.Contains(r.out, w) {
					t.Errorf("resume: exit %d, want 2 with %q\n%s", r.code, w, r.out)
				}
			}
			if after, _ := os.ReadFile(filepath.Join(run, steps.JournalFile)); !bytes.Equal(after, journal) {
				t.Errorf("the refused resume changed the journal:\n%s", after)
			}
		})
	}
}

// TestPolicyWeakened: what a resume may and may not run under, against
// the policy its run started with.
func TestPolicyWeakened(t *testing.T) {
	then := &steps.PolicyRecord{Approvals: 2, AllowedSigners: "/etc/s", SignersSHA256: "aa", Enforced: true}
	for _, tc := range []struct {
		then, now *steps.PolicyRecord
		want      string
	}{
		{then, then, ""},
		{then, &steps.PolicyRecord{Approvals: 3, AllowedSigners: "/etc/s", SignersSHA256: "aa", Enforced: true}, ""},
		{then, &steps.PolicyRecord{Approvals: 2, AllowedSigners: "/srv/s", SignersSHA256: "aa", Enforced: true}, ""}, // moved, same content
		{nil, &steps.PolicyRecord{Approvals: 1}, ""},                                                                 // an older kremedy's run
		{&steps.PolicyRecord{Approvals: 2, Why: "waived on a lab"}, &steps.PolicyRecord{Approvals: 1}, ""},
		{then, &steps.PolicyRecord{Approvals: 1}, "would not be enforced"},
		{then, &steps.PolicyRecord{Approvals: 2, SignersSHA256: "aa", Why: "waived on a lab: …"}, "would not be enforced"},
		{&steps.PolicyRecord{Approvals: 3, SignersSHA256: "aa", Enforced: true}, then, "it would want 2 approvals, not 3"},
		{then, &steps.PolicyRecord{Approvals: 2, AllowedSigners: "/etc/s", SignersSHA256: "bb", Enforced: true}, "its allowed signers are not the ones the run started with (sha256 aa then, bb now)"},
	} {
		if got := policyWeakened(tc.then, tc.now); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("%+v then, %+v now: %q, want %q", tc.then, tc.now, got, tc.want)
		}
	}
}

// approvalKeys makes an ed25519 key (no passphrase) for each of names in
// dir, and an allowed_signers file there naming each of allowed as
// NAME@example.com; it returns that file's path.
func approvalKeys(t *testing.T, dir string, names []string, allowed ...string) string {
	t.Helper()
	var lines []string
	for _, name := range names {
		k := filepath.Join(dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen (OpenSSH's client tools are needed: apt-get install openssh-client): %v\n%s", err, out)
		}
		if slices.Contains(allowed, name) {
			pub, _ := os.ReadFile(k + ".pub")
			f := strings.Fields(string(pub))
			lines = append(lines, name+"@example.com "+f[0]+" "+f[1])
		}
	}
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return signers
}

// inProcess runs a kremedy command in this process: its output (and
// error), and its exit code.
func inProcess(args ...string) (string, int) {
	var out bytes.Buffer
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		fmt.Fprintln(&out, err)
	}
	return out.String(), exitCode(context.Background(), err)
}
