package steps

import (
	"context"
	"fmt"
	"time"
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
	// Signoffs are the signatures an approval policy asked for besides
	// the operator's confirmation (a second person's, steps/signoff), each
	// of the same digest: the engine refuses an approval carrying one of
	// another plan, and journals them with the approval.
	Signoffs []Signoff
}

// Signoff is one person's verified signature of a plan's digest.
type Signoff struct {
	// By is the signer's principal in the policy's allowed_signers.
	By string `json:"by"`
	// Key is the signing key's fingerprint (SHA256:…).
	Key    string `json:"key"`
	Digest string `json:"digest"`
	// Nonce is the approval request's (steps/signoff): the signature
	// answers that request only.
	Nonce string `json:"nonce,omitempty"`
	// At is when kremedy verified the signature.
	At time.Time `json:"at"`
	// Operator: the signature of the operator who confirmed the plan.
	Operator bool `json:"operator,omitempty"`
	// File is the signature file, in the run directory.
	File string `json:"file,omitempty"`
}

func (s Signoff) String() string {
	who := s.By
	if s.Operator {
		who += " (operator)"
	}
	return fmt.Sprintf("%s, key %s, at %s UTC", who, s.Key, s.At.UTC().Format("15:04:05"))
}

// Approver is asked before any step with a confirmation policy. It never
// sees a step whose plan is a no-op. It must answer with the digest of the
// plan it showed.
type Approver interface {
	Approve(ctx context.Context, info Info, plan *Plan) (Approval, error)
}
