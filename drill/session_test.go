package drill

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// flowing writes customers' counts in dir that pass the traffic half of
// the victory check: both topics acknowledged and read just now.
func flowing(t *testing.T, dir string, st *State) {
	t.Helper()
	now := time.Now()
	c := Counts{Sent: 10, Acked: 10, Consumed: 10, LastAck: now, LastRead: now}
	if err := os.MkdirAll(filepath.Join(dir, Sub), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteJSON(Path(dir, TrafficFile), TrafficState{At: now, Topics: map[string]Counts{st.Topic: c, st.Bystander: c}}); err != nil {
		t.Fatal(err)
	}
}

// TestVictoryCheckDiagnosesInProcess: the victory check diagnoses the
// drill's inventory through the Connect it is given, in this process (it
// used to run its own binary's `diagnose`): a healthy cluster with the
// customers flowing passes, the ghost-topic state remains broken naming
// its cause, and a cluster that cannot be reached says so.
func TestVictoryCheckDiagnosesInProcess(t *testing.T) {
	st := &State{Scenario: "ghost-topic", Topic: "orders", Bystander: "orders-v2"}
	cases := []struct {
		name    string
		cluster func(t *testing.T) ports.Cluster
		err     error
		want    string // "" : resolved
	}{
		{"healthy", func(t *testing.T) ports.Cluster { return steptest.Racked(t, 4, 3).Ports }, nil, ""},
		{"ghost topic", func(t *testing.T) ports.Cluster { return steptest.Ghost(t).Ports }, nil, "kremedy diagnose does not pass: [CRITICAL] "},
		{"unreachable", nil, errors.New("zookeeper zk:2181: no answer"), "kremedy diagnose does not pass: zookeeper zk:2181: no answer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			flowing(t, dir, st)
			var asked []string
			closed := 0
			s := &Session{Dir: dir, Connect: func(_ context.Context, path string) (ports.Cluster, func(), error) {
				asked = append(asked, path)
				if tc.err != nil {
					return ports.Cluster{}, nil, tc.err
				}
				return tc.cluster(t), func() { closed++ }, nil
			}}
			remains := s.victoryCheck(context.Background(), st)
			if len(asked) != 1 || asked[0] != filepath.Join(dir, "inventory.yaml") {
				t.Fatalf("connected to %v, want the drill's inventory once", asked)
			}
			if tc.err == nil && closed != 1 {
				t.Fatalf("the clients were closed %d times", closed)
			}
			if tc.want == "" {
				if len(remains) != 0 {
					t.Fatalf("a healthy, flowing drill remains broken: %v", remains)
				}
				return
			}
			if len(remains) != 1 || !strings.HasPrefix(remains[0], tc.want) {
				t.Fatalf("remains %q, want one starting %q", remains, tc.want)
			}
		})
	}
}

// TestVictoryCheckTraffic: customers detached, not flowing or already
// stopped each remain broken, whatever diagnose says.
func TestVictoryCheckTraffic(t *testing.T) {
	st := &State{Scenario: "ghost-topic", Topic: "orders", Bystander: "orders-v2"}
	dir := t.TempDir()
	if got := trafficRemains(dir, st); len(got) != 1 || !strings.HasPrefix(got[0], "the customers' traffic cannot be read: ") {
		t.Fatalf("no traffic file: %v", got)
	}
	flowing(t, dir, st)
	tr, err := ReadTraffic(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr.Paused = []string{"orders"}
	c := tr.Topics["orders-v2"]
	c.LastRead = time.Time{}
	tr.Topics["orders-v2"] = c
	if err := atomicfile.WriteJSON(Path(dir, TrafficFile), tr); err != nil {
		t.Fatal(err)
	}
	got := trafficRemains(dir, st)
	if len(got) != 2 || !strings.Contains(got[0], "the customers of orders are still detached") ||
		!strings.Contains(got[1], "orders-v2: records are not acknowledged and read within 10 s") || !strings.Contains(got[1], "last read never") {
		t.Fatalf("detached and not flowing: %q", got)
	}
}

// TestHintAndStatus: Hint records and prints the next hint, refuses once
// the drill has ended; Status says the clock, hints and traffic. Both are
// usage errors without a drill.
func TestHintAndStatus(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	s := &Session{Dir: dir, Out: &out}
	if err := s.Hint(); !errors.Is(err, ErrUsage) || !errors.Is(err, ErrNoDrill) {
		t.Fatalf("a hint without a drill: %v", err)
	}
	if err := s.Status(); !errors.Is(err, ErrUsage) {
		t.Fatalf("status without a drill: %v", err)
	}
	st := &State{Scenario: "ghost-topic", Topic: "orders", Bystander: "orders-v2", Started: time.Now()}
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Hint(); err != nil || !strings.HasPrefix(out.String(), "hint 1 of 3: Only the customers of orders are hurt") {
		t.Fatalf("hint: %v\n%s", err, out.String())
	}
	out.Reset()
	flowing(t, dir, st)
	if err := s.Status(); err != nil || !strings.HasPrefix(out.String(), "DRILL running · clock ") || !strings.Contains(out.String(), "hints 1\n") ||
		!strings.Contains(out.String(), "  orders: flowing — 10 sent, 10 acknowledged") {
		t.Fatalf("status: %v\n%s", err, out.String())
	}
	now := time.Now()
	st.Ended = &now
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Hint(); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "has ended; its debrief is") {
		t.Fatalf("a hint after the end: %v", err)
	}
}

// TestEndOnce: End scores the drill once (victory check, final counts,
// the trainee's commands) and writes the debrief; a second End returns
// the debrief the first wrote, without checking again.
func TestEndOnce(t *testing.T) {
	t.Setenv("KREMEDY_CACHE", t.TempDir()) // this machine's drill history
	dir := t.TempDir()
	st := &State{Scenario: "ghost-topic", Topic: "orders", Bystander: "orders-v2", Started: time.Now().Add(-time.Minute)}
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	flowing(t, dir, st)
	connects := 0
	s := &Session{Dir: dir, Connect: func(context.Context, string) (ports.Cluster, func(), error) {
		connects++
		return steptest.Racked(t, 4, 3).Ports, func() {}, nil
	}}
	stopped := func(*State) (*TrafficState, error) {
		tr, err := ReadTraffic(dir)
		tr.Final = true
		return tr, err
	}
	d, err := s.end(context.Background(), stopped)
	if err != nil || !d.Resolved || d.TimeToResolvedS == nil || d.Traffic.Sent != 20 {
		t.Fatalf("end: %v, %+v", err, d)
	}
	if md, err := os.ReadFile(filepath.Join(dir, DebriefFile)); err != nil || string(md) != d.Markdown() {
		t.Fatalf("the debrief file: %v", err)
	}
	again, err := s.end(context.Background(), func(*State) (*TrafficState, error) { t.Fatal("stopped twice"); return nil, nil })
	if err != nil || connects != 1 || !again.Ended.Equal(d.Ended) || !again.Resolved {
		t.Fatalf("a second end: %v, %d victory checks, %+v", err, connects, again)
	}
}

// TestRecorder: a command is recorded only against a running drill's
// inventory, as it starts and as it ends (one command, its exit and error,
// secrets redacted); resume is recorded by its run's inventory and
// runbook, read from the run's journal.
func TestRecorder(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory.yaml")
	at := time.Now()
	if r := NewRecorder(Invocation{Verb: "diagnose", Inventory: inv}, at); r != nil {
		t.Fatal("no drill, yet a recorder")
	}
	if err := (*Recorder)(nil).Started(); err != nil {
		t.Fatal(err)
	}
	st := &State{Scenario: "ghost-topic", Topic: "orders", Started: at}
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(Invocation{Verb: "run", Args: []string{"run", "topic-cleanup", "--notify", "https://hooks/secret"}, Inventory: inv, RunDir: "r1", Runbook: "topic-cleanup"}, at)
	if err := r.Started(); err != nil {
		t.Fatal(err)
	}
	if cs, err := Commands(dir); err != nil || len(cs) != 1 || cs[0].Exit != -1 {
		t.Fatalf("the start record: %+v %v", cs, err)
	}
	if err := r.Ended(errors.New("refused: not whole\nmore"), 1); err != nil {
		t.Fatal(err)
	}
	cs, err := Commands(dir)
	if err != nil || len(cs) != 1 {
		t.Fatalf("start and end are one command: %+v %v", cs, err)
	}
	if c := cs[0]; c.Exit != 1 || c.Verb != "run" || c.Runbook != "topic-cleanup" || c.RunDir != "r1" || c.Error != "refused: not whole\nmore" ||
		strings.Contains(strings.Join(c.Args, " "), "secret") || !c.At.Equal(at) {
		t.Fatalf("the command: %+v", c)
	}

	run := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Create(filepath.Join(run, steps.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(journal.RunStart, "", steps.Meta{ID: "r2", Runbook: "topic-cleanup", Inventory: inv}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	res := NewRecorder(Invocation{Verb: "resume", Args: []string{"resume", run}, RunDir: run, OfRun: true}, at.Add(time.Second))
	if err := res.Ended(nil, 0); err != nil {
		t.Fatal(err)
	}
	cs, _ = Commands(dir)
	if len(cs) != 2 || cs[1].Verb != "resume" || cs[1].Runbook != "topic-cleanup" || cs[1].RunDir != run || cs[1].Exit != 0 {
		t.Fatalf("resume by its run's inventory: %+v", cs)
	}
	if NewRecorder(Invocation{Verb: "resume", RunDir: filepath.Join(dir, "none"), OfRun: true}, at) != nil {
		t.Fatal("a resume of no run is recorded")
	}
}
