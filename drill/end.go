package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
)

// End stops the customers, runs the victory check and writes the debrief
// (once; a second call returns the debrief written by the first).
func (s *Session) End(ctx context.Context) (Debrief, error) {
	return s.end(ctx, func(st *State) (*TrafficState, error) { return stopTraffic(s.Dir, st) })
}

// end ends the drill: the victory check while the customers still run,
// then stop (which stops them and returns their final counts), the score,
// the debrief's files, this machine's history and the state.
func (s *Session) end(ctx context.Context, stop func(*State) (*TrafficState, error)) (Debrief, error) {
	dir := s.Dir
	var d Debrief
	st, err := Load(dir)
	if err != nil {
		return d, usage(err)
	}
	if st.Ended != nil {
		b, err := os.ReadFile(filepath.Join(dir, DebriefJSON))
		if err == nil {
			err = json.Unmarshal(b, &d)
		}
		return d, err
	}
	remains := s.victoryCheck(ctx, st)
	if len(remains) == 0 && st.Resolved == nil {
		now := time.Now()
		st.Resolved = &now
	}
	tr, err := stop(st)
	if err != nil {
		remains = append(remains, "the traffic's final counts: "+err.Error())
	}
	cmds, err := Commands(dir)
	if err != nil {
		return d, err
	}
	earlier, _ := History(lab.CacheDir())
	d = Score(Inputs{State: st, Commands: cmds, Traffic: tr, Runs: scoreRuns(cmds), Remains: remains, Earlier: earlier, Now: time.Now()})
	if err := d.write(dir); err != nil {
		return d, err
	}
	st.Ended = &d.Ended
	return d, st.Save(dir)
}

// write keeps the debrief beside the lab's inventory (Markdown and JSON)
// and adds it to this machine's drills.
func (d Debrief) write(dir string) error {
	if err := atomicfile.WriteFile(filepath.Join(dir, DebriefFile), []byte(d.Markdown())); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, DebriefJSON), d); err != nil {
		return err
	}
	past := Past{Ended: d.Ended, Scenario: d.Scenario, Resolved: d.Resolved, Hints: d.Hints}
	if d.TimeToResolvedS != nil {
		past.TimeToResolved = *d.TimeToResolvedS
	}
	_ = AddHistory(lab.CacheDir(), past)
	return nil
}

// victoryCheck lists what is still broken: customers detached or not
// flowing, diagnose's findings. None: resolved.
func (s *Session) victoryCheck(ctx context.Context, st *State) []string {
	remains := trafficRemains(s.Dir, st)
	if r := s.diagnoseRemains(ctx); r != "" {
		remains = append(remains, r)
	}
	return remains
}

// trafficRemains is what the customers still suffer: their traffic
// unreadable, a topic detached or not flowing.
func trafficRemains(dir string, st *State) []string {
	tr, err := ReadTraffic(dir)
	if err != nil {
		return []string{"the customers' traffic cannot be read: " + err.Error()}
	}
	var remains []string
	for _, name := range []string{st.Topic, st.Bystander} {
		c := tr.Topics[name]
		switch {
		case tr.Final:
			remains = append(remains, "the customers were stopped before the victory check")
		case slices.Contains(tr.Paused, name):
			remains = append(remains, fmt.Sprintf("the customers of %s are still detached (the runbook's reattach step, or `kremedy drill clients resume --dir %s --topic %s`)", name, dir, name))
		case !c.Flowing(tr.At, 10*time.Second):
			remains = append(remains, fmt.Sprintf("%s: records are not acknowledged and read within 10 s (last acknowledged %s, last read %s)", name, stamp(c.LastAck), stamp(c.LastRead)))
		}
	}
	return remains
}

// diagnoseRemains diagnoses the drill's cluster as `kremedy diagnose
// --inventory` does (the whole cluster, its disks, the lease), through
// s.Connect: "" when the diagnosis is healthy, else what does not pass.
func (s *Session) diagnoseRemains(ctx context.Context) string {
	const failed = "kremedy diagnose does not pass: "
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, closing, err := s.Connect(ctx, filepath.Join(s.Dir, "inventory.yaml"))
	if err != nil {
		return failed + err.Error()
	}
	defer closing()
	d, err := diagnose.Run(ctx, c, diagnose.Options{Disk: true, Lease: true})
	if err != nil {
		return failed + fmt.Sprintf("diagnosis failed: %v; nothing was changed", err)
	}
	if d.Healthy {
		return ""
	}
	return failed + unhealthy(d)
}

// maxCauses bounds the causes a victory check that does not pass names
// (as the last lines of diagnose's text did).
const maxCauses = 6

// unhealthy says what an unhealthy diagnosis found: each cause, severity
// first, then how many findings in all.
func unhealthy(d *diagnose.Diagnosis) string {
	var out []string
	causes := d.Causes()
	for _, c := range causes[:min(maxCauses, len(causes))] {
		out = append(out, fmt.Sprintf("[%s] %s", strings.ToUpper(string(c.Severity)), c.Summary))
	}
	if len(causes) > maxCauses {
		out = append(out, fmt.Sprintf("and %d more causes", len(causes)-maxCauses))
	}
	return strings.Join(append(out, fmt.Sprintf("%d findings", len(d.Findings))), " / ")
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("15:04:05")
}

// stopTraffic asks the traffic process to stop and waits for its final
// counts (it flushes what is in flight, then drains for drain).
func stopTraffic(dir string, st *State) (*TrafficState, error) {
	if tr, err := ReadTraffic(dir); err == nil && tr.Final {
		return tr, nil
	}
	if p, err := os.FindProcess(st.TrafficPID); err == nil {
		_ = p.Signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if tr, err := ReadTraffic(dir); err == nil && tr.Final {
			return tr, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	tr, err := ReadTraffic(dir)
	if err != nil {
		return nil, err
	}
	return tr, fmt.Errorf("the traffic process (pid %d) gave no final counts within 90 s: the counts are from %s and lost records are not known", st.TrafficPID, tr.At.UTC().Format(time.RFC3339))
}
