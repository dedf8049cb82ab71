package remote

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cmdConn is a connection carried by a local command's stdin and stdout,
// as OpenSSH's ProxyCommand: the command runs under /bin/sh in its own
// process group, which Close kills.
type cmdConn struct {
	cmd    *exec.Cmd
	r      io.ReadCloser
	w      io.WriteCloser
	stderr *tailBuffer
	addr   string
	line   string
	once   sync.Once
}

// dialCommand starts a ProxyCommand for the connection to addr.
func dialCommand(command, addr string) (net.Conn, error) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &cmdConn{cmd: cmd, r: r, w: w, stderr: &tailBuffer{max: 4 << 10}, addr: addr, line: command}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ProxyCommand `%s`: %w", command, err)
	}
	return c, nil
}

func (c *cmdConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *cmdConn) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c *cmdConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		if c.cmd.Process != nil {
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { c.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
	})
	return nil
}

// explain adds the command and what it wrote on stderr to a failed
// handshake's error.
func (c *cmdConn) explain(err error) error {
	said := strings.TrimSpace(c.stderr.String())
	if said == "" {
		said = "nothing"
	}
	return fmt.Errorf("%w (through ProxyCommand `%s`, which wrote on stderr: %s)", err, c.line, said)
}

type pipeAddr string

func (a pipeAddr) Network() string { return "proxycommand" }
func (a pipeAddr) String() string  { return string(a) }

func (c *cmdConn) LocalAddr() net.Addr  { return pipeAddr("127.0.0.1:0") }
func (c *cmdConn) RemoteAddr() net.Addr { return pipeAddr(c.addr) }

// Deadlines are not supported on pipes; the handshake is bounded by
// closing the conn when its context ends.
func (c *cmdConn) SetDeadline(time.Time) error      { return nil }
func (c *cmdConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cmdConn) SetWriteDeadline(time.Time) error { return nil }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
