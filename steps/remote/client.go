package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// Target says where and how to connect.
type Target struct {
	Host string // hostname/IP, or ~/.ssh/config alias when SSHConfig resolution is used (ResolveSSHConfig)
	Port int    // 0 = 22
	User string
	// IdentityFiles are private key files. Passphrase-protected keys are
	// refused with a clear error: load those into ssh-agent instead.
	IdentityFiles []string
	UseAgent      bool // also offer the keys of the agent at SSH_AUTH_SOCK
	// KnownHostsFiles is REQUIRED. There is no trust-on-first-use and no
	// way to skip host-key checking.
	KnownHostsFiles []string
	// ConnectTimeout bounds TCP connect AND the SSH handshake (including
	// authentication) of each hop; 0 = 10s. x/crypto's own Timeout covers
	// only the TCP connect, so a server that accepts and never speaks would
	// hang forever without this.
	ConnectTimeout time.Duration
	// ProxyJump is an optional "user@host:port[,host2]" chain, dialled in
	// order; each hop is verified against the same known_hosts files and
	// offered the same keys. A hop without user@ uses User, without :port 22.
	ProxyJump string
	// Become "sudo" runs every command through `sudo -n` (Fleet does it);
	// "" runs it as User.
	Become string
	// ProxyCommand, when set (and ProxyJump is not), is a local shell
	// command whose stdin/stdout carry the connection, as ssh's
	// ProxyCommand (tokens already expanded).
	ProxyCommand string
	// HostKeyAlias is the name looked up in known_hosts instead of Host.
	HostKeyAlias string
	// CertificateFiles are OpenSSH user certificates; each is offered with
	// the identity whose key it certifies (an identity's own
	// "<file>-cert.pub" is tried too, as ssh does).
	CertificateFiles []string
	// SkipUnusableKeys skips identity files that cannot be used without a
	// prompt (passphrase-protected) instead of failing: ssh's default
	// identities, which ssh would skip too.
	SkipUnusableKeys bool
	// TryAgent offers the agent's keys when an agent answers at
	// AgentSocket (or SSH_AUTH_SOCK), and quietly does without otherwise;
	// UseAgent insists.
	TryAgent    bool
	AgentSocket string
}

// Keepalive tuning: a keepalive@openssh.com request every interval; the
// connection is declared lost after maxMisses intervals without a reply.
// Variables so the tests can shorten them.
var (
	keepaliveInterval  = 5 * time.Second
	keepaliveMaxMisses = 3
)

const defaultConnectTimeout = 10 * time.Second

// Client is one SSH connection to a target. It is safe for concurrent use:
// each Run opens its own session.
type Client struct {
	addr  string
	conn  *ssh.Client
	hops  []*ssh.Client // jump-host connections, first hop first
	creds *credentials

	done      chan struct{}
	closeOnce sync.Once

	mu     sync.Mutex
	lost   error // why the keepalive gave up, nil while alive
	closed bool  // Close was called
}

// hop is one SSH connection of a route: keyAddr is the name known_hosts
// is asked about (HostKeyAlias), proxy a ProxyCommand that carries it.
type hop struct{ user, addr, keyAddr, proxy string }

// Dial connects to t, verifying host keys and authenticating. ctx bounds
// the dial only; once Dial returns, cancelling ctx does not affect the
// Client. Errors: *UnknownHostKeyError, *HostKeyMismatchError, ErrAuth,
// ErrUnreachable (wrapped), ctx's error, or a configuration error.
func Dial(ctx context.Context, t Target) (*Client, error) {
	if t.Host == "" {
		return nil, errors.New("ssh target has no host")
	}
	if t.User == "" {
		return nil, fmt.Errorf("ssh target %s has no user", t.Host)
	}
	port := t.Port
	if port == 0 {
		port = 22
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("ssh target %s: port %d out of range", t.Host, t.Port)
	}
	addr := net.JoinHostPort(t.Host, strconv.Itoa(port))
	timeout := t.ConnectTimeout
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	files := make([]string, len(t.KnownHostsFiles))
	for i, f := range t.KnownHostsFiles {
		files[i] = expandHome(f)
	}
	hk, err := loadKnownHosts(files)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	ids := make([]string, len(t.IdentityFiles))
	for i, f := range t.IdentityFiles {
		ids[i] = expandHome(f)
	}
	t.IdentityFiles = ids
	chain, err := routeOf(t, addr, port)
	if err != nil {
		return nil, err
	}

	creds, err := loadCredentials(t)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	clients, err := dialChain(ctx, chain, hk, creds, timeout)
	if err != nil {
		creds.close()
		return nil, err
	}
	c := &Client{
		addr:  addr,
		conn:  clients[len(clients)-1],
		hops:  clients[:len(clients)-1],
		creds: creds,
		done:  make(chan struct{}),
	}
	go c.keepalive(keepaliveInterval, keepaliveMaxMisses)
	return c, nil
}

// routeOf is the hops that reach t (at addr, its port port): its
// ProxyJump hosts, then t itself (with its HostKeyAlias and ProxyCommand).
// A target with both ProxyJump and ProxyCommand is refused.
func routeOf(t Target, addr string, port int) ([]hop, error) {
	chain, err := parseProxyJump(t.ProxyJump, t.User)
	if err != nil {
		return nil, err
	}
	last := hop{user: t.User, addr: addr}
	if t.HostKeyAlias != "" {
		last.keyAddr = net.JoinHostPort(t.HostKeyAlias, strconv.Itoa(port))
	}
	if t.ProxyCommand != "" {
		if len(chain) > 0 {
			return nil, fmt.Errorf("ssh target %s has both ProxyJump and ProxyCommand; ssh uses one route: keep one", t.Host)
		}
		last.proxy = t.ProxyCommand
	}
	return append(chain, last), nil
}

// dialChain connects to each hop of chain in turn, each through the one
// before it: the clients, the target's last. On error it closes the
// clients it made (the last first) and returns none.
func dialChain(ctx context.Context, chain []hop, hk *hostKeys, creds *credentials, timeout time.Duration) ([]*ssh.Client, error) {
	var clients []*ssh.Client
	for i, h := range chain {
		var via *ssh.Client
		if i > 0 {
			via = clients[i-1]
		}
		cl, err := dialHop(ctx, via, h, hk, creds, timeout)
		if err != nil {
			for i := len(clients) - 1; i >= 0; i-- {
				clients[i].Close()
			}
			return nil, err
		}
		clients = append(clients, cl)
	}
	return clients, nil
}

// dialHop dials h directly (via == nil) or through the jump client via,
// then runs the SSH handshake, all bounded by timeout.
func dialHop(ctx context.Context, via *ssh.Client, h hop, hk *hostKeys, creds *credentials, timeout time.Duration) (*ssh.Client, error) {
	keyAddr := h.keyAddr
	if keyAddr == "" {
		keyAddr = h.addr
	}
	cfg := &ssh.ClientConfig{
		User:              h.user,
		Auth:              []ssh.AuthMethod{creds.method()},
		HostKeyCallback:   hk.verify,
		HostKeyAlgorithms: hk.algorithms(keyAddr),
		Timeout:           timeout,
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var nc net.Conn
	var err error
	switch {
	case h.proxy != "":
		nc, err = dialCommand(h.proxy, h.addr)
	case via == nil:
		var d net.Dialer
		nc, err = d.DialContext(dctx, "tcp", h.addr)
	default:
		nc, err = via.DialContext(dctx, "tcp", h.addr)
	}
	if err != nil {
		return nil, classifyDial(ctx, dctx, h, via, creds, timeout, err)
	}
	cl, err := handshake(dctx, nc, keyAddr, cfg)
	if err != nil {
		if pc, ok := nc.(*cmdConn); ok {
			err = pc.explain(err)
		}
		return nil, classifyDial(ctx, dctx, h, via, creds, timeout, err)
	}
	return cl, nil
}

// handshake runs the SSH handshake over nc, bounded by ctx. ssh.Dial's
// Timeout stops at TCP connect, and tunnelled conns (ProxyJump) ignore
// SetDeadline, so ctx closes the conn when it expires.
func handshake(ctx context.Context, nc net.Conn, addr string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl) // fails harmlessly on tunnelled conns
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	c, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
	if !stop() {
		// ctx fired and the conn is (being) closed under the handshake.
		if err == nil {
			c.Close()
			err = ctx.Err()
		}
		nc.Close()
		return nil, err
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

func classifyDial(ctx, dctx context.Context, h hop, via *ssh.Client, creds *credentials, timeout time.Duration, err error) error {
	host, port := splitAddr(h.addr)
	where := h.addr
	if via != nil {
		where = fmt.Sprintf("%s (via jump host %s)", h.addr, via.RemoteAddr())
	}
	var ne net.Error
	switch {
	case isHostKeyError(err):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("connect to %s: %w; nothing was run", where, ctx.Err())
	case isAuthError(err):
		return fmt.Errorf("%w: %s@%s accepted none of the offered keys [%s]; nothing was run. "+
			"Check that one of them is in ~%s/.ssh/authorized_keys on %s, or load the right key into ssh-agent (%w)",
			ErrAuth, h.user, where, creds.describe(), h.user, host, err)
	case errors.Is(dctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Errorf("%w: %s did not complete TCP connect and SSH handshake within %s (%w); nothing was run. "+
			"Check the host is up and sshd answers on port %s (`ssh -v -p %s %s`); sshd may be overloaded or something else listens there",
			ErrUnreachable, where, timeout, err, port, port, host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: %s refused the connection (%w); nothing was run. "+
			"Is sshd running and listening on port %s there?", ErrUnreachable, where, err, port)
	}
	var oce *ssh.OpenChannelError
	if errors.As(err, &oce) {
		return fmt.Errorf("%w: jump host %s could not open a connection to %s (%w); nothing was run. "+
			"Check that %s is reachable from the jump host and that it allows TCP forwarding",
			ErrUnreachable, via.RemoteAddr(), h.addr, err, h.addr)
	}
	return fmt.Errorf("%w: cannot set up SSH to %s (%w); nothing was run. "+
		"Check the host is up and sshd answers on port %s", ErrUnreachable, where, err, port)
}

func isAuthError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "unable to authenticate") || strings.Contains(s, "Too many authentication failures")
}

// parseProxyJump splits "user@host:port,host2" into hops. "" and "none"
// mean no jump host. A hop without user@ gets defUser.
func parseProxyJump(s, defUser string) ([]hop, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return nil, nil
	}
	var hops []hop
	for _, part := range strings.Split(s, ",") {
		user, host, port, err := splitHop(part)
		if err != nil {
			return nil, fmt.Errorf("ProxyJump %q: %w", s, err)
		}
		if user == "" {
			user = defUser
		}
		if port == "" {
			port = "22"
		}
		hops = append(hops, hop{user: user, addr: net.JoinHostPort(host, port)})
	}
	return hops, nil
}

// splitHop splits one "[ssh://][user@]host[:port]" hop; user and port are
// "" when absent.
func splitHop(spec string) (user, host, port string, err error) {
	bad := func(why string) (string, string, string, error) {
		return "", "", "", fmt.Errorf("hop %q %s (want user@host:port)", spec, why)
	}
	s := strings.TrimPrefix(strings.TrimSpace(spec), "ssh://")
	if s == "" {
		return bad("is empty")
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		user, s = s[:i], s[i+1:]
		if user == "" {
			return bad("has an empty user")
		}
	}
	host = s
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		if host, port, err = net.SplitHostPort(s); err != nil {
			return bad(err.Error())
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return bad("has a bad port")
		}
	}
	if host == "" || strings.ContainsAny(host, " \t/") {
		return bad("has a bad host")
	}
	return user, host, port, nil
}

// Addr returns the target's "host:port".
func (c *Client) Addr() string { return c.addr }

// Close closes the connection and any jump-host connections. Commands still
// running over it get ErrSessionLost; their remote processes are not
// stopped. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	var err error
	c.closeOnce.Do(func() {
		close(c.done)
		err = c.conn.Close()
		for i := len(c.hops) - 1; i >= 0; i-- {
			c.hops[i].Close()
		}
		c.creds.close()
		if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
			err = nil
		}
	})
	return err
}

// state returns why the connection is gone, or nil while it is usable.
func (c *Client) state() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.lost != nil:
		return c.lost
	case c.closed:
		return errors.New("the client was closed")
	}
	return nil
}

// keepalive sends keepalive@openssh.com every interval. Any reply, even a
// refusal (OpenSSH answers false), proves the peer alive. After maxMisses
// intervals without a reply the connection is closed, which fails
// everything blocked on it: a dead peer becomes ErrSessionLost, not a hang.
func (c *Client) keepalive(interval time.Duration, maxMisses int) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var inflight chan error
	misses := 0
	for {
		select {
		case <-c.done:
			return
		case err := <-inflight:
			inflight = nil
			if err != nil {
				c.giveUp(fmt.Errorf("keepalive failed: %w", err))
				return
			}
			misses = 0
		case <-tick.C:
			if inflight != nil {
				misses++
				if misses >= maxMisses {
					c.giveUp(fmt.Errorf("no reply to keepalives for %s", time.Duration(misses)*interval))
					return
				}
				continue
			}
			inflight = make(chan error, 1)
			go func(ch chan<- error) {
				_, _, err := c.conn.SendRequest("keepalive@openssh.com", true, nil)
				ch <- err
			}(inflight)
		}
	}
}

func (c *Client) giveUp(why error) {
	c.mu.Lock()
	if c.lost == nil && !c.closed {
		c.lost = why
	}
	c.mu.Unlock()
	c.conn.Close()
	for i := len(c.hops) - 1; i >= 0; i-- {
		c.hops[i].Close()
	}
}
