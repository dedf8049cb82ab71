package signoff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Namespace is the signatures' namespace (ssh-keygen -Y sign -n): a
// signature made for anything else (git commits, files) never counts.
const Namespace = "kremedy-approval"

// Errors of the signer, kept by every error that wraps them.
var (
	// ErrKeygen: no ssh-keygen that signs and verifies (OpenSSH 8.2 or
	// later: -Y sign, verify, find-principals, check-novalidate).
	ErrKeygen = errors.New("no usable ssh-keygen")
	// ErrNotAllowed: the signing key is not one of the allowed signers.
	ErrNotAllowed = errors.New("not an allowed signer")
	// ErrBadSignature: the signature is not one of this message by an
	// allowed signer (another digest, run or step; another namespace; a
	// key allowed_signers restricts to other namespaces or times).
	ErrBadSignature = errors.New("the signature does not verify")
)

// Identity is who a verified signature is from.
type Identity struct {
	// Principal is the signer's name in allowed_signers: the one the
	// signature verified for.
	Principal string
	// Principals are every name allowed_signers gives the signing key, on
	// any line: one person is never two approvers under two spellings.
	Principals []string `json:",omitempty"`
	// Key is the signing key's fingerprint (SHA256:…).
	Key string
}

// Signer signs and verifies approvals: OpenSSH's ssh-keygen (Keygen).
type Signer interface {
	// Sign signs msg with key (a private key file, or a public one whose
	// private half ssh-agent holds). Interactive lets ssh-keygen ask for
	// the key's passphrase on the terminal.
	Sign(ctx context.Context, key string, msg []byte, interactive bool) ([]byte, error)
	// Verify checks that sig is msg's signature by one of the allowed
	// signers, in Namespace. ErrNotAllowed names the key's fingerprint.
	// ErrNotAllowed and ErrBadSignature are verdicts on the signature; any
	// other error (ErrPattern, a missing allowed_signers, a timeout) is
	// about the allowed signers or the machine, and may pass.
	Verify(ctx context.Context, allowedSigners string, msg, sig []byte) (Identity, error)
}

// Keygen is OpenSSH's ssh-keygen (-Y sign, -Y find-principals, -Y verify,
// -Y check-novalidate; `man ssh-keygen`, ALLOWED SIGNERS).
type Keygen struct {
	// Path is ssh-keygen's path; "" finds it on PATH.
	Path string
}

func (k Keygen) path() string {
	if k.Path != "" {
		return k.Path
	}
	return "ssh-keygen"
}

// Check says whether ssh-keygen is there and knows -Y find-principals
// (OpenSSH 8.2+; -Y sign and verify are 8.1's): it is asked to find the
// principals of an empty signature, which a new one refuses as a bad
// signature and an old one as an unknown option.
func (k Keygen) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	path, err := exec.LookPath(k.path())
	if err != nil {
		return fmt.Errorf("%w: %v; install OpenSSH's client tools (Debian, Ubuntu: apt-get install openssh-client; macOS has it)", ErrKeygen, err)
	}
	_, stderr, _ := k.run(ctx, nil, false, "-Y", "find-principals", "-s", os.DevNull, "-f", os.DevNull)
	if strings.Contains(stderr, "unknown option") || strings.Contains(stderr, "usage:") || strings.Contains(stderr, "Unsupported") || strings.Contains(stderr, "invalid") {
		return fmt.Errorf("%w: %s (%s) cannot sign or verify approvals (-Y find-principals needs OpenSSH 8.2 or later): install a newer openssh-client", ErrKeygen, path, opensshVersion(ctx))
	}
	return nil
}

func opensshVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "ssh", "-V").CombinedOutput()
	if err != nil {
		return "OpenSSH version unknown"
	}
	return strings.TrimSpace(string(out))
}

// run runs ssh-keygen with stdin; without interactive it has no terminal
// (a new session): a key that needs a passphrase fails instead of asking
// on the operator's screen.
func (k Keygen) run(ctx context.Context, stdin []byte, interactive bool, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, k.path(), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if !interactive {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	err := cmd.Run()
	return out.String(), strings.TrimSpace(errb.String()), err
}

// Sign implements Signer.
func (k Keygen) Sign(ctx context.Context, key string, msg []byte, interactive bool) ([]byte, error) {
	if !interactive {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	if _, err := os.Stat(key); err != nil {
		return nil, fmt.Errorf("sign with %s: %w", key, err)
	}
	out, stderr, err := k.run(ctx, msg, interactive, "-Y", "sign", "-n", Namespace, "-f", key, "-")
	if err != nil {
		hint := ""
		if !interactive {
			hint = "; a key with a passphrase must be in ssh-agent (ssh-add " + key + ")"
		}
		return nil, fmt.Errorf("sign with %s: %s%s: %w", key, keygenSaid(stderr, err), hint, err)
	}
	if !strings.Contains(out, "-----BEGIN SSH SIGNATURE-----") {
		return nil, fmt.Errorf("sign with %s: ssh-keygen wrote no signature (%s)", key, keygenSaid(stderr, nil))
	}
	return []byte(out), nil
}

// keygenSaid is ssh-keygen's complaint without its chatter.
func keygenSaid(stderr string, err error) string {
	var lines []string
	for l := range strings.SplitSeq(stderr, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Signing data on standard input") && !strings.HasPrefix(l, "Write signature") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 && err != nil {
		return err.Error()
	}
	return strings.Join(lines, "; ")
}

var keyRe = regexp.MustCompile(`key (SHA256:[A-Za-z0-9+/=]+)`)

// Verify implements Signer: find-principals names who the signing key
// belongs to, then verify checks the signature of msg for each in turn
// (verify applies allowed_signers' namespaces= and validity options). The
// Identity's Principals are every name the key has in allowed_signers; a
// key allowed under a pattern is refused (ErrPattern). An ssh-keygen that
// does not answer within 20 s is neither ErrNotAllowed nor
// ErrBadSignature: the signature was not judged.
func (k Keygen) Verify(ctx context.Context, allowedSigners string, msg, sig []byte) (Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "kremedy-sig-")
	if err != nil {
		return Identity{}, err
	}
	defer os.RemoveAll(dir)
	sigFile := filepath.Join(dir, "approval.sig")
	if err := os.WriteFile(sigFile, sig, 0o600); err != nil {
		return Identity{}, err
	}
	if _, err := os.Stat(allowedSigners); err != nil {
		return Identity{}, fmt.Errorf("allowed signers: %w", err)
	}
	out, stderr, err := k.run(ctx, nil, false, "-Y", "find-principals", "-s", sigFile, "-f", allowedSigners)
	if ctx.Err() != nil {
		return Identity{}, k.late(ctx)
	}
	if err != nil {
		fp := k.fingerprint(ctx, sigFile, msg)
		if ctx.Err() != nil {
			return Identity{}, k.late(ctx)
		}
		if fp == "" {
			return Identity{}, fmt.Errorf("%w: %s", ErrBadSignature, keygenSaid(stderr, err))
		}
		return Identity{Key: fp}, fmt.Errorf("%w: key %s is not in %s", ErrNotAllowed, fp, allowedSigners)
	}
	var found []string
	for p := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if p = strings.TrimSpace(p); p != "" {
			found = append(found, p)
		}
	}
	var last string
	for _, p := range found {
		vout, verr, err := k.run(ctx, msg, false, "-Y", "verify", "-f", allowedSigners, "-I", p, "-n", Namespace, "-s", sigFile)
		if ctx.Err() != nil {
			return Identity{}, k.late(ctx)
		}
		if err == nil {
			m := keyRe.FindStringSubmatch(vout + verr)
			if m == nil {
				return Identity{}, fmt.Errorf("%w: ssh-keygen said %q, naming no key", ErrBadSignature, strings.TrimSpace(vout+verr))
			}
			id := Identity{Principal: p, Key: m[1]}
			// find-principals prints the first matching line's names
			// only: the key's other lines name the same person too.
			more, err := principalsOf(allowedSigners, id.Key)
			if err != nil {
				return id, err
			}
			for _, q := range append(found, more...) {
				if !slices.Contains(id.Principals, q) {
					id.Principals = append(id.Principals, q)
				}
			}
			if q := patternIn(id.Principals); q != "" {
				return id, fmt.Errorf("%w: the key %s is allowed as %q in %s — an approval must name one person: write each person's principal out, never *, ? or !", ErrPattern, id.Key, q, allowedSigners)
			}
			return id, nil
		}
		last = keygenSaid(verr+"\n"+vout, err)
	}
	return Identity{Key: k.fingerprint(ctx, sigFile, msg)}, fmt.Errorf("%w: %s", ErrBadSignature, last)
}

// late is a verification that ssh-keygen did not finish: not a verdict
// on the signature (a loaded machine; the run's interruption).
func (k Keygen) late(ctx context.Context) error {
	return fmt.Errorf("ssh-keygen did not answer in time, the signature was not judged: %w", ctx.Err())
}

func patternIn(ps []string) string {
	for _, p := range ps {
		if isPattern(p) {
			return p
		}
	}
	return ""
}

// fingerprint is the key that made sig, if sig is a signature of msg at
// all ("" otherwise).
func (k Keygen) fingerprint(ctx context.Context, sigFile string, msg []byte) string {
	out, stderr, err := k.run(ctx, msg, false, "-Y", "check-novalidate", "-n", Namespace, "-s", sigFile)
	if err != nil {
		return ""
	}
	if m := keyRe.FindStringSubmatch(out + stderr); m != nil {
		return m[1]
	}
	return ""
}
