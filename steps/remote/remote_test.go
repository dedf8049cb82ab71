package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kremedy/kremedy/internal/shell"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// dial connects to s. At cleanup, before the client closes, every process
// the connection started is killed, so commands such as "sleep 30" that a
// test abandons do not outlive it (closing first would orphan them).
func dial(t *testing.T, s *sshd, tg Target) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, tg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	t.Cleanup(func() { killTree(s.pid, syscall.SIGKILL, func(string) bool { return true }) })
	return c
}

// collector gathers lines per stream. It takes no lock on purpose: Run
// promises never to call out concurrently, and -race checks that.
type collector struct{ out, err []string }

func (c *collector) add(l Line) {
	switch l.Stream {
	case Stdout:
		c.out = append(c.out, l.Text)
	case Stderr:
		c.err = append(c.err, l.Text)
	default:
		panic("bad stream " + l.Stream.String())
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := dial(t, s, s.target(t))
	if c.Addr() != s.addr() {
		t.Errorf("Addr() = %q, want %q", c.Addr(), s.addr())
	}
	mib := 1 << 20
	tests := []struct {
		name       string
		cmd        string
		wantOut    []string // nil: not checked
		wantErr    []string
		check      func(t *testing.T, col *collector)
		wantCode   int
		wantSignal string
	}{
		{
			name:    "stdout and stderr streamed, exit 0",
			cmd:     "echo out1; echo err1 >&2; echo out2; echo err2 >&2; printf 'no newline'",
			wantOut: []string{"out1", "out2", "no newline"},
			wantErr: []string{"err1", "err2"},
		},
		{
			name:     "exit 3",
			cmd:      "echo giving up >&2; exit 3",
			wantOut:  []string{},
			wantErr:  []string{"giving up"},
			wantCode: 3,
		},
		{
			name:       "killed by signal",
			cmd:        "echo before; kill -TERM $$; echo after",
			wantOut:    []string{"before"},
			wantCode:   143,
			wantSignal: "TERM",
		},
		{
			name:     "command not found",
			cmd:      "kremedy-no-such-command",
			wantCode: 127,
		},
		{
			name:    "stdin is empty, not left open",
			cmd:     "cat; echo done",
			wantOut: []string{"done"},
		},
		{
			name:    "CRLF line endings are stripped",
			cmd:     `printf 'a\r\nb\r\n'`,
			wantOut: []string{"a", "b"},
		},
		{
			name: "over-long line arrives in 1 MiB pieces",
			cmd:  "head -c 2621440 /dev/zero | tr '\\0' x; echo; echo tail",
			check: func(t *testing.T, col *collector) {
				var lens []int
				for _, l := range col.out {
					lens = append(lens, len(l))
				}
				if want := []int{mib, mib, mib / 2, 4}; !slices.Equal(lens, want) {
					t.Errorf("line lengths %v, want %v", lens, want)
				}
			},
		},
		{
			// Each stream exceeds x/crypto's 2 MiB channel window: an
			// undrained stream would block the remote command.
			name: "both streams drained at volume",
			cmd: "head -c 3000000 /dev/zero | tr '\\0' e | fold -w 1000 >&2 & " +
				"head -c 3000000 /dev/zero | tr '\\0' o | fold -w 1000; wait",
			check: func(t *testing.T, col *collector) {
				if len(col.out) != 3000 || len(col.err) != 3000 || col.out[0] != strings.Repeat("o", 1000) || col.err[2999] != strings.Repeat("e", 1000) {
					t.Errorf("got %d stdout and %d stderr lines, want 3000 of 1000 bytes each", len(col.out), len(col.err))
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // sessions on one connection
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			col := &collector{}
			res, err := c.Run(ctx, tc.cmd, col.add)
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
			} else {
				var ee *ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("Run error = %v, want *ExitError", err)
				}
				if ee.Code != tc.wantCode || ee.Signal != tc.wantSignal || ee.Cmd != tc.cmd {
					t.Errorf("ExitError = %+v, want code %d signal %q", ee, tc.wantCode, tc.wantSignal)
				}
				if !strings.Contains(ee.Error(), strconv.Itoa(tc.wantCode)) || !strings.Contains(ee.Error(), s.addr()) {
					t.Errorf("message %q lacks status or host", ee.Error())
				}
			}
			if res.ExitCode != tc.wantCode || res.Signal != tc.wantSignal {
				t.Errorf("Result = %+v, want code %d signal %q", res, tc.wantCode, tc.wantSignal)
			}
			if res.Duration <= 0 {
				t.Errorf("Result.Duration = %v", res.Duration)
			}
			if tc.wantOut != nil && !slices.Equal(col.out, tc.wantOut) && !(len(tc.wantOut) == 0 && len(col.out) == 0) {
				t.Errorf("stdout lines %q, want %q", col.out, tc.wantOut)
			}
			if tc.wantErr != nil && !slices.Equal(col.err, tc.wantErr) {
				t.Errorf("stderr lines %q, want %q", col.err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, col)
			}
		})
	}
	t.Run("nil out", func(t *testing.T) {
		if _, err := c.Run(context.Background(), "echo ignored; echo ignored >&2", nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRunStreamsAsTheyArrive(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := dial(t, s, s.target(t))
	var first time.Time
	_, err := c.Run(context.Background(), "echo first; sleep 1; echo second", func(l Line) {
		if l.Text == "first" {
			first = time.Now()
		}
	})
	end := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if first.IsZero() || end.Sub(first) < 700*time.Millisecond {
		t.Fatalf("first line came %v before Run returned; want it streamed ~1s before the end", end.Sub(first))
	}
}

// TestRunInput: the input reaches the command's standard input byte for
// byte (3 MiB: more than one SSH window, binary, no final newline), and the
// command line is only the command; a command without input reads EOF.
func TestRunInput(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := dial(t, s, s.target(t))
	in := make([]byte, 3<<20)
	for i := range in {
		in[i] = byte(i*7 + i>>9)
	}
	col := &collector{}
	if _, err := c.RunInput(context.Background(), "sha256sum | cut -d' ' -f1", in, col.add); err != nil {
		t.Fatalf("RunInput: %v (%q)", err, col.err)
	}
	h := sha256.Sum256(in)
	if len(col.out) != 1 || col.out[0] != hex.EncodeToString(h[:]) {
		t.Fatalf("the command read %q, want the %d bytes' sha256 %x", col.out, len(in), h)
	}
	col = &collector{}
	if _, err := c.RunInput(context.Background(), "wc -c", nil, col.add); err != nil || len(col.out) != 1 || strings.TrimSpace(col.out[0]) != "0" {
		t.Fatalf("no input: %q %v", col.out, err)
	}
}

func TestRunConcurrentSessions(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := dial(t, s, s.target(t))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			col := &collector{}
			if _, err := c.Run(context.Background(), shell.Command("echo", strconv.Itoa(i)), col.add); err != nil {
				t.Errorf("run %d: %v", i, err)
				return
			}
			if !slices.Equal(col.out, []string{strconv.Itoa(i)}) {
				t.Errorf("run %d: stdout %q", i, col.out)
			}
		})
	}
	wg.Wait()
}

// hostile are strings that must reach a program unchanged through a shell.
var hostile = []string{
	"", "plain", "with space", "it's", `a"b`, `$(id)`, "`id`", "a;rm -rf /", "a;b|c&d>e<f",
	"line1\nline2", "trailing\n", "\t\r", `\`, `'\''`, `'`, `''`, "$HOME", "${HOME}", "*", "?", "[a]",
	"~", "~root", "-rf", "--", "A=B", "#comment", "!", "{a,b}", "ünï-код-日本", "%s%n", "a\x01b\x7f",
	"/var/lib/kafka/data/orders-0",
}

func TestQuoteThroughSSH(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := dial(t, s, s.target(t))
	// One session for all strings (sessions cost ~150 ms here). od shows
	// the bytes printf received exactly, trailing newlines included.
	var script []string
	for _, in := range hostile {
		script = append(script, shell.Command("printf", "%s", in)+" | od -An -v -tx1; echo --")
	}
	cmd := strings.Join(script, "; ")
	col := &collector{}
	if _, err := c.Run(context.Background(), cmd, col.add); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got []string
	var hexLines []string
	for _, l := range col.out {
		if l != "--" {
			hexLines = append(hexLines, l)
			continue
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(strings.Join(hexLines, " ")), ""))
		if err != nil {
			t.Fatalf("od output %q: %v", hexLines, err)
		}
		got, hexLines = append(got, string(b)), nil
	}
	if len(got) != len(hostile) {
		t.Fatalf("got %d results for %d strings; stdout %q, stderr %q", len(got), len(hostile), col.out, col.err)
	}
	for i, in := range hostile {
		if got[i] != in {
			t.Errorf("remote printf got %q, want %q (quoted as %s)", got[i], in, shell.Quote(in))
		}
	}
}

func TestDialHostKeys(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	k := s.keys
	addr := s.addr()
	edFP := keygenFingerprint(t, k.hostEd+".pub")

	tests := []struct {
		name  string
		lines []string
		check func(t *testing.T, kh string, err error)
	}{
		{
			name: "empty known_hosts: unknown host, ed25519 fingerprint shown",
			check: func(t *testing.T, kh string, err error) {
				var u *UnknownHostKeyError
				if !errors.As(err, &u) {
					t.Fatalf("err = %v, want *UnknownHostKeyError", err)
				}
				want := UnknownHostKeyError{Addr: addr, KeyType: "ssh-ed25519", Fingerprint: edFP, KnownHosts: []string{kh}}
				if u.Addr != want.Addr || u.KeyType != want.KeyType || u.Fingerprint != want.Fingerprint || !slices.Equal(u.KnownHosts, want.KnownHosts) {
					t.Errorf("got %+v, want %+v", *u, want)
				}
				msg := u.Error()
				for _, w := range []string{edFP, "ssh-keyscan -p " + strconv.Itoa(s.port) + " -t ed25519 127.0.0.1", "ssh-keygen -lf", kh} {
					if !strings.Contains(msg, w) {
						t.Errorf("message lacks %q:\n%s", w, msg)
					}
				}
			},
		},
		{
			name:  "recorded for another port only: unknown",
			lines: []string{khLine("127.0.0.1:1", k.hostEdPub)},
			check: func(t *testing.T, kh string, err error) {
				var u *UnknownHostKeyError
				if !errors.As(err, &u) {
					t.Fatalf("err = %v, want *UnknownHostKeyError", err)
				}
			},
		},
		{
			name:  "different key recorded: mismatch names file and line",
			lines: []string{"# kremedy test", khLine(addr, k.otherEdPub)},
			check: func(t *testing.T, kh string, err error) {
				var m *HostKeyMismatchError
				if !errors.As(err, &m) {
					t.Fatalf("err = %v, want *HostKeyMismatchError", err)
				}
				want := HostKeyMismatchError{Addr: addr, KeyType: "ssh-ed25519", Fingerprint: edFP,
					File: kh, Line: 2, KnownFingerprint: Fingerprint(k.otherEdPub)}
				if *m != want {
					t.Errorf("got %+v, want %+v", *m, want)
				}
				if msg := m.Error(); !strings.Contains(msg, "man-in-the-middle") || !strings.Contains(msg, kh+" line 2") {
					t.Errorf("message: %s", msg)
				}
			},
		},
		{
			name:  "only ed25519 recorded while server also offers rsa (algorithm pitfall)",
			lines: []string{khLine(addr, k.hostEdPub)},
		},
		{
			name:  "only rsa recorded",
			lines: []string{khLine(addr, k.hostRSAP)},
		},
		{
			name:  "both recorded",
			lines: []string{khLine(addr, k.hostRSAP), khLine(addr, k.hostEdPub)},
		},
		{
			name:  "hashed hostname",
			lines: []string{knownhosts.Line([]string{knownhosts.HashHostname(knownhosts.Normalize(addr))}, k.hostEdPub)},
		},
		{
			name:  "revoked key",
			lines: []string{"@revoked * " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.hostEdPub))), khLine(addr, k.hostEdPub)},
			check: func(t *testing.T, kh string, err error) {
				var r *knownhosts.RevokedError
				if !errors.As(err, &r) || errors.Is(err, ErrUnreachable) {
					t.Fatalf("err = %v, want *knownhosts.RevokedError", err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kh := knownHosts(t, tc.lines...)
			tg := s.target(t)
			tg.KnownHostsFiles = []string{kh}
			c, err := Dial(context.Background(), tg)
			if tc.check == nil {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded, want an error")
			}
			if errors.Is(err, ErrUnreachable) || errors.Is(err, ErrAuth) {
				t.Errorf("host-key error also matches ErrUnreachable/ErrAuth: %v", err)
			}
			tc.check(t, kh, err)
		})
	}

	// Control: the pitfall is real. Plain x/crypto with Go's default
	// algorithm order negotiates RSA and reports a (false) mismatch.
	t.Run("control: Go defaults fail on ed25519-only known_hosts", func(t *testing.T) {
		cb, err := knownhosts.New(knownHosts(t, khLine(addr, k.hostEdPub)))
		if err != nil {
			t.Fatal(err)
		}
		cl, err := ssh.Dial("tcp", addr, &ssh.ClientConfig{
			User: currentUser(t), Auth: []ssh.AuthMethod{ssh.PublicKeys(k.userSigner)},
			HostKeyCallback: cb, Timeout: 5 * time.Second,
		})
		if err == nil {
			cl.Close()
			t.Fatal("plain ssh.Dial succeeded; the algorithm pitfall no longer reproduces, review hostKeys.algorithms")
		}
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) || len(ke.Want) == 0 {
			t.Fatalf("err = %v, want knownhosts key mismatch", err)
		}
	})
}

func TestDialErrors(t *testing.T) {
	s := startSSHD(t)
	k := s.keys

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // accept and never speak
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	silentPort := silent.Addr().(*net.TCPAddr).Port
	refusedPort := freePort(t)

	tests := []struct {
		name    string
		edit    func(tg *Target)
		ctx     func() context.Context
		is      error    // errors.Is target
		msg     []string // substrings of the message
		maxTime time.Duration
	}{
		{
			name: "wrong user key",
			edit: func(tg *Target) { tg.IdentityFiles = []string{k.wrong} },
			is:   ErrAuth,
			msg:  []string{"authorized_keys", keygenFingerprint(t, k.wrong+".pub")},
		},
		{
			name: "connection refused",
			edit: func(tg *Target) { tg.Port = refusedPort },
			is:   ErrUnreachable,
			msg:  []string{"refused"},
		},
		{
			name:    "server accepts TCP but never speaks",
			edit:    func(tg *Target) { tg.Port = silentPort; tg.ConnectTimeout = time.Second },
			is:      ErrUnreachable,
			msg:     []string{"within 1s"},
			maxTime: 3 * time.Second,
		},
		{
			name: "jump host cannot reach target",
			edit: func(tg *Target) {
				tg.ProxyJump = s.addr()
				tg.Port = refusedPort
			},
			is:  ErrUnreachable,
			msg: []string{"jump host"},
		},
		{
			name: "silent target behind jump host (tunnel ignores SetDeadline)",
			edit: func(tg *Target) {
				tg.ProxyJump = s.addr()
				tg.Port = silentPort
				tg.ConnectTimeout = time.Second
			},
			is:      ErrUnreachable,
			maxTime: 3 * time.Second,
		},
		{
			name: "ctx already cancelled",
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			is: context.Canceled,
		},
		{
			name: "passphrase-protected key",
			edit: func(tg *Target) { tg.IdentityFiles = []string{k.pass} },
			msg:  []string{"key " + k.pass + " is passphrase-protected; load it into ssh-agent"},
		},
		{
			name: "missing known_hosts file",
			edit: func(tg *Target) { tg.KnownHostsFiles = []string{filepath.Join(t.TempDir(), "nope")} },
			is:   os.ErrNotExist,
			msg:  []string{"cannot be read", "nope"},
		},
		{
			name: "no known_hosts at all",
			edit: func(tg *Target) { tg.KnownHostsFiles = nil },
			msg:  []string{"KnownHostsFiles is required"},
		},
		{
			name: "no credentials",
			edit: func(tg *Target) { tg.IdentityFiles = nil },
			msg:  []string{"no SSH credentials"},
		},
		{
			name: "agent requested without SSH_AUTH_SOCK",
			edit: func(tg *Target) { tg.UseAgent = true },
			msg:  []string{"SSH_AUTH_SOCK is empty"},
		},
		{
			name: "bad ProxyJump",
			edit: func(tg *Target) { tg.ProxyJump = "user@host:notaport" },
			msg:  []string{"ProxyJump"},
		},
	}
	t.Setenv("SSH_AUTH_SOCK", "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := s.target(t)
			if tc.edit != nil {
				tc.edit(&tg)
			}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			start := time.Now()
			c, err := Dial(ctx, tg)
			took := time.Since(start)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded, want an error")
			}
			t.Logf("error (after %v): %v", took.Round(time.Millisecond), err)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(err, %v) = false", tc.is)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("message lacks %q", m)
				}
			}
			if tc.maxTime > 0 && took > tc.maxTime {
				t.Errorf("took %v, want under %v", took, tc.maxTime)
			}
		})
	}
}

func TestProxyJump(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	t.Run("through the server itself", func(t *testing.T) {
		tg := s.target(t)
		tg.ProxyJump = currentUser(t) + "@" + s.addr()
		c := dial(t, s, tg)
		col := &collector{}
		// SSH_CONNECTION shows the target saw a connection from the jump host's sshd.
		if _, err := c.Run(context.Background(), "echo ok", col.add); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(col.out, []string{"ok"}) {
			t.Fatalf("stdout %q", col.out)
		}
	})
	t.Run("two hops", func(t *testing.T) {
		tg := s.target(t)
		tg.ProxyJump = s.addr() + "," + currentUser(t) + "@" + s.addr()
		c := dial(t, s, tg)
		if _, err := c.Run(context.Background(), "true", nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unknown jump host key", func(t *testing.T) {
		tg := s.target(t) // known_hosts records 127.0.0.1:port only
		jump := net.JoinHostPort("localhost", strconv.Itoa(s.port))
		tg.ProxyJump = jump
		c, err := Dial(context.Background(), tg)
		if err == nil {
			c.Close()
			t.Fatal("Dial succeeded through a jump host missing from known_hosts")
		}
		var u *UnknownHostKeyError
		if !errors.As(err, &u) || u.Addr != jump {
			t.Fatalf("err = %v, want *UnknownHostKeyError for %s", err, jump)
		}
	})
}

func TestAgent(t *testing.T) {
	s := startSSHD(t)
	kr := agent.NewKeyring()
	b, err := os.ReadFile(s.keys.user)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := kr.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(kr, c); c.Close() }()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)

	// The file key is wrong; the agent's is right. Both must be offered
	// through one auth method (x/crypto uses only the first of each type).
	tg := s.target(t)
	tg.IdentityFiles = []string{s.keys.wrong}
	tg.UseAgent = true
	c := dial(t, s, tg)
	if _, err := c.Run(context.Background(), "true", nil); err != nil {
		t.Fatal(err)
	}
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := dial(t, s, s.target(t))
	ctx, cancel := context.WithCancel(context.Background())
	col := &collector{}
	started := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
		}
		cancel()
	}()
	begin := time.Now()
	res, err := c.Run(ctx, "echo started; sleep 30", func(l Line) {
		col.add(l)
		once.Do(func() { close(started) })
	})
	took := time.Since(begin)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "may STILL be running") {
		t.Errorf("message does not warn the command may still run: %v", err)
	}
	if took > 4*time.Second {
		t.Errorf("Run took %v after cancel, want prompt return", took)
	}
	if res.ExitCode != -1 {
		t.Errorf("ExitCode = %d, want -1 (unknown)", res.ExitCode)
	}
	// The connection survives a cancelled command.
	if _, err := c.Run(context.Background(), "true", nil); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	// A ctx cancelled before Run never starts the command.
	if _, err := c.Run(ctx, "true", nil); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not started") {
		t.Errorf("Run with dead ctx: %v", err)
	}
}

// runUntilStarted runs cmd (which must print "started" first) and calls
// then once that line arrives; it returns Run's outcome and duration
// measured from the call to then.
func runUntilStarted(t *testing.T, c *Client, cmd string, then func()) (Result, time.Duration, error) {
	t.Helper()
	var at time.Time
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Run(ctx, cmd, func(l Line) {
		if l.Text == "started" && at.IsZero() {
			at = time.Now()
			go then()
		}
	})
	if at.IsZero() {
		t.Fatalf("command never printed started: %v", err)
	}
	return res, time.Since(at), err
}

func TestRunSessionLost(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := dial(t, s, s.target(t))
	res, took, err := runUntilStarted(t, c, "echo started; sleep 20", func() {
		if n := killTree(s.pid, syscall.SIGKILL, isSSHD); n == 0 {
			t.Error("no per-connection sshd process found to kill")
		}
	})
	if !errors.Is(err, ErrSessionLost) {
		t.Fatalf("err = %v, want ErrSessionLost", err)
	}
	if !strings.Contains(err.Error(), "UNKNOWN") || !strings.Contains(err.Error(), "still be running") {
		t.Errorf("message must say the outcome is unknown: %v", err)
	}
	if res.ExitCode != -1 {
		t.Errorf("ExitCode = %d, want -1", res.ExitCode)
	}
	if took > 5*time.Second {
		t.Errorf("took %v to notice", took)
	}
	// The client is now unusable and says so without trying.
	if _, err := c.Run(context.Background(), "true", nil); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "NOT started") {
		t.Errorf("Run on a lost connection: %v", err)
	}
}

func TestKeepaliveDetectsDeadPeer(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := dial(t, s, s.target(t))
	// SIGSTOP keeps the TCP connection open but silent, like a hung host or
	// a dropped network path: only the keepalive can notice.
	res, took, err := runUntilStarted(t, c, "echo started; sleep 20", func() {
		if n := killTree(s.pid, syscall.SIGSTOP, isSSHD); n == 0 {
			t.Error("no per-connection sshd process found to stop")
		}
	})
	if !errors.Is(err, ErrSessionLost) {
		t.Fatalf("err = %v, want ErrSessionLost", err)
	}
	if !strings.Contains(err.Error(), "keepalive") {
		t.Errorf("message should name the keepalive: %v", err)
	}
	if res.ExitCode != -1 {
		t.Errorf("ExitCode = %d", res.ExitCode)
	}
	limit := time.Duration(keepaliveMaxMisses+2)*keepaliveInterval + 5*time.Second
	if took > limit {
		t.Errorf("took %v to notice a dead peer, want under %v", took, limit)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := dial(t, s, s.target(t))
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Run(context.Background(), "true", nil); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "NOT started") {
		t.Errorf("Run after Close: %v", err)
	}
}
