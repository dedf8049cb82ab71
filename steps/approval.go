package steps

import (
	"context"
	"fmt"
)

// Decision is the operator's answer to a plan.
type Decision int

const (
	Approve Decision = iota
	Skip
	Abort
)

var decisionNames = [...]string{"approve", "skip", "abort"}

func (d Decision) String() string {
	if d < 0 || int(d) >= len(decisionNames) {
		return fmt.Sprintf("Decision(%d)", int(d))
	}
	return decisionNames[d]
}

// Approval answers one confirmation.
type Approval struct {
	Decision Decision
	Typed    string // for ConfirmTyped: what the operator typed
	Reason   string // for Skip: why (journaled)
	By       string // who approved (user name, "headless --yes")
	// Digest is the Plan.Digest of the plan the operator was shown. The
	// engine applies a plan only if it still has this digest.
	Digest string
}

// Approver is asked before any step with a confirmation policy. It never
// sees a step whose plan is a no-op. It must answer with the digest of the
// plan it showed.
type Approver interface {
	Approve(ctx context.Context, info Info, plan *Plan) (Approval, error)
}
