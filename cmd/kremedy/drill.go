package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/drill"
	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/tui"
)

func newDrillCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "A scored rehearsal: a lab broken by a hidden cause, customers writing and reading, a debrief at the end",
		Long: "A drill builds a lab, starts customer traffic (an acks=all idempotent producer and a consumer group per topic),\n" +
			"breaks the lab with a scenario it does not name, and pages you as an alert would. Repair it with kremedy and any\n" +
			"tool; every kremedy command run against the drill's inventory is recorded. `drill end` (or the victory check:\n" +
			"diagnose clean, traffic flowing on every topic) writes the debrief. Scenarios: " + strings.Join(drill.Names(), ", ") + ".",
	}
	cmd.AddCommand(newDrillStartCmd(), newDrillStatusCmd(), newDrillHintCmd(), newDrillEndCmd(), newDrillClientsCmd(), newDrillTrafficCmd())
	return group(cmd)
}

// drillTrafficRate is the customers' records per second per topic.
const drillTrafficRate = 20

// drillDrain is how long the customers read on, once the drill ends, for
// the acknowledged records not read yet: the ones still unread are lost.
const drillDrain = 10 * time.Second

func newDrillStartCmd() *cobra.Command {
	var dir, scenario, version, topic string
	var seed uint64
	var net int
	var secure bool
	c := &cobra.Command{
		Use:   "start",
		Short: "Build the lab in --dir, start the customers, break it with a hidden scenario, page",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if _, err := drill.Load(dir); err == nil {
				return usageErr(fmt.Errorf("%s already holds a drill; end it (`kremedy drill end --dir %s`) and take it down (`kremedy lab down --dir %s --purge`) first", dir, dir, dir))
			}
			if !cmd.Flags().Changed("seed") {
				seed = uint64(time.Now().UnixNano())
			}
			name, err := drill.Pick(scenario, seed, drill.Names())
			if err != nil {
				return usageErr(fmt.Errorf("--scenario: %w", err))
			}
			v, err := pickVersion(version, seed)
			if err != nil {
				return usageErr(err)
			}
			cfg := lab.DefaultConfig()
			cfg.KafkaVersion, cfg.Net, cfg.Secure = v, net, secure
			kind := ""
			if secure {
				kind = "secured "
			}
			fmt.Fprintf(out, "drill: building a %slab of Kafka %s in %s (seed %d)…\n", kind, v, dir, seed)
			l, err := lab.Up(cmd.Context(), dir, cfg, nil, io.Discard)
			if err != nil {
				return labErr(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, drill.Sub), 0o755); err != nil {
				return failedErr(err)
			}
			if err := drillBreak(cmd.Context(), l, name, topic); err != nil {
				return err
			}
			st := &drill.State{Scenario: name, Topic: topic, Bystander: topic + "-v2", KafkaVersion: v, Secure: secure, Seed: seed}
			if err := drillClients(l, st); err != nil {
				return failedErr(err)
			}
			pid, err := spawnTraffic(dir)
			if err != nil {
				return failedErr(err)
			}
			st.TrafficPID = pid
			fmt.Fprintf(out, "drill: customers are writing to %s and %s; waiting for their first complaints…\n", st.Topic, st.Bystander)
			time.Sleep(8 * time.Second)
			tr, err := drill.ReadTraffic(dir)
			if err != nil {
				return failedErr(fmt.Errorf("the customers' traffic did not start (see %s): %w", drill.Path(dir, drill.TrafficLog), err))
			}
			st.Started, st.Page = time.Now(), drillPage(l, st, tr)
			if err := st.Save(dir); err != nil {
				return failedErr(err)
			}
			fmt.Fprintln(out, st.Page)
			return nil
		},
	}
	addDirFlag(c, &dir)
	f := c.Flags()
	f.StringVar(&scenario, "scenario", "random", "the hidden cause: random, or one of "+strings.Join(drill.Names(), ", "))
	f.StringVar(&version, "kafka-version", lab.KafkaVersion, "Kafka release of the lab (installed with `lab install`), or random among the installed ZooKeeper-mode releases")
	f.Uint64Var(&seed, "seed", 0, "seed of the random choices (default: the clock)")
	f.StringVar(&topic, "topic", "orders", "the customers' topic")
	f.IntVar(&net, "net", 0, "second octet of the lab's loopback addresses, as `lab up --net`")
	f.BoolVar(&secure, "secure", false, "a secured lab, as `lab up --secure`: SASL_SSL listeners, ZooKeeper SASL ACLs, SSH as an operator through sudo")
	return c
}

// pickVersion resolves --kafka-version: random picks among the installed
// ZooKeeper-mode releases.
func pickVersion(v string, seed uint64) (string, error) {
	if v != "random" {
		return v, nil
	}
	var have []string
	for _, r := range lab.Releases {
		if _, err := lab.CheckKafkaHome(lab.DefaultKafkaHome(r.Version)); err == nil && r.Modes.Has(lab.ZooKeeperMode) {
			have = append(have, r.Version)
		}
	}
	if len(have) == 0 {
		return "", fmt.Errorf("--kafka-version random: no ZooKeeper-mode release is installed (`kremedy lab install --kafka-version %s`)", lab.KafkaVersion)
	}
	return drill.Pick("random", seed, have)
}

// drillBreak runs the scenario with its account kept hidden in break.log.
func drillBreak(ctx context.Context, l *lab.Lab, name, topic string) error {
	var log bytes.Buffer
	rep, err := lab.Scenarios[name].Run(ctx, l, topic, &log)
	if rep != nil {
		rep.Print(&log)
	}
	if werr := atomicfile.WriteFile(drill.Path(l.Dir, drill.BreakLog), log.Bytes()); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return failedErr(fmt.Errorf("the drill could not break the lab (%w); what it did is in %s", err, drill.Path(l.Dir, drill.BreakLog)))
	}
	return nil
}

// drillClients adds the customers of the drill's topic to the inventory,
// as an operator's inventory lists its clients: the runbook's detach step
// stops them over SSH, the reattach step starts them.
func drillClients(l *lab.Lab, st *drill.State) error {
	inv, err := inventory.Load(l.InventoryPath())
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := func(verb string) string {
		return fmt.Sprintf("%s drill clients %s --dir %s --topic %s", exe, verb, l.Dir, st.Topic)
	}
	inv.Clients = append(inv.Clients, inventory.Client{Name: "customers-of-" + st.Topic, Host: l.State.Config.BrokerHost(1), Stop: cmd("pause"), Start: cmd("resume")})
	b, err := inv.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(l.InventoryPath(), b)
}

// spawnTraffic starts `kremedy drill traffic` in its own session, so that
// it outlives this command and a Ctrl-C in the trainee's terminal.
func spawnTraffic(dir string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(drill.Path(dir, drill.TrafficLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	c := exec.Command(exe, "drill", "traffic", "--dir", dir)
	c.Stdout, c.Stderr = logf, logf
	c.Env = append(os.Environ(), drill.Internal()...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		return 0, err
	}
	pid := c.Process.Pid
	_ = c.Process.Release()
	return pid, nil
}

// drillPage is the alert: what the customers see, never the cause.
func drillPage(l *lab.Lab, st *drill.State, tr *drill.TrafficState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n🔔 PAGE %s — customers of topic %q report trouble\n", time.Now().UTC().Format("15:04:05 UTC"), st.Topic)
	for _, name := range []string{st.Topic, st.Bystander} {
		c := tr.Topics[name]
		fmt.Fprintf(&b, "  %s: %d writes sent, %d failed, %d still unacknowledged (the oldest for %.0f s), %d acknowledged but not readable yet (the oldest for %.0f s)\n",
			name, c.Sent, c.Failed, c.InFlight, c.OldestInFlightS, c.Pending, c.OldestUnreadS)
		if c.Foreign > 0 {
			fmt.Fprintf(&b, "    the customers read %d records they did not write (older data)\n", c.Foreign)
		}
		for _, e := range c.Errors[:min(3, len(c.Errors))] {
			fmt.Fprintf(&b, "    customer error: %s\n", e)
		}
	}
	fmt.Fprintf(&b, "Cluster %q, inventory %s.\n", "kremedy-lab", l.InventoryPath())
	fmt.Fprintf(&b, "The clock runs. `kremedy drill status --dir %s` · `kremedy drill hint --dir %s` · `kremedy drill end --dir %s`", l.Dir, l.Dir, l.Dir)
	return b.String()
}

func newDrillStatusCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "status",
		Short: "The drill's clock, hints and the customers' traffic so far",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := drill.Load(dir)
			if err != nil {
				return usageErr(err)
			}
			out := cmd.OutOrStdout()
			state := "running"
			if st.Ended != nil {
				state = "ended (see " + filepath.Join(dir, drill.DebriefFile) + ")"
			}
			fmt.Fprintf(out, "DRILL %s · clock %s · hints %d\n", state, time.Since(st.Started).Round(time.Second), len(st.Hints))
			if st.Resolved != nil {
				fmt.Fprintf(out, "  the victory check passed at %s\n", st.Resolved.UTC().Format("15:04:05 UTC"))
			}
			if tr, err := drill.ReadTraffic(dir); err == nil {
				for _, name := range []string{st.Topic, st.Bystander} {
					c := tr.Topics[name]
					flow := "NOT flowing"
					if c.Flowing(tr.At, 10*time.Second) {
						flow = "flowing"
					}
					if slices.Contains(tr.Paused, name) {
						flow = "detached"
					}
					if tr.Final {
						flow = "stopped (the drill ended)"
					}
					fmt.Fprintf(out, "  %s: %s — %d sent, %d acknowledged, %d failed, %d in flight (oldest %.0f s), %d read, %d not read yet (oldest %.0f s), %d duplicated\n",
						name, flow, c.Sent, c.Acked, c.Failed, c.InFlight, c.OldestInFlightS, c.Consumed, c.Pending, c.OldestUnreadS, c.Duplicated)
				}
			} else {
				fmt.Fprintf(out, "  traffic: %v\n", err)
			}
			return nil
		},
	}
	addDirFlag(c, &dir)
	return c
}

func newDrillHintCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "hint",
		Short: "The next hint, from \"look at…\" to the runbook (each one counts in the debrief)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := drill.Load(dir)
			if err != nil {
				return usageErr(err)
			}
			if st.Ended != nil {
				return usageErr(fmt.Errorf("the drill in %s has ended; its debrief is %s", dir, filepath.Join(dir, drill.DebriefFile)))
			}
			h := st.NextHint(time.Now(), filepath.Join(dir, "inventory.yaml"))
			if err := st.Save(dir); err != nil {
				return failedErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "hint %d of %d: %s\n", h.Level, len(drill.Scenarios[st.Scenario].Hints), h.Text)
			return nil
		},
	}
	addDirFlag(c, &dir)
	return c
}

func newDrillEndCmd() *cobra.Command {
	var dir string
	var asJSON bool
	c := &cobra.Command{
		Use:   "end",
		Short: "Stop the customers, run the victory check and write the debrief (exit 1 when the drill is not resolved)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := endDrill(cmd.Context(), dir, func(st *drill.State) (*drill.TrafficState, error) { return stopTraffic(dir, st) })
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(d); err != nil {
					return failedErr(err)
				}
			} else {
				fmt.Fprint(cmd.OutOrStdout(), d.Markdown())
			}
			if !d.Resolved {
				return failedErr(fmt.Errorf("the drill is not resolved: %s", strings.Join(d.Remains, "; ")))
			}
			return nil
		},
	}
	addDirFlag(c, &dir)
	c.Flags().BoolVar(&asJSON, "json", false, "print the debrief as JSON")
	return c
}

// endDrill ends the drill in dir (once; a second call returns the debrief
// written by the first): the victory check while the customers still
// run, then stop (which stops them and returns their final counts).
func endDrill(ctx context.Context, dir string, stop func(*drill.State) (*drill.TrafficState, error)) (drill.Debrief, error) {
	var d drill.Debrief
	st, err := drill.Load(dir)
	if err != nil {
		return d, usageErr(err)
	}
	if st.Ended != nil {
		b, err := os.ReadFile(filepath.Join(dir, drill.DebriefJSON))
		if err == nil {
			err = json.Unmarshal(b, &d)
		}
		return d, err
	}
	remains := victoryCheck(ctx, dir, st)
	if len(remains) == 0 && st.Resolved == nil {
		now := time.Now()
		st.Resolved = &now
	}
	tr, err := stop(st)
	if err != nil {
		remains = append(remains, "the traffic's final counts: "+err.Error())
	}
	cmds, err := drill.Commands(dir)
	if err != nil {
		return d, failedErr(err)
	}
	earlier, _ := drill.History(lab.CacheDir())
	d = drill.Score(drill.Inputs{State: st, Commands: cmds, Traffic: tr, Runs: scoreRuns(cmds), Remains: remains, Earlier: earlier, Now: time.Now()})
	md := d.Markdown()
	if err := atomicfile.WriteFile(filepath.Join(dir, drill.DebriefFile), []byte(md)); err != nil {
		return d, failedErr(err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, drill.DebriefJSON), d); err != nil {
		return d, failedErr(err)
	}
	past := drill.Past{Ended: d.Ended, Scenario: d.Scenario, Resolved: d.Resolved, Hints: d.Hints}
	if d.TimeToResolvedS != nil {
		past.TimeToResolved = *d.TimeToResolvedS
	}
	_ = drill.AddHistory(lab.CacheDir(), past)
	st.Ended = &d.Ended
	if err := st.Save(dir); err != nil {
		return d, failedErr(err)
	}
	return d, nil
}

// victoryCheck lists what is still broken: diagnose's findings, customers
// detached or not flowing. None: resolved.
func victoryCheck(ctx context.Context, dir string, st *drill.State) []string {
	var remains []string
	if tr, err := drill.ReadTraffic(dir); err != nil {
		remains = append(remains, "the customers' traffic cannot be read: "+err.Error())
	} else {
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
	}
	exe, err := os.Executable()
	if err != nil {
		return append(remains, err.Error())
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(cctx, exe, "diagnose", "--inventory", filepath.Join(dir, "inventory.yaml"))
	c.Env = append(os.Environ(), drill.Internal()...)
	out, err := c.CombinedOutput()
	if err != nil {
		remains = append(remains, "kremedy diagnose does not pass: "+tailLines(string(out), 6))
	}
	return remains
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("15:04:05")
}

func tailLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], " / ")
}

// stopTraffic asks the traffic process to stop and waits for its final
// counts (it flushes what is in flight, then drains for drillDrain).
func stopTraffic(dir string, st *drill.State) (*drill.TrafficState, error) {
	if tr, err := drill.ReadTraffic(dir); err == nil && tr.Final {
		return tr, nil
	}
	if p, err := os.FindProcess(st.TrafficPID); err == nil {
		_ = p.Signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if tr, err := drill.ReadTraffic(dir); err == nil && tr.Final {
			return tr, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	tr, err := drill.ReadTraffic(dir)
	if err != nil {
		return nil, err
	}
	return tr, fmt.Errorf("the traffic process (pid %d) gave no final counts within 90 s: the counts are from %s and lost records are not known", st.TrafficPID, tr.At.UTC().Format(time.RFC3339))
}

// scoreRuns reads the journals of the trainee's runs.
func scoreRuns(cmds []drill.Command) []drill.RunScore {
	var out []drill.RunScore
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
		r := drill.RunScore{RunDir: c.RunDir, Runbook: c.Runbook}
		if o, wait, err := steps.RunOutage(c.RunDir); err == nil && o != nil {
			r.OutageS, r.WaitS = o.Length().Seconds(), wait.Seconds()
		}
		r.Steps, r.Finished = stepScores(v, whyNotes(c.Runbook))
		var same []drill.Command
		for _, o := range cmds {
			if o.RunDir == c.RunDir {
				same = append(same, o)
			}
		}
		r.Failures = stepFailures(v, c.Runbook, same)
		out = append(out, r)
	}
	return out
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
func stepScores(v *steps.RunView, why map[string]string) ([]drill.StepScore, bool) {
	var out []drill.StepScore
	for _, st := range v.Steps {
		sc := drill.StepScore{ID: st.ID, State: "not done", Why: why[st.ID]}
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
func stepFailures(v *steps.RunView, runbook string, cmds []drill.Command) []drill.Refusal {
	var all []steps.Failure
	for _, st := range v.Steps {
		all = append(all, st.Failures...)
	}
	slices.SortFunc(all, func(a, b steps.Failure) int { return cmp.Compare(a.Seq, b.Seq) })
	var out []drill.Refusal
	lastOf := map[int]int{} // command index -> index in out of its last failure
	for _, f := range all {
		at := f.Time
		for ci, c := range cmds {
			if !at.Before(c.At) && (c.Exit < 0 || !at.After(c.At.Add(time.Duration(c.TookS*float64(time.Second))+time.Second))) {
				lastOf[ci] = len(out)
			}
		}
		out = append(out, drill.Refusal{At: at, Command: fmt.Sprintf("%s: step %s", runbook, f.Step), Why: f.Err})
	}
	drop := map[int]bool{}
	for ci, i := range lastOf {
		if cmds[ci].Exit != 0 {
			drop[i] = true
		}
	}
	var kept []drill.Refusal
	for i, f := range out {
		if !drop[i] {
			kept = append(kept, f)
		}
	}
	return kept
}

func newDrillClientsCmd() *cobra.Command {
	var dir, topic string
	c := &cobra.Command{
		Use:       "clients pause|resume",
		Short:     "Detach (pause) or attach again (resume) the customers of a topic: the drill inventory's client stop and start commands",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"pause", "resume"},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctl, err := drill.ReadControl(dir)
			if err != nil {
				return failedErr(err)
			}
			pause := args[0] == "pause"
			ctl.Paused = slices.DeleteFunc(ctl.Paused, func(s string) bool { return s == topic })
			if pause {
				ctl.Paused = append(ctl.Paused, topic)
			}
			if err := drill.WriteControl(dir, ctl); err != nil {
				return failedErr(err)
			}
			// Done when the traffic says so: a stop command returns once the
			// client has stopped.
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if tr, err := drill.ReadTraffic(dir); err == nil && slices.Contains(tr.Paused, topic) == pause {
					fmt.Fprintf(cmd.OutOrStdout(), "customers of %s %s\n", topic, map[bool]string{true: "detached: no writes, group left", false: "attached again"}[pause])
					return nil
				}
			}
			return failedErr(fmt.Errorf("the drill's traffic did not %s the customers of %s within 30 s (see %s)", args[0], topic, drill.Path(dir, drill.TrafficLog)))
		},
	}
	addDirFlag(c, &dir)
	c.Flags().StringVar(&topic, "topic", "", "the topic whose customers to detach or attach")
	_ = c.MarkFlagRequired("topic")
	return c
}

// newDrillTrafficCmd is the customers' process (started by drill start):
// it writes the counts every half second, follows the control file, and on
// SIGTERM or the victory check stops, drains and writes the final counts.
func newDrillTrafficCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:    "traffic",
		Short:  "The drill's customers (started by `drill start`)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := openLab(dir)
			if err != nil {
				return err
			}
			st, err := drill.Load(dir)
			topic := ""
			if err == nil {
				topic = st.Topic
			}
			topics, err := drillTopics(dir, topic)
			if err != nil {
				return usageErr(err)
			}
			tr, err := drill.Start(drill.Options{Bootstrap: l.State.Config.Bootstrap(), Topics: topics, Group: "drill-customers",
				Rate: drillTrafficRate, DeliveryTimeout: 30 * time.Second, Client: l.KafkaOpts()})
			if err != nil {
				return failedErr(err)
			}
			term := make(chan os.Signal, 1)
			signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
			write := func(counts map[string]drill.Counts, final bool) {
				_ = atomicfile.WriteJSON(drill.Path(dir, drill.TrafficFile), drill.TrafficState{At: time.Now(), PID: os.Getpid(), Topics: counts, Paused: tr.Paused(), Final: final})
			}
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			lastCheck := time.Now()
			for {
				select {
				case <-term:
					write(tr.Stop(drillDrain), true)
					return nil
				case <-tick.C:
				}
				follow(dir, tr)
				write(tr.Snapshot(), false)
				if time.Since(lastCheck) >= 10*time.Second {
					lastCheck = time.Now()
					if autoEnd(cmd.Context(), dir, tr, write) {
						return nil
					}
				}
			}
		},
	}
	addDirFlag(c, &dir)
	return c
}

// drillTopics is the affected topic and its bystander. The state is written
// after the traffic starts, so the topic comes from the inventory's client.
func drillTopics(dir, topic string) ([]string, error) {
	if topic == "" {
		inv, err := inventory.Load(filepath.Join(dir, "inventory.yaml"))
		if err != nil {
			return nil, err
		}
		for _, c := range inv.Clients {
			if t, ok := strings.CutPrefix(c.Name, "customers-of-"); ok {
				topic = t
			}
		}
	}
	if topic == "" {
		return nil, errors.New("no drill topic: the inventory names no customers-of-TOPIC client")
	}
	return []string{topic, topic + "-v2"}, nil
}

// follow applies the control file: detach or attach each topic's customers.
func follow(dir string, tr *drill.Traffic) {
	ctl, err := drill.ReadControl(dir)
	if err != nil {
		return
	}
	paused := tr.Paused()
	for _, t := range ctl.Paused {
		if !slices.Contains(paused, t) {
			_ = tr.Pause(t)
		}
	}
	for _, t := range paused {
		if !slices.Contains(ctl.Paused, t) {
			_ = tr.Resume(t)
		}
	}
}

// autoEnd runs the victory check once every customer flows again after
// the page; when it passes, the drill ends itself with the debrief, and
// autoEnd returns true: the traffic has stopped.
func autoEnd(ctx context.Context, dir string, tr *drill.Traffic, write func(map[string]drill.Counts, bool)) bool {
	st, err := drill.Load(dir)
	if err != nil || st.Ended != nil || st.Started.IsZero() || time.Since(st.Started) < 20*time.Second {
		return false
	}
	now := time.Now()
	for _, c := range tr.Snapshot() {
		if !c.Flowing(now, 10*time.Second) || c.LastRead.Before(st.Started) {
			return false
		}
	}
	if len(tr.Paused()) > 0 || len(victoryCheck(ctx, dir, st)) > 0 {
		return false
	}
	// The check runs again inside endDrill, on the same live traffic; the
	// drill has ended either way once it returns.
	if _, err := endDrill(ctx, dir, func(*drill.State) (*drill.TrafficState, error) {
		write(tr.Stop(drillDrain), true)
		return drill.ReadTraffic(dir)
	}); err != nil {
		fmt.Fprintf(os.Stderr, "drill: the victory check passed, but the debrief: %v\n", err)
	}
	return true
}

// recordForDrill records, for the debrief, a command run against a
// running drill's inventory — the trainee does nothing special: once as it
// starts (code -1), once as it ends. A failure to record is said on stderr
// and changes nothing else.
func recordForDrill(cmd *cobra.Command, err error, code int, start time.Time) {
	if cmd == nil {
		return
	}
	flag := func(name string) string {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	args := cmd.Flags().Args()
	inv, runDir := flag("inventory"), flag("run-dir")
	var meta steps.Meta
	if cmd.Name() == "resume" && len(args) == 1 {
		runDir = args[0]
		if m, oerr := steps.ReadMeta(runDir); oerr == nil {
			meta, inv = m, m.Inventory
		}
	}
	dir := drill.DirOfInventory(inv)
	if dir == "" {
		return
	}
	c := drill.Command{At: start, Args: os.Args[1:], Exit: code, TookS: time.Since(start).Seconds(), RunDir: runDir,
		Verb: strings.TrimPrefix(cmd.CommandPath(), "kremedy ")}
	if (cmd.Name() == "run" || cmd.Name() == "plan") && len(args) > 0 {
		c.Runbook = args[0]
	}
	if cmd.Name() == "resume" {
		c.Runbook = meta.Runbook
	}
	if err != nil {
		c.Error = err.Error()
	}
	if rerr := drill.Record(dir, c); rerr != nil {
		fmt.Fprintf(os.Stderr, "kremedy: this command was not recorded for the drill's debrief: %v\n", rerr)
	}
}

// drillHeader is the TUI's drill header when inv is a running drill's.
func drillHeader(inv string) *tui.Drill {
	dir := drill.DirOfInventory(inv)
	if dir == "" {
		return nil
	}
	st, err := drill.Load(dir)
	if err != nil {
		return nil
	}
	return &tui.Drill{Started: st.Started, Hints: func() int {
		if now, err := drill.Load(dir); err == nil {
			return len(now.Hints)
		}
		return len(st.Hints)
	}}
}
