package steps

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Risk says how much a step can hurt.
type Risk int

const (
	ReadOnly Risk = iota
	Low
	Destructive
)

var riskNames = [...]string{"read-only", "low", "destructive"}

// MarshalText writes the risk's name ("read-only", "low", "destructive").
func (r Risk) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func (r Risk) String() string {
	if r < 0 || int(r) >= len(riskNames) {
		return fmt.Sprintf("Risk(%d)", int(r))
	}
	return riskNames[r]
}

// ParseRisk reads a runbook's risk value.
func ParseRisk(s string) (Risk, error) {
	for r := range riskNames {
		if riskNames[r] == s {
			return Risk(r), nil
		}
	}
	return 0, fmt.Errorf("unknown risk %q", s)
}

// RiskNames lists the values ParseRisk accepts.
func RiskNames() []string { return riskNames[:] }

// Confirm is a step's confirmation policy.
type Confirm int

const (
	ConfirmNone  Confirm = iota
	ConfirmYes           // y/N, default No
	ConfirmTyped         // the operator types the runbook's confirmation word
)

var confirmNames = [...]string{"none", "yes", "typed"}

// MarshalText writes the confirmation's name ("none", "yes", "typed").
func (c Confirm) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

func (c Confirm) String() string {
	if c < 0 || int(c) >= len(confirmNames) {
		return fmt.Sprintf("Confirm(%d)", int(c))
	}
	return confirmNames[c]
}

// ParseConfirm reads a runbook's confirm value.
func ParseConfirm(s string) (Confirm, error) {
	for c := range confirmNames {
		if confirmNames[c] == s {
			return Confirm(c), nil
		}
	}
	return 0, fmt.Errorf("unknown confirm policy %q", s)
}

// ConfirmNames lists the values ParseConfirm accepts.
func ConfirmNames() []string { return confirmNames[:] }

// Info is a step's static description, from its runbook.
type Info struct {
	ID       string        `json:"id"`
	Kind     string        `json:"kind"`
	Title    string        `json:"title"`
	Why      string        `json:"why"`
	Risk     Risk          `json:"risk"`
	Confirm  Confirm       `json:"confirm"`
	Rollback string        `json:"-"` // a text/template, filled with the run's paths and parameters
	Timeout  time.Duration `json:"timeout"`
	// Window names the group of consecutive steps this one belongs to:
	// planned and confirmed together before the first runs, then run back
	// to back ("" for none).
	Window string `json:"window,omitempty"`
}

// Check is one pre- or postcondition result.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Kind implements one kind of step. Plan is read-only and lists every
// concrete action. Apply performs exactly the plan it is given, action by
// action, and is idempotent: applying a plan whose actions are already done
// succeeds. Verify re-checks the step's postconditions; on resume it is what
// proves an earlier completion still holds (env.Rechecking() says so).
//
// A kind reaches the cluster, the run's files and its history only through
// env; its options come from the runbook, decoded when it was loaded.
type Kind interface {
	Plan(ctx context.Context, env *Env) (*Plan, error)
	Apply(ctx context.Context, env *Env, p *Plan) error
	Verify(ctx context.Context, env *Env) ([]Check, error)
}

// Step is a configured step of a runbook.
type Step struct {
	Info Info
	Kind Kind
}

// AllOK reports whether every check passed.
func AllOK(cs []Check) bool {
	for _, c := range cs {
		if !c.OK {
			return false
		}
	}
	return true
}

// Failing lists the checks that failed, each with its detail.
func Failing(cs []Check) string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, c.Name+" ("+c.Detail+")")
		}
	}
	return strings.Join(out, "; ")
}
