package inventory

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// notifyCases are the notify and policy keys' parse cases: they join the
// table (and so FuzzParse's seeds). minimal ends at line 12.
var notifyCases = []parseCase{
	{name: "notify and policy", in: minimal + `notify:
  - url_env: SLACK_HOOK
  - url: https://ops.example.com/hooks/kremedy
    token_file: ~/.config/kremedy/token
    format: json
  - url: http://127.0.0.1:9999/hook
    token_env: T
policy:
  approvals: 2
  allowed_signers: signers
  timeout: 10m
  in_lab: true
`},
	{name: "an empty policy key means no policy", in: minimal + "policy: # none\n"},
	{name: "approvals: 1 needs no signers", in: minimal + "policy:\n  approvals: 1\n"},
	{name: "a Slack webhook's URL in the inventory", in: minimal + "notify:\n  - url: https://hooks.slack.com/services/T0/B0/XX\n",
		want: []string{"t.yaml:14:10: notify[0].url is a Slack incoming webhook, whose URL is its secret"}},
	{name: "not an http URL", in: minimal + "notify:\n  - url: ftp://x/y\n",
		want: []string{"t.yaml:14:10: notify[0].url: use an http:// or https:// URL"}},
	{name: "no URL", in: minimal + "notify:\n  - format: json\n",
		want: []string{"t.yaml:14:5: notify[0] needs url (the webhook), or url_env or url_file"}},
	{name: "two URLs", in: minimal + "notify:\n  - url: https://a.example/h\n    url_env: H\n",
		want: []string{"t.yaml:14:5: notify[0] has more than one of url, url_env and url_file"}},
	{name: "a token in the inventory", in: minimal + "notify:\n  - url: https://a.example/h\n    token: hunter2\n",
		want: []string{"t.yaml:15:5: notify[0].token: kremedy never reads a webhook's token from the inventory"}},
	{name: "a token over http", in: minimal + "notify:\n  - url: http://a.example/h\n    token_env: T\n",
		want: []string{"t.yaml:14:10: notify[0].url is http:// and the webhook has a token"}},
	{name: "a password in the URL", in: minimal + "notify:\n  - url: https://u:p@a.example/h\n",
		want: []string{"t.yaml:14:10: notify[0].url has a user or password in it"}},
	{name: "bad env name and two tokens", in: minimal + "notify:\n  - url_env: 1BAD\n    token_env: T\n    token_file: f\n",
		want: []string{`t.yaml:14:14: notify[0].url_env "1BAD" is not an environment variable name`, "t.yaml:16:17: notify[0] has both token_env and token_file"}},
	{name: "format xml", in: minimal + "notify:\n  - url: https://a.example/h\n    format: xml\n",
		want: []string{`t.yaml:15:13: notify[0].format "xml": it is slack`}},
	{name: "unknown notify key", in: minimal + "notify:\n  - url: https://a.example/h\n    retries: 3\n",
		want: []string{`t.yaml:15:5: unknown key "retries" in notify[0]; known keys there are format, token_env, token_file, url, url_env, url_file`}},
	{name: "approvals without signers", in: minimal + "policy:\n  approvals: 2\n",
		want: []string{"t.yaml:13:1: policy approvals: 2 needs allowed_signers"}},
	{name: "approvals 0", in: minimal + "policy:\n  approvals: 0\n  allowed_signers: f\n",
		want: []string{"t.yaml:14:14: policy.approvals is 0; it must be how many people approve"}},
	{name: "approvals 10", in: minimal + "policy:\n  approvals: 10\n  allowed_signers: f\n",
		want: []string{"t.yaml:14:14: policy.approvals is 10"}},
	{name: "no approvals", in: minimal + "policy:\n  allowed_signers: f\n",
		want: []string{"t.yaml:13:1: policy needs approvals"}},
	{name: "timeout without unit, in_lab yes", in: minimal + "policy:\n  approvals: 2\n  allowed_signers: f\n  timeout: 30\n  in_lab: yes\n",
		want: []string{"t.yaml:16:12: policy.timeout needs a unit", "t.yaml:17:11: policy.in_lab must be true or false"}},
	{name: "signers at ~user", in: minimal + "policy:\n  approvals: 2\n  allowed_signers: ~bob/f\n",
		want: []string{`t.yaml:15:20: policy.allowed_signers "~bob/f": only ~/ is expanded`}},
}

func init() { parseCases = append(parseCases, notifyCases...) }

// TestNotifyCredentials: a webhook's URL and token come from where the
// inventory says, and errors name the variable or file, never the value.
func TestNotifyCredentials(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hook")
	if err := os.WriteFile(file, []byte("https://hooks.slack.com/services/T/B/SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KREMEDY_T_TOKEN", "s3cret")
	t.Setenv("KREMEDY_T_EMPTY", "")
	for _, tc := range []struct {
		n              Notify
		url, token     string
		urlErr, tokErr string
	}{
		{n: Notify{URL: "https://a.example/h"}, url: "https://a.example/h"},
		{n: Notify{URLFile: file, TokenEnv: "KREMEDY_T_TOKEN"}, url: "https://hooks.slack.com/services/T/B/SECRET", token: "s3cret"},
		{n: Notify{URLEnv: "KREMEDY_T_UNSET"}, urlErr: "environment variable KREMEDY_T_UNSET is not set"},
		{n: Notify{URLEnv: "KREMEDY_T_EMPTY"}, urlErr: "KREMEDY_T_EMPTY is empty"},
		{n: Notify{URLFile: empty, TokenFile: filepath.Join(dir, "none")}, urlErr: "is empty", tokErr: "no such file"},
	} {
		u, err := tc.n.ResolveURL()
		if tc.urlErr == "" && (err != nil || u != tc.url) || tc.urlErr != "" && (err == nil || !strings.Contains(err.Error(), tc.urlErr) || !errors.Is(err, ErrNoCredential)) {
			t.Errorf("%+v: URL %q, %v", tc.n, u, err)
		}
		tok, err := tc.n.Token()
		if tc.tokErr == "" && (err != nil || tok != tc.token) || tc.tokErr != "" && (err == nil || !strings.Contains(err.Error(), tc.tokErr)) {
			t.Errorf("%+v: token %q, %v", tc.n, tok, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("an error shows the token: %v", err)
		}
	}
}

// TestPolicyEnforced: a live cluster's policy is enforced; a lab's is
// waived only without in_lab and when the marker of `kremedy lab up`
// vouches for the file as it is — lab: true alone does not waive it.
func TestPolicyEnforced(t *testing.T) {
	dir := t.TempDir()
	marked := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(marked, []byte(minimal+"lab: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteLabMarker(marked); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.yaml") // beside another inventory's marker
	if err := os.WriteFile(other, []byte(minimal+"lab: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(edited, []byte(minimal+"lab: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteLabMarker(edited); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(edited, []byte(minimal+"lab: true\n# pointed at production\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unmarked := filepath.Join(t.TempDir(), "inventory.yaml")
	two := &Policy{Approvals: 2, AllowedSigners: "f"}
	for _, tc := range []struct {
		path    string
		lab     bool
		p       *Policy
		want    bool
		wantWhy string
	}{
		{marked, false, nil, false, ""},
		{marked, false, &Policy{Approvals: 1}, false, ""},
		{unmarked, false, two, true, ""},
		{marked, true, two, false, "waived on a lab: kremedy-lab.marker vouches"},
		{marked, true, &Policy{Approvals: 2, AllowedSigners: "f", InLab: true}, true, "policy.in_lab: true"},
		{unmarked, true, two, true, "has no kremedy-lab.marker beside it"},
		{other, true, two, true, "vouches for inventory.yaml, not other.yaml"},
		{edited, true, two, true, "was changed since `kremedy lab up` wrote it"},
	} {
		inv := &Inventory{Path: tc.path, Lab: tc.lab, Policy: tc.p}
		got, why := inv.Enforced()
		if got != tc.want || !strings.Contains(why, tc.wantWhy) || (tc.wantWhy == "") != (why == "") {
			t.Errorf("%s lab %v policy %+v: Enforced() = %v, %q; want %v, %q", tc.path, tc.lab, tc.p, got, why, tc.want, tc.wantWhy)
		}
	}
}

// TestLoadResolvesNotifyAndPolicyPaths: url_file, token_file and
// allowed_signers are paths on this machine, resolved like the others.
func TestLoadResolvesNotifyAndPolicyPaths(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	in := minimal + "notify:\n  - url_file: hook\n    token_file: ~/tok\npolicy:\n  approvals: 2\n  allowed_signers: keys/allowed\n"
	path := filepath.Join(dir, "inv.yaml")
	if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	inv, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Notify[0].URLFile != filepath.Join(dir, "hook") || inv.Notify[0].TokenFile != filepath.Join(home, "tok") || inv.Policy.AllowedSigners != filepath.Join(dir, "keys/allowed") {
		t.Errorf("paths: %+v %+v", inv.Notify[0], inv.Policy)
	}
}
