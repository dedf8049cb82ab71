package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/signoff"
)

// newApproveCmd is the second approver's command: it shows the plan a run
// waits to have approved, as the run's journal has it, and signs its
// digest with the approver's key.
func newApproveCmd() *cobra.Command {
	var step, key string
	var yes bool
	c := &cobra.Command{
		Use:   "approve RUN_DIR",
		Short: "Approve, as a second person, the plan a run waits for: shows it and signs its digest with your SSH key (ssh-keygen -Y sign)",
		Long: `approve is the second pair of eyes of an inventory whose policy wants two
approvals of each destructive step (policy: approvals: 2, allowed_signers:
FILE). The run, once its operator confirmed a step, waits; approve shows the
plan it waits for (from the run's journal: every action, the rollback note,
the digest), asks you to type the step's id, and signs the digest — for this
run, this step and this request only (the request's nonce) — with your key,
which must be in the allowed signers and not the operator's (no name in
common with the operator's key). The run counts the signature within a
second. A plan that changes (re-planned, stale), and a later request for the
same plan (another attempt, a resume), need a new approval.

It reads RUN_DIR and writes to its approvals/: run it on the machine where
the run directory is, from your own account, in the group the inventory's
policy.group shares the run with (docs/team.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return usageErr(errors.New("--key KEY is required: your signing key (a private key, or the .pub of a key in ssh-agent)"))
			}
			return approve(cmd, args[0], step, key, yes)
		},
	}
	c.Flags().StringVar(&step, "step", "", "the step to approve (default: the one the run waits for)")
	c.Flags().StringVar(&key, "key", "", "your signing key: a private key, or the .pub of a key in ssh-agent (required)")
	c.Flags().BoolVar(&yes, "yes", false, "sign without asking to type the step's id (you have read the plan)")
	return c
}

func approve(cmd *cobra.Command, dir, step, key string, yes bool) error {
	ctx, w := cmd.Context(), cmd.OutOrStdout()
	meta, err := steps.ReadMeta(dir)
	if errors.Is(err, fs.ErrPermission) {
		return failedErr(unreadableRun(dir, err))
	}
	if err != nil {
		return usageErr(err)
	}
	reqs, err := signoff.Requests(dir, step)
	switch {
	case errors.Is(err, signoff.ErrNoRequest) && step != "":
		return failedErr(fmt.Errorf("run %s does not wait for an approval of %s now (a run asks when its operator has confirmed a destructive step); nothing was signed", meta.ID, step))
	case errors.Is(err, signoff.ErrNoRequest):
		return failedErr(fmt.Errorf("run %s waits for no approval now (a run asks when its operator has confirmed a destructive step); nothing was signed", meta.ID))
	case err != nil:
		return failedErr(fmt.Errorf("%w; nothing was signed", err))
	case len(reqs) > 1:
		var ids []string
		for _, r := range reqs {
			ids = append(ids, r.Step)
		}
		return usageErr(fmt.Errorf("run %s waits for approvals of %s: name one with --step; nothing was signed", meta.ID, strings.Join(ids, ", ")))
	}
	req := reqs[0]
	if err := req.Check(); err != nil {
		return failedErr(fmt.Errorf("%s: %w; nothing was signed", signoff.RequestPath(dir, req.Step), err))
	}
	if req.Run != meta.ID {
		return failedErr(fmt.Errorf("%s: the request is for run %s, not this directory's run %s; nothing was signed", signoff.RequestPath(dir, req.Step), req.Run, meta.ID))
	}
	if err := requestSigners(meta, req); err != nil {
		return failedErr(err)
	}
	if meta.PlanDigest != steps.PlanDigestForm {
		return failedErr(fmt.Errorf("run %s was started by an earlier kremedy (plan digest form %q, this one computes %s): the plan it waits for cannot be recomputed here; approve it with the kremedy that runs it, or have the operator start the run again with this one; nothing was signed", meta.ID, meta.PlanDigest, steps.PlanDigestForm))
	}
	plan, err := journaledPlan(dir, req)
	if err != nil {
		return failedErr(err)
	}
	showRequest(w, meta, req, plan)
	if err := (signoff.Keygen{}).Check(ctx); err != nil {
		return failedErr(err)
	}
	if !yes {
		if !isTerminal(os.Stdin) {
			return usageErr(errors.New("without a terminal, pass --yes once you have read the plan; nothing was signed"))
		}
		fmt.Fprintf(w, "\nType %s to sign this plan (anything else signs nothing): ", req.Step)
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		if strings.TrimSpace(line) != req.Step {
			return &exitError{exitInterrupted, errors.New("not signed")}
		}
	}
	msg := signoff.Message(req.Run, req.Step, req.Digest, req.Nonce)
	sig, err := (signoff.Keygen{}).Sign(ctx, key, msg, true)
	if err != nil {
		return failedErr(fmt.Errorf("%w; nothing was written", err))
	}
	id, err := (signoff.Keygen{}).Verify(ctx, req.AllowedSigners, msg, sig)
	switch {
	case errors.Is(err, signoff.ErrNotAllowed):
		return failedErr(fmt.Errorf("your key %s is not in the allowed signers (%s): your approval would not count; nothing was written", id.Key, req.AllowedSigners))
	case err != nil:
		return failedErr(fmt.Errorf("your signature does not verify against %s: %w; nothing was written", req.AllowedSigners, err))
	case signoff.SamePerson(id, req.Operator) != "":
		return failedErr(fmt.Errorf("you signed as %s (key %s), the operator of this run (%s), whose approval already counts once: another person must approve; nothing was written", id.Principal, id.Key, signoff.SamePerson(id, req.Operator)))
	}
	// The run may have moved on, or re-planned, while the plan was read.
	if now, err := signoff.Requests(dir, req.Step); err != nil || now[0].Digest != req.Digest || now[0].Nonce != req.Nonce {
		return failedErr(fmt.Errorf("run %s no longer waits for this plan of %s (digest %.12s): it changed or was answered meanwhile; nothing was written — run approve again to see what it waits for now", meta.ID, req.Step, req.Digest))
	}
	path, err := signoff.WriteSignature(dir, req, id.Principal, sig)
	if err != nil {
		return failedErr(fmt.Errorf("%w; the signature was not stored", err))
	}
	fmt.Fprintf(w, "\nsigned: %s (key %s) approved the plan of %s, digest %.12s, in run %s, answering its request %s.\n  signature: %s\n  the run counts it within a second (it counts for this request only: a later one needs a new approval).\n", id.Principal, id.Key, req.Step, req.Digest, meta.ID, req.Nonce, path)
	return nil
}

// unreadableRun is approve's error for a run whose journal the user
// cannot read: the group the run directory is shared with (its
// policy.group), or that it is the operator's alone.
func unreadableRun(dir string, err error) error {
	path := filepath.Join(dir, steps.JournalFile)
	var st *syscall.Stat_t
	fi, serr := os.Stat(dir)
	if serr == nil {
		st, _ = fi.Sys().(*syscall.Stat_t)
	}
	switch {
	case st != nil && fi.Mode().Perm()&0o050 == 0o050:
		g := strconv.FormatUint(uint64(st.Gid), 10)
		if grp, err := user.LookupGroupId(g); err == nil {
			g = grp.Name
		}
		return fmt.Errorf("cannot read %s: permission denied — this run is shared with group %s (policy.group); ask to be added to it, or approve where the run directory is readable; nothing was signed (%w)", path, g, err)
	case st != nil:
		return fmt.Errorf("cannot read %s: permission denied — the run directory is its operator's alone (mode %#o): an inventory's policy.group shares a run with the approvers' group (docs/team.md); approve as a user who can read it; nothing was signed (%w)", path, fi.Mode().Perm(), err)
	}
	return fmt.Errorf("cannot read %s: permission denied — the run directory cannot be reached from this account; a run shared with the approvers' group (policy.group) needs every directory above it searchable by the group; nothing was signed (%w)", path, err)
}

// requestSigners refuses a request whose allowed signers are not the
// ones the run journaled at its start (the request names the file
// approve checks against), or whose file has changed since.
func requestSigners(meta steps.Meta, req signoff.Request) error {
	p := meta.Policy
	if p == nil || !p.Enforced {
		return nil // a run of an older kremedy: the request's file is all there is
	}
	if req.AllowedSigners != p.AllowedSigners {
		return fmt.Errorf("the request names the allowed signers %s, but run %s started under %s; nothing was signed", req.AllowedSigners, meta.ID, p.AllowedSigners)
	}
	if p.SignersSHA256 == "" {
		return nil
	}
	now, err := signoff.SignersDigest(p.AllowedSigners)
	if err != nil {
		return fmt.Errorf("%w; nothing was signed", err)
	}
	if now != p.SignersSHA256 {
		return fmt.Errorf("%s changed since run %s started (sha256 %.12s then, %.12s now): the run counts no approval until it is restored; nothing was signed", p.AllowedSigners, meta.ID, p.SignersSHA256, now)
	}
	return nil
}

// journaledPlan is the plan of req's step as the run's journal has it last:
// what the operator was shown. It must be the plan the request is for, and
// its journaled bytes must digest as that: the digest is recomputed here,
// never taken from the journal's or the request's word.
func journaledPlan(dir string, req signoff.Request) (*steps.PlanView, error) {
	v, err := steps.ReadRun(dir)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was signed", err)
	}
	var last *steps.PlanView
	if s := v.Step(req.Step); s != nil {
		last = s.LastPlan()
	}
	switch {
	case last == nil:
		return nil, fmt.Errorf("the run's journal has no plan of %s; nothing was signed", req.Step)
	case !last.Intact():
		return nil, fmt.Errorf("refused: the journal's plan of step %s (record %d) digests as %s when recomputed from the journal, not as the %s journaled with it: it was changed after it was made, so what you would read is not what runs; nothing was signed — tell the operator and do not approve this run", req.Step, last.Seq, last.Recomputed, last.Digest)
	case last.Digest != req.Digest:
		return nil, fmt.Errorf("refused: the run asks you to sign digest %s for step %s, but the journal's latest plan of it digests as %s (recomputed): the request is not for the plan you would read; nothing was signed — run approve again, and if it repeats, tell the operator", req.Digest, req.Step, last.Recomputed)
	}
	return last, nil
}

func showRequest(w io.Writer, meta steps.Meta, req signoff.Request, pv *steps.PlanView) {
	p := &pv.Plan
	fmt.Fprintf(w, "run %s: %s on %s (%s)\n", meta.ID, meta.Runbook, meta.Cluster, modeName(meta.Lab))
	fmt.Fprintf(w, "step %s — %s [%s]\n", req.Step, req.Title, req.Risk)
	fmt.Fprintf(w, "confirmed by %s (key %s) at %s UTC; the run waits until %s UTC\n", req.Operator.Principal, req.Operator.Key,
		req.Since.UTC().Format("15:04:05"), req.Until.UTC().Format(time.DateTime))
	fmt.Fprintf(w, "\nthe plan you sign, as the run's journal has it (record %d):\n   digest %s\n   recomputed here from what is shown below: equal\n   %s\n", pv.Seq, pv.Recomputed, p.Summary)
	for _, f := range p.Facts {
		fmt.Fprintf(w, "   · %s\n", f)
	}
	for _, a := range p.Actions {
		fmt.Fprintf(w, "   → %s\n", a)
		if args := actionArgs(a); args != "" {
			fmt.Fprintf(w, "       args %s\n", args)
		}
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "   ! %s\n", n)
	}
	if p.Rollback != "" {
		fmt.Fprintf(w, "   rollback: %s\n", strings.ReplaceAll(p.Rollback, "\n", "\n             "))
	}
}

// actionArgs is an action's arguments as canonical JSON: what Apply runs
// besides the line above it, and part of the digest.
func actionArgs(a steps.Action) string {
	if a.Args == nil {
		return ""
	}
	b, err := json.Marshal(a.Args)
	if err == nil {
		b, err = steps.CanonicalJSON(b)
	}
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	return string(b)
}
