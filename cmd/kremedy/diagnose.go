package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/drill"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// diagnoseFlags are diagnose's flags.
type diagnoseFlags struct {
	inv, topic, accept, output         string
	asJSON, noDisk, details, migration bool
}

func newDiagnoseCmd() *cobra.Command {
	var f diagnoseFlags
	c := &cobra.Command{
		Use:   "diagnose",
		Short: "Read-only: find stuck deletions, ghost topics, stale broker caches, foreign or orphaned segments (exit 0 healthy, 1 findings, 2 error)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			actsOn(cmd, drill.Invocation{Inventory: f.inv})
			return runDiagnose(cmd, &f)
		},
	}
	c.Flags().StringVar(&f.inv, "inventory", "", "inventory file describing the cluster (required)")
	c.Flags().StringVar(&f.topic, "topic", "", "diagnose one topic (deeper checks: leaders asked to serve, old records)")
	_ = c.RegisterFlagCompletionFunc("topic", topicFlag)
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the diagnosis as JSON (stable: fields are only added)")
	c.Flags().BoolVar(&f.noDisk, "no-disk", false, "do not list log dirs over SSH")
	c.Flags().StringVar(&f.output, "output", "text", "text, json (as --json) or jsonl (one JSON object per line: each finding, type finding, then the diagnosis, type diagnosis; for automation)")
	c.Flags().BoolVar(&f.migration, "migration", false, "also check ZooKeeper → KRaft migration readiness (Kafka 3.9, KIP-866): every condition that stalls or corrupts it, and a verdict; exit 0 ready, 1 not ready")
	c.Flags().StringVar(&f.accept, "accept-unavailable", "", "with --migration: topics (comma-separated, or *) whose partitions no restart can keep available that the migration's rolls are to accept (zk-to-kraft's accept_unavailable): advice instead of a blocker")
	c.Flags().BoolVar(&f.details, "details", false, "print every evidence line and every finding a cause explains (the text output is bounded otherwise)")
	_ = c.MarkFlagRequired("inventory")
	return c
}

// runDiagnose diagnoses the cluster of --inventory and prints the
// diagnosis as --output says; exit 1 for findings (or, with --migration,
// for a cluster not ready).
func runDiagnose(cmd *cobra.Command, f *diagnoseFlags) error {
	o, err := f.options()
	if err != nil {
		return err
	}
	cl, err := openCluster(cmd.Context(), f.inv)
	if err != nil {
		return err
	}
	defer cl.Close()
	d, err := diagnose.Run(cmd.Context(), cl.Ports, o)
	if err != nil {
		return usageErr(fmt.Errorf("diagnosis failed: %w; nothing was changed", err))
	}
	pasteInventory(d, cl.Inv.Path)
	if err := writeDiagnosis(cmd.OutOrStdout(), d, f); err != nil {
		return err
	}
	return diagnosisErr(d)
}

// options checks the flags against each other and makes them the
// diagnosis's options (--output json sets --json).
func (f *diagnoseFlags) options() (diagnose.Options, error) {
	switch f.output {
	case "text", "jsonl":
	case "json":
		f.asJSON = true
	default:
		return diagnose.Options{}, usageErr(fmt.Errorf("--output %q: use text, json or jsonl", f.output))
	}
	if f.topic != "" {
		if err := kafkazk.ValidateTopic(f.topic); err != nil {
			return diagnose.Options{}, usageErr(err)
		}
	}
	accepted, err := kafkazk.ParseTopics(f.accept)
	if err != nil {
		return diagnose.Options{}, usageErr(fmt.Errorf("--accept-unavailable: %w", err))
	}
	if f.accept != "" && !f.migration {
		return diagnose.Options{}, usageErr(errors.New("--accept-unavailable weighs the migration's rolls: it goes with --migration"))
	}
	if f.migration && (f.topic != "" || f.noDisk) {
		return diagnose.Options{}, usageErr(errors.New("--migration reads the whole cluster and every disk: it takes neither --topic nor --no-disk"))
	}
	return diagnose.Options{Topic: f.topic, Disk: !f.noDisk, Migration: f.migration, Accept: accepted, Lease: true}, nil
}

// pasteInventory makes the fixes' commands name the inventory at path,
// ready to paste.
func pasteInventory(d *diagnose.Diagnosis, path string) {
	withInv := func(fix string) string {
		for _, end := range []string{" ", "`"} {
			fix = strings.ReplaceAll(fix, "--inventory "+diagnose.InventoryMark+end, "--inventory "+shell.Quote(path)+end)
		}
		return fix
	}
	for i := range d.Findings {
		d.Findings[i].Fix = withInv(d.Findings[i].Fix)
	}
	for i := range d.Shared {
		d.Shared[i].Fix = withInv(d.Shared[i].Fix)
	}
}

// writeDiagnosis prints d as --output (or --json) says: text, indented
// JSON, or JSON lines (each finding, then the diagnosis without them).
func writeDiagnosis(w io.Writer, d *diagnose.Diagnosis, f *diagnoseFlags) error {
	switch {
	case f.output == "jsonl":
		enc := json.NewEncoder(w)
		for _, f := range d.Findings {
			if err := enc.Encode(struct {
				Type string `json:"type"`
				diagnose.Finding
			}{"finding", f}); err != nil {
				return err
			}
		}
		head := *d
		head.Findings = nil
		return enc.Encode(struct {
			Type string `json:"type"`
			*diagnose.Diagnosis
		}{"diagnosis", &head})
	case f.asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	printDiagnosis(w, d, f.details)
	if d.Migration != nil {
		printReadiness(w, d)
	}
	return nil
}

// diagnosisErr is diagnose's exit: 1 for a cluster not ready for the
// migration (with --migration) or with findings, else 0.
func diagnosisErr(d *diagnose.Diagnosis) error {
	if m := d.Migration; m != nil {
		if !m.Ready {
			return &exitError{exitFailed, fmt.Errorf("not ready for the ZooKeeper → KRaft migration: %d blockers", len(m.Blockers))}
		}
		return nil
	}
	if !d.Healthy {
		return &exitError{exitFailed, fmt.Errorf("%d findings", len(d.Findings))}
	}
	return nil
}

// maxCauses and maxEvidence bound the text output (--details lifts them):
// the summary fits one screen, each cause shows a sample of its evidence.
const (
	maxCauses   = 10
	maxEvidence = 6
	// maxSharedTopics bounds the shared cause's command in the text: past
	// it the command is in --details and --json.
	maxSharedTopics = 50
)

// printDiagnosis leads with the causes (one line each: what, how bad, what
// to do, which runbook), then their details; the findings a cause explains
// are folded under it as counts, printed in full with details.
func printDiagnosis(w io.Writer, d *diagnose.Diagnosis, details bool) {
	printHeader(w, d)
	if d.Healthy {
		agree := "ZooKeeper, every broker's metadata and every disk agree"
		if d.Mode == "kraft" {
			agree = "the quorum has its margin, every broker serves, their metadata and every disk agree"
		}
		if len(d.Findings) == 0 {
			fmt.Fprintln(w, "no findings: "+agree)
			return
		}
		fmt.Fprintf(w, "no problem found (%s); %s:\n", agree, text.Count(len(d.Findings), "note"))
		for _, f := range d.Findings {
			fmt.Fprintf(w, "  [%s] %s\n     → %s\n", strings.ToUpper(string(f.Severity)), f.Summary, firstSentence(f.Fix))
		}
		return
	}
	causes := d.Causes()
	critical := 0
	for _, c := range causes {
		if c.Severity == diagnose.Critical {
			critical++
		}
	}
	fmt.Fprintf(w, "\nSUMMARY: %s (%d critical), explaining %s\n", text.Count(len(causes), "cause"), critical, text.Count(len(d.Findings)-len(causes), "more finding"))
	for i, c := range causes {
		if i == maxCauses && !details {
			fmt.Fprintf(w, "  … and %d more causes like these: %s (--details or --json lists every one)\n", len(causes)-maxCauses, kindCounts(causes[maxCauses:]))
			break
		}
		fmt.Fprintf(w, "%3d. [%s] %s\n", i+1, strings.ToUpper(string(c.Severity)), c.Summary)
		todo := firstSentence(c.Fix)
		if c.Runbook != "" {
			todo = "runbook " + c.Runbook + ": " + todo
		}
		fmt.Fprintf(w, "     → %s\n", todo)
		if ex := d.Explained(c.ID); len(ex) > 0 {
			fmt.Fprintf(w, "     explains %s\n", kindCounts(ex))
		}
	}
	for _, s := range d.Shared {
		fix := s.Fix
		if len(s.Topics) > maxSharedTopics && !details {
			fix = fmt.Sprintf("repair all %d in one run of %s --set topics=… (the whole command: --details or --json)", len(s.Topics), s.Runbook)
		}
		fmt.Fprintf(w, "\nSHARED CAUSE: %s: %s\n     → runbook %s: %s\n", s.Summary, sample(s.Topics, maxEvidence), s.Runbook, fix)
	}
	fmt.Fprintf(w, "\nDETAILS")
	if !details {
		fmt.Fprintf(w, " (evidence sampled; --details prints every line and every folded finding)")
	}
	fmt.Fprintln(w)
	for i, c := range causes {
		if i == maxCauses && !details {
			fmt.Fprintf(w, "\n … %d more causes not shown (--details prints them, --json holds everything)\n", len(causes)-maxCauses)
			break
		}
		printFinding(w, fmt.Sprint(i+1), c, details)
		if ex := d.Explained(c.ID); len(ex) > 0 {
			if !details {
				byKind := map[string][]string{}
				var kinds []string
				for _, f := range ex {
					if byKind[f.Kind] == nil {
						kinds = append(kinds, f.Kind)
					}
					byKind[f.Kind] = append(byKind[f.Kind], cmp.Or(f.Topic, strings.TrimPrefix(f.ID, f.Kind+"/")))
				}
				for _, k := range kinds {
					fmt.Fprintf(w, "   explains %s on %s: %s\n", k, text.Count(len(byKind[k]), "topic"), sample(byKind[k], maxEvidence))
				}
				continue
			}
			for j, f := range ex {
				printFinding(w, fmt.Sprintf("%d.%d", i+1, j+1), f, true)
			}
		}
	}
}

// printHeader is the diagnosis's first lines: what was read, the
// releases and how each version-dependent check was made.
func printHeader(w io.Writer, d *diagnose.Diagnosis) {
	scope := "the whole cluster"
	if d.Topic != "" {
		scope = fmt.Sprintf("topic %q", d.Topic)
	}
	if d.Mode == "kraft" {
		fmt.Fprintf(w, "diagnosis of %s on %s (KRaft): brokers %v, %s, %d topics, disks checked: %v (%s)\n",
			scope, d.Cluster, d.Brokers, quorumLine(d.Quorum), d.Topics, d.Disk, d.Took)
		if f := d.Features; f != nil && len(f.Finalized) > 0 {
			fmt.Fprintf(w, "features: %s\n", featureLine(f.Finalized))
		}
	} else {
		fmt.Fprintf(w, "diagnosis of %s on %s: brokers %v, controller %d, %d topics, disks checked: %v (%s)\n",
			scope, d.Cluster, d.Brokers, d.Controller, d.Topics, d.Disk, d.Took)
	}
	if len(d.Releases) > 0 {
		fmt.Fprintf(w, "releases: %s\n", d.Releases)
		for _, m := range d.Methods {
			fmt.Fprintf(w, "  method: %s\n", m)
		}
	}
}

// quorumLine says who leads the metadata quorum and who votes.
func quorumLine(q *ports.Quorum) string {
	if q == nil {
		return "metadata quorum: no answer"
	}
	ids := make([]int32, len(q.Voters))
	for i, v := range q.Voters {
		ids[i] = v.ID
	}
	return fmt.Sprintf("quorum leader %d (epoch %d, high watermark %d, voters %v)", q.Leader, q.Epoch, q.HighWatermark, ids)
}

func featureLine(f map[string]int16) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(f)) {
		out = append(out, fmt.Sprintf("%s %d", k, f[k]))
	}
	return strings.Join(out, ", ")
}

func printFinding(w io.Writer, n string, f diagnose.Finding, details bool) {
	fmt.Fprintf(w, "\n%s. [%s] %s", n, strings.ToUpper(string(f.Severity)), f.Kind)
	if f.Topic != "" {
		fmt.Fprintf(w, "  topic %s", f.Topic)
	}
	if len(f.Brokers) > 0 {
		fmt.Fprintf(w, "  brokers %v", f.Brokers)
	}
	if len(f.Partitions) > 0 {
		fmt.Fprintf(w, "  partitions %s", text.Summarize(strings.Fields(strings.Trim(fmt.Sprint(f.Partitions), "[]"))))
	}
	if f.Cause != "" {
		fmt.Fprintf(w, "  (an effect of %s)", f.Cause)
	}
	fmt.Fprintf(w, "\n   %s\n", f.Summary)
	ev := f.Evidence
	if !details && len(ev) > maxEvidence {
		ev = ev[:maxEvidence]
	}
	for _, e := range ev {
		fmt.Fprintf(w, "   · %s\n", e)
	}
	if len(ev) < len(f.Evidence) {
		fmt.Fprintf(w, "   · … %d more lines (--details)\n", len(f.Evidence)-len(ev))
	}
	fmt.Fprintf(w, "   fix: %s\n", f.Fix)
	if f.DoNot != "" {
		fmt.Fprintf(w, "   do NOT: %s\n", f.DoNot)
	}
}

// kindCounts is "under-replicated ×300, unregistered-replica ×300".
func kindCounts(fs []diagnose.Finding) string {
	n := map[string]int{}
	var order []string
	for _, f := range fs {
		if n[f.Kind] == 0 {
			order = append(order, f.Kind)
		}
		n[f.Kind]++
	}
	var out []string
	for _, k := range order {
		out = append(out, fmt.Sprintf("%s ×%d", k, n[k]))
	}
	return strings.Join(out, ", ")
}

func sample(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:n], ", ") + fmt.Sprintf(" and %d more", len(s)-n)
}

// firstSentence is a fix's first sentence, for the one-line summary.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, ".")
}

// printReadiness ends a --migration diagnosis with the verdict: each
// blocker with why the migration cares, then what to read first.
func printReadiness(w io.Writer, d *diagnose.Diagnosis) {
	m := d.Migration
	fmt.Fprintln(w)
	if m.InProgress != "" {
		fmt.Fprintf(w, "ZooKeeper → KRaft migration: under way — %s\n", m.InProgress)
	}
	if m.Ready {
		fmt.Fprintln(w, "ZooKeeper → KRaft migration: READY — no condition that stalls or corrupts the migration was found (Kafka 3.9 with IBP 3.9, every assigned broker registered, no pending deletion, every topic with a topic_id and every partition with a state, every log with partition.metadata, no reassignment in flight, brokers agreeing with ZooKeeper)")
	} else {
		fmt.Fprintf(w, "ZooKeeper → KRaft migration: NOT READY — %d blockers; fix them (in this order) and check again:\n", len(m.Blockers))
		for _, id := range m.Blockers {
			fix := ""
			for _, f := range d.Findings {
				if f.ID == id {
					fix = f.Fix
				}
			}
			fmt.Fprintf(w, "  - %s: %s\n    fix: %s\n", id, m.Why[id], fix)
		}
	}
	for _, id := range m.Advice {
		fmt.Fprintf(w, "  advice: %s (see DETAILS)\n", id)
	}
}
