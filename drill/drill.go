package drill

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
)

// A drill lives in its lab's directory, under drill/: the state (which
// scenario — the trainee is not told), the traffic's counts and control,
// the commands recorded, and at the end the debrief.
const (
	Sub          = "drill"
	stateFile    = "drill.json"
	commandsFile = "commands.jsonl"
	TrafficFile  = "traffic.json" // the traffic's counts, rewritten every half second
	ControlFile  = "control.json" // the topics whose customers are detached
	DebriefFile  = "debrief.md"   // beside the lab's inventory
	DebriefJSON  = "debrief.json" // the same, for tools
	historyFile  = "drill-history.jsonl"
	BreakLog     = "break.log" // what the scenario did: hidden until the debrief
	TrafficLog   = "traffic.log"
	internalEnv  = "KREMEDY_DRILL_INTERNAL"
	internalMark = "1"
)

// Scenario is a lab scenario a drill may hide: the runbook that repairs
// it, graded hints, and the reference the debrief compares with.
type Scenario struct {
	Name    string
	Runbook string
	Set     []string // the runbook's parameters, as --set
	// Hints go from "look at…" to the runbook; %[1]s is the topic, %[2]s
	// the inventory.
	Hints []string
	// Reference is the scenario's runbook run headless on the lab, measured
	// by the drill lab test (TestDrillLab) on the 2-core machine.
	Reference Reference
}

// Reference is what the runbook, run headless by kremedy alone, took
// (Measured "" : not measured yet).
type Reference struct {
	OutageS  float64 `json:"outage_s"`
	RunS     float64 `json:"run_s"`
	Measured string  `json:"measured"`
}

// Scenarios are the drills' hidden causes (ZooKeeper-mode labs).
var Scenarios = map[string]Scenario{
	"ghost-topic": {
		Name: "ghost-topic", Runbook: "topic-cleanup", Set: []string{"recreate=true"},
		Hints: []string{
			"Only the customers of %[1]s are hurt; the other topics are fine. What does kremedy see? `kremedy diagnose --inventory %[2]s`",
			"Compare the topic ID in ZooKeeper with the one in the partition.metadata of each broker's %[1]s directories: a broker came back with segments of a deleted topic.",
			"The repair is the topic-cleanup runbook with recreate=true: `kremedy run topic-cleanup --inventory %[2]s --set topic=%[1]s --set recreate=true` (it detaches the customers for you, and reattaches them).",
		},
		Reference: Reference{OutageS: 9.0, RunS: 42.1, Measured: "TestDrillLab/resolved on the 2-core machine, 2026-12-02: the scripted trainee's headless topic-cleanup (recreate=true) with the drill's customers writing; 31 s of the run is the detach gate waiting for the producers to go idle (two runs: 41.6 s and 42.6 s, outage 9.0 s and 9.1 s)"},
	},
	"stale-metadata": {
		Name: "stale-metadata", Runbook: "topic-cleanup",
		Hints: []string{
			"Only the customers of %[1]s are hurt; brokers disagree about it. What does kremedy see? `kremedy diagnose --inventory %[2]s`",
			"ZooKeeper no longer has %[1]s but two brokers still serve it from a stale cache, and their disks hold its segments.",
			"The repair is the topic-cleanup runbook: `kremedy run topic-cleanup --inventory %[2]s --set topic=%[1]s` (full restart: the stale caches go, the segments are wiped).",
		},
		// Not measured with the drill's customers yet: the debrief says so.
	},
}

// Names lists the drill scenarios, sorted.
func Names() []string {
	var out []string
	for n := range Scenarios {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Pick resolves "random" (or "") with seed; any other name must be a drill
// scenario.
func Pick(name string, seed uint64, choices []string) (string, error) {
	if name == "" || name == "random" {
		if len(choices) == 0 {
			return "", errors.New("nothing to pick from")
		}
		r := rand.New(rand.NewPCG(seed, seed^0x6b72656d656479))
		return choices[r.IntN(len(choices))], nil
	}
	if !slices.Contains(choices, name) {
		return "", fmt.Errorf("%q is not one of %s", name, strings.Join(choices, ", "))
	}
	return name, nil
}

// Hint is one hint the trainee asked for.
type Hint struct {
	At    time.Time `json:"at"`
	Level int       `json:"level"`
	Text  string    `json:"text"`
}

// State is a drill's own record.
type State struct {
	Scenario     string     `json:"scenario"`
	Topic        string     `json:"topic"`
	Bystander    string     `json:"bystander"`
	KafkaVersion string     `json:"kafka_version"`
	Secure       bool       `json:"secure,omitempty"` // SASL_SSL, ZooKeeper ACLs, SSH through sudo
	Seed         uint64     `json:"seed"`
	Started      time.Time  `json:"started"` // the page: the clock starts
	Page         string     `json:"page"`
	Hints        []Hint     `json:"hints,omitempty"`
	TrafficPID   int        `json:"traffic_pid"`
	Ended        *time.Time `json:"ended,omitempty"`
	Resolved     *time.Time `json:"resolved,omitempty"` // when the victory check first passed
}

// Path is a file of the drill in lab directory dir.
func Path(dir, file string) string { return filepath.Join(dir, Sub, file) }

// ErrNoDrill means the lab directory holds no drill.
var ErrNoDrill = errors.New("no drill here")

// Load reads the drill of lab directory dir.
func Load(dir string) (*State, error) {
	b, err := os.ReadFile(Path(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no %s (start one with `kremedy drill start --dir %s`)", ErrNoDrill, dir, filepath.Join(Sub, stateFile), dir)
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", Path(dir, stateFile), err)
	}
	return &s, nil
}

// Save writes s durably.
func (s *State) Save(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, Sub), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteJSON(Path(dir, stateFile), s)
}

// NextHint returns the next hint (the last one again once all were given)
// and records it.
func (s *State) NextHint(now time.Time, inventory string) Hint {
	sc := Scenarios[s.Scenario]
	level := min(len(s.Hints)+1, len(sc.Hints))
	h := Hint{At: now, Level: level, Text: fmt.Sprintf(sc.Hints[level-1], s.Topic, inventory)}
	s.Hints = append(s.Hints, h)
	return h
}

// Command is one kremedy command run against a drill's inventory.
type Command struct {
	At      time.Time `json:"at"`
	Args    []string  `json:"args"`
	Exit    int       `json:"exit"`
	TookS   float64   `json:"took_s"`
	Error   string    `json:"error,omitempty"`
	RunDir  string    `json:"run_dir,omitempty"`
	Verb    string    `json:"verb"`              // diagnose, plan, run, resume, …
	Runbook string    `json:"runbook,omitempty"` // of plan, run
}

// Internal marks a process kremedy runs for a drill itself (the
// customers' process): it is not the trainee's and is not recorded.
func Internal() []string { return []string{internalEnv + "=" + internalMark} }

// DirOfInventory is the lab directory of a drill whose inventory is inv, or
// "" when inv is not a running drill's.
func DirOfInventory(inv string) string {
	if inv == "" || os.Getenv(internalEnv) == internalMark {
		return ""
	}
	dir := filepath.Dir(inv)
	s, err := Load(dir)
	if err != nil || s.Ended != nil {
		return ""
	}
	return dir
}

// Record appends c to the drill's commands (a private file: a command
// line may name a webhook, whose URL is its secret; RedactArgs hides the
// values of the flags known to carry one).
func Record(dir string, c Command) error {
	c.Args = RedactArgs(c.Args)
	f, err := os.OpenFile(Path(dir, commandsFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	b, err := json.Marshal(c)
	if err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Commands reads the drill's recorded commands, oldest first: a command's
// end record (Exit ≥ 0) replaces its start record (Exit -1, the same At
// and Args); a command with no end record was killed, and keeps Exit -1.
func Commands(dir string) ([]Command, error) {
	all, err := readLines[Command](Path(dir, commandsFile))
	var out []Command
	at := map[string]int{}
	for _, c := range all {
		key := c.At.Format(time.RFC3339Nano) + strings.Join(c.Args, "\x00")
		if i, ok := at[key]; ok {
			out[i] = c
			continue
		}
		at[key] = len(out)
		out = append(out, c)
	}
	return out, err
}

func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return out, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// TrafficState is what the traffic process writes: the counts by topic,
// the detached topics, and whether the counts are final.
type TrafficState struct {
	At     time.Time         `json:"at"`
	PID    int               `json:"pid"`
	Topics map[string]Counts `json:"topics"`
	Paused []string          `json:"paused,omitempty"`
	Final  bool              `json:"final"`
}

// ReadTraffic reads the traffic's last counts.
func ReadTraffic(dir string) (*TrafficState, error) {
	b, err := os.ReadFile(Path(dir, TrafficFile))
	if err != nil {
		return nil, err
	}
	var t TrafficState
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", Path(dir, TrafficFile), err)
	}
	return &t, nil
}

// Control is the traffic's control file: the topics whose customers are
// to be detached.
type Control struct {
	Paused []string `json:"paused"`
}

// ReadControl reads the control file (none: nothing paused).
func ReadControl(dir string) (Control, error) {
	var c Control
	b, err := os.ReadFile(Path(dir, ControlFile))
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}

// WriteControl writes the control file durably.
func WriteControl(dir string, c Control) error {
	slices.Sort(c.Paused)
	c.Paused = slices.Compact(c.Paused)
	return atomicfile.WriteJSON(Path(dir, ControlFile), c)
}

// Past is one earlier drill on this machine, for the debrief's comparison.
type Past struct {
	Ended          time.Time `json:"ended"`
	Scenario       string    `json:"scenario"`
	Resolved       bool      `json:"resolved"`
	TimeToResolved float64   `json:"time_to_resolved_s"`
	Hints          int       `json:"hints"`
}

// History reads this machine's earlier drills (file in cacheDir).
func History(cacheDir string) ([]Past, error) {
	return readLines[Past](filepath.Join(cacheDir, historyFile))
}

// AddHistory appends p to this machine's drills.
func AddHistory(cacheDir string, p Past) error {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(cacheDir, historyFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(p)
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// secretFlags are the flags whose value can be a secret itself (a Slack
// webhook's URL is its credential; a token): drill records show
// "[redacted]" instead. env:/file: references are kept: they name where a
// secret is, not the secret.
var secretFlags = []string{"--notify", "--notify-token"}

// RedactArgs is args with the values of secretFlags hidden, in both forms
// (`--notify URL` and `--notify=URL`).
func RedactArgs(args []string) []string {
	out := slices.Clone(args)
	keep := func(v string) bool { return strings.HasPrefix(v, "env:") || strings.HasPrefix(v, "file:") }
	for i := 0; i < len(out); i++ {
		a := out[i]
		for _, f := range secretFlags {
			if a == f && i+1 < len(out) {
				if !keep(out[i+1]) {
					out[i+1] = "[redacted]"
				}
				i++
				break
			}
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				if !keep(v) {
					out[i] = f + "=[redacted]"
				}
				break
			}
		}
	}
	return out
}
