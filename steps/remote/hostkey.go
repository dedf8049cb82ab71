package remote

import (
	"bufio"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Fingerprint returns the SHA256 fingerprint of k in the form ssh-keygen -l
// prints it: "SHA256:" followed by unpadded base64.
func Fingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }

// hostKeys checks host keys against a fixed set of known_hosts files.
type hostKeys struct {
	cb    ssh.HostKeyCallback
	files []string
}

func loadKnownHosts(files []string) (*hostKeys, error) {
	if len(files) == 0 {
		return nil, errors.New("no known_hosts file given (Target.KnownHostsFiles is required); did not connect. " +
			"kremedy never trusts a host key on first use: list a known_hosts file that records the brokers' host keys")
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("known_hosts file %s cannot be read: %w; did not connect. "+
				"Create it (it may be empty) and add the hosts' keys deliberately, see ssh-keyscan", f, err)
		}
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts %s: %w; did not connect", strings.Join(files, ", "), err)
	}
	return &hostKeys{cb: cb, files: files}, nil
}

// verify is the ssh.HostKeyCallback. It turns knownhosts' errors into the
// package's typed errors, which carry the offered key's fingerprint.
func (h *hostKeys) verify(hostname string, remote net.Addr, key ssh.PublicKey) error {
	err := h.cb(hostname, remote, key)
	if err == nil {
		return nil
	}
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("host key %s of %s is marked @revoked in %s line %d; did not connect, nothing was run. "+
			"The host needs a new host key, which you then verify and add to known_hosts: %w",
			Fingerprint(key), hostname, re.Revoked.Filename, re.Revoked.Line, err)
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return &UnknownHostKeyError{
			Addr: hostname, KeyType: key.Type(), Fingerprint: Fingerprint(key),
			KnownHosts: append([]string(nil), h.files...),
		}
	case errors.As(err, &ke):
		w := ke.Want[0]
		for _, k := range ke.Want { // prefer the line recording the same key type
			if k.Key.Type() == key.Type() {
				w = k
				break
			}
		}
		return &HostKeyMismatchError{
			Addr: hostname, KeyType: key.Type(), Fingerprint: Fingerprint(key),
			File: w.Filename, Line: w.Line, KnownFingerprint: Fingerprint(w.Key),
		}
	}
	return fmt.Errorf("host key of %s rejected: %w; did not connect, nothing was run", hostname, err)
}

// isHostKeyError reports whether err came from host-key verification, in
// which case Dial returns it as is.
func isHostKeyError(err error) bool {
	var u *UnknownHostKeyError
	var m *HostKeyMismatchError
	var r *knownhosts.RevokedError
	return errors.As(err, &u) || errors.As(err, &m) || errors.As(err, &r)
}

var probeKey = sync.OnceValue(func() ssh.PublicKey {
	// A fixed key nobody holds: known_hosts can never record it, so probing
	// with it always reports which keys are recorded.
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public()
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return k
})

// Host-key algorithms in OpenSSH's order of preference.
var (
	plainAlgos = map[string][]string{
		ssh.KeyAlgoED25519:  {ssh.KeyAlgoED25519},
		ssh.KeyAlgoECDSA256: {ssh.KeyAlgoECDSA256},
		ssh.KeyAlgoECDSA384: {ssh.KeyAlgoECDSA384},
		ssh.KeyAlgoECDSA521: {ssh.KeyAlgoECDSA521},
		// ssh-rsa (SHA-1) last, for servers older than OpenSSH 7.2.
		ssh.KeyAlgoRSA: {ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA},
	}
	plainOrder = []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoRSA}
	certAlgos  = []string{ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01,
		ssh.CertAlgoECDSA521v01, ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01}
	// unknownHostAlgos is used when known_hosts has nothing for the host:
	// the handshake will fail anyway, and this order makes the error show
	// the ed25519 fingerprint, the one OpenSSH users usually compare.
	unknownHostAlgos = []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384,
		ssh.KeyAlgoECDSA521, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
)

// algorithms returns the host-key algorithms to offer when dialling addr
// ("host:port"): only those matching the key types known_hosts records for
// addr. Go's default order prefers ECDSA and RSA over Ed25519, so against a
// server with ed25519+rsa keys and only the ed25519 key recorded (OpenSSH's
// habit) it would negotiate RSA and fail with a false "key mismatch".
//
// An @cert-authority line matching the host adds the certificate algorithms
// first (knownhosts cannot tell CA lines apart in KeyError.Want, so the line
// itself is read back).
func (h *hostKeys) algorithms(addr string) []string {
	err := h.cb(addr, &net.TCPAddr{IP: net.IPv4zero, Port: 22}, probeKey())
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) || len(ke.Want) == 0 {
		return unknownHostAlgos
	}
	recorded := map[string]bool{}
	var other []string // types this package has no preference for (sk-*, ...)
	ca := false
	for _, k := range ke.Want {
		if isCertAuthorityLine(k.Filename, k.Line) {
			ca = true
			continue
		}
		t := k.Key.Type()
		if _, ok := plainAlgos[t]; !ok && !recorded[t] {
			other = append(other, t)
		}
		recorded[t] = true
	}
	var algos []string
	if ca {
		algos = append(algos, certAlgos...)
	}
	for _, t := range plainOrder {
		if recorded[t] {
			algos = append(algos, plainAlgos[t]...)
		}
	}
	return append(algos, other...)
}

// isCertAuthorityLine reports whether line n (1-based) of file is an
// @cert-authority line.
func isCertAuthorityLine(file string, n int) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for i := 1; sc.Scan(); i++ {
		if i == n {
			return strings.HasPrefix(strings.TrimSpace(sc.Text()), "@cert-authority")
		}
	}
	return false
}
