package remote

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
)

// tokens are one connection's values of ssh_config's %-tokens: %h the
// host name, %n the alias as given, %p the port, %r the remote user.
type tokens struct{ h, n, p, r string }

// expandTokens expands ssh_config's %% %h %n %p %r %u %d tokens.
func expandTokens(s string, t tokens) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf("%q ends in a lone %%", s)
		}
		i++
		switch s[i] {
		case '%':
			b.WriteByte('%')
		case 'h':
			b.WriteString(t.h)
		case 'n':
			b.WriteString(t.n)
		case 'p':
			b.WriteString(t.p)
		case 'r':
			b.WriteString(t.r)
		case 'u':
			u, err := user.Current()
			if err != nil {
				return "", err
			}
			b.WriteString(u.Username)
		case 'd':
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			b.WriteString(home)
		default:
			return "", fmt.Errorf("%q: token %%%c is not supported", s, s[i])
		}
	}
	return b.String(), nil
}

// expandPath expands tokens and a leading ~ in a path that `ssh -G`
// printed: it prints IdentityFile and CertificateFile as the config wrote
// them (ssh expands them only when it loads the keys, and kremedy loads
// them itself).
func expandPath(s string, t tokens) (string, error) {
	p, err := expandTokens(s, t)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(p, "~") {
		if p = expandHome(p); strings.HasPrefix(p, "~") {
			return "", fmt.Errorf("%q: only ~ and ~/ are supported, not ~user", s)
		}
	}
	return filepath.Clean(p), nil
}
