// Package signoff is the four-eyes rule: an approval Policy (an
// inventory's `policy: {approvals: 2, allowed_signers: FILE}`) under which
// a destructive step's plan needs, besides the operator's confirmation, an
// approval by another person. Approver wraps the operator's Approver (the
// TUI's, the headless one): the operator confirms as always, kremedy signs
// the plan's digest with the operator's key (--key), then the run waits —
// with progress, for at most the policy's timeout, Ctrl-C-able — writing
// a Request (approvals/<step>.request.json in the run directory, with a
// random nonce of its own) that `kremedy approve` shows and signs. A
// signature is OpenSSH's (ssh-keygen -Y sign, namespace kremedy-approval)
// of Message: the run, the step, the plan's digest and the request's
// nonce, so an approval answers one request for one plan of one step of
// one run — a re-planned step, a later attempt or a resume needs a new one.
// It counts when `ssh-keygen -Y verify` finds it made by an allowed signer
// who is not the operator nor anyone counted already: another key, and no
// principal in common (every name allowed_signers gives each key, on any
// line, is compared; principals written as patterns are refused). A
// signature refused for a passing reason (allowed_signers missing or
// changed since the run started, ssh-keygen too slow) is judged again, and
// so is one signed again in the same file. Every signature is kept in the
// run directory; the approval the engine journals carries them
// (steps.Signoff, with the request's nonce). In a run shared with the
// approvers' group (policy.group, Approver.Shared) approvals/ is 3770 —
// setgid, and sticky so nobody removes another's file — and the request
// and every signature 0640, so that each person approves from their own
// account. Keygen is the adapter over ssh-keygen (OpenSSH 8.2 or later).
package signoff
