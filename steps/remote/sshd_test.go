package remote

// Test harness: a real OpenSSH server (/usr/sbin/sshd) on 127.0.0.1 with a
// random port, configured from a temp dir. Keys are generated once per
// package run with ssh-keygen.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

const (
	sshdPath   = "/usr/sbin/sshd"
	installMsg = "install openssh-server and openssh-client (apt-get install -y openssh-server openssh-client): " +
		"these tests run against a real OpenSSH server and must not be skipped"
)

func TestMain(m *testing.M) {
	// Fast keepalives so a dead peer is detected within ~4 s in tests, yet
	// a live sshd on a loaded machine is not declared dead.
	keepaliveInterval = time.Second
	keepaliveMaxMisses = 3
	code := m.Run()
	if keys.dir != "" {
		os.RemoveAll(keys.dir)
	}
	os.Exit(code)
}

// needSSHD skips under -short and FAILS when OpenSSH is missing.
func needSSHD(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("real-sshd test skipped under -short")
	}
	if _, err := os.Stat(sshdPath); err != nil {
		t.Fatalf("%s not found (%v): %s", sshdPath, err, installMsg)
	}
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Fatalf("ssh-keygen not found (%v): %s", err, installMsg)
	}
}

// testKeys are generated once and shared by all servers.
type testKeys struct {
	dir                 string
	hostEd, hostRSA     string // private host key files
	hostEdPub, hostRSAP ssh.PublicKey
	otherEdPub          ssh.PublicKey // a host key no server uses
	user, wrong, pass   string        // user private keys: authorized, not authorized, passphrase-protected
	userSigner          ssh.Signer
	err                 error
}

var (
	keys     testKeys
	keysOnce sync.Once
)

func getKeys(t *testing.T) *testKeys {
	t.Helper()
	needSSHD(t)
	keysOnce.Do(func() { keys.err = genKeys(&keys) })
	if keys.err != nil {
		t.Fatalf("generate test keys: %v", keys.err)
	}
	return &keys
}

func genKeys(k *testKeys) error {
	dir, err := os.MkdirTemp("", "kremedy-remote-keys-")
	if err != nil {
		return err
	}
	k.dir = dir
	gen := func(name, typ, pass string, extra ...string) (string, error) {
		p := filepath.Join(dir, name)
		args := append([]string{"-q", "-t", typ, "-N", pass, "-C", name, "-f", p}, extra...)
		if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("ssh-keygen %v: %v: %s", args, err, out)
		}
		return p, nil
	}
	var other string
	for _, g := range []struct {
		dst             *string
		name, typ, pass string
		extra           []string
	}{
		{&k.hostEd, "host_ed25519_key", "ed25519", "", nil},
		{&k.hostRSA, "host_rsa_key", "rsa", "", []string{"-b", "2048"}},
		{&other, "other_ed25519_key", "ed25519", "", nil},
		{&k.user, "user_key", "ed25519", "", nil},
		{&k.wrong, "wrong_key", "ed25519", "", nil},
		{&k.pass, "pass_key", "ed25519", "secret", nil},
	} {
		if *g.dst, err = gen(g.name, g.typ, g.pass, g.extra...); err != nil {
			return err
		}
	}
	pub := func(p string) (ssh.PublicKey, error) {
		b, err := os.ReadFile(p + ".pub")
		if err != nil {
			return nil, err
		}
		key, _, _, _, err := ssh.ParseAuthorizedKey(b)
		return key, err
	}
	if k.hostEdPub, err = pub(k.hostEd); err != nil {
		return err
	}
	if k.hostRSAP, err = pub(k.hostRSA); err != nil {
		return err
	}
	if k.otherEdPub, err = pub(other); err != nil {
		return err
	}
	b, err := os.ReadFile(k.user)
	if err != nil {
		return err
	}
	k.userSigner, err = ssh.ParsePrivateKey(b)
	return err
}

// keygenFingerprint asks ssh-keygen itself, as an independent check of
// Fingerprint.
func keygenFingerprint(t *testing.T, pubFile string) string {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-lf", pubFile).Output()
	if err != nil {
		t.Fatalf("ssh-keygen -lf %s: %v", pubFile, err)
	}
	f := strings.Fields(string(out)) // "256 SHA256:... comment (ED25519)"
	if len(f) < 2 {
		t.Fatalf("ssh-keygen -lf output %q", out)
	}
	return f[1]
}

type sshd struct {
	keys *testKeys
	host string
	port int
	pid  int
	log  *lockedBuffer
}

func (s *sshd) addr() string { return net.JoinHostPort(s.host, strconv.Itoa(s.port)) }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startSSHD starts a private sshd for the test and stops it (and every
// process it spawned) in t.Cleanup.
// startSSHD starts a real sshd on loopback; extra are more sshd_config
// lines.
func startSSHD(t *testing.T, extra ...string) *sshd {
	t.Helper()
	k := getKeys(t)
	dir := t.TempDir()
	// sshd reads authorized_keys as the user logging in: the lab's
	// non-root logins (become_test.go) must be able to read it.
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	ak := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(ak, ssh.MarshalAuthorizedKey(k.userSigner.PublicKey()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The port is free when chosen but another process (a parallel
	// package's outgoing connection takes ports from the same range) may
	// bind it before sshd does: sshd then exits with "Address already in
	// use", and a new port is tried.
	for attempt := 1; ; attempt++ {
		s, err := launchSSHD(t, k, dir, ak, freePort(t), extra)
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; another port", attempt, err)
	}
}

var errPortTaken = errors.New("the port was taken before sshd bound it")

// launchSSHD starts sshd on port and waits for its banner; the process
// is stopped in t.Cleanup, or at once when it does not come up.
func launchSSHD(t *testing.T, k *testKeys, dir, ak string, port int, extra []string) (*sshd, error) {
	t.Helper()
	cfg := filepath.Join(dir, "sshd_config")
	conf := fmt.Sprintf(`ListenAddress 127.0.0.1:%d
HostKey %s
HostKey %s
PidFile %s
AuthorizedKeysFile %s
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
StrictModes no
UseDNS no
PrintMotd no
AllowTcpForwarding yes
LogLevel VERBOSE
`, port, k.hostEd, k.hostRSA, filepath.Join(dir, "sshd.pid"), ak) + strings.Join(extra, "\n") + "\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.MkdirAll("/run/sshd", 0o755) // privilege-separation dir; fails harmlessly when not root

	s := &sshd{keys: k, host: "127.0.0.1", port: port, log: &lockedBuffer{}}
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v (%s)", sshdPath, err, installMsg)
	}
	s.pid = cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		select {
		case <-exited: // reaped: its pid may be another process's now
		default:
			killTree(s.pid, syscall.SIGKILL, func(string) bool { return true })
			cmd.Process.Kill()
			<-exited
		}
	}

	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case <-exited:
			stop()
			if strings.Contains(s.log.String(), "Address already in use") {
				return nil, fmt.Errorf("%w (port %d): %s", errPortTaken, port, strings.TrimSpace(s.log.String()))
			}
			return nil, fmt.Errorf("sshd exited at startup:\n%s", s.log.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr(), time.Second); err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			banner, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(banner, "SSH-2.0-") {
				t.Cleanup(func() {
					stop()
					if t.Failed() {
						t.Logf("sshd log:\n%s", s.log.String())
					}
				})
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("sshd did not start listening on %s:\n%s", s.addr(), s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// knownHosts writes a known_hosts file; each line is written as is.
func knownHosts(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// khLine is the known_hosts line for addr and key.
func khLine(addr string, key ssh.PublicKey) string {
	return knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)
}

// goodKnownHosts records the ed25519 key only, the way OpenSSH usually does.
func (s *sshd) goodKnownHosts(t *testing.T) string {
	return knownHosts(t, khLine(s.addr(), s.keys.hostEdPub))
}

func currentUser(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

func (s *sshd) target(t *testing.T) Target {
	return Target{
		Host:            s.host,
		Port:            s.port,
		User:            currentUser(t),
		IdentityFiles:   []string{s.keys.user},
		KnownHostsFiles: []string{s.goodKnownHosts(t)},
		ConnectTimeout:  5 * time.Second,
	}
}

// procTree maps each pid to its children and names, from /proc.
func procTree() (children map[int][]int, comm map[int]string) {
	children, comm = map[int][]int{}, map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ..."; comm may contain spaces and parens.
		st := string(b)
		open, closing := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(st[closing+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
		comm[pid] = st[open+1 : closing]
	}
	return children, comm
}

// descendants lists every process below pid, parents before children.
func descendants(pid int) (pids []int, comm map[int]string) {
	children, comm := procTree()
	queue := append([]int(nil), children[pid]...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		pids = append(pids, p)
		queue = append(queue, children[p]...)
	}
	return pids, comm
}

// killTree sends sig to the descendants of pid selected by match, and
// SIGKILLs the remaining descendants afterwards when sig is SIGKILL (so the
// sshd processes are dead before the commands they run).
func killTree(pid int, sig syscall.Signal, match func(comm string) bool) int {
	pids, comm := descendants(pid)
	n := 0
	for _, p := range pids {
		if match(comm[p]) {
			if syscall.Kill(p, sig) == nil {
				n++
			}
		}
	}
	if sig == syscall.SIGKILL {
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	return n
}

func isSSHD(comm string) bool { return comm == "sshd" }
