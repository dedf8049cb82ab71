package remote

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Stream says which output stream a Line came from.
type Stream int

const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return "Stream(" + strconv.Itoa(int(s)) + ")"
}

// Line is one line of a remote command's output, without its line ending.
// Lines longer than maxLine bytes arrive in maxLine pieces.
type Line struct {
	Stream Stream
	Text   string
}

// Result describes a finished (or abandoned) command. ExitCode is -1 when
// the command's outcome is unknown (cancelled, connection lost).
type Result struct {
	ExitCode int
	Signal   string // signal that killed the command, e.g. "TERM"; "" otherwise
	Duration time.Duration
}

const maxLine = 1 << 20 // bufio.Scanner buffer limit

// Run runs cmd, a shell command line (build it with Command or Quote), in a
// new session without a terminal, and streams its stdout and stderr to out
// line by line as they arrive. out may be nil; it is never called
// concurrently and never after Run returns.
//
// Errors:
//   - *ExitError when the command exits non-zero or is killed by a signal
//     (Result is filled too);
//   - ErrSessionLost (wrapped) when the connection drops mid-command: the
//     outcome is unknown and the command may still be running;
//   - ctx's error (wrapped) when ctx ends first. Run then asks for TERM and
//     closes the session, but that does NOT stop the remote command: OpenSSH
//     ignores signal requests for root logins (and before 7.9), and closing
//     a session without a terminal leaves its process running. Make
//     commands self-limiting, e.g. Command("timeout", "--kill-after=10",
//     "300", ...), or kill them explicitly over a new session.
//   - ErrUnreachable (wrapped) when the connection was already gone and
//     the command was not started.
func (c *Client) Run(ctx context.Context, cmd string, out func(Line)) (Result, error) {
	return c.run(ctx, cmd, nil, out)
}

// RunInput is Run with stdin as the command's standard input (closed
// once it is sent): the way a file's content reaches a host without
// appearing in the command line, which sudo logs and ps shows. The
// command must read its input to the end: one that exits first may make
// the send fail, and its outcome is reported as a lost session.
func (c *Client) RunInput(ctx context.Context, cmd string, stdin []byte, out func(Line)) (Result, error) {
	if stdin == nil {
		stdin = []byte{}
	}
	return c.run(ctx, cmd, stdin, out)
}

// run is Run and RunInput: stdin, when not nil, is the command's standard
// input.
func (c *Client) run(ctx context.Context, cmd string, stdin []byte, out func(Line)) (Result, error) {
	start := time.Now()
	res := Result{ExitCode: -1}
	done := func() Result { res.Duration = time.Since(start); return res }

	sess, stdout, stderr, err := c.openSession(ctx, cmd)
	if err != nil {
		return done(), err
	}
	defer sess.Close()
	em := &emitter{out: out}
	defer em.stop()

	if stdin != nil {
		sess.Stdin = bytes.NewReader(stdin)
	}
	if err := sess.Start(cmd); err != nil {
		if c.state() != nil || errors.Is(err, io.EOF) {
			return done(), c.sessionLost(cmd, err)
		}
		return done(), fmt.Errorf("%s refused to run `%s` (%w); the command was not started", c.addr, short(cmd), err)
	}
	werr, err := c.await(ctx, cmd, sess, stdout, stderr, em.emit)
	if err != nil {
		return done(), err
	}
	err = c.outcome(ctx, cmd, werr, &res)
	return done(), err
}

// openSession opens a session for cmd with its stdout and stderr piped,
// when ctx is alive and the connection is; its errors say the command was
// not started.
func (c *Client) openSession(ctx context.Context, cmd string) (*ssh.Session, io.Reader, io.Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("run `%s` on %s: %w; the command was not started", short(cmd), c.addr, err)
	}
	if why := c.state(); why != nil {
		return nil, nil, nil, c.notStarted(cmd, why)
	}
	sess, err := c.newSession(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, fmt.Errorf("run `%s` on %s: %w; the command was not started", short(cmd), c.addr, ctx.Err())
		}
		return nil, nil, nil, c.notStarted(cmd, err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, nil, nil, fmt.Errorf("run `%s` on %s: %w; the command was not started", short(cmd), c.addr, err)
	}
	stderr, err := sess.StderrPipe()
	if err != nil {
		sess.Close()
		return nil, nil, nil, fmt.Errorf("run `%s` on %s: %w; the command was not started", short(cmd), c.addr, err)
	}
	return sess, stdout, stderr, nil
}

// emitter hands a command's lines to out one at a time, and none once
// stop was called (Run returned).
type emitter struct {
	mu       sync.Mutex
	returned bool
	out      func(Line)
}

// emit gives l to out, unless out is nil or stop was called.
func (e *emitter) emit(l Line) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.out != nil && !e.returned {
		e.out(l)
	}
}

// stop ends the emitting: no line reaches out after it returns.
func (e *emitter) stop() { e.mu.Lock(); e.returned = true; e.mu.Unlock() }

// await streams the started session's stdout and stderr to emit and waits
// for the command's end: werr is what sess.Wait said. When ctx ends first
// it asks for TERM, closes the session and returns err, which says the
// command may still be running.
func (c *Client) await(ctx context.Context, cmd string, sess *ssh.Session, stdout, stderr io.Reader, emit func(Line)) (werr, err error) {
	var wg sync.WaitGroup
	wg.Add(2)
	go scanLines(&wg, stdout, Stdout, emit)
	go scanLines(&wg, stderr, Stderr, emit)
	readersDone := make(chan struct{})
	go func() { wg.Wait(); close(readersDone) }()
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()

	select {
	case werr = <-waited:
	case <-ctx.Done():
		select {
		case werr = <-waited: // finished at the same moment: report that
		default:
			_ = sess.Signal(ssh.SIGTERM) // best effort, see Run
			sess.Close()
			// The readers are not awaited: sshd keeps the channel open until
			// the command exits. They stop calling out once Run returns.
			return nil, fmt.Errorf("run `%s` on %s: %w; the SSH session was closed and TERM requested, "+
				"but a command without a terminal keeps running after that (OpenSSH ignores signals for root logins): "+
				"it may STILL be running on the host. Check with ps there and stop it yourself if needed",
				short(cmd), c.addr, ctx.Err())
		}
	}
	// Output still buffered when the exit status came is read to the end.
	select {
	case <-readersDone:
	case <-ctx.Done():
	}
	return werr, nil
}

// outcome is what a finished command's werr (sess.Wait's) means: nil for
// exit 0, *ExitError for another exit or a signal (res says which), ctx's
// error, or a lost session.
func (c *Client) outcome(ctx context.Context, cmd string, werr error, res *Result) error {
	var ee *ssh.ExitError
	switch {
	case werr == nil:
		res.ExitCode = 0
		return nil
	case errors.As(werr, &ee):
		res.ExitCode, res.Signal = ee.ExitStatus(), ee.Signal()
		return &ExitError{Cmd: cmd, Code: res.ExitCode, Signal: res.Signal, Addr: c.addr}
	case ctx.Err() != nil:
		return fmt.Errorf("run `%s` on %s: %w; the command may still be running on the host", short(cmd), c.addr, ctx.Err())
	}
	return c.sessionLost(cmd, werr)
}

func (c *Client) notStarted(cmd string, why error) error {
	return fmt.Errorf("%w: connection to %s is gone (%w); `%s` was NOT started. Reconnect and run it again",
		ErrUnreachable, c.addr, why, short(cmd))
}

func (c *Client) sessionLost(cmd string, cause error) error {
	if why := c.state(); why != nil {
		cause = fmt.Errorf("%w (%w)", why, cause)
	}
	return fmt.Errorf("%w: the connection to %s dropped while running `%s` (%w). "+
		"The command's outcome is UNKNOWN: it may have finished, failed, or still be running on the host. "+
		"Nothing was retried. Reconnect and check the host's state before running it again",
		ErrSessionLost, c.addr, short(cmd), cause)
}

// newSession opens a session, giving up when ctx ends (opening blocks while
// a dead peer has not yet been detected by the keepalive).
func (c *Client) newSession(ctx context.Context) (*ssh.Session, error) {
	type result struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := c.conn.NewSession()
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.s != nil {
				r.s.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// scanLines reads r to EOF, emitting each line. The split function cuts
// over-long lines instead of failing, and the remainder is drained in any
// case: an unread stream fills the SSH window and blocks the remote command.
func scanLines(wg *sync.WaitGroup, r io.Reader, s Stream, emit func(Line)) {
	defer wg.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	sc.Split(splitLines)
	for sc.Scan() {
		emit(Line{Stream: s, Text: sc.Text()})
	}
	_, _ = io.Copy(io.Discard, r)
}

func splitLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 && i < maxLine {
		return i + 1, bytes.TrimSuffix(data[:i], []byte{'\r'}), nil
	}
	if len(data) >= maxLine {
		return maxLine, data[:maxLine], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), bytes.TrimSuffix(data, []byte{'\r'}), nil
	}
	return 0, nil, nil
}
