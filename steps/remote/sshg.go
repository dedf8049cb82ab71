package remote

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ErrNoSSHClient means the local OpenSSH client (`ssh`) is not installed,
// so ssh_config cannot be evaluated the way ssh evaluates it.
var ErrNoSSHClient = errors.New("the OpenSSH client (ssh) is not installed")

// maxJumpDepth bounds ProxyJump chains resolved through `ssh -G`.
const maxJumpDepth = 8

// SSHClientPath is the ssh binary ResolveWithSSH runs; a variable for tests.
var SSHClientPath = "ssh"

// ResolveWithSSH asks the local OpenSSH client how it would connect to
// t.Host (`ssh -G`): OpenSSH itself evaluates the config (Include, Match
// host/user/exec/…, Host patterns, tokens, its defaults), so kremedy
// connects where `ssh host` would. configFile is ssh's -F ("" = ssh's own
// ~/.ssh/config and /etc/ssh/ssh_config). Fields already set in t win,
// like ssh's command-line options (User and Port are passed as -l and -p
// so that `Match user` sees them).
//
// Filled: HostName, Port, User, ConnectTimeout, IdentityFile (those that
// exist; ssh's default ~/.ssh/id_* included, skipped when unusable as ssh
// skips them), CertificateFile (and each identity's -cert.pub), the
// known_hosts files, HostKeyAlias, IdentityAgent, ProxyJump (every hop
// resolved the same way) and ProxyCommand (tokens expanded).
//
// Deliberately not honoured: StrictHostKeyChecking (host keys are always
// checked against known_hosts; there is no trust on first use),
// IdentitiesOnly (the agent's keys are offered after the files).
func ResolveWithSSH(ctx context.Context, t Target, configFile string) (Target, error) {
	return resolveWithSSH(ctx, t, configFile, false, 0)
}

// sshG runs `ssh -G` and returns its settings (lower-case keys, every
// value of repeated keys).
func sshG(ctx context.Context, configFile, user string, port int, host string) (map[string][]string, error) {
	if _, err := exec.LookPath(SSHClientPath); err != nil {
		return nil, fmt.Errorf("%w (%v): install openssh-client, or set ssh.config: none in the inventory to use only its own settings", ErrNoSSHClient, err)
	}
	args := []string{"-G"}
	if configFile != "" {
		args = append(args, "-F", expandHome(configFile))
	}
	if user != "" {
		args = append(args, "-l", user)
	}
	if port != 0 {
		args = append(args, "-p", strconv.Itoa(port))
	}
	args = append(args, "--", host)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, SSHClientPath, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ssh_config for %q (`ssh %s`): %w: %s", host, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		m[k] = append(m[k], v)
	}
	return m, sc.Err()
}

// sshSettings is `ssh -G`'s answer for one alias.
type sshSettings struct {
	g     map[string][]string
	alias string
	tok   tokens
}

func (s sshSettings) one(k string) string {
	if v := s.g[k]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func (s sshSettings) fail(format string, args ...any) error {
	return fmt.Errorf("ssh_config for %q: "+format, append([]any{s.alias}, args...)...)
}

// existing expands each path and keeps those that exist; split says
// whether a value is a space-separated list (known_hosts) or one path
// (IdentityFile, which may contain spaces).
func (s sshSettings) existing(key string, split bool) ([]string, error) {
	var out []string
	for _, v := range s.g[key] {
		fs := []string{v}
		if split {
			fs = strings.Fields(v)
		}
		for _, f := range fs {
			if f == "none" {
				continue
			}
			p, err := expandPath(f, s.tok)
			if err != nil {
				return nil, s.fail("%s: %w", key, err)
			}
			if _, err := os.Stat(p); err == nil {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func resolveWithSSH(ctx context.Context, t Target, configFile string, hop bool, depth int) (Target, error) {
	alias := t.Host
	g, err := sshG(ctx, configFile, t.User, t.Port, alias)
	if err != nil {
		return t, err
	}
	s := sshSettings{g: g, alias: alias}
	host := alias
	if hn := s.one("hostname"); hn != "" {
		host = hn
	}
	if t.Port == 0 {
		if p := s.one("port"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return t, s.fail("bad Port %q", p)
			}
			t.Port = n
		}
	}
	if t.User == "" {
		t.User = s.one("user")
	}
	port := t.Port
	if port == 0 {
		port = 22
	}
	s.tok = tokens{h: host, n: alias, p: strconv.Itoa(port), r: t.User}
	if !hop {
		if t, err = s.credentials(t); err != nil {
			return t, err
		}
	}
	if t, err = s.route(ctx, t, configFile, depth); err != nil {
		return t, err
	}
	t.Host = host
	return t, nil
}

// credentials fills what the target itself uses (a jump hop uses the
// target's): timeout, identities, certificates, known_hosts, the host key
// alias and the agent.
func (s sshSettings) credentials(t Target) (Target, error) {
	var err error
	if t.ConnectTimeout == 0 {
		if v := s.one("connecttimeout"); v != "" && v != "none" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return t, s.fail("bad ConnectTimeout %q (seconds)", v)
			}
			t.ConnectTimeout = time.Duration(n) * time.Second
		}
	}
	if len(t.IdentityFiles) == 0 {
		if t.IdentityFiles, err = s.existing("identityfile", false); err != nil {
			return t, err
		}
		t.SkipUnusableKeys = true // ssh's own defaults: skip what ssh would
	}
	if t.CertificateFiles, err = s.existing("certificatefile", false); err != nil {
		return t, err
	}
	if len(t.KnownHostsFiles) == 0 {
		for _, key := range []string{"userknownhostsfile", "globalknownhostsfile"} {
			files, err := s.existing(key, true)
			if err != nil {
				return t, err
			}
			t.KnownHostsFiles = append(t.KnownHostsFiles, files...)
		}
	}
	if a := s.one("hostkeyalias"); a != "" && a != "none" && t.HostKeyAlias == "" {
		t.HostKeyAlias = a
	}
	switch a := s.one("identityagent"); a {
	case "":
	case "none":
		t.AgentSocket, t.TryAgent = "", false
	case "SSH_AUTH_SOCK":
		t.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	default:
		if strings.HasPrefix(a, "$") {
			t.AgentSocket = os.Getenv(strings.Trim(a, "${}"))
		} else if t.AgentSocket, err = expandPath(a, s.tok); err != nil {
			return t, s.fail("IdentityAgent: %v", err)
		}
		t.TryAgent = t.AgentSocket != ""
	}
	return t, nil
}

// route fills how the connection gets there: ProxyJump (every hop
// resolved the same way) or ProxyCommand (tokens expanded).
func (s sshSettings) route(ctx context.Context, t Target, configFile string, depth int) (Target, error) {
	jump := t.ProxyJump
	if jump == "" {
		jump = s.one("proxyjump")
		if jump != "" && jump != "none" {
			if depth >= maxJumpDepth {
				return t, s.fail("ProxyJump chain deeper than %d (a loop?)", maxJumpDepth)
			}
			var resolved []string
			for _, spec := range strings.Split(jump, ",") {
				hs, err := resolveHopWithSSH(ctx, configFile, spec, depth+1)
				if err != nil {
					return t, err
				}
				resolved = append(resolved, hs...)
			}
			jump = strings.Join(resolved, ",")
		} else if pc := s.one("proxycommand"); pc != "" && pc != "none" && t.ProxyCommand == "" {
			var err error
			if t.ProxyCommand, err = expandTokens(pc, s.tok); err != nil {
				return t, s.fail("ProxyCommand: %v", err)
			}
		}
	}
	if jump == "none" {
		jump = ""
	}
	t.ProxyJump = jump
	return t, nil
}

// resolveHopWithSSH turns one ProxyJump entry into the hops to dial, the
// hop's own ProxyJump hops first.
func resolveHopWithSSH(ctx context.Context, configFile, spec string, depth int) ([]string, error) {
	user, alias, port, err := splitHop(spec)
	if err != nil {
		return nil, fmt.Errorf("ssh_config: ProxyJump: %w", err)
	}
	ht := Target{Host: alias, User: user}
	if port != "" {
		ht.Port, _ = strconv.Atoi(port)
	}
	r, err := resolveWithSSH(ctx, ht, configFile, true, depth)
	if err != nil {
		return nil, err
	}
	if r.Port == 0 {
		r.Port = 22
	}
	var out []string
	if r.ProxyJump != "" {
		out = strings.Split(r.ProxyJump, ",")
	}
	return append(out, r.User+"@"+net.JoinHostPort(r.Host, strconv.Itoa(r.Port))), nil
}
