package steps

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/steps/journal"
)

// writeReport renders report.md from the journal: the timeline with
// timings, what changed, where the backups are, how to undo, and what to do
// next. It is rewritten whenever a run stops, so it is never stale.
func (s *Session) writeReport(out Outcome) error {
	recs := s.run.rec.records()
	var b strings.Builder
	b.WriteString(s.reportHead(out))
	b.WriteString(reportFound(recs))
	b.WriteString(reportTimes(recs))
	if v, err := ViewRecords(recs); err == nil {
		b.WriteString(reportApprovals(v))
	} else {
		fmt.Fprintf(&b, "\n## Approvals\n\nthe journal cannot be read as a run: %v\n", err)
	}
	timeline, changed, rollbacks := reportTimeline(recs)
	b.WriteString("\n## Timeline\n\n| time (UTC) | step | event |\n|---|---|---|\n")
	b.WriteString(timeline)
	b.WriteString(s.reportChanges(changed, rollbacks))
	b.WriteString(s.reportNext(out))
	return atomicfile.WriteFile(s.ReportPath(), []byte(b.String()))
}

// reportHead is the report's title and its list of what the run is: the
// runbook and cluster, inventory, run directory, kremedy's version,
// parameters, approval policy, and the outcome with how to go on.
func (s *Session) reportHead(out Outcome) string {
	rb, m, dir := s.run.rb, s.run.meta, s.run.dir
	var b strings.Builder
	mode := "LIVE cluster"
	if m.Lab {
		mode = "LAB"
	}
	fmt.Fprintf(&b, "# kremedy run %s\n\n", m.ID)
	fmt.Fprintf(&b, "- runbook: `%s` on %s (%s)\n", m.Runbook, rb.Confirm.Subject(m.Cluster), mode)
	fmt.Fprintf(&b, "- inventory: `%s`\n- run directory: `%s`\n- kremedy: %s\n", m.Inventory, dir, m.Version)
	if len(m.Params) > 0 {
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(m.Params)) {
			ps = append(ps, fmt.Sprintf("`%s=%s`", k, m.Params[k]))
		}
		fmt.Fprintf(&b, "- parameters: %s\n", strings.Join(ps, " "))
	}
	if m.Policy != nil {
		fmt.Fprintf(&b, "- approval policy: %s\n", m.Policy)
	}
	switch {
	case out.Err == nil:
		fmt.Fprintf(&b, "- outcome: **finished**\n")
	case errors.Is(out.Err, ErrAborted) && len(out.NotDone) > 0:
		fmt.Fprintf(&b, "- outcome: **stopped before `%s`** by the operator; nothing of it was done — go on with `%s`\n", out.NotDone[0], s.ResumeCommand(false))
	case out.Interrupted != "":
		fmt.Fprintf(&b, "- outcome: **interrupted during `%s`** — resume with `%s`\n", out.Interrupted, s.ResumeCommand(false))
	default:
		fmt.Fprintf(&b, "- outcome: **stopped at `%s`**: %v — after fixing the cause, `%s`\n", out.Failed, out.Err, s.ResumeCommand(false))
	}
	return b.String()
}

// reportFound is what the steps found: the first step's facts about the
// cluster, then each section the steps saved under ReportKey.
func reportFound(recs []journal.Record) string {
	var b strings.Builder
	if step, facts := firstFacts(recs); len(facts) > 0 {
		fmt.Fprintf(&b, "\n## The cluster as `%s` found it\n\n", step)
		for _, f := range facts {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(f, "\n", " "))
		}
	}
	for _, sec := range reportSections(recs) {
		fmt.Fprintf(&b, "\n## %s\n\n", sec.title)
		for _, l := range sec.lines {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(l, "\n", " "))
		}
	}
	return b.String()
}

// reportChanges is the report's What changed (changed), Backups (the
// runbook's artifacts that exist in the run directory) and How to undo
// (rollbacks) sections.
func (s *Session) reportChanges(changed, rollbacks []string) string {
	var b strings.Builder
	b.WriteString("\n## What changed\n\n")
	if len(changed) == 0 {
		b.WriteString("Nothing: no action was performed.\n")
	} else {
		b.WriteString(strings.Join(changed, "\n") + "\n")
	}
	b.WriteString("\n## Backups\n\n")
	listed := false
	for _, a := range s.run.rb.Artifacts {
		p := filepath.Join(s.run.dir, a.Path)
		if _, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "- %s: `%s`\n", a.What, p)
			listed = true
		}
	}
	if !listed {
		b.WriteString("None were needed.\n")
	}
	b.WriteString("\n## How to undo\n\n")
	if len(rollbacks) == 0 {
		b.WriteString("Nothing to undo.\n")
	} else {
		b.WriteString(strings.Join(rollbacks, "\n"))
	}
	return b.String()
}

// reportNext is the report's Next section: the runbook's next steps after
// a finished run, else the command that resumes it.
func (s *Session) reportNext(out Outcome) string {
	var b strings.Builder
	b.WriteString("\n## Next\n\n")
	if out.Err == nil {
		for _, n := range s.Next() {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	} else {
		fmt.Fprintf(&b, "- `%s` continues from the journal: completed steps are re-checked, not re-done.\n", s.ResumeCommand(false))
	}
	return b.String()
}

// ReportKey prefixes a run fact (Env.Save, a []string) that the report
// prints as a section titled by the rest of the key (the latest value).
const ReportKey = "report/"

type reportSection struct {
	title string
	lines []string
}

func reportSections(recs []journal.Record) []reportSection {
	var out []reportSection
	seen := map[string]int{}
	for _, r := range recs {
		if r.Type != Fact {
			continue
		}
		f, err := journal.Decode[factRecord](r)
		if err != nil || !strings.HasPrefix(f.Key, ReportKey) {
			continue
		}
		var lines []string
		if json.Unmarshal(f.Value, &lines) != nil {
			continue
		}
		title := strings.TrimPrefix(f.Key, ReportKey)
		if i, ok := seen[title]; ok {
			out[i].lines = lines
			continue
		}
		seen[title] = len(out)
		out = append(out, reportSection{title, lines})
	}
	return out
}

// firstFacts are the facts of the run's first plan (its preflight's reading
// of the cluster, releases and methods included).
func firstFacts(recs []journal.Record) (string, []string) {
	for _, r := range recs {
		if r.Type != "plan" {
			continue
		}
		var p Plan
		if json.Unmarshal(r.Data, &p) != nil {
			return "", nil
		}
		return r.Step, p.Facts
	}
	return "", nil
}

// reportTimeline is the report's timeline table rows, the changes made and
// the rollback notes of the steps that planned changes.
func reportTimeline(recs []journal.Record) (timeline string, changed, rollbacks []string) {
	var b strings.Builder
	starts := map[string]time.Time{}
	seenRollback := map[string]bool{}
	for _, rec := range recs {
		at := rec.Time.UTC().Format("15:04:05.000")
		var ev string
		switch rec.Type {
		case journal.RunStart:
			ev = "run started"
		case journal.StepStart:
			starts[rec.Step] = rec.Time
			ev = "step started"
		case journal.Plan:
			p, _ := journal.Decode[Plan](rec)
			ev = "plan: " + p.Summary
			if p.NoOp {
				ev += " (nothing to do)"
			}
			if p.Rollback != "" && !p.NoOp && !seenRollback[rec.Step] {
				seenRollback[rec.Step] = true
				rollbacks = append(rollbacks, fmt.Sprintf("### %s\n\n%s\n", rec.Step, p.Rollback))
			}
		case journal.Approval:
			a, _ := journal.Decode[approval](rec)
			ev = fmt.Sprintf("confirmation: %v by %v", a.Decision, a.By)
			if len(a.Signoffs) > 0 {
				ev += "; signed off by " + signers(a.Signoffs)
			}
		case journal.ActionEnd:
			a, _ := journal.Decode[actionEnd](rec)
			if a.OK {
				ev = fmt.Sprintf("done (%d ms): %s", a.TookMS, a.Action)
				if a.Action.Op.Changes() {
					changed = append(changed, fmt.Sprintf("- `%s` %s", rec.Step, a.Action))
				}
			} else {
				ev = fmt.Sprintf("FAILED (%d ms): %s: %s", a.TookMS, a.Action, a.Error)
			}
		case journal.StepDone:
			ev = "step done"
			if t, ok := starts[rec.Step]; ok {
				ev += fmt.Sprintf(" in %s", rec.Time.Sub(t).Round(time.Millisecond))
			}
		case journal.StepFailed, journal.StepSkipped, journal.Interrupted, journal.RunEnd:
			var d map[string]any
			_ = json.Unmarshal(rec.Data, &d)
			ev = fmt.Sprintf("%s %v", rec.Type, compact(d))
		default:
			continue
		}
		step := rec.Step
		if step == "" {
			step = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", at, step, strings.ReplaceAll(ev, "|", "\\|"))
	}
	return b.String(), changed, rollbacks
}

func compact(d map[string]any) string {
	if len(d) == 0 {
		return ""
	}
	var parts []string
	for k, v := range d {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(parts, " ")
}

// reportApprovals is the report's account of who approved what, when:
// every decision journaled (those given ahead of a window too) with the
// digest of the plan it was for and the signoffs a policy asked for; then
// whether every approved plan, recomputed from the journal, has the digest
// it was approved with.
func reportApprovals(v *RunView) string {
	var all []DecisionView
	for _, s := range v.Steps {
		all = append(all, s.Decisions...)
	}
	if len(all) == 0 {
		return ""
	}
	slices.SortFunc(all, func(a, b DecisionView) int { return cmp.Compare(a.Seq, b.Seq) })
	var b strings.Builder
	b.WriteString("\n## Approvals\n\n| time (UTC) | step | decision | by | plan digest | signed off by |\n|---|---|---|---|---|---|\n")
	approved := 0
	for _, a := range all {
		ahead := ""
		if a.Ahead {
			ahead = " (ahead)"
		}
		if a.Decision == Approve.String() && a.Digest != "" {
			approved++
		}
		so := "-"
		if len(a.Signoffs) > 0 {
			var parts []string
			for _, s := range a.Signoffs {
				parts = append(parts, s.String())
			}
			so = strings.Join(parts, "; ")
		}
		digest := "-"
		if a.Digest != "" {
			digest = fmt.Sprintf("`%.12s`", a.Digest)
		}
		row := []string{a.Time.UTC().Format("15:04:05"), a.Step, a.Decision + ahead, a.By, digest, so}
		for i := range row {
			row[i] = strings.ReplaceAll(row[i], "|", "\\|")
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	if v.Meta.PlanDigest != PlanDigestForm {
		b.WriteString("\nthis run was started by an earlier kremedy, whose plan digests cannot be recomputed from the journal: its approvals are not checked.\n")
	} else if bad := v.Tampered(); len(bad) > 0 {
		b.WriteString("\n**The journal does not hold every approved plan as it was approved:**\n\n")
		for _, l := range bad {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	} else if approved > 0 {
		fmt.Fprintf(&b, "\nevery approved plan digests, recomputed from this journal, as approved (%d approvals checked).\n", approved)
	}
	return b.String()
}

// signers names who signed off, with their keys.
func signers(ss []Signoff) string {
	var parts []string
	for _, s := range ss {
		w := s.By
		if s.Operator {
			w += " (operator)"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", w, s.Key))
	}
	return strings.Join(parts, ", ")
}
