package steptest

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

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
// remove or add the broker's registration in the fake ZooKeeper. Any other
// command fails the test: the fake is strict.
type Hosts struct {
	t      testing.TB
	mu     sync.Mutex
	zk     *ZK
	target ports.Target
	// FS[broker][dir] lists the names in that directory.
	FS map[int32]map[string]map[string]Entry
	// Running says whether each broker's process runs.
	Running map[int32]bool
	// StopFails makes a broker's stop command exit with this status.
	StopFails map[int32]int
	// Unreachable makes Check and Run fail for a broker.
	Unreachable map[int32]error
	// Unwritable[broker][dir] makes the listing say the login user may
	// not write that log dir ("dir"), its parent ("parent") or the
	// quarantine ("quarantine").
	Unwritable map[int32]map[string]string
	// OnStart, if set, runs after a broker's start command (the cluster
	// as that broker finds it).
	OnStart func(broker int32)
	// OnStop, if set, runs after a broker's stop command (the controller
	// shrinking the ISRs it was in, say).
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
	// session numbers the brokers' ZooKeeper sessions: every start
	// registers under a new one, as a new broker process does.
	session int64
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
// registered.
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

// SizedAt is when the fake hosts say every directory last changed.
var SizedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var (
	sizesRe = regexp.MustCompile(`(?m)^kremedy_sizes (.+)$`)
	listRe  = regexp.MustCompile(`(?m)^kremedy_list (\S+) (\d+) (\S+)$`)
	moveRe  = regexp.MustCompile(`(?m)^kremedy_move (\S+) (\S+) \|\| exit \$\?$`)
	backRe  = regexp.MustCompile(`(?sm)^set -e\nsrc=(\S+); dst=(\S+)\n`)
	whereRe = regexp.MustCompile(`^if \[ -e (\S+) \] && \[ ! -e (\S+) \]`)
	// asideRe is the migration revert's move of the KRaft metadata log out
	// of a log dir (migrate's metadataScript).
	asideRe = regexp.MustCompile(`(?m)^if \[ -e (\S+) \]; then mv -- (\S+) (\S+); printf 'moved %s aside\\n' (\S+); fi$`)
)

// unquote decodes a word the scripts' regexps captured.
func unquote(s string) string {
	if w, ok := shellWord(s); ok {
		return w
	}
	return s
}

// shellWord decodes one POSIX shell word made of bare characters,
// single-quoted runs and backslash escapes (what shell.Quote produces).
func shellWord(w string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		switch c := w[i]; c {
		case '\\':
			if i+1 == len(w) {
				return "", false
			}
			i++
			b.WriteByte(w[i])
		case '\'':
			j := strings.IndexByte(w[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(w[i+1 : i+1+j])
			i += j + 1
		case ' ', '\t', '\n', ';', '&', '|', '$', '`', '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
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
func (h *Hosts) RunInput(_ context.Context, broker int32, cmd string, stdin []byte, out func(ports.Line)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Commands = append(h.Commands, fmt.Sprintf("%d: %s", broker, cmd))
	h.Inputs = append(h.Inputs, Input{Command: len(h.Commands) - 1, Data: slices.Clone(stdin)})
	if err := h.Unreachable[broker]; err != nil {
		return err
	}
	if h.Local == nil || !h.Local(broker, cmd) {
		h.t.Errorf("unexpected command with an input on node %d: %q", broker, cmd)
		return &ExitErr{127}
	}
	if h.local.Shell == "" {
		h.local.Shell = "/bin/sh"
	}
	if stdin == nil {
		stdin = []byte{}
	}
	return h.local.RunInput(context.Background(), broker, cmd, stdin, func(l ports.Line) {
		if out != nil {
			out(l)
		}
	})
}

// Run implements ports.Hosts.
func (h *Hosts) Run(_ context.Context, broker int32, cmd string, out func(ports.Line)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Commands = append(h.Commands, fmt.Sprintf("%d: %s", broker, cmd))
	if err := h.Unreachable[broker]; err != nil {
		return err
	}
	b, isBroker := h.target.Host(broker)
	emit := func(s string) {
		if out != nil {
			out(ports.Line{Text: s})
		}
	}
	if c, ok := h.target.Controller(broker); ok && !isBroker {
		// A KRaft controller: its own stop and start toggle whether it
		// runs (it registers nowhere in ZooKeeper).
		switch cmd {
		case c.Stop:
			h.Running[broker] = false
			emit("stopped")
			if h.OnStop != nil {
				h.OnStop(broker)
			}
			return nil
		case c.Start:
			h.Running[broker] = true
			emit("started")
			if h.OnStart != nil {
				h.OnStart(broker)
			}
			return nil
		}
	}
	if h.Local != nil && cmd != b.Stop && cmd != b.Start && h.Local(broker, cmd) {
		if h.local.Shell == "" {
			h.local.Shell = "/bin/sh"
		}
		return h.local.Run(context.Background(), broker, cmd, func(l ports.Line) {
			if out != nil {
				out(l)
			}
		})
	}
	switch {
	case cmd == "true":
		return nil
	case cmd == b.Stop:
		if code := h.StopFails[broker]; code != 0 {
			emit("did not stop in time")
			return &ExitErr{code}
		}
		h.Running[broker] = false
		h.zk.Remove(fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, broker))
		emit("stopped")
		if h.OnStop != nil {
			h.OnStop(broker)
		}
		return nil
	case cmd == b.Start:
		h.Running[broker] = true
		h.register(b)
		emit("started")
		if h.OnStart != nil {
			h.OnStart(broker)
		}
		return nil
	}
	// Every script kremedy writes must run under /bin/sh (shell.Script),
	// never in the remote user's login shell.
	wrapped, ok := strings.CutPrefix(cmd, "exec /bin/sh -c ")
	if !ok {
		h.t.Errorf("command on broker %d is neither the inventory's stop/start nor a shell.Script: %q", broker, cmd)
		return &ExitErr{127}
	}
	cmd, ok = shellWord(wrapped)
	if !ok {
		h.t.Errorf("shell.Script on broker %d is not one shell word: %q", broker, wrapped)
		return &ExitErr{127}
	}
	return h.script(broker, cmd, emit)
}

// script plays one of kremedy's scripts on the fake filesystem: a
// log-dir listing, a quarantine move, a restore or a where-is-it check.
func (h *Hosts) script(broker int32, cmd string, emit func(string)) error {
	if strings.HasPrefix(cmd, "kremedy_sizes() {") {
		// Every directory the fake holds is 4 KiB, changed at SizedAt.
		m := sizesRe.FindStringSubmatch(cmd)
		if m == nil {
			h.t.Errorf("kremedy_sizes on broker %d names no path: %q", broker, cmd)
			return &ExitErr{2}
		}
		for _, w := range strings.Fields(m[1]) {
			p := unquote(w)
			if _, ok := h.FS[broker][filepath.Dir(p)][filepath.Base(p)]; ok {
				emit(fmt.Sprintf("4\t%d\t%s", SizedAt.Unix(), p))
			} else {
				emit("-1\t-1\t" + p)
			}
		}
		return nil
	}
	if strings.HasPrefix(cmd, "kremedy_list() {") {
		for _, m := range listRe.FindAllStringSubmatch(cmd, -1) {
			own := "K" + m[1] + "\t" + m[2] + "\t" // the script's own lines
			dir := unquote(m[3])
			ents, ok := h.FS[broker][dir]
			if !ok {
				emit(own + "x\t\t")
				continue
			}
			access := "ok"
			if a := h.Unwritable[broker][dir]; a != "" {
				access = a
			}
			emit(own + "a\t" + access + "\t")
			names := make([]string, 0, len(ents))
			for n := range ents {
				names = append(names, n)
			}
			sort.Strings(names)
			// The entries as the script's ls -Apq prints them.
			emit(own + "l\t\t")
			for _, n := range names {
				if ents[n].IsDir {
					n += "/"
				}
				emit(n)
			}
			// The topic ids as the script's grep prints them.
			emit(own + "m\t\t")
			for _, n := range names {
				if e := ents[n]; e.IsDir && e.TopicID != "" {
					emit(n + "/partition.metadata:topic_id: " + e.TopicID)
				}
			}
			emit(own + "e\t\t")
		}
		return nil
	}
	strays := strings.Contains(cmd, "kremedy_straycheck() {")
	if strings.HasPrefix(cmd, "kremedy_move() {") {
		for _, m := range moveRe.FindAllStringSubmatch(cmd, -1) {
			src, dst := unquote(m[1]), unquote(m[2])
			// A stray cleanup's script refuses, on the host, any source
			// not named -stray; only those may move while the broker runs.
			if strays {
				if !strings.HasSuffix(src, "-stray") {
					emit("refusing: " + src + " is not a -stray directory")
					return &ExitErr{6}
				}
			} else if h.Running[broker] {
				h.t.Errorf("move %s on broker %d while it runs", src, broker)
			}
			sd, sn := filepath.Dir(src), filepath.Base(src)
			dd, dn := filepath.Dir(dst), filepath.Base(dst)
			e, ok := h.FS[broker][sd][sn]
			if !ok {
				if _, done := h.FS[broker][dd][dn]; done {
					emit("in quarantine: " + src + " -> " + dst)
					continue
				}
				return &ExitErr{1}
			}
			delete(h.FS[broker][sd], sn)
			if h.FS[broker][dd] == nil {
				h.FS[broker][dd] = map[string]Entry{}
			}
			h.FS[broker][dd][dn] = e
			emit("moved " + src + " -> " + dst)
		}
		return nil
	}
	if m := backRe.FindStringSubmatch(cmd); m != nil { // segments restore
		src, dst := unquote(m[1]), unquote(m[2])
		if strays && !strings.HasSuffix(dst, "-stray") {
			return &ExitErr{6}
		} else if !strays && h.Running[broker] {
			h.t.Errorf("restore %s on broker %d while it runs", src, broker)
		}
		sd, sn, dd, dn := filepath.Dir(src), filepath.Base(src), filepath.Dir(dst), filepath.Base(dst)
		if _, ok := h.FS[broker][dd][dn]; ok {
			return &ExitErr{3}
		}
		e, ok := h.FS[broker][sd][sn]
		if !ok {
			return &ExitErr{1}
		}
		delete(h.FS[broker][sd], sn)
		h.FS[broker][dd][dn] = e
		emit("moved back " + src + " -> " + dst)
		return nil
	}
	if ms := asideRe.FindAllStringSubmatch(cmd, -1); ms != nil {
		for _, m := range ms {
			src, dst := unquote(m[1]), unquote(m[3])
			if unquote(m[2]) != src || unquote(m[4]) != src {
				h.t.Errorf("metadata move on broker %d names two sources: %q", broker, m[0])
				return &ExitErr{2}
			}
			if h.Running[broker] {
				h.t.Errorf("move %s on broker %d while it runs", src, broker)
			}
			sd, sn, dd, dn := filepath.Dir(src), filepath.Base(src), filepath.Dir(dst), filepath.Base(dst)
			e, ok := h.FS[broker][sd][sn]
			if !ok {
				continue
			}
			delete(h.FS[broker][sd], sn)
			if h.FS[broker][dd] == nil {
				h.FS[broker][dd] = map[string]Entry{}
			}
			h.FS[broker][dd][dn] = e
			emit("moved " + src + " aside")
		}
		return nil
	}
	if m := whereRe.FindStringSubmatch(cmd); m != nil {
		src, dst := unquote(m[2]), unquote(m[1])
		_, atDst := h.FS[broker][filepath.Dir(dst)][filepath.Base(dst)]
		_, atSrc := h.FS[broker][filepath.Dir(src)][filepath.Base(src)]
		switch {
		case atDst && !atSrc:
			emit("moved")
		case atSrc:
			emit("source")
		default:
			emit("missing")
		}
		return nil
	}
	h.t.Errorf("unexpected command on broker %d: %q", broker, cmd)
	return &ExitErr{127}
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
