package connect

import (
	"context"
	"os"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps/remote"
)

// SSHTarget is how kremedy reaches host with the inventory's SSH settings
// s: as `ssh host` would, the OpenSSH client evaluating its config (Match
// blocks, Include, ProxyJump, ProxyCommand, HostKeyAlias, default
// identities…) unless s.Config is "none". Host keys are still checked
// against known_hosts, never relaxed.
func SSHTarget(ctx context.Context, s inventory.SSH, host string) (remote.Target, error) {
	t := remote.Target{Host: host, Port: s.Port, User: s.User, UseAgent: s.Agent, ProxyJump: s.ProxyJump,
		ConnectTimeout: s.ConnectTimeout.Duration, Become: s.Become,
		// As ssh: the agent's keys when one answers at SSH_AUTH_SOCK.
		TryAgent: os.Getenv("SSH_AUTH_SOCK") != ""}
	if s.IdentityFile != "" {
		t.IdentityFiles = []string{s.IdentityFile}
	}
	if s.KnownHosts != "" {
		t.KnownHostsFiles = []string{s.KnownHosts}
	}
	if s.Config == inventory.SSHConfigNone {
		return t, nil
	}
	return remote.ResolveWithSSH(ctx, t, s.Config)
}
