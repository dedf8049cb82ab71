package steps

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Op is what an action does. The set is closed: the report, the TUI and the
// digest of a plan all depend on it.
type Op int

const (
	OpCheck    Op = iota // read and check; changes nothing
	OpWait               // wait for a condition; changes nothing
	OpSave               // write a file in the run directory (a backup, a manifest, saved offsets)
	OpZKDelete           // delete one znode at the version the plan read
	OpZKSet              // rewrite one znode at the version the plan read
	OpSSH                // run a command on a host
	OpMove               // move a directory on a host
	OpKafka              // a Kafka request that changes the cluster
)

var opNames = [...]string{"check", "wait", "save", "zk-delete", "zk-set", "ssh", "move", "kafka"}

func (o Op) String() string {
	if o < 0 || int(o) >= len(opNames) {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return opNames[o]
}

// Changes reports whether an action of this kind changes anything (what
// the report lists under "What changed").
func (o Op) Changes() bool { return o != OpCheck && o != OpWait }

// MarshalText writes the op's name (the journal stays readable).
func (o Op) MarshalText() ([]byte, error) {
	if o < 0 || int(o) >= len(opNames) {
		return nil, fmt.Errorf("unknown op %d", int(o))
	}
	return []byte(o.String()), nil
}

// UnmarshalText reads an op's name.
func (o *Op) UnmarshalText(b []byte) error {
	for i, n := range opNames {
		if n == string(b) {
			*o = Op(i)
			return nil
		}
	}
	return fmt.Errorf("unknown op %q", b)
}

// Action is one concrete thing a plan will do. Args are the kind's own typed
// arguments for it (a move's source and destination, a topic's settings):
// Apply runs each action from its own fields and args, never from anything
// the operator was not shown.
type Action struct {
	ID      string `json:"id"` // unique within its plan
	Op      Op     `json:"op"`
	Target  string `json:"target"`            // znode path, broker, directory
	Detail  string `json:"detail,omitempty"`  // command, destination, what is saved
	Version *int32 `json:"version,omitempty"` // the znode version the plan read
	Broker  int32  `json:"broker,omitempty"`
	Args    any    `json:"args,omitempty"`
}

func (a Action) String() string {
	s := a.Op.String() + " " + a.Target
	if a.Version != nil {
		s += fmt.Sprintf(" (version %d)", *a.Version)
	}
	if a.Detail != "" {
		s += ": " + a.Detail
	}
	return s
}

// ArgsOf returns an action's typed arguments: those of a plan just made,
// or of an action read back from the journal (History), whose arguments
// are JSON there — decoded strictly, so that another kind's arguments (a
// field T does not have) are an error, never a T of zero values.
func ArgsOf[T any](a Action) (T, error) {
	var zero T
	if v, ok := a.Args.(T); ok {
		return v, nil
	}
	if m, ok := a.Args.(map[string]any); ok {
		b, err := json.Marshal(m)
		if err != nil {
			return zero, err
		}
		var v T
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&v); err != nil {
			return zero, fmt.Errorf("action %s (%s): its arguments are not %T: %w", a.ID, a.Op, zero, err)
		}
		return v, nil
	}
	return zero, fmt.Errorf("action %s (%s): its arguments are %T, not %T", a.ID, a.Op, a.Args, zero)
}

// Plan is what a step will do, computed read-only from the cluster as it is
// now. Apply acts on exactly this plan: the approval carries its Digest and
// the engine refuses to apply a plan whose digest differs.
type Plan struct {
	Step    string   `json:"step"`
	Kind    string   `json:"kind,omitempty"`
	Summary string   `json:"summary"`
	Actions []Action `json:"actions"`
	Notes   []string `json:"notes,omitempty"`
	Facts   []string `json:"facts,omitempty"` // what the step saw (preflight, diagnosis)
	NoOp    bool     `json:"noop,omitempty"`  // nothing to do: already in the wanted state
	// EndsRun, on a no-op plan, says the whole runbook has nothing to do
	// (e.g. the topic is already consistent): the run finishes after this
	// step and the steps after it are not needed.
	EndsRun bool `json:"ends_run,omitempty"`
	// Rollback is the step's rollback note; a kind may set what this
	// plan adds to the runbook's (its backups, by host).
	Rollback string `json:"rollback,omitempty"`
}

// Digest identifies what the plan will do: its step, summary and every
// action with its arguments (sha256 of their JSON). Notes, facts and the
// rollback note are what the operator reads, not what runs.
func (p *Plan) Digest() string {
	b, err := json.Marshal(struct {
		Step, Kind, Summary string
		NoOp, EndsRun       bool
		Actions             []Action
	}{p.Step, p.Kind, p.Summary, p.NoOp, p.EndsRun, p.Actions})
	if err != nil {
		// Arguments that do not encode cannot be shown, so cannot be
		// approved: a digest nothing matches.
		return "unencodable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
