package signoff

import (
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
// run: the plan's digest, and the run and step it is for (a signature of
// the same plan in another run does not count in this one).
func Message(run, step, digest string) []byte {
	return fmt.Appendf(nil, "kremedy approval v1\nrun %s\nstep %s\ndigest %s\n", run, step, digest)
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
	Digest string      `json:"digest"`
	Plan   *steps.Plan `json:"plan"`
	// Operator is who confirmed the plan (their signature's identity):
	// their key does not count again.
	Operator Identity `json:"operator"`
	// Need is how many approvals by other people the plan needs.
	Need           int       `json:"need"`
	AllowedSigners string    `json:"allowed_signers"`
	Since          time.Time `json:"since"`
	Until          time.Time `json:"until"`
}

// RequestPath is where a run waiting for approvals of step writes its
// Request.
func RequestPath(runDir, step string) string {
	return filepath.Join(runDir, Dir, step+".request.json")
}

// ErrNoRequest: nothing in the run waits for an approval now.
var ErrNoRequest = errors.New("nothing waits for an approval")

// Requests reads the requests of the run in runDir (for step, or every
// one when step is ""), oldest first.
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
		b, err := os.ReadFile(f)
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

// sigName is where an approver's signature of step's plan with digest is
// kept; who (a principal) keeps approvers apart.
func sigName(step, digest, who string) string {
	return step + "." + digest + "." + unsafeName.ReplaceAllString(who, "_") + ".sig"
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9@._-]+`)

// WriteSignature stores an approver's signature of r's plan in the run
// directory, where the waiting run finds it.
func WriteSignature(runDir string, r Request, who string, sig []byte) (string, error) {
	path := filepath.Join(runDir, Dir, sigName(r.Step, r.Digest, who))
	if err := atomicfile.WriteFile(path, sig); err != nil {
		return "", err
	}
	return path, nil
}

// sigFile is a signature file found for a step: the digest its name says
// it signs, and whether it is the operator's.
type sigFile struct {
	path, digest string
	operator     bool
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
		digest, who, ok := strings.Cut(rest, ".")
		if !ok || !digestRe.MatchString(digest) {
			continue // another step's whose id starts with this one's
		}
		out = append(out, sigFile{path: f, digest: digest, operator: who == operatorSig})
	}
	return out, nil
}
