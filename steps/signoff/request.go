package signoff

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/steps"
)

// Dir is the folder of a run directory that holds its approvals: the
// requests of a waiting run and every signature, kept as evidence.
const Dir = "approvals"

// Message is what a signer signs to approve one plan of one step of one
// run, in answer to one request: the plan's digest, the run and step it is
// for (a signature of the same plan in another run does not count in this
// one), and the request's nonce (a signature made for an earlier request —
// an earlier attempt, a resume days later of a plan with the same digest —
// does not count for a later one).
func Message(run, step, digest, nonce string) []byte {
	return fmt.Appendf(nil, "kremedy approval v2\nrun %s\nstep %s\ndigest %s\nnonce %s\n", run, step, digest, nonce)
}

// NewNonce is a request's nonce: 16 random bytes, in hex.
func NewNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("a random nonce for the approval request: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Request is what a run waiting for approvals writes for the approvers
// (approvals/<step>.request.json): what to sign, and what it is.
type Request struct {
	Run     string `json:"run"`
	Runbook string `json:"runbook"`
	Cluster string `json:"cluster"`
	Lab     bool   `json:"lab"`
	Step    string `json:"step"`
	Title   string `json:"title"`
	Risk    string `json:"risk"`
	// Digest is the plan's: what an approval signs (Message).
	Digest string `json:"digest"`
	// Nonce is this request's, random: an approval signs it too, so it
	// answers this request only.
	Nonce string      `json:"nonce"`
	Plan  *steps.Plan `json:"plan"`
	// Operator is who confirmed the plan (their signature's identity):
	// their key and names do not count again.
	Operator Identity `json:"operator"`
	// Need is how many approvals by other people the plan needs.
	Need           int       `json:"need"`
	AllowedSigners string    `json:"allowed_signers"`
	Since          time.Time `json:"since"`
	Until          time.Time `json:"until"`
}

var (
	stepRe  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	nonceRe = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// ErrBadRequest: a request file that is not one kremedy wrote (a step,
// digest or nonce that could name a file outside approvals/).
var ErrBadRequest = errors.New("not a valid approval request")

// Check refuses a request whose step, digest or nonce is not what a run
// writes: the step names files in approvals/, so it is letters, digits,
// `.`, `_` and `-` and never `..`; the digest is a sha256 and the nonce 16
// bytes, in lower-case hex.
func (r Request) Check() error {
	switch {
	case !stepRe.MatchString(r.Step) || strings.Contains(r.Step, ".."):
		return fmt.Errorf("%w: step %q is not a step id (letters, digits, '.', '_', '-', no '..')", ErrBadRequest, r.Step)
	case !digestRe.MatchString(r.Digest):
		return fmt.Errorf("%w: digest %q is not a sha256 in hex", ErrBadRequest, r.Digest)
	case !nonceRe.MatchString(r.Nonce):
		return fmt.Errorf("%w: nonce %q is not 32 hex digits (a request of an older kremedy has none: run the step again with this one)", ErrBadRequest, r.Nonce)
	case r.Run == "":
		return fmt.Errorf("%w: it names no run", ErrBadRequest)
	}
	return nil
}

// RequestPath is where a run waiting for approvals of step writes its
// Request.
func RequestPath(runDir, step string) string {
	return filepath.Join(runDir, Dir, step+".request.json")
}

// ErrNoRequest: nothing in the run waits for an approval now.
var ErrNoRequest = errors.New("nothing waits for an approval")

// Requests reads the requests of the run in runDir (for step, or every
// one when step is ""), oldest first. A request file that is not a
// regular file of at most 64 KiB, or whose step, digest or nonce is not
// what a run writes (Check), is an error.
func Requests(runDir, step string) ([]Request, error) {
	pattern := filepath.Join(runDir, Dir, "*.request.json")
	if step != "" {
		pattern = RequestPath(runDir, step)
	}
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var out []Request
	for _, f := range files {
		b, err := readRegular(f, maxApprovalFile)
		if errors.Is(err, os.ErrNotExist) {
			continue // answered meanwhile
		}
		if err != nil {
			return nil, err
		}
		var r Request
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if err := r.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if f != RequestPath(runDir, r.Step) {
			return nil, fmt.Errorf("%s: %w: it is for step %s, whose request is %s", f, ErrBadRequest, r.Step, filepath.Base(RequestPath(runDir, r.Step)))
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Request) int { return a.Since.Compare(b.Since) })
	if len(out) == 0 {
		return nil, ErrNoRequest
	}
	return out, nil
}

// operatorSig ends the name of the operator's signature file; no
// approver's (sigName) can end so.
const operatorSig = "+operator.sig"

// sigName is where an approver's signature of step's plan with digest, in
// answer to the request with nonce, is kept; who (a principal) keeps
// approvers apart.
func sigName(step, digest, nonce, who string) string {
	return step + "." + digest + "." + nonce + "." + unsafeName.ReplaceAllString(who, "_") + ".sig"
}

// operatorName is where the operator's signature for a request is kept.
func operatorName(step, digest, nonce string) string {
	return step + "." + digest + "." + nonce + "." + operatorSig
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9@._-]+`)

// WriteSignature stores an approver's signature of r's plan in the run
// directory, where the waiting run finds it: 0640 in a run shared with
// its approvers' group (approvals/ lets the group write: the file takes
// its group, and the operator's run, another user, reads it), 0600
// otherwise. A request that fails Check is refused: nothing is written.
func WriteSignature(runDir string, r Request, who string, sig []byte) (string, error) {
	if err := r.Check(); err != nil {
		return "", err
	}
	path := filepath.Join(runDir, Dir, sigName(r.Step, r.Digest, r.Nonce, who))
	perm := os.FileMode(0o600)
	if fi, err := os.Stat(filepath.Join(runDir, Dir)); err == nil && fi.Mode().Perm()&0o020 != 0 {
		perm = steps.SharedFileMode
	}
	if err := atomicfile.WriteFileMode(path, sig, perm); err != nil {
		return "", err
	}
	return path, nil
}

// sigFile is a signature file found for a step: the digest and the
// request's nonce its name says it signs, and whether it is the
// operator's. old: named the way a kremedy before nonces named it.
type sigFile struct {
	path, digest, nonce string
	operator, old       bool
}

var digestRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

// signatures lists the signature files for step in the run directory.
func signatures(runDir, step string) ([]sigFile, error) {
	files, err := filepath.Glob(filepath.Join(runDir, Dir, step+".*.sig"))
	if err != nil {
		return nil, err
	}
	var out []sigFile
	for _, f := range files {
		rest := strings.TrimPrefix(filepath.Base(f), step+".")
		digest, rest, ok := strings.Cut(rest, ".")
		if !ok || !digestRe.MatchString(digest) {
			continue // another step's whose id starts with this one's
		}
		nonce, who, ok := strings.Cut(rest, ".")
		if !ok || !nonceRe.MatchString(nonce) {
			out = append(out, sigFile{path: f, digest: digest, old: true, operator: rest == operatorSig})
			continue
		}
		out = append(out, sigFile{path: f, digest: digest, nonce: nonce, operator: who == operatorSig})
	}
	return out, nil
}
