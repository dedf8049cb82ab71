package main

// Lab tests of what a run tells and asks of the team: webhooks on loopback
// receiving a real rolling restart's events, and a second approver whose
// signature the run waits for before any broker stops.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/notify"
	"github.com/kremedy/kremedy/steps/signoff"
)

// hook is a webhook on loopback that keeps every body it answered 200, in
// order; it can go away and come back on the same port.
type hook struct {
	t    *testing.T
	addr string

	mu     sync.Mutex
	srv    *http.Server
	bodies [][]byte
	// seen is called with each message's event (JSON hooks).
	seen func(event string)
}

func newHook(t *testing.T) *hook {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hook{t: t, addr: ln.Addr().String()}
	h.serve(ln)
	t.Cleanup(func() { h.stop() })
	return h
}

func (h *hook) url(path string) string { return "http://" + h.addr + path }

func (h *hook) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, b)
		seen := h.seen
		h.mu.Unlock()
		var m struct{ Event string }
		if json.Unmarshal(b, &m) == nil && seen != nil {
			seen(m.Event)
		}
	})}
	h.mu.Lock()
	h.srv = srv
	h.mu.Unlock()
	go srv.Serve(ln)
}

func (h *hook) stop() {
	h.mu.Lock()
	srv := h.srv
	h.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// restart stops the hook now and serves again on its address after d.
func (h *hook) restart(d time.Duration) {
	h.stop()
	time.AfterFunc(d, func() {
		ln, err := net.Listen("tcp", h.addr)
		if err != nil {
			h.t.Errorf("the hook could not come back on %s: %v", h.addr, err)
			return
		}
		h.serve(ln)
	})
}

func (h *hook) got() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bodies)
}

// events decodes a JSON hook's messages.
func (h *hook) events() []notify.Message {
	var out []notify.Message
	for _, b := range h.got() {
		var m notify.Message
		if err := json.Unmarshal(b, &m); err != nil {
			h.t.Fatalf("not a JSON message: %v\n%s", err, b)
		}
		out = append(out, m)
	}
	return out
}

// labInventory writes a copy of the lab's inventory with edit applied,
// and vouches for it as a lab's as `kremedy lab up` does (its marker): a
// lab's copy, whose lab: true waives a policy that does not ask for labs.
func labInventory(t *testing.T, l *lab.Lab, edit func(*inventory.Inventory)) string {
	t.Helper()
	if err := inventory.CheckLabMarker(l.InventoryPath()); err != nil {
		t.Fatalf("lab up wrote no marker for its inventory: %v", err)
	}
	inv, err := inventory.Load(l.InventoryPath())
	if err != nil {
		t.Fatal(err)
	}
	edit(inv)
	path := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := inventory.Write(path, inv); err != nil {
		t.Fatal(err)
	}
	if err := inventory.WriteLabMarker(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runStartPolicy is the approval policy a run's start record journaled.
func runStartPolicy(t *testing.T, run string) *steps.PolicyRecord {
	t.Helper()
	meta, err := steps.ReadMeta(run)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Policy == nil {
		t.Fatalf("the run-start record of %s has no policy", run)
	}
	return meta.Policy
}

// silentHook accepts connections and never answers.
func silentHook(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String() + "/never"
}

// deadHook is an address nothing listens on.
func deadHook(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/gone"
}

func needKeygen(t *testing.T) {
	t.Helper()
	if err := (signoff.Keygen{}).Check(context.Background()); err != nil {
		t.Fatalf("%v", err) // a missing dependency fails, with its fix
	}
}

// TestTeamLab: a rolling restart of a real lab tells webhooks what it does
// — in order, to Slack in Slack's shape, across a webhook's restart, and
// finishing although two webhooks never answer — and, under a policy of
// two approvals, waits (no broker stopped) until a second person's key
// approves the plan, refusing a key not allowed, the operator's own and a
// stale digest.
func TestTeamLab(t *testing.T) {
	needLab(t)
	needKeygen(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net = 50
	l := startLab(t, cfg)

	t.Run("webhooks: order, Slack's shape, a restart, dead ones", func(t *testing.T) {
		plain, slack := newHook(t), newHook(t)
		silent, dead := silentHook(t), deadHook(t)
		// M5: a hook that redirects (307) to another server: nothing of the
		// run may reach that one, and the redirect is reported once.
		beyond := newHook(t)
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, beyond.url("/collect"), http.StatusTemporaryRedirect)
		}))
		t.Cleanup(redirect.Close)
		// The JSON hook goes away when the outage window opens and comes
		// back 4 s later: what it missed is retried, in order.
		var once sync.Once
		plain.seen = func(ev string) {
			if ev == notify.EvOutageOpen {
				// Once this answer is sent: a retry of a message that
				// did arrive would be a duplicate, not a loss.
				once.Do(func() { time.AfterFunc(300*time.Millisecond, func() { plain.restart(4 * time.Second) }) })
			}
		}
		inv := labInventory(t, l, func(inv *inventory.Inventory) {
			inv.Notify = []inventory.Notify{{URL: slack.url("/services/T0/B0"), Format: inventory.FormatSlack}}
			// A lab ignores an approval policy unless it asks.
			inv.Policy = &inventory.Policy{Approvals: 2, AllowedSigners: filepath.Join(t.TempDir(), "nobody")}
		})
		run := filepath.Join(t.TempDir(), "run")
		r := kremedy(t, "run", "rolling-restart", "--inventory", inv, "--run-dir", run, "--headless", "--yes", "--confirm", "kremedy-lab",
			"--notify", plain.url("/hook"), "--notify", silent, "--notify", dead, "--notify", redirect.URL+"/hook")
		ran := "?"
		if m := runTookRe.FindStringSubmatch(r.out); m != nil {
			ran = m[1] + "s"
		}
		t.Logf("FIGURE rolling restart with 4 webhooks (one restarted, one silent, one refusing): the run %s, the process %s (connecting, the last notifications' wait, exit)", ran, r.took.Round(100*time.Millisecond))
		if r.code != 0 {
			t.Fatalf("rolling-restart: exit %d\n%s", r.code, r.out)
		}
		if !strings.Contains(r.out, "is not enforced on a lab: set policy.in_lab: true") {
			t.Errorf("the run does not say the lab ignores the policy:\n%s", r.out)
		}
		if p := runStartPolicy(t, run); p.Approvals != 2 || p.Enforced || !strings.Contains(p.Why, "waived on a lab: kremedy-lab.marker vouches") {
			t.Errorf("the run-start record's policy: %+v", p)
		}
		if report, _ := os.ReadFile(filepath.Join(run, "report.md")); !strings.Contains(string(report), "- approval policy: 2 approvals of each destructive step, allowed signers ") ||
			!strings.Contains(string(report), "NOT enforced: waived on a lab") {
			t.Errorf("the report does not state the waived policy:\n%s", report)
		}
		// Each dead webhook is reported once, on screen and in the journal.
		journal, _ := os.ReadFile(filepath.Join(run, "journal.jsonl"))
		for _, u := range []string{silent, dead} {
			name := notify.Name(u)
			if n := strings.Count(r.out, "notifications to "+name); n != 1 {
				t.Errorf("%s reported %d times on screen, want once:\n%s", name, n, r.out)
			}
			if !strings.Contains(string(journal), "notifications to "+name) {
				t.Errorf("%s is not in the journal", name)
			}
		}
		if got := beyond.got(); len(got) != 0 {
			t.Errorf("a redirect was followed: the server it pointed at got %d messages", len(got))
		}
		if n := strings.Count(r.out, "kremedy does not follow redirects"); n != 1 {
			t.Errorf("the redirecting webhook reported %d times, want once:\n%s", n, r.out)
		}
		if strings.Contains(r.out, "notifications to "+notify.Name(plain.url(""))) {
			t.Errorf("the restarted webhook was reported:\n%s", r.out)
		}

		evs := plain.events()
		shown := map[string]bool{}
		for _, b := range plain.got() {
			var m notify.Message
			if json.Unmarshal(b, &m) == nil && !shown[m.Event] {
				shown[m.Event] = true
				t.Logf("SHAPE %s", b)
			}
		}
		if b := slack.got(); len(b) > 0 {
			t.Logf("SHAPE slack %s", b[len(b)-2])
		}
		var names []string
		for _, m := range evs {
			names = append(names, m.Event)
		}
		at := func(ev string) int { return slices.Index(names, ev) }
		if !(at(notify.EvRunStart) == 0 && at(notify.EvRunStart) < at(notify.EvOutageOpen) && at(notify.EvOutageOpen) < at(notify.EvOutageClose) &&
			at(notify.EvOutageClose) < at(notify.EvRunEnd) && at(notify.EvRunEnd) == len(names)-1) {
			t.Fatalf("events out of order: %v", names)
		}
		for i, m := range evs {
			if m.Seq != i+1 {
				t.Fatalf("message %d has seq %d: one was lost or repeated across the restart: %v", i, m.Seq, names)
			}
		}
		start, closed, end := evs[0], evs[at(notify.EvOutageClose)], evs[len(evs)-1]
		if start.Runbook != "rolling-restart" || start.Cluster != "kremedy-lab" || !start.Lab || start.Operator == "" || start.Kremedy == "" {
			t.Errorf("run-start: %+v", start)
		}
		if closed.LengthMS <= 0 || closed.Brokers != 3 || closed.BrokersDown != 1 {
			t.Errorf("outage-close: %+v", closed)
		}
		if end.Ending != "finished" || !slices.Contains(end.Done, "roll") {
			t.Errorf("run-end: %+v", end)
		}
		for _, want := range []string{notify.EvPlan, notify.EvApproval, notify.EvStepStart, notify.EvStepEnd} {
			if at(want) < 0 {
				t.Errorf("no %s event: %v", want, names)
			}
		}
		if report, _ := os.ReadFile(filepath.Join(run, "report.md")); !strings.Contains(string(report), "## Outage window") {
			t.Errorf("the report has no outage window")
		}

		// The Slack hook got the same events, each as text and blocks.
		bodies := slack.got()
		if len(bodies) != len(evs) {
			t.Errorf("the Slack hook got %d messages, the JSON one %d", len(bodies), len(evs))
		}
		var closeText string
		for i, b := range bodies {
			var s struct {
				Text   string `json:"text"`
				Blocks []struct {
					Type     string                        `json:"type"`
					Text     *struct{ Type, Text string }  `json:"text"`
					Elements []struct{ Type, Text string } `json:"elements"`
				} `json:"blocks"`
			}
			var top map[string]json.RawMessage
			if json.Unmarshal(b, &top) != nil || len(top) != 2 || json.Unmarshal(b, &s) != nil || s.Text == "" || len(s.Blocks) != 2 ||
				s.Blocks[0].Type != "section" || s.Blocks[0].Text == nil || s.Blocks[0].Text.Type != "mrkdwn" || s.Blocks[1].Type != "context" {
				t.Fatalf("Slack message %d is not text plus a section and a context:\n%s", i, b)
			}
			if strings.Contains(s.Blocks[0].Text.Text, "outage window closed") {
				closeText = s.Blocks[0].Text.Text
			}
		}
		if !strings.Contains(closeText, "after *") {
			t.Errorf("no outage-close with its length in Slack: %q", closeText)
		}
	})

	t.Run("approvals: 2: the run waits for a second key", func(t *testing.T) {
		keys := t.TempDir()
		var lines []string
		for _, name := range []string{"alice", "bob", "carol"} {
			k := filepath.Join(keys, name)
			if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", k).CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen: %v\n%s", err, out)
			}
			if name != "carol" {
				pub, _ := os.ReadFile(k + ".pub")
				f := strings.Fields(string(pub))
				lines = append(lines, fmt.Sprintf("%s@example.com namespaces=%q %s %s", name, signoff.Namespace, f[0], f[1]))
			}
		}
		signers := filepath.Join(keys, "allowed_signers")
		if err := os.WriteFile(signers, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		inv := labInventory(t, l, func(inv *inventory.Inventory) {
			inv.Policy = &inventory.Policy{Approvals: 2, AllowedSigners: signers, Timeout: inventory.Duration{Duration: 5 * time.Minute}, InLab: true}
		})
		run := filepath.Join(t.TempDir(), "run")
		before := brokerPIDs(l)
		start := time.Now()
		out, exited := startRun(t, exec.Command(bin, "run", "rolling-restart", "--inventory", inv, "--run-dir", run, "--headless", "--yes", "--confirm", "kremedy-lab",
			"--key", filepath.Join(keys, "alice")))
		req := waitRequest(t, run, "roll", exited, out, "")
		approve := func(key string) result {
			return kremedy(t, "approve", run, "--step", "roll", "--key", filepath.Join(keys, key), "--yes")
		}
		// A key not allowed, the operator's own: refused, nothing written.
		if r := approve("carol"); r.code != 1 || !strings.Contains(r.out, "is not in the allowed signers") {
			t.Errorf("carol's approval: exit %d\n%s", r.code, r.out)
		}
		if r := approve("alice"); r.code != 1 || !strings.Contains(r.out, "the operator of this run") {
			t.Errorf("the operator's own approval: exit %d\n%s", r.code, r.out)
		}
		// Bob's signature of a stale digest (an earlier plan of roll) is
		// found and refused by the run.
		stale := req
		stale.Digest = strings.Repeat("0", 64)
		sig, err := (signoff.Keygen{}).Sign(context.Background(), filepath.Join(keys, "bob"), signoff.Message(stale.Run, stale.Step, stale.Digest, stale.Nonce), false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := signoff.WriteSignature(run, stale, "bob", sig); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "an earlier plan of roll"); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the stale approval was not refused:\n%s", out.String())
			}
		}
		time.Sleep(2 * time.Second)
		if got := stops(t, run); len(got) != 0 {
			t.Fatalf("brokers were stopped before the second approval: %v", got)
		}
		if after := brokerPIDs(l); !maps.Equal(before, after) {
			t.Fatalf("a broker was restarted before the second approval: %v -> %v", before, after)
		}
		// H1: the journal's plan edited after the operator's confirmation
		// (what bob would read is no longer what runs): approve recomputes
		// the digest from it and refuses, naming the step; nothing signed.
		jpath := filepath.Join(run, "journal.jsonl")
		orig, err := os.ReadFile(jpath)
		if err != nil {
			t.Fatal(err)
		}
		jlines := bytes.SplitAfter(orig, []byte("\n"))
		for i := len(jlines) - 1; i >= 0; i-- {
			if bytes.Contains(jlines[i], []byte(`"type":"plan","step":"roll"`)) {
				jlines[i] = bytes.Replace(jlines[i], []byte(`"summary":"`), []byte(`"summary":"(harmless) `), 1)
				break
			}
		}
		edited := bytes.Join(jlines, nil)
		if bytes.Equal(edited, orig) {
			t.Fatal("the test's edit changed nothing in the journal")
		}
		if err := os.WriteFile(jpath, edited, 0o600); err != nil {
			t.Fatal(err)
		}
		r := approve("bob")
		if err := os.WriteFile(jpath, orig, 0o600); err != nil {
			t.Fatal(err)
		}
		if r.code != 1 || !strings.Contains(r.out, "refused: the journal's plan of step roll") || strings.Contains(r.out, "signed:") {
			t.Fatalf("bob's approval of an edited plan: exit %d, want 1 naming the step\n%s", r.code, r.out)
		}
		waited := time.Since(start)
		r = approve("bob")
		if r.code != 0 || !strings.Contains(r.out, "the plan you sign, as the run's journal has it") || !strings.Contains(r.out, "digest "+req.Digest+"\n   recomputed here from what is shown below: equal") || !strings.Contains(r.out, "signed: bob@example.com") {
			t.Fatalf("bob's approval: exit %d\n%s", r.code, r.out)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("the run failed after the approval: %v\n%s", err, out.String())
			}
		case <-time.After(10 * time.Minute):
			t.Fatalf("the run did not end:\n%s", out.String())
		}
		t.Logf("FIGURE the run waited %s for the second approval; the roll took %s after it", waited.Round(100*time.Millisecond), (time.Since(start) - waited).Round(100*time.Millisecond))
		text := out.String()
		for _, w := range []string{"waiting for a second approval of roll, digest " + req.Digest[:12], "approved by bob@example.com", "signed off by alice@example.com (operator), bob@example.com"} {
			if !strings.Contains(text, w) {
				t.Errorf("the run's output lacks %q:\n%s", w, text)
			}
		}
		if got := stops(t, run); len(got) != 3 {
			t.Errorf("stops per broker %v, want every broker once", got)
		}
		sum, _ := signoff.SignersDigest(signers)
		if p := runStartPolicy(t, run); p.Approvals != 2 || !p.Enforced || p.AllowedSigners != signers || p.SignersSHA256 != sum || sum == "" {
			t.Errorf("the run-start record's policy: %+v (allowed_signers sha256 %s)", p, sum)
		}
		report, _ := os.ReadFile(filepath.Join(run, "report.md"))
		for _, w := range []string{"## Approvals", "| roll | approve |", "alice@example.com (operator), key SHA256:", "bob@example.com, key SHA256:", "outcome: **finished**",
			"- approval policy: 2 approvals of each destructive step, allowed signers " + signers + " (sha256 " + sum + "), enforced: a lab's inventory that asks for it (policy.in_lab: true)"} {
			if !strings.Contains(string(report), w) {
				t.Errorf("report lacks %q:\n%s", w, report)
			}
		}
	})

	t.Run("policy.group: kremedy-op runs, kremedy-nosudo approves from its own account", func(t *testing.T) {
		sharedApproval(t, l)
	})

	t.Run("a signature answers one request, one person one approver, a refusal judged again", func(t *testing.T) {
		signatureLifecycle(t, l)
	})
}

// signatureLifecycle proves on a real rolling restart, under a policy of
// two approvals, three findings of the security review:
//   - M3: alice's second key, allowed under another spelling of her name
//     (allowed_signers `alice@example.com,alice KEY_A` and `alice KEY_A2`),
//     never counts as the second person;
//   - M2: bob's approval of the first attempt's request does not count for
//     the resumed attempt's request of the same plan (the run was killed
//     right after the approval; the plan's digest is unchanged): the resumed
//     run waits, no broker stopped, until bob approves again;
//   - L1: bob's new signature, refused while allowed_signers is missing (a
//     config-management rewrite), counts once the file is back, without
//     being signed again.
func signatureLifecycle(t *testing.T, l *lab.Lab) {
	keys := t.TempDir()
	pub := map[string][]string{}
	for _, name := range []string{"alice", "alice2", "bob"} {
		k := filepath.Join(keys, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		b, _ := os.ReadFile(k + ".pub")
		pub[name] = strings.Fields(string(b))
	}
	ns := fmt.Sprintf("namespaces=%q", signoff.Namespace)
	signers := filepath.Join(keys, "allowed_signers")
	lines := fmt.Sprintf("alice@example.com,alice %s %s %s\nalice %s %s %s\nbob@example.com %s %s %s\n",
		ns, pub["alice"][0], pub["alice"][1], ns, pub["alice2"][0], pub["alice2"][1], ns, pub["bob"][0], pub["bob"][1])
	if err := os.WriteFile(signers, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	inv := labInventory(t, l, func(inv *inventory.Inventory) {
		inv.Policy = &inventory.Policy{Approvals: 2, AllowedSigners: signers, Timeout: inventory.Duration{Duration: 5 * time.Minute}, InLab: true}
	})
	run := filepath.Join(t.TempDir(), "run")
	before := brokerPIDs(l)
	approve := func(key string) result {
		return kremedy(t, "approve", run, "--step", "roll", "--key", filepath.Join(keys, key), "--yes")
	}
	start := func(fault string, args ...string) (*lockedBuffer, <-chan error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = os.Environ()
		if fault != "" {
			cmd.Env = append(cmd.Env, "KREMEDY_FAULT="+fault)
		}
		return startRun(t, cmd)
	}

	// The first attempt: killed right after the approval is journaled.
	out1, exited1 := start("sigkill@approval:roll", "run", "rolling-restart", "--inventory", inv, "--run-dir", run, "--headless", "--yes",
		"--confirm", "kremedy-lab", "--key", filepath.Join(keys, "alice"))
	req1 := waitRequest(t, run, "roll", exited1, out1, "")
	if r := approve("alice2"); r.code != 1 || !strings.Contains(r.out, "the operator of this run") {
		t.Fatalf("M3: alice's second key, allowed as \"alice\": exit %d\n%s", r.code, r.out)
	}
	if r := approve("bob"); r.code != 0 {
		t.Fatalf("bob's approval of the first request: exit %d\n%s", r.code, r.out)
	}
	select {
	case <-exited1:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the first attempt was not killed after its approval:\n%s", out1.String())
	}
	if got := stops(t, run); len(got) != 0 {
		t.Fatalf("the first attempt stopped brokers before it was killed: %v", got)
	}

	// The resumed attempt: the same plan, a new request; bob's old
	// signature is refused and the run waits.
	out2, exited2 := start("", "resume", run, "--headless", "--yes", "--confirm", "kremedy-lab", "--key", filepath.Join(keys, "alice"))
	req2 := waitRequest(t, run, "roll", exited2, out2, req1.Nonce)
	if req2.Digest != req1.Digest {
		t.Logf("the resumed roll re-planned to another digest (%.12s, was %.12s): the old signature is refused for that reason too", req2.Digest, req1.Digest)
	}
	for end := time.Now().Add(30 * time.Second); !strings.Contains(out2.String(), "answers an earlier request") && !strings.Contains(out2.String(), "an earlier plan of roll"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("M2: the first request's signature was not refused for the second:\n%s", out2.String())
		}
	}
	if got := stops(t, run); len(got) != 0 {
		t.Fatalf("M2: brokers were stopped on the first request's signature: %v", got)
	}

	// L1: bob signs the new request while allowed_signers is away; the
	// refusal is no verdict, and the same file counts once it is back.
	if err := os.Rename(signers, signers+".away"); err != nil {
		t.Fatal(err)
	}
	sig, err := (signoff.Keygen{}).Sign(context.Background(), filepath.Join(keys, "bob"), signoff.Message(req2.Run, req2.Step, req2.Digest, req2.Nonce), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signoff.WriteSignature(run, req2, "bob@example.com", sig); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); !strings.Contains(out2.String(), "is not judged: the run cannot read the allowed signers"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("L1: the signature was not judged while allowed_signers was missing:\n%s", out2.String())
		}
	}
	if got := stops(t, run); len(got) != 0 {
		t.Fatalf("L1: brokers were stopped while allowed_signers was missing: %v", got)
	}
	if err := os.Rename(signers+".away", signers); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited2:
		if err != nil {
			t.Fatalf("L1: the resumed run failed once allowed_signers was back: %v\n%s", err, out2.String())
		}
	case <-time.After(10 * time.Minute):
		t.Fatalf("L1: the resumed run did not end:\n%s", out2.String())
	}
	if !strings.Contains(out2.String(), "approved by bob@example.com") {
		t.Errorf("the resumed run does not say bob approved:\n%s", out2.String())
	}
	if got := stops(t, run); len(got) != 3 {
		t.Errorf("stops per broker %v, want every broker once", got)
	}
	if after := brokerPIDs(l); maps.Equal(before, after) {
		t.Errorf("no broker was restarted")
	}
}

// runTookRe finds the time the headless runner says the run took.
var runTookRe = regexp.MustCompile(`\(([0-9.]+)s\)\nreport: `)

// lockedBuffer is a process's output, read by the test while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// account is a local user a lab test runs kremedy as.
type account struct {
	name     string
	uid, gid uint32
	home     string
}

// labAccount is the local user name (`make lab-users`), with a home of
// its own under base (0700): missing, the test fails, saying how to make it.
func labAccount(t *testing.T, name, base string) account {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("the local user %s is missing (%v): run `make lab-users` as root", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	a := account{name: name, uid: uint32(uid), gid: uint32(gid), home: filepath.Join(base, name)}
	if err := os.Mkdir(a.home, 0o700); err != nil {
		t.Fatal(err)
	}
	chown(t, a.home, a)
	return a
}

func chown(t *testing.T, path string, a account) {
	t.Helper()
	if err := os.Chown(path, int(a.uid), int(a.gid)); err != nil {
		t.Fatal(err)
	}
}

// copyTo copies src to dst (mode perm), owned by a.
func copyTo(t *testing.T, src, dst string, perm fs.FileMode, a account) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, perm); err != nil {
		t.Fatal(err)
	}
	chown(t, dst, a)
}

// cmd runs name as a, with exactly the supplementary groups given, in a's
// home (HOME too).
func (a account) cmd(groups []uint32, name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: groups}}
	c.Env = []string{"HOME=" + a.home, "USER=" + a.name, "LOGNAME=" + a.name, "PATH=" + os.Getenv("PATH")}
	c.Dir = a.home
	return c
}

// run runs name as a and returns its output and exit code.
func (a account) run(t *testing.T, groups []uint32, name string, args ...string) result {
	t.Helper()
	var buf bytes.Buffer
	c := a.cmd(groups, name, args...)
	c.Stdout, c.Stderr = &buf, &buf
	start := time.Now()
	err := c.Run()
	r := result{out: buf.String(), took: time.Since(start)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// owner is a file's mode, uid and gid (not following a link).
func owner(t *testing.T, path string) (fs.FileMode, uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fi.Mode(), st.Uid, st.Gid
}

// sharedApproval (review M4): the deployment docs/team.md describes —
// each engineer their own account, both in the approvers' group, runs
// under a parent the group can search, policy.group — on two real local
// users: kremedy-op runs a rolling restart with alice's key, kremedy-nosudo
// approves with bob's, which kremedy-op cannot read; the run directory is
// the group's to read (journal, request 0640), approvals/ the group's to
// add to but not to remove from, nothing else in it the group's; a user
// outside the group is told why it cannot approve.
func sharedApproval(t *testing.T, l *lab.Lab) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs kremedy as two local users: run it as root (CI does; sudo go test …)")
	}
	const groupName = "kremedy-approvers"
	g, err := user.LookupGroup(groupName)
	if err != nil {
		t.Fatalf("the group %s is missing (%v): run `make lab-users` as root", groupName, err)
	}
	n, _ := strconv.Atoi(g.Gid)
	grp := uint32(n)
	base, err := os.MkdirTemp("", "kremedy-team-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	op, bob := labAccount(t, "kremedy-op", base), labAccount(t, "kremedy-nosudo", base)
	for _, a := range []account{op, bob} {
		u, _ := user.Lookup(a.name)
		if ids, err := u.GroupIds(); err != nil || !slices.Contains(ids, g.Gid) {
			t.Fatalf("%s is not in %s (%v, %v): run `make lab-users` as root", a.name, groupName, ids, err)
		}
	}
	root := account{name: "root", home: base}

	// The binary, and the allowed signers where only root writes.
	for _, d := range []string{"bin", "etc"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kremedyBin := filepath.Join(base, "bin", "kremedy")
	copyTo(t, bin, kremedyBin, 0o755, root)
	alice, bobKey := filepath.Join(op.home, "alice"), filepath.Join(bob.home, "bob")
	var lines []string
	for _, k := range []struct {
		path, who string
		a         account
	}{{alice, "alice", op}, {bobKey, "bob", bob}} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", k.who, "-f", k.path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		chown(t, k.path, k.a)
		chown(t, k.path+".pub", k.a)
		pub, _ := os.ReadFile(k.path + ".pub")
		f := strings.Fields(string(pub))
		lines = append(lines, fmt.Sprintf("%s@example.com namespaces=%q %s %s", k.who, signoff.Namespace, f[0], f[1]))
	}
	signers := filepath.Join(base, "etc", "allowed_signers")
	if err := os.WriteFile(signers, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The runs' parent: the group's, setgid, as on a bastion.
	runs := filepath.Join(base, "runs")
	if err := os.Mkdir(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(runs, 0, int(grp)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(runs, 0o775|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}

	// The operator's inventory: the lab's, with the policy, and the SSH
	// files it names copied where kremedy-op reads them (the login on the
	// lab's hosts is unchanged). A client setting pointing at a root-only
	// file (TLS, JAAS) would need the same; the plain lab has none.
	inv, err := inventory.Load(l.InventoryPath())
	if err != nil {
		t.Fatal(err)
	}
	if inv.ZooKeeper.TLSConfigFile != "" || inv.Kafka.ClientProperties != "" || inv.Kafka.Krb5Conf != "" || inv.ZooKeeper.Auth != nil || inv.SSH.Config != inventory.SSHConfigNone {
		t.Fatalf("the lab's inventory names client files this test does not copy for kremedy-op: %+v", inv)
	}
	for _, p := range []*string{&inv.SSH.IdentityFile, &inv.SSH.KnownHosts} {
		if *p != "" {
			to := filepath.Join(op.home, filepath.Base(*p))
			copyTo(t, *p, to, 0o600, op)
			*p = to
		}
	}
	for _, b := range inv.Brokers {
		if b.IdentityFile != "" || b.KnownHosts != "" {
			t.Fatalf("broker %d names its own SSH files: copy them for kremedy-op too", b.ID)
		}
	}
	inv.Policy = &inventory.Policy{Approvals: 2, AllowedSigners: signers, Timeout: inventory.Duration{Duration: 5 * time.Minute}, InLab: true, Group: groupName}
	opInv := filepath.Join(op.home, "inventory.yaml")
	if err := inventory.Write(opInv, inv); err != nil {
		t.Fatal(err)
	}
	chown(t, opInv, op)

	// (1) The approver's key is out of the operator's reach.
	if r := op.run(t, []uint32{grp}, "cat", bobKey); r.code == 0 || !strings.Contains(r.out, "Permission denied") {
		t.Fatalf("kremedy-op reads bob's private key: exit %d\n%s", r.code, r.out)
	}

	run := filepath.Join(runs, "run")
	before := brokerPIDs(l)
	out, exited := startRun(t, op.cmd([]uint32{grp}, kremedyBin, "run", "rolling-restart", "--inventory", opInv, "--run-dir", run, "--headless", "--yes", "--confirm", "kremedy-lab", "--key", alice))
	req := waitRequest(t, run, "roll", exited, out, "")

	// (3) What the group reads, and how: the run directory 2750, the
	// journal and the request 0640, kremedy-op's, group kremedy-approvers;
	// approvals/ 3770.
	approvals := filepath.Join(run, signoff.Dir)
	for _, c := range []struct {
		path string
		mode fs.FileMode
	}{
		{run, fs.ModeDir | fs.ModeSetgid | 0o750},
		{filepath.Join(run, steps.JournalFile), 0o640},
		{signoff.RequestPath(run, "roll"), 0o640},
		{approvals, fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o770},
	} {
		if m, uid, gid := owner(t, c.path); m != c.mode || uid != op.uid || gid != grp {
			t.Errorf("%s: %v uid %d gid %d, want %v uid %d (kremedy-op) gid %d (%s)", c.path, m, uid, gid, c.mode, op.uid, grp, groupName)
		}
	}
	opSigs, _ := filepath.Glob(filepath.Join(approvals, "*+operator.sig"))
	if len(opSigs) != 1 {
		t.Fatalf("the operator's signature: %v", opSigs)
	}
	// A member of the group neither changes the journal nor removes the
	// operator's files from approvals/ (sticky).
	jpath := filepath.Join(run, steps.JournalFile)
	jBefore, _ := os.ReadFile(jpath)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sh", "-c", "echo '{}' >> " + jpath}, "Permission denied"},
		{[]string{"rm", "-f", opSigs[0]}, "Operation not permitted"},
		{[]string{"rm", "-f", signoff.RequestPath(run, "roll")}, "Operation not permitted"},
		{[]string{"mv", opSigs[0], opSigs[0] + ".x"}, "Operation not permitted"},
	} {
		if r := bob.run(t, []uint32{grp}, c.args[0], c.args[1:]...); r.code == 0 || !strings.Contains(r.out, c.want) {
			t.Errorf("kremedy-nosudo: %s: exit %d, want %q\n%s", strings.Join(c.args, " "), r.code, c.want, r.out)
		}
	}
	for _, f := range []string{opSigs[0], signoff.RequestPath(run, "roll")} {
		if _, err := os.Lstat(f); err != nil {
			t.Errorf("kremedy-nosudo removed or moved the operator's %s: %v", filepath.Base(f), err)
		}
	}
	if jAfter, _ := os.ReadFile(jpath); !bytes.HasPrefix(jAfter, jBefore) || bytes.Contains(jAfter[len(jBefore):], []byte("{}\n")) {
		t.Errorf("kremedy-nosudo wrote to the journal")
	}

	// (4) Outside the group (its own group only): told why, nothing
	// written, exit 1.
	listed := func() []string {
		es, _ := os.ReadDir(approvals)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return names
	}
	had := listed()
	r := bob.run(t, nil, kremedyBin, "approve", run, "--step", "roll", "--key", bobKey, "--yes")
	if want := "cannot read " + jpath + ": permission denied — this run is shared with group " + groupName + " (policy.group); ask to be added to it, or approve where the run directory is readable"; r.code != 1 || !strings.Contains(r.out, want) || strings.Contains(r.out, "signed:") {
		t.Errorf("an approver outside the group: exit %d, want 1 saying %q\n%s", r.code, want, r.out)
	}
	if now := listed(); !slices.Equal(had, now) {
		t.Errorf("approvals/ changed: %v -> %v", had, now)
	}
	if got := stops(t, run); len(got) != 0 {
		t.Fatalf("brokers were stopped before the second approval: %v", got)
	}

	// (2) kremedy-nosudo, in the group, approves from its own account.
	r = bob.run(t, []uint32{grp}, kremedyBin, "approve", run, "--step", "roll", "--key", bobKey, "--yes")
	if r.code != 0 || !strings.Contains(r.out, "signed: bob@example.com") || !strings.Contains(r.out, "digest "+req.Digest) {
		t.Fatalf("kremedy-nosudo's approval: exit %d\n%s", r.code, r.out)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the run (kremedy-op) failed after the approval: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Minute):
		t.Fatalf("the run did not end:\n%s", out.String())
	}
	if text := out.String(); !strings.Contains(text, "approved by bob@example.com") || !strings.Contains(text, "signed off by alice@example.com (operator), bob@example.com") {
		t.Errorf("the run's output does not count bob's approval:\n%s", text)
	}
	restartedOnce(t, l, run, before)
	// (3) The signature is kremedy-nosudo's, 0640, the group's.
	bobSigs, _ := filepath.Glob(filepath.Join(approvals, "roll.*.bob@example.com.sig"))
	if len(bobSigs) != 1 {
		t.Fatalf("bob's signature: %v", bobSigs)
	}
	if m, uid, gid := owner(t, bobSigs[0]); m != 0o640 || uid != bob.uid || gid != grp {
		t.Errorf("bob's signature: %v uid %d gid %d, want 0640 uid %d (kremedy-nosudo) gid %d", m, uid, gid, bob.uid, grp)
	}
	// Nothing else in the run directory is the group's to read.
	err = filepath.WalkDir(run, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if p == jpath || filepath.Dir(p) == approvals {
			return nil
		}
		if m, _, _ := owner(t, p); m.Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v: the group or others can read it", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if m, uid, _ := owner(t, filepath.Join(run, steps.ReportFile)); m != 0o600 || uid != op.uid {
		t.Errorf("report.md: %v uid %d, want 0600 kremedy-op's", m, uid)
	}
	if p := runStartPolicy(t, run); p.Group != groupName || !p.Enforced {
		t.Errorf("the run-start record's policy: %+v", p)
	}
}

// startRun starts a kremedy process with its output kept as it comes;
// exited gets how it ended; it is killed at the test's end if it still
// runs.
func startRun(t *testing.T, cmd *exec.Cmd) (*lockedBuffer, <-chan error) {
	t.Helper()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return out, exited
}

// waitRequest waits (2 minutes at most) until the run in dir asks for an
// approval of step by a request whose nonce is not not; the run ending
// first fails the test.
func waitRequest(t *testing.T, run, step string, exited <-chan error, out *lockedBuffer, not string) signoff.Request {
	t.Helper()
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if rs, err := signoff.Requests(run, step); err == nil && rs[0].Nonce != not {
			return rs[0]
		}
		select {
		case err := <-exited:
			t.Fatalf("the run ended (%v) without waiting for an approval:\n%s", err, out.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("the run never asked for an approval:\n%s", out.String())
		}
	}
}
