package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/drill"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/inventory/connect"
	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
)

type runFlags struct {
	inventory string
	set       []string
	runDir    string
	headless  bool
	yes       bool
	confirm   string
	output    string
	// stopBefore: headless, the run ends (resumable) when it reaches this
	// step, before asking for it.
	stopBefore string
	// notify are webhooks told what the run does, besides the inventory's
	// (a URL, env:NAME or file:PATH); notifyToken their bearer token.
	notify      []string
	notifyToken string
	// key is the operator's signing key, for an inventory whose policy
	// wants a second approval.
	key string
	// breakLease: break the cluster's lease before taking it.
	breakLease bool
}

func addRunFlags(c *cobra.Command, f *runFlags, full bool) {
	if full {
		c.Flags().StringVar(&f.inventory, "inventory", "", "inventory file describing the cluster (required)")
		c.Flags().StringArrayVar(&f.set, "set", nil, "runbook parameter name=value (repeatable), e.g. --set topic=orders")
		_ = c.MarkFlagRequired("inventory")
		_ = c.RegisterFlagCompletionFunc("set", setValues)
	}
	c.Flags().StringVar(&f.runDir, "run-dir", "", "run directory (default: a new one under ~/.local/state/kremedy/runs)")
	c.Flags().BoolVar(&f.headless, "headless", false, "run without a terminal UI, printing every event")
	c.Flags().BoolVar(&f.yes, "yes", false, "headless: approve every step that asks y/N")
	c.Flags().StringVar(&f.confirm, "confirm", "", "headless: the runbook's confirmation word (the topic, or the cluster's name), typed to approve destructive steps")
	c.Flags().StringVar(&f.stopBefore, "stop-before", "", "headless: end the run, resumable, when it reaches this step (its id), before it changes anything — e.g. --stop-before finalize leaves a zk-to-kraft run in dual-write")
	c.Flags().StringVar(&f.output, "output", "text", "headless: text, or jsonl (one JSON event per line on stdout, for automation; the rest on stderr)")
	c.Flags().StringArrayVar(&f.notify, "notify", nil, "POST the run's events to this webhook (repeatable; besides the inventory's notify): a URL, or env:NAME / file:PATH holding it (a Slack webhook's URL is a secret); never blocks or fails the run")
	c.Flags().StringVar(&f.notifyToken, "notify-token", "", "the --notify webhooks' bearer token: env:NAME or file:PATH (never the token itself)")
	c.Flags().BoolVar(&f.breakLease, "break-lease", false, "break the cluster's lease (held by another kremedy run, named when it refuses) before taking it: only after making sure that run is dead; the journal records whose lease was broken")
	c.Flags().StringVar(&f.key, "key", "", "your signing key (a private key, or the .pub of a key in ssh-agent), for an inventory whose policy wants a second approval: it signs your confirmation of each destructive step")
}

// bindRunbook resolves a runbook and checks the --set values (hostile
// topic names are refused before the inventory is even read), then loads
// the inventory and builds the runbook's steps for its cluster.
func bindRunbook(name string, set []string, invPath, confirm string) (*steps.Runbook, *inventory.Inventory, error) {
	rb, err := runbooks.Get(name)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	kv, err := runbooks.ParseSet(set)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	vals, err := rb.BindParams(kv)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	if w, ok := rb.WordFor(vals); ok && confirm != "" && confirm != w {
		return nil, nil, usageErr(fmt.Errorf("--confirm %q does not match the %s name %q; nothing was done", confirm, rb.ConfirmNoun, w))
	}
	inv, err := inventory.Load(invPath)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	if err := modeErr(rb, inv); err != nil {
		return nil, nil, err
	}
	b, err := rb.Bind(kv, inv.Name)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	return b, inv, nil
}

// modeErr refuses a runbook on an inventory of a cluster in another mode:
// a ZooKeeper-mode runbook's kinds read and write ZooKeeper, which a KRaft
// cluster has none of.
func modeErr(rb *runbooks.Runbook, inv *inventory.Inventory) error {
	mode := cmp.Or(inv.Mode, inventory.ModeZooKeeper)
	if rb.Mode == mode {
		return nil
	}
	var fit []string
	if all, err := runbooks.Builtin(); err == nil {
		for _, o := range all {
			if o.Mode == mode {
				fit = append(fit, o.Name)
			}
		}
	}
	way := fmt.Sprintf("the runbooks for %s-mode clusters: %s", mode, strings.Join(fit, ", "))
	if rb.Name == "rolling-restart" && mode == inventory.ModeKRaft {
		way = fmt.Sprintf("run kraft-rolling-restart instead (%s)", way)
	}
	return usageErr(fmt.Errorf("runbook %s acts on %s-mode clusters, and %s describes a %s-mode cluster (mode: %s); nothing was done. %s; `kremedy diagnose --inventory %s` sees it", rb.Name, rb.Mode, inv.Path, mode, mode, way, inv.Path))
}

// connectRun connects to an inventory's cluster for a run of runbook,
// refusing one of another mode.
func connectRun(ctx context.Context, runbook, path string) (*connect.Clients, error) {
	rb, err := runbooks.Get(runbook)
	if err != nil {
		return nil, usageErr(err)
	}
	cl, err := openCluster(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := modeErr(rb, cl.Inv); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// rebind binds a run's runbook again from its run-start record (resume).
func rebind(m steps.Meta) (*steps.Runbook, error) {
	rb, err := runbooks.Get(m.Runbook)
	if err != nil {
		return nil, usageErr(err)
	}
	b, err := rb.Bind(m.Params, m.Cluster)
	if err != nil {
		return nil, usageErr(fmt.Errorf("run %s: %w", m.ID, err))
	}
	return b, nil
}

func newPlanCmd() *cobra.Command {
	var f runFlags
	var asJSON bool
	c := &cobra.Command{
		Use:               "plan RUNBOOK",
		Short:             "Print the full concrete plan of a runbook against a cluster; changes nothing anywhere",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: runbookNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			actsOn(cmd, drill.Invocation{Inventory: f.inventory, RunDir: f.runDir, Runbook: args[0]})
			return runPlan(cmd, args[0], f, asJSON)
		},
	}
	addRunFlags(c, &f, true)
	c.Flags().Lookup("run-dir").Hidden = true
	c.Flags().Lookup("output").Hidden = true
	c.Flags().Lookup("break-lease").Hidden = true // a plan takes no lease
	c.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON: every step's info and plan (its actions with their typed arguments and digest), or why it cannot be planned now")
	return c
}

// runPlan prints the plan of runbook name on the cluster of --inventory
// (as JSON with --json); exit 1 when a step cannot be planned now.
func runPlan(cmd *cobra.Command, name string, f runFlags, asJSON bool) error {
	rb, inv, err := bindRunbook(name, f.set, f.inventory, "")
	if err != nil {
		return err
	}
	cl, err := openCluster(cmd.Context(), f.inventory)
	if err != nil {
		return err
	}
	defer cl.Close()
	w := cmd.OutOrStdout()
	meta := steps.NewMeta(rb, inv.Path, inv.Name, inv.Lab, version, time.Now())
	previews := steps.Preview(cmd.Context(), rb, meta, cl.Ports)
	if asJSON {
		return printPlanJSON(w, rb, inv.Name, inv.Lab, previews)
	}
	fmt.Fprintf(w, "plan of %s on %s (%s) — nothing is changed\n", rb.Name, rb.Confirm.Subject(inv.Name), modeName(inv.Lab))
	var cannot []string
	for i, p := range previews {
		if p.Err != nil {
			fmt.Fprintf(w, "\n%d. %s [%s]\n   cannot plan now: %v\n", i, p.Info.Title, p.Info.ID, p.Err)
			cannot = append(cannot, p.Info.ID)
			continue
		}
		printPlan(w, i, p.Info, p.Plan)
	}
	return cannotPlan(w, cannot, previews)
}

// printPlanJSON prints what `plan` shows, for automation; a refused
// preflight exits 1 as in the text form.
func printPlanJSON(w io.Writer, rb *steps.Runbook, cluster string, isLab bool, previews []steps.PreviewStep) error {
	type step struct {
		Info   steps.Info  `json:"info"`
		Plan   *steps.Plan `json:"plan,omitempty"`
		Digest string      `json:"digest,omitempty"`
		Error  string      `json:"error,omitempty"`
	}
	out := struct {
		Runbook string            `json:"runbook"`
		Cluster string            `json:"cluster"`
		Lab     bool              `json:"lab"`
		Params  map[string]string `json:"params"`
		Steps   []step            `json:"steps"`
	}{rb.Name, cluster, isLab, rb.Params, nil}
	var cannot []string
	for _, p := range previews {
		s := step{Info: p.Info, Plan: p.Plan}
		if p.Err != nil {
			s.Plan, s.Error = nil, p.Err.Error()
			cannot = append(cannot, p.Info.ID)
		} else {
			s.Digest = p.Plan.Digest()
		}
		out.Steps = append(out.Steps, s)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	return cannotPlan(nil, cannot, previews)
}

// cannotPlan is plan's exit: 0 only when every step could be planned, 1
// (failed) naming the steps that could not — a refusal is not a plan.
func cannotPlan(w io.Writer, cannot []string, previews []steps.PreviewStep) error {
	if len(cannot) == 0 {
		return nil
	}
	if w != nil {
		fmt.Fprintf(w, "\nthis plan cannot run now: step %s cannot be planned (the reason is above); nothing was changed\n", strings.Join(cannot, ", "))
	}
	for _, p := range previews {
		if p.Err != nil {
			return failedErr(fmt.Errorf("step %s cannot be planned: %w", p.Info.ID, p.Err))
		}
	}
	return nil
}

func modeName(lab bool) string {
	if lab {
		return "LAB"
	}
	return "LIVE cluster"
}

func printPlan(w io.Writer, i int, info steps.Info, p *steps.Plan) {
	fmt.Fprintf(w, "\n%d. %s [%s, %s, confirm: %s]\n   %s\n", i, info.Title, info.ID, info.Risk, info.Confirm, p.Summary)
	for _, f := range p.Facts {
		fmt.Fprintf(w, "   · %s\n", f)
	}
	for _, a := range p.Actions {
		fmt.Fprintf(w, "   → %s\n", a)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "   ! %s\n", n)
	}
	if p.NoOp {
		fmt.Fprintf(w, "   (nothing to do)\n")
	} else if p.Rollback != "" {
		fmt.Fprintf(w, "   rollback: %s\n", strings.ReplaceAll(p.Rollback, "\n", "\n             "))
	}
}

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:               "run RUNBOOK",
		Short:             "Run a runbook step by step (headless with --headless --yes --confirm WORD)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: runbookNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			actsOn(cmd, drill.Invocation{Inventory: f.inventory, RunDir: f.runDir, Runbook: args[0]})
			return beginRun(cmd, args[0], f)
		},
	}
	addRunFlags(c, &f, true)
	return c
}

// beginRun starts a run of runbook name on the cluster of --inventory in
// a new run directory: in the terminal UI, or headless.
func beginRun(cmd *cobra.Command, name string, f runFlags) error {
	if err := checkHeadless(f); err != nil {
		return err
	}
	rb, inv, err := bindRunbook(name, f.set, f.inventory, f.confirm)
	if err != nil {
		return err
	}
	if f.confirm != "" && f.confirm != rb.Confirm.Word {
		return usageErr(fmt.Errorf("--confirm %q does not match the %s name %q; nothing was done", f.confirm, rb.Confirm.Noun, rb.Confirm.Word))
	}
	if _, err := faultsFor(inv.Lab); err != nil {
		return err
	}
	meta := steps.NewMeta(rb, inv.Path, inv.Name, inv.Lab, version, time.Now())
	dir := f.runDir
	if dir == "" {
		sd := stateDir()
		if sd == "" {
			return usageErr(errors.New("neither HOME nor XDG_STATE_HOME is set, so kremedy has no private place for the run directory: pass --run-dir DIR (a directory of your own); nothing was done"))
		}
		dir = filepath.Join(sd, "runs", meta.ID)
	}
	tc, err := resolveTeam(cmd.Context(), inv, f, meta.DryRun)
	if err != nil {
		return err
	}
	meta.Policy = tc.record // journaled: a resume under a weaker one is refused
	if err := tc.checkShare(dir); err != nil {
		return err
	}
	if !f.headless {
		return runTUINew(cmd, rb, meta, dir, f.inventory, tc, f.breakLease)
	}
	cl, err := openCluster(cmd.Context(), f.inventory)
	if err != nil {
		return err
	}
	defer cl.Close()
	s, err := steps.Create(dir, rb, meta)
	if err != nil {
		return sessionErr(err)
	}
	defer s.Close()
	if f.breakLease {
		s.BreakLease()
	}
	return headless(cmd, s, cl, f, tc)
}

func newResumeCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "resume RUN_DIR",
		Short: "Continue an interrupted run from its journal (completed steps are re-checked, not re-done)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			actsOn(cmd, drill.Invocation{RunDir: args[0], OfRun: true})
			return resumeRun(cmd, args[0], f)
		},
	}
	addRunFlags(c, &f, false)
	c.Flags().Lookup("run-dir").Hidden = true
	return c
}

// resumeRun continues the run in dir from its journal, under the policy
// it started with (or a stronger one).
func resumeRun(cmd *cobra.Command, dir string, f runFlags) error {
	if err := checkHeadless(f); err != nil {
		return err
	}
	s, err := steps.Open(dir, rebind)
	if err != nil {
		return sessionErr(err)
	}
	defer s.Close()
	meta := s.Meta()
	if f.breakLease {
		s.BreakLease()
	}
	if s.Finished() {
		fmt.Fprintf(cmd.OutOrStdout(), "run %s already finished; see %s\n", meta.ID, s.ReportPath())
		return nil
	}
	if word := s.Runbook().Confirm; f.confirm != "" && f.confirm != word.Word {
		return usageErr(fmt.Errorf("--confirm %q does not match the run's %s name %q; nothing was done", f.confirm, word.Noun, word.Word))
	}
	inv, err := inventory.Load(meta.Inventory)
	if err != nil {
		return usageErr(fmt.Errorf("run %s: %w", meta.ID, err))
	}
	tc, err := resolveTeam(cmd.Context(), inv, f, meta.DryRun)
	if err != nil {
		return err
	}
	if err := resumePolicy(meta, tc); err != nil {
		return err
	}
	if !f.headless {
		return runTUI(cmd.Context(), cmd.OutOrStdout(), s, dialer(meta.Runbook, meta.Inventory), false, tc)
	}
	if _, err := faultsFor(meta.Lab); err != nil {
		return err
	}
	cl, err := connectRun(cmd.Context(), meta.Runbook, meta.Inventory)
	if err != nil {
		return err
	}
	defer cl.Close()
	fmt.Fprintf(cmd.ErrOrStderr(), "resuming run %s from %s (%d journal records)\n", meta.ID, s.Dir(), s.Progress().Records)
	return headless(cmd, s, cl, f, tc)
}

// sessionErr maps a run directory that cannot be created or opened to an
// exit code: a usage error when the directory is not a run, holds one, or
// is locked by another kremedy; a failure otherwise.
func sessionErr(err error) error {
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return err
	case errors.Is(err, steps.ErrNothingDone):
		return failedErr(err)
	default:
		return usageErr(err)
	}
}

func checkHeadless(f runFlags) error {
	switch {
	case f.output != "text" && f.output != "jsonl":
		return usageErr(fmt.Errorf("--output %q: use text or jsonl", f.output))
	case f.output == "jsonl" && !f.headless:
		return usageErr(errors.New("--output jsonl is for --headless runs"))
	}
	if !f.headless {
		if f.yes || f.confirm != "" {
			return usageErr(errors.New("--yes and --confirm are for --headless; in the terminal UI you confirm each step yourself"))
		}
		return nil
	}
	if !f.yes {
		return usageErr(errors.New("--headless needs --yes: without a terminal nobody can answer a confirmation"))
	}
	return nil
}

func stateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "kremedy")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "kremedy")
	}
	// Never a shared /tmp: another user could prepare the directory.
	return ""
}

// exitFor maps how a run ended (steps.Session.End) to an exit code.
func exitFor(err error) error {
	var end *steps.EndError
	if err == nil || !errors.As(err, &end) {
		return err
	}
	var ee *exitError
	switch {
	case end.Ending == steps.Interrupted:
		return &exitError{exitInterrupted, err}
	case errors.As(end.Err, &ee):
		return &exitError{ee.code, err}
	default:
		return &exitError{exitFailed, err}
	}
}
