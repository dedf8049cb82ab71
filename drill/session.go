package drill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/ports"
)

// Connect opens the clients of the cluster the inventory at path
// describes (the command line's own connect); closing releases them. The
// victory check diagnoses the drill's cluster through it.
type Connect func(ctx context.Context, path string) (c ports.Cluster, closing func(), err error)

// Session is the drill in a lab directory, as the drill commands drive
// it: Start builds and breaks the lab and pages, Status and Hint tell the
// trainee where they are, End (or the victory check, from the customers'
// process) scores the drill. Out is where each says what it did.
type Session struct {
	Dir     string
	Out     io.Writer
	Connect Connect
}

// Errors a session's methods mark, for the caller's exit codes: ErrUsage
// is what the caller asked wrongly (a flag, no drill, a drill that has
// ended); nothing was done. ErrLab is the lab's own error, as lab.Up or
// lab.Open returned it (the lab package's errors say which are the
// caller's). Every other error is a failure.
var (
	ErrUsage = errors.New("drill: usage")
	ErrLab   = errors.New("drill: lab")
)

// marked is err with kind added to what errors.Is finds; its message is
// err's own.
type marked struct{ err, kind error }

func (m marked) Error() string   { return m.err.Error() }
func (m marked) Unwrap() []error { return []error{m.err, m.kind} }

func usage(err error) error {
	if err == nil {
		return nil
	}
	return marked{err, ErrUsage}
}

func labError(err error) error {
	if err == nil {
		return nil
	}
	return marked{err, ErrLab}
}

// trafficRate is the customers' records per second per topic.
const trafficRate = 20

// drain is how long the customers read on, once the drill ends, for the
// acknowledged records not read yet: the ones still unread are lost.
const drain = 10 * time.Second

// StartOptions are a new drill's choices.
type StartOptions struct {
	Scenario     string // random, or a scenario's name
	KafkaVersion string // a release, or random among the installed ZooKeeper-mode ones
	Topic        string // the customers' topic
	Seed         uint64 // of the random choices
	Net          int    // the lab's loopback net, as `lab up --net`
	Secure       bool   // a secured lab, as `lab up --secure`
}

// Start builds the lab in s.Dir, starts the customers, breaks the lab
// with a hidden scenario and pages (on s.Out).
func (s *Session) Start(ctx context.Context, o StartOptions) error {
	dir, out := s.Dir, s.Out
	if _, err := Load(dir); err == nil {
		return usage(fmt.Errorf("%s already holds a drill; end it (`kremedy drill end --dir %s`) and take it down (`kremedy lab down --dir %s --purge`) first", dir, dir, dir))
	}
	name, err := Pick(o.Scenario, o.Seed, Names())
	if err != nil {
		return usage(fmt.Errorf("--scenario: %w", err))
	}
	v, err := pickVersion(o.KafkaVersion, o.Seed)
	if err != nil {
		return usage(err)
	}
	cfg := lab.DefaultConfig()
	cfg.KafkaVersion, cfg.Net, cfg.Secure = v, o.Net, o.Secure
	kind := ""
	if o.Secure {
		kind = "secured "
	}
	fmt.Fprintf(out, "drill: building a %slab of Kafka %s in %s (seed %d)…\n", kind, v, dir, o.Seed)
	l, err := lab.Up(ctx, dir, cfg, nil, io.Discard)
	if err != nil {
		return labError(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, Sub), 0o755); err != nil {
		return err
	}
	if err := breakLab(ctx, l, name, o.Topic); err != nil {
		return err
	}
	st := &State{Scenario: name, Topic: o.Topic, Bystander: o.Topic + "-v2", KafkaVersion: v, Secure: o.Secure, Seed: o.Seed}
	return s.page(l, st)
}

// page lists the customers in the inventory, starts them, and once they
// have met the broken lab pages the trainee: the clock starts.
func (s *Session) page(l *lab.Lab, st *State) error {
	dir := s.Dir
	if err := addClients(l, st); err != nil {
		return err
	}
	pid, err := spawnTraffic(dir)
	if err != nil {
		return err
	}
	st.TrafficPID = pid
	fmt.Fprintf(s.Out, "drill: customers are writing to %s and %s; waiting for their first complaints…\n", st.Topic, st.Bystander)
	time.Sleep(8 * time.Second)
	tr, err := ReadTraffic(dir)
	if err != nil {
		return fmt.Errorf("the customers' traffic did not start (see %s): %w", Path(dir, TrafficLog), err)
	}
	st.Started, st.Page = time.Now(), pageText(l, st, tr)
	if err := st.Save(dir); err != nil {
		return err
	}
	fmt.Fprintln(s.Out, st.Page)
	return nil
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
	return Pick("random", seed, have)
}

// breakLab runs the scenario with its account kept hidden in break.log.
func breakLab(ctx context.Context, l *lab.Lab, name, topic string) error {
	var log bytes.Buffer
	rep, err := lab.Scenarios[name].Run(ctx, l, topic, &log)
	if rep != nil {
		rep.Print(&log)
	}
	if werr := atomicfile.WriteFile(Path(l.Dir, BreakLog), log.Bytes()); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("the drill could not break the lab (%w); what it did is in %s", err, Path(l.Dir, BreakLog))
	}
	return nil
}

// addClients adds the customers of the drill's topic to the inventory, as
// an operator's inventory lists its clients: the runbook's detach step
// stops them over SSH, the reattach step starts them.
func addClients(l *lab.Lab, st *State) error {
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
	logf, err := os.OpenFile(Path(dir, TrafficLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	c := exec.Command(exe, "drill", "traffic", "--dir", dir)
	c.Stdout, c.Stderr = logf, logf
	c.Env = append(os.Environ(), Internal()...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		return 0, err
	}
	pid := c.Process.Pid
	_ = c.Process.Release()
	return pid, nil
}

// pageText is the alert: what the customers see, never the cause.
func pageText(l *lab.Lab, st *State, tr *TrafficState) string {
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

// Status prints the drill's clock, hints and the customers' traffic so
// far.
func (s *Session) Status() error {
	dir, out := s.Dir, s.Out
	st, err := Load(dir)
	if err != nil {
		return usage(err)
	}
	state := "running"
	if st.Ended != nil {
		state = "ended (see " + filepath.Join(dir, DebriefFile) + ")"
	}
	fmt.Fprintf(out, "DRILL %s · clock %s · hints %d\n", state, time.Since(st.Started).Round(time.Second), len(st.Hints))
	if st.Resolved != nil {
		fmt.Fprintf(out, "  the victory check passed at %s\n", st.Resolved.UTC().Format("15:04:05 UTC"))
	}
	tr, err := ReadTraffic(dir)
	if err != nil {
		fmt.Fprintf(out, "  traffic: %v\n", err)
		return nil
	}
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
	return nil
}

// Hint gives (and records) the next hint, from "look at…" to the runbook.
func (s *Session) Hint() error {
	dir := s.Dir
	st, err := Load(dir)
	if err != nil {
		return usage(err)
	}
	if st.Ended != nil {
		return usage(fmt.Errorf("the drill in %s has ended; its debrief is %s", dir, filepath.Join(dir, DebriefFile)))
	}
	h := st.NextHint(time.Now(), filepath.Join(dir, "inventory.yaml"))
	if err := st.Save(dir); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "hint %d of %d: %s\n", h.Level, len(Scenarios[st.Scenario].Hints), h.Text)
	return nil
}
