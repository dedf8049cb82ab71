package remote

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"
)

// ResolveSSHConfig treats t.Host as an ssh_config alias and fills t the way
// `ssh alias` would, from files (OpenSSH syntax; none given means
// ~/.ssh/config then /etc/ssh/ssh_config; the first value found wins).
// Fields already set in t win over the config, like ssh's command-line
// options; with no User anywhere the local user name is used, as ssh does
// (for jump hops too). Read: HostName, Port, User, IdentityFile, UserKnownHostsFile,
// GlobalKnownHostsFile, ConnectTimeout and ProxyJump (each hop resolved
// through the same files, recursively). Tokens %% %h %n %p %r %u %d and a
// leading ~ are expanded.
//
// Deliberately not honoured: StrictHostKeyChecking (host keys are always
// checked; "UserKnownHostsFile /dev/null" therefore means every host is
// unknown), ProxyCommand (an error: use ProxyJump), per-hop IdentityFile
// (every hop is offered the target's keys) and Match exec (the parser
// rejects it). Identity and known_hosts files that do not exist are
// skipped, as ssh does; with no known_hosts setting ~/.ssh/known_hosts and
// /etc/ssh/ssh_known_hosts are used when present.
func ResolveSSHConfig(t Target, files ...string) (Target, error) {
	if t.Host == "" {
		return t, errors.New("ssh_config: target has no host alias")
	}
	if len(files) == 0 {
		files = []string{"~/.ssh/config", "/etc/ssh/ssh_config"}
	}
	var cfgs sshConfigs
	for _, f := range files {
		f = expandHome(f)
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return t, fmt.Errorf("ssh_config: %w", err)
		}
		c, err := ssh_config.Decode(bytes.NewReader(b))
		if err != nil {
			return t, fmt.Errorf("ssh_config %s: %w", f, err)
		}
		cfgs = append(cfgs, namedConfig{f, c})
	}
	return cfgs.resolve(t, false, 0)
}

type namedConfig struct {
	file string
	cfg  *ssh_config.Config
}

type sshConfigs []namedConfig

func (cs sshConfigs) get(alias, key string) (string, error) {
	for _, c := range cs {
		v, err := c.cfg.Get(alias, key)
		if err != nil {
			return "", fmt.Errorf("ssh_config %s: %s: %w", c.file, key, err)
		}
		if v != "" {
			return v, nil
		}
	}
	return "", nil
}

func (cs sshConfigs) getAll(alias, key string) ([]string, error) {
	var all []string
	for _, c := range cs {
		v, err := c.cfg.GetAll(alias, key)
		if err != nil {
			return nil, fmt.Errorf("ssh_config %s: %s: %w", c.file, key, err)
		}
		all = append(all, v...)
	}
	return all, nil
}

const maxJumpDepth = 8

// resolve fills t from the config for alias t.Host. For a jump hop
// (hop=true) only the route is resolved: hops use the target's keys and
// known_hosts.
func (cs sshConfigs) resolve(t Target, hop bool, depth int) (Target, error) {
	alias := t.Host
	fail := func(format string, args ...any) (Target, error) {
		return t, fmt.Errorf("ssh_config for %q: "+format, append([]any{alias}, args...)...)
	}
	for _, key := range []string{"HostName", "Port", "User", "ConnectTimeout", "ProxyJump", "ProxyCommand",
		"IdentityFile", "UserKnownHostsFile", "GlobalKnownHostsFile"} {
		if _, err := cs.getAll(alias, key); err != nil {
			return t, err
		}
	}
	get := func(key string) string { v, _ := cs.get(alias, key); return v }

	host := alias
	if hn := get("HostName"); hn != "" {
		var err error
		if host, err = expandTokens(hn, tokens{h: alias, n: alias}); err != nil {
			return fail("HostName: %v", err)
		}
	}
	if t.Port == 0 {
		if p := get("Port"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return fail("bad Port %q", p)
			}
			t.Port = n
		}
	}
	if t.User == "" {
		t.User = get("User")
	}
	if t.User == "" { // ssh's default: the local user, for hops too
		u, err := user.Current()
		if err != nil {
			return fail("no User and no local user name: %v", err)
		}
		t.User = u.Username
	}
	if t.ConnectTimeout == 0 && !hop {
		if s := get("ConnectTimeout"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return fail("bad ConnectTimeout %q (seconds)", s)
			}
			t.ConnectTimeout = time.Duration(n) * time.Second
		}
	}
	port := t.Port
	if port == 0 {
		port = 22
	}
	tok := tokens{h: host, n: alias, p: strconv.Itoa(port), r: t.User}
	// existing expands each path and keeps those that exist; split says
	// whether a value is a space-separated list (known_hosts) or one path
	// (IdentityFile, which may contain spaces once unquoted).
	existing := func(key string, vals []string, split bool) ([]string, error) {
		var out []string
		for _, v := range vals {
			fs := []string{v}
			if split {
				fs = strings.Fields(v)
			}
			for _, f := range fs {
				if f == "none" {
					continue
				}
				p, err := expandPath(f, tok)
				if err != nil {
					return nil, fmt.Errorf("ssh_config for %q: %s: %w", alias, key, err)
				}
				if _, err := os.Stat(p); err == nil {
					out = append(out, p)
				}
			}
		}
		return out, nil
	}
	if len(t.IdentityFiles) == 0 && !hop {
		ids, _ := cs.getAll(alias, "IdentityFile")
		var err error
		if t.IdentityFiles, err = existing("IdentityFile", ids, false); err != nil {
			return t, err
		}
	}
	if len(t.KnownHostsFiles) == 0 && !hop {
		for key, def := range map[string]string{"UserKnownHostsFile": "~/.ssh/known_hosts", "GlobalKnownHostsFile": "/etc/ssh/ssh_known_hosts"} {
			v := get(key)
			if v == "" {
				v = def
			}
			files, err := existing(key, []string{v}, true)
			if err != nil {
				return t, err
			}
			t.KnownHostsFiles = append(t.KnownHostsFiles, files...)
		}
		slices.Sort(t.KnownHostsFiles) // map order is random; keep it stable
	}

	jump := t.ProxyJump
	if jump == "" {
		jump = get("ProxyJump")
		if pc := get("ProxyCommand"); jump == "" && pc != "" && pc != "none" {
			return fail("ProxyCommand is not supported; express the route as ProxyJump")
		}
		if jump != "" && jump != "none" {
			if depth >= maxJumpDepth {
				return fail("ProxyJump chain deeper than %d (a loop?)", maxJumpDepth)
			}
			var resolved []string
			for _, spec := range strings.Split(jump, ",") {
				hs, err := cs.resolveHop(spec, depth+1)
				if err != nil {
					return t, err
				}
				resolved = append(resolved, hs...)
			}
			jump = strings.Join(resolved, ",")
		}
	}
	if jump == "none" {
		jump = ""
	}
	t.ProxyJump = jump
	t.Host = host
	return t, nil
}

// resolveHop turns one ProxyJump entry ("[user@]alias[:port]") into the
// concrete hops to dial, the alias's own ProxyJump hops first.
func (cs sshConfigs) resolveHop(spec string, depth int) ([]string, error) {
	user, alias, port, err := splitHop(spec)
	if err != nil {
		return nil, fmt.Errorf("ssh_config: ProxyJump: %w", err)
	}
	ht := Target{Host: alias, User: user}
	if port != "" { // an explicit port wins over the alias's Port
		ht.Port, _ = strconv.Atoi(port)
	}
	r, err := cs.resolve(ht, true, depth)
	if err != nil {
		return nil, err
	}
	if r.Port == 0 {
		r.Port = 22
	}
	h := r.User + "@" + net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
	var out []string
	if r.ProxyJump != "" {
		out = strings.Split(r.ProxyJump, ",")
	}
	return append(out, h), nil
}

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

// expandPath expands tokens and a leading ~ (ssh_config does neither for
// us).
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
