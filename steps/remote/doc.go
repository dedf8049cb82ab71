// Package remote is kremedy's port adapter over golang.org/x/crypto/ssh: it
// dials a broker host (optionally through a ProxyJump chain or a
// ProxyCommand), verifies every
// hop's host key against known_hosts with no trust-on-first-use, and runs one
// shell command per SSH session, streaming stdout and stderr line by line as
// they arrive. Dial bounds both the TCP connect and the SSH handshake by
// ConnectTimeout and restricts host-key algorithms to the key types that
// known_hosts records for the host (Go would otherwise prefer RSA and raise a
// false "key mismatch"). A keepalive notices a dead peer so Run fails with
// ErrSessionLost instead of hanging. Failures keep their identity:
// *UnknownHostKeyError, *HostKeyMismatchError, ErrAuth and ErrUnreachable from
// Dial; *ExitError, ErrSessionLost and the context's error from Run. RunInput
// gives a command a standard input: the way file contents, secrets among
// them, reach a host without being in the command line (which sudo logs and
// ps shows). Commands
// run without a terminal, so cancelling Run does not stop the remote process
// (OpenSSH ignores signal requests for root logins): build commands that limit
// themselves, e.g. Command("timeout", "--kill-after=10", "300", ...), and
// quote every external string with Quote or Command. ResolveWithSSH turns
// an ssh_config alias into a Target by asking the local OpenSSH client
// (`ssh -G`: Match blocks, Include, ProxyJump, ProxyCommand, HostKeyAlias,
// certificates, default identities) without ever relaxing host-key
// checking. A Fleet runs every command through `sudo -n` for a Target whose
// Become is "sudo" (*SudoError when sudo refuses).
package remote
