package remote

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// credentials are the keys Dial offers, shared by every hop.
type credentials struct {
	files     []ssh.Signer
	filePaths []string
	skipped   []string // default identities that need a passphrase
	agent     agent.ExtendedAgent
	agentConn net.Conn
}

func loadCredentials(t Target) (*credentials, error) {
	cr := &credentials{}
	for _, p := range t.IdentityFiles {
		s, err := loadKey(p)
		if err != nil {
			if t.SkipUnusableKeys {
				cr.skipped = append(cr.skipped, p)
				continue
			}
			return nil, err
		}
		for _, cert := range certificatesFor(s, p, t.CertificateFiles) {
			cs, err := ssh.NewCertSigner(cert, s)
			if err != nil {
				return nil, fmt.Errorf("certificate for %s: %w; did not connect", p, err)
			}
			cr.files = append(cr.files, cs)
			cr.filePaths = append(cr.filePaths, p+" (certificate)")
		}
		cr.files = append(cr.files, s)
		cr.filePaths = append(cr.filePaths, p)
	}
	if t.UseAgent || t.TryAgent {
		sock := t.AgentSocket
		if sock == "" {
			sock = os.Getenv("SSH_AUTH_SOCK")
		}
		conn, err := net.Dial("unix", sock)
		switch {
		case sock == "" && t.UseAgent:
			return nil, errors.New("UseAgent is set but SSH_AUTH_SOCK is empty; did not connect. " +
				"Start ssh-agent and ssh-add the key, or list the key in IdentityFiles")
		case err != nil && t.UseAgent:
			return nil, fmt.Errorf("cannot reach ssh-agent at %s: %w; did not connect. "+
				"Check the agent is running (ssh-add -l)", sock, err)
		case err == nil:
			cr.agentConn = conn
			cr.agent = agent.NewClient(conn)
		}
	}
	if len(cr.files) == 0 && cr.agent == nil {
		if len(cr.skipped) > 0 {
			return nil, fmt.Errorf("no usable SSH credentials: %s need a passphrase (load them into ssh-agent: ssh-add) and no ssh-agent answered; did not connect", strings.Join(cr.skipped, ", "))
		}
		return nil, errors.New("no SSH credentials: no identity file (inventory identity_file, ssh config IdentityFile or ~/.ssh/id_*) and no ssh-agent (SSH_AUTH_SOCK); did not connect")
	}
	return cr, nil
}

// certificatesFor returns the OpenSSH certificates of s's key among
// files and keyPath's own "-cert.pub", as ssh offers them.
func certificatesFor(s ssh.Signer, keyPath string, files []string) []*ssh.Certificate {
	var out []*ssh.Certificate
	seen := map[string]bool{}
	for _, f := range append([]string{keyPath + "-cert.pub"}, files...) {
		if seen[f] {
			continue
		}
		seen[f] = true
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			continue
		}
		if c, ok := pub.(*ssh.Certificate); ok && bytes.Equal(c.Key.Marshal(), s.PublicKey().Marshal()) {
			out = append(out, c)
		}
	}
	return out
}

func loadKey(path string) (ssh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read identity file: %w; did not connect", err)
	}
	s, err := ssh.ParsePrivateKey(pem)
	var pm *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &pm):
		return nil, fmt.Errorf("key %s is passphrase-protected; load it into ssh-agent (`ssh-add %s`) and set UseAgent; did not connect", path, path)
	case err != nil:
		return nil, fmt.Errorf("identity file %s is not a usable private key: %w; did not connect "+
			"(give the private key, not the .pub file)", path, err)
	}
	return s, nil
}

// method returns ONE public-key auth method offering the file keys first,
// then the agent's. x/crypto uses only the first method of each type, so
// ssh.PublicKeys(files...) next to ssh.PublicKeysCallback(agent.Signers)
// would silently never try the agent.
func (cr *credentials) method() ssh.AuthMethod {
	return ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
		signers := append([]ssh.Signer(nil), cr.files...)
		if cr.agent != nil {
			as, err := cr.agent.Signers()
			if err != nil && len(signers) == 0 {
				return nil, fmt.Errorf("list ssh-agent keys: %w", err)
			}
			signers = append(signers, as...)
		}
		return signers, nil
	})
}

// describe lists what was offered, for ErrAuth messages.
func (cr *credentials) describe() string {
	var parts []string
	for i, s := range cr.files {
		parts = append(parts, fmt.Sprintf("%s (%s)", Fingerprint(s.PublicKey()), cr.filePaths[i]))
	}
	for _, p := range cr.skipped {
		parts = append(parts, p+" skipped: passphrase-protected (ssh-add it)")
	}
	if cr.agent != nil {
		if keys, err := cr.agent.List(); err == nil {
			parts = append(parts, fmt.Sprintf("%d key(s) from ssh-agent", len(keys)))
		} else {
			parts = append(parts, "ssh-agent keys")
		}
	}
	return strings.Join(parts, ", ")
}

func (cr *credentials) close() {
	if cr.agentConn != nil {
		cr.agentConn.Close()
	}
}

// expandHome expands a leading "~/" the way ssh does.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p[1:], "/"))
		}
	}
	return p
}
