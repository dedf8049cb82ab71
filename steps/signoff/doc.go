// Package signoff is the four-eyes rule: an approval Policy (an
// inventory's `policy: {approvals: 2, allowed_signers: FILE}`) under which
// a destructive step's plan needs, besides the operator's confirmation, an
// approval by another person. Approver wraps the operator's Approver (the
// TUI's, the headless one): the operator confirms as always, kremedy signs
// the plan's digest with the operator's key (--key), then the run waits —
// with progress, for at most the policy's timeout, Ctrl-C-able — writing
// a Request (approvals/<step>.request.json in the run directory) that
// `kremedy approve` shows and signs. A signature is OpenSSH's (ssh-keygen
// -Y sign, namespace kremedy-approval) of Message: the run, the step and
// the plan's digest, so an approval is for one plan of one step of one
// run, and a re-planned step needs a new one; it counts when `ssh-keygen
// -Y verify` finds it made by an allowed signer other than the operator
// (another key and another principal). Every signature is kept in the run
// directory; the approval the engine journals carries them (steps.Signoff).
// Keygen is the adapter over ssh-keygen (OpenSSH 8.2 or later).
package signoff
