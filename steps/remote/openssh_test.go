package remote

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// run dials tg and runs echo, returning its output or the dial error.
func echoVia(t *testing.T, tg Target) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := Dial(ctx, tg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	col := &collector{}
	if _, err := c.Run(ctx, "echo reached", col.add); err != nil {
		return "", err
	}
	return strings.Join(col.out, ""), nil
}

// TestProxyCommand reaches a real sshd through a ProxyCommand that is the
// real OpenSSH client (`ssh -W`, the usual bastion set-up), given directly
// and through an ssh_config with tokens; a ProxyCommand that fails says so.
func TestProxyCommand(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	kh := s.goodKnownHosts(t)
	me := currentUser(t)
	bastion := fmt.Sprintf("ssh -F none -i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o BatchMode=yes -p %d %s@127.0.0.1",
		s.keys.user, kh, s.port, me)
	tg := s.target(t)
	tg.ProxyCommand = "exec " + bastion + " -W 127.0.0.1:" + strconv.Itoa(s.port)
	if out, err := echoVia(t, tg); err != nil || out != "reached" {
		t.Fatalf("through ProxyCommand: %q %v", out, err)
	}

	cfg := writeConfig(t, fmt.Sprintf("Host via-bastion\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n  ProxyCommand exec %s -W %%h:%%p\n",
		s.port, me, s.keys.user, kh, bastion))
	rt, err := ResolveWithSSH(context.Background(), Target{Host: "via-bastion"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(rt.ProxyCommand, "-W 127.0.0.1:"+strconv.Itoa(s.port)) {
		t.Fatalf("tokens not expanded: %q", rt.ProxyCommand)
	}
	if out, err := echoVia(t, rt); err != nil || out != "reached" {
		t.Fatalf("through ssh_config's ProxyCommand: %q %v", out, err)
	}

	bad := s.target(t)
	bad.ProxyCommand = "echo no route to the bastion >&2; exit 1"
	_, err = echoVia(t, bad)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "no route to the bastion") || !strings.Contains(err.Error(), "nothing was run") {
		t.Fatalf("a failing ProxyCommand: %v", err)
	}
	both := s.target(t)
	both.ProxyCommand, both.ProxyJump = "true", "x@y:22"
	if _, err := echoVia(t, both); err == nil || !strings.Contains(err.Error(), "both ProxyJump and ProxyCommand") {
		t.Fatalf("ProxyJump and ProxyCommand together: %v", err)
	}
}

// TestHostKeyAlias checks the host key under the alias known_hosts
// records it by, and only there.
func TestHostKeyAlias(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	tg := s.target(t)
	tg.KnownHostsFiles = []string{knownHosts(t, khLine("kafka-b1:"+strconv.Itoa(s.port), s.keys.hostEdPub))}
	var uk *UnknownHostKeyError
	if _, err := echoVia(t, tg); !errors.As(err, &uk) {
		t.Fatalf("without the alias the host is unknown: %v", err)
	}
	tg.HostKeyAlias = "kafka-b1"
	if out, err := echoVia(t, tg); err != nil || out != "reached" {
		t.Fatalf("with HostKeyAlias: %q %v", out, err)
	}
}

// TestCertificateLogin logs in with an OpenSSH user certificate (sshd
// trusts the CA; the key itself is in no authorized_keys): found as the
// identity's -cert.pub, as ssh finds it, or named by CertificateFile.
func TestCertificateLogin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	me := currentUser(t)
	keygen := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen %v: %v: %s", args, err, out)
		}
	}
	ca, key := filepath.Join(dir, "user_ca"), filepath.Join(dir, "cert_user")
	keygen("-q", "-t", "ed25519", "-N", "", "-f", ca)
	keygen("-q", "-t", "ed25519", "-N", "", "-f", key)
	keygen("-q", "-s", ca, "-I", "kremedy-test", "-n", me, "-V", "-5m:+1h", key+".pub")
	s := startSSHD(t, "TrustedUserCAKeys "+ca+".pub")
	tg := s.target(t)
	tg.IdentityFiles = []string{key}
	if out, err := echoVia(t, tg); err != nil || out != "reached" {
		t.Fatalf("with the identity's -cert.pub: %q %v", out, err)
	}
	elsewhere := filepath.Join(dir, "signed.pub")
	if err := os.Rename(key+"-cert.pub", elsewhere); err != nil {
		t.Fatal(err)
	}
	if _, err := echoVia(t, tg); !errors.Is(err, ErrAuth) {
		t.Fatalf("without the certificate the key is refused: %v", err)
	}
	tg.CertificateFiles = []string{elsewhere}
	if out, err := echoVia(t, tg); err != nil || out != "reached" {
		t.Fatalf("with CertificateFile: %q %v", out, err)
	}
}

// TestDefaultIdentitiesSkipWhatNeedsAPassphrase: ssh's default identities
// are tried as ssh tries them, a passphrase-protected one skipped (and
// named if nothing else works), while a key the inventory names is never
// silently skipped.
func TestDefaultIdentitiesSkipWhatNeedsAPassphrase(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	tg := s.target(t)
	tg.IdentityFiles = []string{s.keys.pass, s.keys.user}
	if _, err := echoVia(t, tg); err == nil || !strings.Contains(err.Error(), "passphrase") {
		t.Fatalf("a named passphrase-protected key: %v", err)
	}
	tg.SkipUnusableKeys = true
	if out, err := echoVia(t, tg); err != nil || out != "reached" {
		t.Fatalf("skipping it: %q %v", out, err)
	}
	tg.IdentityFiles = []string{s.keys.pass}
	if _, err := echoVia(t, tg); err == nil || !strings.Contains(err.Error(), s.keys.pass) || !strings.Contains(err.Error(), "ssh-add") {
		t.Fatalf("only a passphrase-protected default: %v", err)
	}
}
