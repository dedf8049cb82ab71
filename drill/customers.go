package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/lab"
)

// Clients detaches (verb "pause") or attaches again (verb "resume") the
// customers of topic: the drill inventory's client stop and start
// commands. It returns once the customers' process has done it.
func (s *Session) Clients(verb, topic string) error {
	dir := s.Dir
	ctl, err := ReadControl(dir)
	if err != nil {
		return err
	}
	pause := verb == "pause"
	ctl.Paused = slices.DeleteFunc(ctl.Paused, func(s string) bool { return s == topic })
	if pause {
		ctl.Paused = append(ctl.Paused, topic)
	}
	if err := WriteControl(dir, ctl); err != nil {
		return err
	}
	// Done when the traffic says so: a stop command returns once the
	// client has stopped.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if tr, err := ReadTraffic(dir); err == nil && slices.Contains(tr.Paused, topic) == pause {
			fmt.Fprintf(s.Out, "customers of %s %s\n", topic, map[bool]string{true: "detached: no writes, group left", false: "attached again"}[pause])
			return nil
		}
	}
	return fmt.Errorf("the drill's traffic did not %s the customers of %s within 30 s (see %s)", verb, topic, Path(dir, TrafficLog))
}

// Customers is the customers' process (started by Start): it writes the
// counts every half second, follows the control file, and on SIGTERM or
// the victory check stops, drains and writes the final counts.
func (s *Session) Customers(ctx context.Context) error {
	dir := s.Dir
	l, err := lab.Open(dir)
	if err != nil {
		return labError(err)
	}
	topic := ""
	if st, err := Load(dir); err == nil {
		topic = st.Topic
	}
	topics, err := customerTopics(dir, topic)
	if err != nil {
		return usage(err)
	}
	tr, err := StartTraffic(TrafficOptions{Bootstrap: l.State.Config.Bootstrap(), Topics: topics, Group: "drill-customers",
		Rate: trafficRate, DeliveryTimeout: 30 * time.Second, Client: l.KafkaOpts()})
	if err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	write := func(counts map[string]Counts, final bool) {
		_ = atomicfile.WriteJSON(Path(dir, TrafficFile), TrafficState{At: time.Now(), PID: os.Getpid(), Topics: counts, Paused: tr.Paused(), Final: final})
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	lastCheck := time.Now()
	for {
		select {
		case <-term:
			write(tr.Stop(drain), true)
			return nil
		case <-tick.C:
		}
		follow(dir, tr)
		write(tr.Snapshot(), false)
		if time.Since(lastCheck) >= 10*time.Second {
			lastCheck = time.Now()
			if s.autoEnd(ctx, tr, write) {
				return nil
			}
		}
	}
}

// customerTopics is the affected topic and its bystander. The state is
// written after the traffic starts, so the topic comes from the
// inventory's client.
func customerTopics(dir, topic string) ([]string, error) {
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
func follow(dir string, tr *Traffic) {
	ctl, err := ReadControl(dir)
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
func (s *Session) autoEnd(ctx context.Context, tr *Traffic, write func(map[string]Counts, bool)) bool {
	dir := s.Dir
	st, err := Load(dir)
	if err != nil || st.Ended != nil || st.Started.IsZero() || time.Since(st.Started) < 20*time.Second {
		return false
	}
	now := time.Now()
	for _, c := range tr.Snapshot() {
		if !c.Flowing(now, 10*time.Second) || c.LastRead.Before(st.Started) {
			return false
		}
	}
	if len(tr.Paused()) > 0 || len(s.victoryCheck(ctx, st)) > 0 {
		return false
	}
	// The check runs again inside end, on the same live traffic; the drill
	// has ended either way once it returns.
	if _, err := s.end(ctx, func(*State) (*TrafficState, error) {
		write(tr.Stop(drain), true)
		return ReadTraffic(dir)
	}); err != nil {
		fmt.Fprintf(os.Stderr, "drill: the victory check passed, but the debrief: %v\n", err)
	}
	return true
}
