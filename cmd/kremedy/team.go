package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/notify"
	"github.com/kremedy/kremedy/steps/signoff"
)

// teamConfig is what a run tells and asks of other people, resolved before
// anything is done: the webhooks it notifies (--notify, the inventory's
// notify) and the approval policy it enforces (the inventory's policy,
// with the operator's --key).
type teamConfig struct {
	targets []notify.Target
	// warnings are the inventory's webhooks that cannot be used: said at
	// the run's start, and the run goes on without them.
	warnings []string
	policy   *signoff.Policy
	// record is the policy as the run-start record keeps it: enforced or
	// waived, and why, with the allowed signers' sha256.
	record *steps.PolicyRecord
	key    string
	// notes are said at the run's start (a policy a lab ignores).
	notes []string
	// secrets are the webhook URLs read from the environment or files, and
	// the tokens: the journal never shows them.
	secrets []string
}

// resolveTeam reads --notify, --notify-token and --key and the
// inventory's notify and policy. A flag that cannot be used is a usage
// error; an inventory webhook that cannot be used is a warning (a
// notification never stops a repair); a policy the run cannot enforce
// stops it before anything is done.
func resolveTeam(ctx context.Context, inv *inventory.Inventory, f runFlags, dryRun bool) (*teamConfig, error) {
	tc := &teamConfig{}
	if err := tc.notifyFlags(f); err != nil {
		return nil, err
	}
	tc.inventoryNotify(inv)
	if err := tc.resolvePolicy(ctx, inv, f.key, dryRun); err != nil {
		return nil, err
	}
	return tc, nil
}

// notifyFlags adds the --notify webhooks, with the --notify-token bearer
// token, to the targets; the token and the URLs read from the environment
// or files (and Slack's, which carry their secret) are secrets.
func (tc *teamConfig) notifyFlags(f runFlags) error {
	token := ""
	if f.notifyToken != "" {
		t, err := secretArg("--notify-token", f.notifyToken)
		if err != nil {
			return usageErr(err)
		}
		token = t
		tc.secrets = append(tc.secrets, t)
	}
	for _, arg := range f.notify {
		u, err := secretArg("--notify", arg)
		if err != nil {
			return usageErr(err)
		}
		t := notify.Target{URL: u, Token: token}
		if err := t.Check(); err != nil {
			return usageErr(fmt.Errorf("--notify: %w", err))
		}
		if u != arg || notify.IsSlack(u) {
			tc.secrets = append(tc.secrets, u)
		}
		tc.targets = append(tc.targets, t)
	}
	if f.notifyToken != "" && len(f.notify) == 0 {
		return usageErr(errors.New("--notify-token is the bearer token of the --notify webhooks; there are none"))
	}
	return nil
}

// inventoryNotify adds the inventory's notify webhooks to the targets; one
// that cannot be used is a warning, and the run goes on without it.
func (tc *teamConfig) inventoryNotify(inv *inventory.Inventory) {
	for i, n := range inv.Notify {
		name := fmt.Sprintf("%s: notify[%d]", inv.Path, i)
		u, err := n.ResolveURL()
		if err != nil {
			tc.warnings = append(tc.warnings, fmt.Sprintf("%s is not notified: %v; the run goes on without it", name, err))
			continue
		}
		tok, err := n.Token()
		if err != nil {
			tc.warnings = append(tc.warnings, fmt.Sprintf("%s (%s) is not notified: %v; the run goes on without it", name, notify.Name(u), err))
			continue
		}
		format, _ := notify.ParseFormat(n.Format) // the loader checked it
		t := notify.Target{URL: u, Token: tok, Format: format}
		if err := t.Check(); err != nil {
			tc.warnings = append(tc.warnings, fmt.Sprintf("%s is not notified: %v; the run goes on without it", name, err))
			continue
		}
		if n.URL == "" || notify.IsSlack(u) {
			tc.secrets = append(tc.secrets, u)
		}
		if tok != "" {
			tc.secrets = append(tc.secrets, tok)
		}
		tc.targets = append(tc.targets, t)
	}
}

// resolvePolicy records the inventory's approval policy as the run keeps
// it and says why it is waived (none, a dry run, a lab) or enforces it
// (enforce) with the operator's --key.
func (tc *teamConfig) resolvePolicy(ctx context.Context, inv *inventory.Inventory, keyFlag string, dryRun bool) error {
	p := inv.Policy
	enforced, why := inv.Enforced()
	tc.record = &steps.PolicyRecord{Approvals: 1}
	if p != nil && p.Approvals >= 2 {
		tc.record = &steps.PolicyRecord{Approvals: p.Approvals, AllowedSigners: p.AllowedSigners, Why: why}
		tc.record.SignersSHA256, _ = signoff.SignersDigest(p.AllowedSigners) // the file is checked below when it matters
	}
	switch {
	case p == nil || p.Approvals < 2:
		if keyFlag != "" {
			tc.notes = append(tc.notes, fmt.Sprintf("--key %s: %s has no approval policy (policy: approvals: 2), so the key signs nothing", keyFlag, inv.Path))
		}
		return nil
	case dryRun:
		tc.record.Why = "a dry run changes nothing"
		tc.notes = append(tc.notes, fmt.Sprintf("the approval policy of %s (approvals: %d) is not enforced: a dry run changes nothing", inv.Path, p.Approvals))
		return nil
	case !enforced:
		tc.notes = append(tc.notes, fmt.Sprintf("the approval policy of %s (approvals: %d) is not enforced on a lab: set policy.in_lab: true to rehearse it (%s)", inv.Path, p.Approvals, why))
		return nil
	case why != "":
		tc.notes = append(tc.notes, fmt.Sprintf("the approval policy of %s (approvals: %d) is enforced: %s", inv.Path, p.Approvals, why))
	}
	return tc.enforce(ctx, inv, keyFlag, why)
}

// enforce sets the policy the run enforces: the operator's signing key
// (--key) and the allowed signers checked (checkSigners), the policy's
// group shared with, a warning when the operator can change who approves.
func (tc *teamConfig) enforce(ctx context.Context, inv *inventory.Inventory, keyFlag, why string) error {
	p := inv.Policy
	if keyFlag == "" {
		return usageErr(fmt.Errorf("%s's policy wants %d approvals of every destructive step: pass --key KEY, your signing key (a private key file, or the .pub of a key in ssh-agent) in %s; your confirmation is signed with it, and another person approves with `kremedy approve`; nothing was done%s", inv.Path, p.Approvals, p.AllowedSigners, because(why)))
	}
	key, err := filepath.Abs(keyFlag)
	if err != nil {
		return usageErr(err)
	}
	if _, err := os.Stat(key); err != nil {
		return usageErr(fmt.Errorf("--key: %w; nothing was done", err))
	}
	sum, err := checkSigners(ctx, inv)
	if err != nil {
		return err
	}
	if w := writable(p.AllowedSigners); w != "" {
		tc.notes = append(tc.notes, fmt.Sprintf("warning: you, the operator, can write %s (%s): you could change who approves. The run journals its sha256 (%.12s), counts no approval while it differs, and refuses a resume under another; keep it where only an administrator writes (a root-owned /etc/kremedy/allowed_signers)", p.AllowedSigners, w, sum))
	}
	if p.Group != "" {
		// Refused now, before anything is done, rather than when the run
		// directory is made.
		if _, err := steps.ShareGroup(p.Group); err != nil {
			return usageErr(fmt.Errorf("%s's approval policy: %w", inv.Path, err))
		}
		tc.record.Group = p.Group
	}
	tc.record.SignersSHA256, tc.record.Enforced = sum, true
	tc.policy = &signoff.Policy{Approvals: p.Approvals, AllowedSigners: p.AllowedSigners, SignersSHA256: sum, Timeout: p.Timeout.Duration}
	tc.key = key
	return nil
}

// checkSigners proves a run can check approvals under the inventory's
// policy: its allowed signers file exists and parses, and ssh-keygen is
// there and knows -Y find-principals; it returns the file's sha256.
func checkSigners(ctx context.Context, inv *inventory.Inventory) (string, error) {
	p := inv.Policy
	if _, err := os.Stat(p.AllowedSigners); err != nil {
		return "", usageErr(fmt.Errorf("%s policy.allowed_signers: %w; a run under the policy cannot check an approval without it; nothing was done", inv.Path, err))
	}
	if err := signoff.CheckSigners(p.AllowedSigners); err != nil {
		return "", usageErr(fmt.Errorf("%s's approval policy: %w; nothing was done", inv.Path, err))
	}
	sum, err := signoff.SignersDigest(p.AllowedSigners)
	if err != nil {
		return "", usageErr(fmt.Errorf("%s's approval policy: %w; nothing was done", inv.Path, err))
	}
	if err := (signoff.Keygen{}).Check(ctx); err != nil {
		return "", usageErr(fmt.Errorf("%s's approval policy: %w; nothing was done", inv.Path, err))
	}
	return sum, nil
}

// checkShare refuses, before a new run's directory dir is made, a
// policy.group whose members could not reach it (a directory above it
// they cannot search); a note when the modes cannot tell (an ACL).
func (tc *teamConfig) checkShare(dir string) error {
	if tc.record == nil || tc.record.Group == "" {
		return nil
	}
	g := tc.record.Group
	gid, err := steps.ShareGroup(g)
	if err != nil {
		return usageErr(err)
	}
	note, err := steps.ShareReach(dir, g, gid)
	if err != nil {
		return usageErr(err)
	}
	if note != "" {
		tc.notes = append(tc.notes, note)
	}
	return nil
}

// because is why a lab inventory's policy is enforced, for an error.
func because(why string) string {
	if why == "" {
		return ""
	}
	return " (the policy is enforced: " + why + ")"
}

// writable says how the user running kremedy can change the file at path
// ("" when they cannot): the file is writable, or its directory is (the
// file can be replaced).
func writable(path string) string {
	const w, x = 2, 1 // access(2)'s W_OK, X_OK
	if syscall.Access(path, w) == nil {
		return "the file is writable by you"
	}
	if dir := filepath.Dir(path); syscall.Access(dir, w|x) == nil {
		return fmt.Sprintf("its directory %s is writable by you: the file can be replaced", dir)
	}
	return ""
}

// policyWeakened says why the policy a resume would run under (now) is
// weaker than the one the run started under (then): not enforced, fewer
// approvals, other allowed signers; "" when it is as strong or stronger,
// or when the run did not record one.
func policyWeakened(then, now *steps.PolicyRecord) string {
	if then == nil || !then.Enforced || then.Approvals < 2 {
		return ""
	}
	switch {
	case now == nil || !now.Enforced:
		return "the policy would not be enforced"
	case now.Approvals < then.Approvals:
		return fmt.Sprintf("it would want %d approvals, not %d", now.Approvals, then.Approvals)
	case now.SignersSHA256 != then.SignersSHA256:
		return fmt.Sprintf("its allowed signers are not the ones the run started with (sha256 %.12s then, %.12s now)", then.SignersSHA256, now.SignersSHA256)
	}
	return ""
}

// resumePolicy checks the policy a resume would run under against the one
// the run journaled at its start: a weaker one is refused before anything
// is done; another one is a note.
func resumePolicy(meta steps.Meta, tc *teamConfig) error {
	then, now := meta.Policy, tc.record
	if why := policyWeakened(then, now); why != "" {
		return usageErr(fmt.Errorf("run %s started under the approval policy %s. Resumed now, %s: %s. Nothing was done: restore %s and the policy of %s as they were, or start a new run (`kremedy run %s --inventory %s`), whose report states the policy it runs under",
			meta.ID, then, why, now, then.AllowedSigners, meta.Inventory, meta.Runbook, meta.Inventory))
	}
	switch {
	case then == nil:
		tc.notes = append(tc.notes, fmt.Sprintf("the run's start record has no approval policy (a kremedy before policies were journaled): it goes on under the inventory's as it is now: %s", now))
	case *then != *now:
		tc.notes = append(tc.notes, fmt.Sprintf("the approval policy changed since the run started (then: %s); it goes on under %s", then, now))
	}
	if then != nil && now != nil && then.Group != now.Group {
		was := "the operator's alone"
		if then.Group != "" {
			was = "shared with group " + then.Group
		}
		tc.notes = append(tc.notes, fmt.Sprintf("the run directory stays as the run made it (%s): policy.group applies to new runs", was))
	}
	return nil
}

// secretArg reads a flag's value as OpenSSL's -passin reads one: env:NAME
// (an environment variable) or file:PATH (a file, one trailing newline
// ignored); a --notify URL may also be written out.
func secretArg(flag, v string) (string, error) {
	switch {
	case strings.HasPrefix(v, "env:"):
		name := strings.TrimPrefix(v, "env:")
		s, ok := os.LookupEnv(name)
		if !ok || strings.TrimSpace(s) == "" {
			return "", fmt.Errorf("%s %s: the environment variable %s is not set or empty; nothing was done", flag, v, name)
		}
		return strings.TrimSpace(s), nil
	case strings.HasPrefix(v, "file:"):
		b, err := os.ReadFile(strings.TrimPrefix(v, "file:"))
		if err != nil {
			return "", fmt.Errorf("%s %s: %w; nothing was done", flag, v, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s %s: the file is empty; nothing was done", flag, v)
		}
		return s, nil
	case flag == "--notify-token":
		return "", fmt.Errorf("--notify-token: write env:NAME or file:PATH; a token on the command line is seen by every user of the machine (ps); nothing was done")
	}
	return v, nil
}

// team is a teamConfig at work in one session: the notifier (one more
// Reporter) and the policy's Approver around the operator's.
type team struct {
	tc *teamConfig
	s  *steps.Session
	n  *notify.Notifier
	w  io.Writer // where lines go once no run reports them
	// over: no attempt is running, so the notifier's lines are printed
	// here as well as journaled.
	over atomic.Bool
	once sync.Once
}

// attach starts the team's work for s; headless chooses the resume
// command the notifications carry. tc may be nil (no flags resolved: a
// test).
func (tc *teamConfig) attach(s *steps.Session, headless bool, w io.Writer) *team {
	if tc == nil {
		tc = &teamConfig{}
	}
	tm := &team{tc: tc, s: s, w: w}
	tm.over.Store(true)
	s.Redact(tc.secrets...)
	if len(tc.targets) > 0 {
		meta := s.Meta()
		tm.n = notify.New(notify.Run{ID: meta.ID, Runbook: meta.Runbook, Cluster: meta.Cluster, Lab: meta.Lab, Operator: operator(),
			Version: version, Dir: s.Dir(), Resume: s.ResumeCommand(headless), Steps: s.Runbook().Infos()},
			tc.targets, notify.Options{Problem: tm.problem})
	}
	return tm
}

// problem journals a line about the notifications and shows it: through
// the run's reporter while it runs, on w once it does not.
func (tm *team) problem(text string) {
	tm.s.Notef("notify", "%s", text)
	if tm.over.Load() {
		fmt.Fprintln(tm.w, "kremedy: "+text)
	}
}

// run is one attempt: it tells the team it starts, composes rep with the
// notifier and a with the policy, walks the run, and tells how it ended.
func (tm *team) run(ctx context.Context, a steps.Approver, rep steps.Reporter, walk func(steps.Approver, steps.Reporter) steps.Outcome) steps.Outcome {
	tm.over.Store(false)
	defer tm.over.Store(true)
	tm.once.Do(func() {
		for _, l := range append(tm.tc.notes, tm.tc.warnings...) {
			tm.s.Notef("kremedy", "%s", l)
			rep.Report(steps.Event{Time: time.Now(), Kind: steps.EvLog, Step: "kremedy", Text: l})
		}
	})
	if tm.n != nil {
		rep = steps.Reporters(rep, tm.s.Redacting(tm.n))
		tm.n.RunStart(tm.s.Resumed())
	}
	if p := tm.tc.policy; p != nil {
		meta := tm.s.Meta()
		// Shared as the run's directory was made (the journaled policy),
		// whatever the inventory says now.
		shared := meta.Policy != nil && meta.Policy.Enforced && meta.Policy.Group != ""
		a = &signoff.Approver{Inner: a, Policy: *p, Run: meta.ID, Dir: tm.s.Dir(), Runbook: meta.Runbook, Cluster: meta.Cluster, Lab: meta.Lab,
			Shared: shared, Key: tm.tc.key, Signer: signoff.Keygen{}, Report: rep, Log: func(step, text string) { tm.s.Notef(step, "%s", text) }}
	}
	out := walk(a, rep)
	if tm.n != nil {
		tm.n.RunEnd(notify.End{Ending: out.Ending(ctx), Done: out.Done, Skipped: out.Skipped, NotDone: out.NotDone, Err: out.Err, Report: tm.s.ReportPath()})
	}
	return out
}

// close waits a little for the last notifications and journals what was
// not delivered (and shows it, unless the webhook was already reported).
func (tm *team) close() {
	if tm.n == nil {
		return
	}
	for _, u := range tm.n.Close() {
		tm.s.Notef("notify", "%s", u.Line)
		if !u.Reported {
			fmt.Fprintln(tm.w, "kremedy: "+u.Line)
		}
	}
}

// operator is who runs kremedy, as the team is told: user@host.
func operator() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		name += "@" + h
	}
	return name
}
