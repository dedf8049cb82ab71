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

// digestVersion starts the bytes a digest hashes: a digest of another
// form (v1 hashed Go-struct JSON of the actions only) never equals one of
// this form.
const digestVersion = "kremedy plan digest v2\n"

// Digest identifies the plan as the operator and every approver read it:
// the sha256 of its canonical JSON (CanonicalJSON) — step, kind, summary,
// every action with its arguments, the notes, the facts, the rollback note
// and the no-op flags. A plan read back from the journal digests the same
// (DigestJSON over the journaled bytes), so anyone holding the journal can
// recompute what was approved: `kremedy approve` does, and refuses a plan
// whose journaled form does not match the digest the run waits for.
func (p *Plan) Digest() string {
	b, err := json.Marshal(p)
	if err != nil {
		// Arguments that do not encode cannot be shown, so cannot be
		// approved: a digest nothing matches.
		return "unencodable: " + err.Error()
	}
	d, err := DigestJSON(b)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	return d
}

// planRecordOnly are the fields a plan record adds to a plan's JSON (the
// digest it was journaled with, whether it was planned ahead): they are not
// part of what the digest covers.
var planRecordOnly = []string{"digest", "ahead"}

// DigestJSON is the digest of a plan from its JSON: a plan's own, or a
// journal plan record's (its "digest" and "ahead" fields are left out). It
// equals Plan.Digest of the plan the JSON encodes.
func DigestJSON(raw []byte) (string, error) {
	c, err := CanonicalJSON(raw, planRecordOnly...)
	if err != nil {
		return "", fmt.Errorf("plan digest: %w", err)
	}
	sum := sha256.Sum256(append([]byte(digestVersion), c...))
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalJSON re-encodes a JSON value in one form whatever wrote it:
// object keys sorted (as encoding/json writes maps), numbers as their
// literal text (json.Number: an int64 never passes through float64), no
// insignificant space. drop names keys of a top-level object left out. A Go
// value marshalled, and the same value read back from the journal into
// maps, give the same bytes: the struct's field order is gone in both.
func CanonicalJSON(raw []byte, drop ...string) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	if m, ok := v.(map[string]any); ok {
		for _, k := range drop {
			delete(m, k)
		}
	} else if len(drop) > 0 {
		return nil, fmt.Errorf("not a JSON object")
	}
	return json.Marshal(v)
}
