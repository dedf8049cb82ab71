package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/ports"
)

// Fleet runs commands on a cluster's broker (and client) hosts: the
// ports.Hosts port. It keeps one connection per host and drops it when the
// session is lost, so the next command dials again.
type Fleet struct {
	brokers map[int32]Target
	clients map[string]Target

	mu    sync.Mutex
	conns map[string]*conn
}

// conn is one host's connection, dialled once even when several steps ask
// for it at the same moment (listings run on every host in parallel).
type conn struct {
	ready chan struct{} // closed when the dial has finished
	c     *Client
	err   error
}

var _ ports.Hosts = (*Fleet)(nil)

// NewFleet builds a fleet from per-broker and per-client SSH targets.
func NewFleet(brokers map[int32]Target, clients map[string]Target) *Fleet {
	return &Fleet{brokers: brokers, clients: clients, conns: map[string]*conn{}}
}

func key(t Target) string { return fmt.Sprintf("%s@%s:%d", t.User, t.Host, t.Port) }

func (f *Fleet) client(ctx context.Context, t Target) (*Client, error) {
	k := key(t)
	f.mu.Lock()
	e, ok := f.conns[k]
	if !ok {
		e = &conn{ready: make(chan struct{})}
		f.conns[k] = e
	}
	f.mu.Unlock()
	if ok {
		select {
		case <-e.ready:
			return e.c, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e.c, e.err = Dial(ctx, t)
	close(e.ready)
	if e.err != nil {
		// Not cached: the next command dials again (the host may be back).
		f.mu.Lock()
		if f.conns[k] == e {
			delete(f.conns, k)
		}
		f.mu.Unlock()
	}
	return e.c, e.err
}

func (f *Fleet) drop(t Target) {
	f.mu.Lock()
	e, ok := f.conns[key(t)]
	if ok {
		delete(f.conns, key(t))
	}
	f.mu.Unlock()
	if ok {
		<-e.ready
		if e.c != nil {
			e.c.Close()
		}
	}
}

func (f *Fleet) run(ctx context.Context, t Target, cmd string, stdin []byte, out func(ports.Line)) error {
	c, err := f.client(ctx, t)
	if err != nil {
		return err
	}
	sent := cmd
	if t.Become == BecomeSudo {
		sent = Sudo(cmd)
	}
	var said string // sudo's first complaint on stderr
	emit := func(l Line) {
		if t.Become == BecomeSudo && said == "" && l.Stream == Stderr && sudoComplaint(l.Text) {
			said = l.Text
		}
		if out != nil {
			out(ports.Line{Stderr: l.Stream == Stderr, Text: l.Text})
		}
	}
	if stdin != nil {
		_, err = c.RunInput(ctx, sent, stdin, emit)
	} else {
		_, err = c.Run(ctx, sent, emit)
	}
	if errors.Is(err, ErrSessionLost) || errors.Is(err, ErrUnreachable) {
		f.drop(t)
	}
	var ee *ExitError
	if said != "" && errors.As(err, &ee) && (ee.Code == 1 || ee.Code == 127) {
		return &SudoError{Addr: ee.Addr, User: t.User, Cmd: cmd, Said: said}
	}
	return err
}

// BecomeSudo is the Target.Become that runs every command through sudo.
const BecomeSudo = "sudo"

// Sudo wraps a command line so that root runs it through `sudo -n` (never
// prompting: without a NOPASSWD rule sudo fails at once) under /bin/sh,
// whatever the login shell.
func Sudo(cmd string) string { return "sudo -n -- /bin/sh -c " + shell.Quote(cmd) }

// sudoComplaint is a line sudo (or the shell not finding it) writes when
// it refuses.
func sudoComplaint(s string) bool {
	return strings.HasPrefix(s, "sudo: ") || (strings.Contains(s, "sudo") && strings.Contains(s, "not found"))
}

// Run runs cmd on broker's host.
func (f *Fleet) Run(ctx context.Context, broker int32, cmd string, out func(ports.Line)) error {
	t, ok := f.brokers[broker]
	if !ok {
		return fmt.Errorf("broker %d has no SSH target in the inventory", broker)
	}
	return f.run(ctx, t, cmd, nil, out)
}

// RunInput runs cmd on broker's host with stdin as its standard input
// (through sudo too: sudo passes it on). Only cmd is on the command line
// sudo logs; stdin is not.
func (f *Fleet) RunInput(ctx context.Context, broker int32, cmd string, stdin []byte, out func(ports.Line)) error {
	t, ok := f.brokers[broker]
	if !ok {
		return fmt.Errorf("broker %d has no SSH target in the inventory", broker)
	}
	if stdin == nil {
		stdin = []byte{}
	}
	return f.run(ctx, t, cmd, stdin, out)
}

// Check connects to broker's host (verifying its host key) and runs `true`.
func (f *Fleet) Check(ctx context.Context, broker int32) error {
	return f.Run(ctx, broker, "true", nil)
}

// RunClient runs cmd on a client's host.
func (f *Fleet) RunClient(ctx context.Context, c ports.Client, cmd string, out func(ports.Line)) error {
	t, ok := f.clients[c.Name]
	if !ok {
		return fmt.Errorf("client %s has no SSH target in the inventory", c.Name)
	}
	return f.run(ctx, t, cmd, nil, out)
}

// Close ends every connection.
func (f *Fleet) Close() {
	f.mu.Lock()
	conns := f.conns
	f.conns = map[string]*conn{}
	f.mu.Unlock()
	for _, e := range conns {
		<-e.ready
		if e.c != nil {
			e.c.Close()
		}
	}
}
