package drill

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
)

// scoreRuns scores the trainee's runs, each read once through the run
// read model (steps.ReadRun): its outage window, each step's end, and the
// step failures no command's exit code shows.
func scoreRuns(cmds []Command) []RunScore {
	var out []RunScore
	seen := map[string]bool{}
	for _, c := range cmds {
		if c.RunDir == "" || seen[c.RunDir] {
			continue
		}
		seen[c.RunDir] = true
		v, err := steps.ReadRun(c.RunDir)
		if err != nil {
			continue // a run refused before its journal was made
		}
		var same []Command
		for _, o := range cmds {
			if o.RunDir == c.RunDir {
				same = append(same, o)
			}
		}
		out = append(out, scoreRun(v, c.Runbook, same))
	}
	return out
}

// scoreRun scores one run of runbook (cmds: the drill's commands on its
// run directory).
func scoreRun(v *steps.RunView, runbook string, cmds []Command) RunScore {
	r := RunScore{RunDir: v.Dir, Runbook: runbook}
	if o, wait := v.Outage(); o != nil {
		r.OutageS, r.WaitS = o.Length().Seconds(), wait.Seconds()
	}
	r.Steps, r.Finished = stepScores(v, whyNotes(runbook))
	r.Failures = stepFailures(v, runbook, cmds)
	return r
}

// whyNotes are a built-in runbook's steps' why-notes, by step.
func whyNotes(runbook string) map[string]string {
	out := map[string]string{}
	if rb, err := runbooks.Get(runbook); err == nil {
		for _, s := range rb.Steps {
			out[s.ID] = s.Why
		}
	}
	return out
}

// stepScores is each step's last state in a run, with its why-note.
func stepScores(v *steps.RunView, why map[string]string) ([]StepScore, bool) {
	var out []StepScore
	for _, st := range v.Steps {
		sc := StepScore{ID: st.ID, State: "not done", Why: why[st.ID]}
		switch st.State {
		case "done", "skipped", "failed":
			sc.State, sc.At = st.State, st.At
		}
		out = append(out, sc)
	}
	return out, v.Ended
}

// stepFailures are the step failures of a run's journal that no command's
// exit code shows: a step that failed and was retried in the same TUI
// session (r) to done. The last failure of a command that exited non-zero
// is that command's refusal, counted with the commands (cmds: the drill's
// commands on this run directory).
func stepFailures(v *steps.RunView, runbook string, cmds []Command) []Refusal {
	var all []steps.Failure
	for _, st := range v.Steps {
		all = append(all, st.Failures...)
	}
	slices.SortFunc(all, func(a, b steps.Failure) int { return cmp.Compare(a.Seq, b.Seq) })
	var out []Refusal
	lastOf := map[int]int{} // command index -> index in out of its last failure
	for _, f := range all {
		at := f.Time
		for ci, c := range cmds {
			if !at.Before(c.At) && (c.Exit < 0 || !at.After(c.At.Add(time.Duration(c.TookS*float64(time.Second))+time.Second))) {
				lastOf[ci] = len(out)
			}
		}
		out = append(out, Refusal{At: at, Command: fmt.Sprintf("%s: step %s", runbook, f.Step), Why: f.Err})
	}
	drop := map[int]bool{}
	for ci, i := range lastOf {
		if cmds[ci].Exit != 0 {
			drop[i] = true
		}
	}
	var kept []Refusal
	for i, f := range out {
		if !drop[i] {
			kept = append(kept, f)
		}
	}
	return kept
}
