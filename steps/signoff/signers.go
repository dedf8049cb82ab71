package signoff

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// Limits of the files an approval reads: a request or a signature in a
// run's approvals/ (written by the run and `kremedy approve`, a few KiB),
// and the allowed signers (one line per key).
const (
	maxApprovalFile = 64 << 10
	maxSigners      = 1 << 20
)

// ErrPattern: allowed_signers names principals by a pattern (`*`, `?`,
// `!`), which could stand for anyone: an approval names one person.
var ErrPattern = errors.New("allowed_signers names principals by a pattern")

// readRegular reads path if it is a regular file (not a link, FIFO or
// device: Lstat, then opened without following a link and without
// blocking) of at most max bytes.
func readRegular(path string, max int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): not read", path, fi.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file: not read", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d KiB: not read", path, max>>10)
	}
	return b, nil
}

// SignersDigest is the sha256 (hex) of an allowed_signers file: the run
// journals it at its start, and no approval counts once it differs.
func SignersDigest(path string) (string, error) {
	b, err := readRegular(path, maxSigners)
	if err != nil {
		return "", fmt.Errorf("allowed signers: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// signerLine is one line of an allowed_signers file (`man ssh-keygen`,
// ALLOWED SIGNERS): principals [options] keytype base64-key.
type signerLine struct {
	n          int // 1-based
	principals []string
	// fingerprint is the key's, as ssh-keygen prints it (SHA256:…).
	fingerprint string
}

// readSigners parses an allowed_signers file; lines ssh-keygen would not
// read either (no key) are left out.
func readSigners(path string) ([]signerLine, error) {
	b, err := readRegular(path, maxSigners)
	if err != nil {
		return nil, fmt.Errorf("allowed signers: %w", err)
	}
	var out []signerLine
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		toks := fields(l)
		if len(toks) < 3 {
			continue
		}
		sl := signerLine{n: i + 1}
		for p := range strings.SplitSeq(strings.Trim(toks[0], `"`), ",") {
			if p = strings.TrimSpace(p); p != "" {
				sl.principals = append(sl.principals, p)
			}
		}
		for j := 1; j+1 < len(toks); j++ {
			if fp, ok := keyFingerprint(toks[j], toks[j+1]); ok {
				sl.fingerprint = fp
				break
			}
		}
		if sl.fingerprint != "" {
			out = append(out, sl)
		}
	}
	return out, nil
}

// fields splits an allowed_signers line at blanks outside double quotes
// (namespaces="a b" is one field).
func fields(l string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range l {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case (r == ' ' || r == '\t') && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// keyFingerprint is the SHA256 fingerprint of a public key written as
// keytype and base64 blob, when the blob is a key of that type.
func keyFingerprint(typ, b64 string) (string, bool) {
	blob, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(blob) < 4 {
		return "", false
	}
	n := binary.BigEndian.Uint32(blob)
	if uint64(n)+4 > uint64(len(blob)) || !bytes.Equal(blob[4:4+n], []byte(typ)) {
		return "", false
	}
	sum := sha256.Sum256(blob)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:]), true
}

// CheckSigners refuses an allowed_signers file that names principals by a
// pattern (`*@example.com`, `!mallory`, `a?`): such a line could be
// anyone, so an approval could not say whose it is. The error names the
// line.
func CheckSigners(path string) error {
	lines, err := readSigners(path)
	if err != nil {
		return err
	}
	for _, l := range lines {
		if err := patternLine(path, l); err != nil {
			return err
		}
	}
	return nil
}

func patternLine(path string, l signerLine) error {
	for _, p := range l.principals {
		if isPattern(p) {
			return fmt.Errorf("%w: %s line %d (%s) — an approval must name one person: write each person's principal out (alice@example.com), never *, ? or !", ErrPattern, path, l.n, strings.Join(l.principals, ","))
		}
	}
	return nil
}

func isPattern(p string) bool { return strings.ContainsAny(p, "*?!") }

// principalsOf is every principal allowed_signers gives the key with
// fingerprint fp, on any of its lines (ssh-keygen -Y find-principals
// prints the first line's only), or the first line with a pattern.
func principalsOf(path, fp string) ([]string, error) {
	lines, err := readSigners(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range lines {
		if l.fingerprint != fp {
			continue
		}
		if err := patternLine(path, l); err != nil {
			return nil, err
		}
		out = append(out, l.principals...)
	}
	return out, nil
}

// overlap is a principal both sets hold, whatever its case ("" when
// none).
func overlap(a, b []string) string {
	for _, p := range a {
		for _, q := range b {
			if p != "" && strings.EqualFold(p, q) {
				return p
			}
		}
	}
	return ""
}
