package remote

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/kremedy/kremedy/steps/ports"
)

// Sentinels. They are always wrapped in an error that names the host and,
// for Run, the command; test with errors.Is.
var (
	// ErrAuth means the server rejected every offered key. Nothing ran.
	ErrAuth = errors.New("ssh authentication failed")
	// ErrUnreachable means no SSH connection could be set up: TCP connect
	// refused or timed out, the handshake stalled or failed, or a jump host
	// could not reach the next hop. Nothing ran.
	ErrUnreachable = errors.New("ssh host unreachable")
	// ErrSessionLost means the connection dropped while a command was
	// running. The command's outcome is unknown; it may still be running.
	ErrSessionLost = fmt.Errorf("ssh connection lost mid-command (%w)", ports.ErrOutcomeUnknown)
)

// UnknownHostKeyError: the host (or a jump host) is not in any known_hosts
// file. Dial never trusts it on first use.
type UnknownHostKeyError struct {
	Addr        string   // "host:port" that was dialled
	KeyType     string   // key type the server offered, e.g. "ssh-ed25519"
	Fingerprint string   // "SHA256:..." exactly as ssh-keygen -l prints it
	KnownHosts  []string // files that were searched
}

func (e *UnknownHostKeyError) Error() string {
	host, port := splitAddr(e.Addr)
	t := keyscanType(e.KeyType)
	return fmt.Sprintf("host key of %s is not in known_hosts (%s); did not connect, nothing was run. "+
		"The server offered %s key %s. Trust it only after checking it out of band: "+
		"run `ssh-keyscan -p %s -t %s %s > /tmp/hostkey && ssh-keygen -lf /tmp/hostkey`, "+
		"compare the fingerprint with `ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub` run on the host's own console, "+
		"and only if they match append it: `cat /tmp/hostkey >> %s`",
		e.Addr, strings.Join(e.KnownHosts, ", "), e.KeyType, e.Fingerprint,
		port, t, host, t, firstOr(e.KnownHosts, "~/.ssh/known_hosts"))
}

// HostKeyMismatchError: known_hosts records a different key for the host.
// This can be a man-in-the-middle attack, or a reinstalled host.
type HostKeyMismatchError struct {
	Addr             string // "host:port" that was dialled
	KeyType          string // key type the server offered
	Fingerprint      string // fingerprint of the key the server offered
	File             string // known_hosts file holding the disagreeing line
	Line             int    // 1-based line number in File
	KnownFingerprint string // fingerprint recorded on File:Line
}

func (e *HostKeyMismatchError) Error() string {
	host, port := splitAddr(e.Addr)
	name := host
	if port != "22" {
		name = "[" + host + "]:" + port
	}
	return fmt.Sprintf("HOST KEY MISMATCH for %s: the server offered %s key %s but %s line %d records %s; "+
		"did not connect, nothing was run. This may be a man-in-the-middle attack, or the host was reinstalled or its keys rotated. "+
		"Do not just delete the line: confirm the new fingerprint with `ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub` on the host's own console; "+
		"only then remove the old entry (`ssh-keygen -R '%s' -f %s`) and add the new key",
		e.Addr, e.KeyType, e.Fingerprint, e.File, e.Line, e.KnownFingerprint,
		keyscanType(e.KeyType), name, e.File)
}

// ErrSudo means `sudo -n` refused to run a command (a password would be
// needed, the user may not run it, requiretty, or no sudo on the host).
// The command did not run.
var ErrSudo = errors.New("sudo refused")

// SudoError is ErrSudo with the host, the login and sudo's own words.
type SudoError struct {
	Addr, User, Cmd string
	Said            string // sudo's message, e.g. "sudo: a password is required"
}

func (e *SudoError) Error() string {
	fix := fmt.Sprintf("allow %s to run commands through sudo without a password (a NOPASSWD rule in /etc/sudoers.d/ for the broker's stop/start commands and /bin/sh, which kremedy's own scripts run under), or log in as a user that has the rights and remove `become: sudo`", e.User)
	switch {
	case strings.Contains(e.Said, "tty"):
		fix = fmt.Sprintf("sudoers requires a terminal; add `Defaults:%s !requiretty` (kremedy never opens a terminal to send commands)", e.User)
	case strings.Contains(e.Said, "not found"):
		fix = "install sudo on the host, or log in as a user that has the rights and remove `become: sudo`"
	}
	return fmt.Sprintf("sudo -n on %s as %s refused `%s`: %s. The command did not run. To fix: %s", e.Addr, e.User, short(e.Cmd), e.Said, fix)
}

func (e *SudoError) Unwrap() error { return ErrSudo }

// ExitError: the remote command ran and exited non-zero, or was killed by a
// signal. Run fills its Result too.
type ExitError struct {
	Cmd    string
	Code   int    // exit status; 128+n when killed by signal n
	Signal string // "TERM", "KILL", ... or "" when it exited normally
	Addr   string // host the command ran on
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("command `%s` on %s was killed by signal %s (status %d); see its output for what it managed to do",
			short(e.Cmd), e.Addr, e.Signal, e.Code)
	}
	return fmt.Sprintf("command `%s` on %s exited with status %d; see its stderr above for why",
		short(e.Cmd), e.Addr, e.Code)
}

func splitAddr(addr string) (host, port string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, "22"
	}
	return h, p
}

// keyscanType maps an SSH key type to the name ssh-keyscan -t and the
// /etc/ssh/ssh_host_<name>_key.pub files use.
func keyscanType(keyType string) string {
	switch {
	case keyType == "ssh-ed25519":
		return "ed25519"
	case strings.HasPrefix(keyType, "ecdsa-"):
		return "ecdsa"
	case keyType == "ssh-rsa" || strings.HasPrefix(keyType, "rsa-"):
		return "rsa"
	}
	return keyType
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// short keeps long scripts from flooding an error message.
func short(cmd string) string {
	const max = 200
	cmd = strings.ReplaceAll(cmd, "\n", "; ")
	if len(cmd) <= max {
		return cmd
	}
	return strings.ToValidUTF8(cmd[:max], "") + "…"
}

// ExitStatus is the remote command's exit status (for callers that match
// on interface{ ExitStatus() int }).
func (e *ExitError) ExitStatus() int { return e.Code }
