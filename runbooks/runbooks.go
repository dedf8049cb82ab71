package runbooks

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/cleanup"
	"github.com/kremedy/kremedy/steps/migrate"
	"github.com/kremedy/kremedy/steps/offline"
	"github.com/kremedy/kremedy/steps/quorum"
	"github.com/kremedy/kremedy/steps/reassign"
	"github.com/kremedy/kremedy/steps/restart"
	"github.com/kremedy/kremedy/steps/space"
)

// builtin holds the built-in runbooks, one per file named after it.
//
//go:embed *.yaml
var builtin embed.FS

// MaxSize is the largest runbook file Parse accepts.
const MaxSize = 256 << 10

// ErrUnknownRunbook is wrapped by Get's error for a name no runbook has.
var ErrUnknownRunbook = errors.New("unknown runbook")

// ErrInvalidParam is wrapped by every error ParseSet and Bind return.
var ErrInvalidParam = errors.New("invalid runbook parameter")

// Runbook is one repair procedure: the parameters an operator sets and the
// steps the engine walks through.
type Runbook struct {
	Name        string
	Summary     string
	Description string
	Mode        string // "zookeeper" or "kraft": the clusters the runbook acts on
	// ConfirmWord is a template of what a destructive step's operator
	// types ({{.topic}}, {{.cluster}}); ConfirmNoun says what it is.
	ConfirmWord, ConfirmNoun string
	// Artifacts are the files the steps write in the run directory.
	Artifacts []Artifact
	// Next is what to do after a successful run (templates).
	Next   []string
	Params []Param
	Steps  []StepSpec
	File   string // where it was read: "runbooks/topic-cleanup.yaml" for a built-in

	kinds *steps.Registry
}

// Artifact is a file a runbook's steps write in the run directory.
type Artifact struct {
	ID   string // its name in templates and for the kinds: {{.backup}}
	What string
	Path string // relative to the run directory
}

// Param is a value the operator passes with --set name=value.
type Param struct {
	Name        string
	Type        string // string, int, bool, duration, or a pack's type (topic, brokers, topics, batch)
	Description string
	Required    bool
	Default     string // as written in the runbook; meaningful only when HasDefault
	HasDefault  bool
}

// StepSpec configures one step of a runbook; Kind names the Go code that
// runs it.
type StepSpec struct {
	ID       string
	Kind     string
	Title    string
	Why      string        // the training note shown before the step runs
	Risk     string        // read-only, low or destructive
	Confirm  string        // none, yes or typed; destructive steps need typed
	Rollback string        // a text/template; empty only for read-only steps
	Timeout  time.Duration // 0: no bound on the step's work
	// Window groups consecutive steps planned and confirmed together
	// before the first runs, then run back to back ("" for none).
	Window string
	// With sets the kind's options: option name → a value as written, or
	// "$param" for the value of a runbook parameter.
	With map[string]string
	Line int // where the step starts in File

	at         pos       // where the step starts, until it is checked
	windowAt   pos       // where window: is
	with       *withNode // where with: is, until it is checked against the kind
	rollbackAt *withNode // where the rollback note is, for its template check
}

// Builtin parses every embedded runbook against the step kinds kremedy has
// (Kinds) and returns them sorted by name. A built-in runbook's name must
// be its file's base name.
func Builtin() ([]*Runbook, error) {
	kinds := Kinds()
	files, err := fs.Glob(builtin, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("built-in runbooks: %w", err)
	}
	var rbs []*Runbook
	var errs []error
	for _, f := range files {
		data, err := builtin.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("built-in runbook %s: %w", f, err))
			continue
		}
		rb, err := parse("runbooks/"+f, data, kinds, strings.TrimSuffix(f, ".yaml"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rbs = append(rbs, rb)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(rbs, func(a, b *Runbook) int { return strings.Compare(a.Name, b.Name) })
	return rbs, nil
}

// Get returns the built-in runbook called name. For a name no runbook has,
// the error wraps ErrUnknownRunbook and lists the names there are.
func Get(name string) (*Runbook, error) {
	rbs, err := Builtin()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(rbs))
	for i, rb := range rbs {
		if rb.Name == name {
			return rb, nil
		}
		names[i] = rb.Name
	}
	return nil, fmt.Errorf("%w %q; the built-in runbooks are %s", ErrUnknownRunbook, name, strings.Join(names, ", "))
}

// Kinds is every step kind kremedy has, from its kind packs.
var Kinds = sync.OnceValue(func() *steps.Registry {
	r := steps.NewRegistry()
	cleanup.Register(r)
	restart.Register(r)
	migrate.Register(r)
	reassign.Register(r)
	offline.Register(r)
	space.Register(r)
	quorum.Register(r)
	return r
})
