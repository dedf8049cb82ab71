package steps

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/journal"
)

// WriteReport renders report.md from the journal: the timeline with
// timings, what changed, where the backups are, how to undo, and what to do
// next. It is rewritten whenever a run stops, so it is never stale.
func WriteReport(r *Run, out Outcome) error {
	recs, err := journal.Read(r.Journal.Path())
	if err != nil {
		return err
	}
	var b strings.Builder
	m := r.Meta
	mode := "LIVE cluster"
	if m.Lab {
		mode = "LAB"
	}
	fmt.Fprintf(&b, "# kremedy run %s\n\n", m.ID)
	fmt.Fprintf(&b, "- runbook: `%s`, topic: `%s`, cluster: %s (%s)\n", m.Runbook, m.Topic, m.Cluster, mode)
	fmt.Fprintf(&b, "- inventory: `%s`\n- run directory: `%s`\n", m.Inventory, r.Dir)
	switch {
	case out.Err == nil:
		fmt.Fprintf(&b, "- outcome: **finished**\n")
	case out.Interrupted != "":
		fmt.Fprintf(&b, "- outcome: **interrupted during `%s`** — resume with `kremedy resume %s`\n", out.Interrupted, r.Dir)
	default:
		fmt.Fprintf(&b, "- outcome: **stopped at `%s`**: %v — after fixing the cause, `kremedy resume %s`\n", out.Failed, out.Err, r.Dir)
	}
	b.WriteString("\n## Timeline\n\n| time (UTC) | step | event |\n|---|---|---|\n")
	starts := map[string]time.Time{}
	var changed []string
	var rollbacks []string
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
			a, _ := journal.Decode[map[string]any](rec)
			ev = fmt.Sprintf("confirmation: %v by %v", a["decision"], a["by"])
		case journal.ActionEnd:
			a, _ := journal.Decode[struct {
				Action Action `json:"action"`
				OK     bool   `json:"ok"`
				Took   int64  `json:"took_ms"`
				Error  string `json:"error"`
			}](rec)
			if a.OK {
				ev = fmt.Sprintf("done (%d ms): %s", a.Took, a.Action)
				if a.Action.Kind != "wait" && a.Action.Kind != "check" {
					changed = append(changed, fmt.Sprintf("- `%s` %s", rec.Step, a.Action))
				}
			} else {
				ev = fmt.Sprintf("FAILED (%d ms): %s: %s", a.Took, a.Action, a.Error)
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
		fmt.Fprintf(&b, "| %s | %s | %s |\n", at, orDash(rec.Step), strings.ReplaceAll(ev, "|", "\\|"))
	}
	b.WriteString("\n## What changed\n\n")
	if len(changed) == 0 {
		b.WriteString("Nothing: no action was performed.\n")
	} else {
		b.WriteString(strings.Join(changed, "\n") + "\n")
	}
	b.WriteString("\n## Backups\n\n")
	for _, f := range []struct{ what, path string }{
		{"znode backup (data, ACLs, versions)", r.BackupPath()},
		{"quarantine manifest (moved segment directories)", r.ManifestPath()},
		{"consumer group offsets", r.OffsetsPath()},
	} {
		if _, err := os.Stat(f.path); err == nil {
			fmt.Fprintf(&b, "- %s: `%s`\n", f.what, f.path)
		}
	}
	b.WriteString("\n## How to undo\n\n")
	if len(rollbacks) == 0 {
		b.WriteString("Nothing to undo.\n")
	} else {
		b.WriteString(strings.Join(rollbacks, "\n"))
	}
	b.WriteString("\n## Next\n\n")
	if out.Err == nil {
		fmt.Fprintf(&b, "- Reattach producers and consumers of `%s`.\n- If consumer groups kept offsets from before the cleanup (see `%s`), delete them so consumers do not resume at stale positions.\n- Remove the quarantine directories once you no longer need them (paths in the manifest).\n", m.Topic, r.OffsetsPath())
	} else {
		fmt.Fprintf(&b, "- `kremedy resume %s` continues from the journal: completed steps are re-checked, not re-done.\n", r.Dir)
	}
	return WriteFileDurably(r.ReportPath(), []byte(b.String()))
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
