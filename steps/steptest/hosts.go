package steptest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// ExitErr is a command's non-zero exit, as the SSH adapter reports it.
type ExitErr struct{ Code int }

func (e *ExitErr) Error() string   { return fmt.Sprintf("exit status %d", e.Code) }
func (e *ExitErr) ExitStatus() int { return e.Code }

// Entry is one name in a fake log dir.
type Entry struct {
	IsDir   bool
	TopicID string
}

// Hosts fakes the broker hosts behind SSH: a filesystem of log dirs and
// quarantine dirs per broker, and the brokers' stop/start commands, which
// remove or add the broker's registration in the fake ZooKeeper. The fake
// is strict both ways: any other command fails the test, and so does a
// scripted response (StopFails, Unreachable, Unwritable) whose command
// never came (hosts_missing.go).
type Hosts struct {
	t      testing.TB
	mu     sync.Mutex
	zk     *ZK
	target ports.Target
	// FS[broker][dir] lists the names in that directory.
	FS map[int32]map[string]map[string]Entry
	// Running says whether each broker's process runs.
	Running map[int32]bool
	// StopFails makes a broker's stop command exit with this status; that
	// stop must come before the test ends.
	StopFails map[int32]int
	// Unreachable makes Check and Run fail for a node; a command for that
	// node must come before the test ends.
	Unreachable map[int32]error
	// Unwritable[broker][dir] makes the listing say the login user may
	// not write that log dir ("dir"), its parent ("parent") or the
	// quarantine ("quarantine"); a listing of that dir must come before
	// the test ends.
	Unwritable map[int32]map[string]string
	// OnStart, if set, runs after a broker's start command (the cluster
	// as that broker finds it).
	OnStart func(broker int32)
	// OnStop, if set, runs after a broker's stop command (the controller
	// shrinking the ISRs it was in, say). OnStart and OnStop (which run for
	// KRaft controllers too) are reactions, not expected commands: a
	// fixture sets them for every run, those that refuse before any stop
	// among them.
	OnStop func(broker int32)
	// Local, when set, picks the commands (other than a node's stop and
	// start) that run for real, under /bin/sh -c on this machine: a test's
	// temporary files stand in for the hosts' files (config files, their
	// backups, a controller's meta.properties), and kremedy's scripts meet
	// a real shell, sha256sum and base64. Every other command is the
	// fake's, strict as ever.
	Local    func(node int32, cmd string) bool
	local    LocalShell
	Commands []string
	// Inputs are the standard inputs RunInput was given, in order, each
	// with its command's index in Commands (a test looks for what must
	// never be in a command line there, and in what may be here).
	Inputs []Input
	// ClientRuns are the client commands run ("name: cmd").
	ClientRuns []string
	// Racks are the brokers' broker.rack, in their registrations.
	Racks map[int32]string
	// Space[broker][dir] are the lines a space reading prints for that
	// log dir (hosts_space.go; default: 1% used, no partition files).
	Space map[int32]map[string][]string
	// Logs[broker][path] are the lines of a file a log reading
	// (brokers.LogLinesScript) finds there; a path not set is not there.
	Logs map[int32]map[string][]string
	// session numbers the brokers' ZooKeeper sessions: every start
	// registers under a new one, as a new broker process does.
	session int64
	// met holds the scripted responses a command met (hosts_missing.go).
	met map[response]bool
}

// register registers broker b under a new session.
func (h *Hosts) register(b ports.Host) {
	h.session++
	rack := ""
	if r := h.Racks[b.ID]; r != "" {
		rack = fmt.Sprintf(`,"rack":"%s"`, r)
	}
	h.zk.PutEphemeral(fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, b.ID), fmt.Sprintf(`{"version":5,"host":"%s","port":9092,"endpoints":["PLAINTEXT://%s:9092"]%s}`, b.Host, b.Host, rack), 0x1000+h.session)
}

// NewHosts fakes the target's hosts; each broker starts running and
// registered. When the test ends, every expected command that never came
// fails it (hosts_missing.go).
func NewHosts(t testing.TB, zk *ZK, target ports.Target) *Hosts {
	h := &Hosts{t: t, zk: zk, target: target, FS: map[int32]map[string]map[string]Entry{},
		Running: map[int32]bool{}, StopFails: map[int32]int{}, Unreachable: map[int32]error{}}
	for _, b := range target.Hosts {
		h.FS[b.ID] = map[string]map[string]Entry{}
		for _, d := range b.LogDirs {
			h.FS[b.ID][d] = map[string]Entry{"meta.properties": {}}
		}
		h.Running[b.ID] = true
		h.register(b)
	}
	h.checkMissing(t)
	return h
}

// Runs reports whether node id's process runs.
func (h *Hosts) Runs(id int32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Running[id]
}

// AddDir puts a directory into a broker's log dir.
func (h *Hosts) AddDir(broker int32, dir, name, topicID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.FS[broker][dir][name] = Entry{IsDir: true, TopicID: topicID}
}

// Names lists a directory's entries.
func (h *Hosts) Names(broker int32, dir string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for n := range h.FS[broker][dir] {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Input is one RunInput's standard input: Command indexes Hosts.Commands.
type Input struct {
	Command int
	Data    []byte
}

// RunInput implements ports.Hosts: the command is recorded in Commands and
// its input in Inputs. Only a command Local picks runs (with the input on
// its standard input); the fake plays none of kremedy's scripts with an
// input, so any other fails the test.
func (h *Hosts) RunInput(_ context.Context, node int32, cmd string, stdin []byte, out func(ports.Line)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Commands = append(h.Commands, fmt.Sprintf("%d: %s", node, cmd))
	h.Inputs = append(h.Inputs, Input{Command: len(h.Commands) - 1, Data: slices.Clone(stdin)})
	if err := h.reach(node); err != nil {
		return err
	}
	if h.Local == nil || !h.Local(node, cmd) {
		h.t.Errorf("unexpected command with an input on node %d: %q", node, cmd)
		return &ExitErr{127}
	}
	if stdin == nil {
		stdin = []byte{}
	}
	return h.runLocal(node, cmd, stdin, out)
}

// Run implements ports.Hosts: a node's own stop or start (lifecycle), a
// command Local picks (run for real), the connection check "true", or one
// of kremedy's scripts under /bin/sh, played on the fake filesystem
// (script). Any other command fails the test.
func (h *Hosts) Run(_ context.Context, node int32, cmd string, out func(ports.Line)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Commands = append(h.Commands, fmt.Sprintf("%d: %s", node, cmd))
	if err := h.reach(node); err != nil {
		return err
	}
	emit := func(s string) {
		if out != nil {
			out(ports.Line{Text: s})
		}
	}
	if ok, err := h.lifecycle(node, cmd, emit); ok {
		return err
	}
	if h.Local != nil && h.Local(node, cmd) {
		return h.runLocal(node, cmd, []byte{}, out)
	}
	if cmd == "true" {
		return nil
	}
	script, err := h.unwrap(node, cmd)
	if err != nil {
		return err
	}
	return h.script(node, script, emit)
}

// reach is the error a command on node meets before it runs: the one
// Unreachable scripts for it, if any.
func (h *Hosts) reach(node int32) error {
	err := h.Unreachable[node]
	if err != nil {
		h.answered(response{kind: "Unreachable", node: node})
	}
	return err
}

// lifecycle plays a node's own stop and start commands, the inventory's:
// a broker's remove and re-add its registration in the fake ZooKeeper
// (under a new session) and its stop exits with StopFails' status when
// that scripts one; a KRaft controller's only toggle whether it runs (it
// registers nowhere in ZooKeeper). OnStop and OnStart run after them. ok is
// false for any other command.
func (h *Hosts) lifecycle(node int32, cmd string, emit func(string)) (ok bool, err error) {
	b, isBroker := h.target.Host(node)
	if !isBroker {
		if b, ok = h.target.Controller(node); !ok {
			return false, nil
		}
	}
	switch cmd {
	case b.Stop:
		if code := h.StopFails[node]; isBroker && code != 0 {
			h.answered(response{kind: "StopFails", node: node})
			emit("did not stop in time")
			return true, &ExitErr{code}
		}
		h.Running[node] = false
		if isBroker {
			h.zk.Remove(fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, node))
		}
		emit("stopped")
		if h.OnStop != nil {
			h.OnStop(node)
		}
		return true, nil
	case b.Start:
		h.Running[node] = true
		if isBroker {
			h.register(b)
		}
		emit("started")
		if h.OnStart != nil {
			h.OnStart(node)
		}
		return true, nil
	}
	return false, nil
}

// runLocal runs a command Local picked under /bin/sh on this machine, with
// stdin on its standard input.
func (h *Hosts) runLocal(node int32, cmd string, stdin []byte, out func(ports.Line)) error {
	if h.local.Shell == "" {
		h.local.Shell = "/bin/sh"
	}
	return h.local.RunInput(context.Background(), node, cmd, stdin, func(l ports.Line) {
		if out != nil {
			out(l)
		}
	})
}

// unwrap is the script a command runs: every script kremedy writes must
// run under /bin/sh as one shell word (shell.Script), never in the remote
// user's login shell. Any other command fails the test.
func (h *Hosts) unwrap(node int32, cmd string) (string, error) {
	wrapped, ok := strings.CutPrefix(cmd, "exec /bin/sh -c ")
	if !ok {
		h.t.Errorf("command on node %d is neither the inventory's stop/start nor a shell.Script: %q", node, cmd)
		return "", &ExitErr{127}
	}
	script, ok := shellWord(wrapped)
	if !ok {
		h.t.Errorf("shell.Script on node %d is not one shell word: %q", node, wrapped)
		return "", &ExitErr{127}
	}
	return script, nil
}

// Check implements ports.Hosts.
func (h *Hosts) Check(ctx context.Context, broker int32) error {
	return h.Run(ctx, broker, "true", nil)
}

// SetZKConnect changes the connect string the fake's target has (set the
// cluster's Target.ZKConnect too).
func (h *Hosts) SetZKConnect(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.target.ZKConnect = s
}

// AddClient makes the fake know an inventory client (add it to the
// cluster's Target.Clients too).
func (h *Hosts) AddClient(c ports.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.target.Clients = append(h.target.Clients, c)
}

// RunClient implements ports.Hosts: it records the command in ClientRuns
// ("name: cmd") when the inventory (the target) has that client, and fails
// the test otherwise.
func (h *Hosts) RunClient(_ context.Context, c ports.Client, cmd string, _ func(ports.Line)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.ContainsFunc(h.target.Clients, func(k ports.Client) bool { return k.Name == c.Name }) {
		h.t.Errorf("unexpected client command on %s: %q", c.Name, cmd)
		return &ExitErr{127}
	}
	h.ClientRuns = append(h.ClientRuns, c.Name+": "+cmd)
	return nil
}

var _ ports.Hosts = (*Hosts)(nil)
