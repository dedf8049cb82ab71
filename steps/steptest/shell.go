package steptest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/kremedy/kremedy/steps/ports"
)

// LocalShell is a ports.Hosts whose every host is this machine: it runs
// commands the way sshd does, `Shell -c CMD`, so that the scripts kremedy
// writes meet a real shell (dash, bash) in a unit test.
type LocalShell struct{ Shell string }

func (s LocalShell) Run(ctx context.Context, n int32, cmd string, out func(ports.Line)) error {
	return s.RunInput(ctx, n, cmd, nil, out)
}

// RunInput runs cmd with stdin as its standard input (none when nil).
func (s LocalShell) RunInput(ctx context.Context, _ int32, cmd string, stdin []byte, out func(ports.Line)) error {
	c := exec.CommandContext(ctx, s.Shell, "-c", cmd)
	if stdin != nil {
		c.Stdin = bytes.NewReader(stdin)
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64*1024), 16<<20) // a file read as one base64 line
	for sc.Scan() {
		out(ports.Line{Text: sc.Text()})
	}
	if err := c.Wait(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return &ExitErr{ee.ExitCode()}
		}
		return err
	}
	return sc.Err()
}

func (LocalShell) Check(context.Context, int32) error { return nil }

func (LocalShell) RunClient(context.Context, ports.Client, string, func(ports.Line)) error {
	return nil
}
