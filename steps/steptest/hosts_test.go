package steptest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/ports"
)

// recTB records the fake's complaints instead of failing the test.
type recTB struct {
	testing.TB
	errs []string
}

func (r *recTB) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

// TestHostsRunInput: a command Local picks runs for real with its input on
// its standard input; the command line is in Commands and the input in
// Inputs, apart. Any other command with an input fails the test: the fake
// plays no script with an input.
func TestHostsRunInput(t *testing.T) {
	g := Ghost(t)
	rec := &recTB{TB: t}
	h := NewHosts(rec, g.ZK, g.Ports.Target)
	h.Local = func(_ int32, cmd string) bool { return strings.HasPrefix(cmd, "tr ") }
	var out []string
	if err := h.RunInput(context.Background(), 2, "tr a-z A-Z", []byte("secret\nline two"), func(l ports.Line) { out = append(out, l.Text) }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(out, "|") != "SECRET|LINE TWO" {
		t.Fatalf("output %q", out)
	}
	if len(h.Commands) != 1 || h.Commands[0] != "2: tr a-z A-Z" || len(h.Inputs) != 1 || h.Inputs[0].Command != 0 || string(h.Inputs[0].Data) != "secret\nline two" {
		t.Fatalf("commands %q, inputs %+v", h.Commands, h.Inputs)
	}
	if len(rec.errs) != 0 {
		t.Fatalf("complaints: %q", rec.errs)
	}
	err := h.RunInput(context.Background(), 1, "cat > /tmp/x", []byte("x"), nil)
	if code, ok := err.(*ExitErr); !ok || code.Code != 127 || len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "unexpected command with an input") {
		t.Fatalf("a command the fake does not know: %v, complaints %q", err, rec.errs)
	}
}

// cleanupTB is a recTB that keeps the cleanups registered on it, so that a
// test can end it (end) and read what the fake then complained about.
type cleanupTB struct {
	recTB
	cleanups []func()
}

func (c *cleanupTB) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }

// end runs the cleanups as the end of a test does, last registered first.
func (c *cleanupTB) end() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
}

// TestHostsFailOnExpectedCommandsThatNeverCame: a scripted response is a
// command the test expects; when the test ends without it (other commands,
// even on that node, do not count), the fake fails the test naming the
// response and the command; when the command came, it does not.
func TestHostsFailOnExpectedCommandsThatNeverCame(t *testing.T) {
	run := func(node int32, cmd string) func(h *Hosts) error {
		return func(h *Hosts) error { return h.Run(context.Background(), node, cmd, nil) }
	}
	list := func(dir string) string { return shell.Script("kremedy_list() {\n}\nkremedy_list T 0 " + dir + "\n") }
	cases := []struct {
		name   string
		script func(h *Hosts)
		other  func(h *Hosts) error // a command that is not the expected one
		come   func(h *Hosts) error // the expected command
		fails  bool                 // whether the expected command fails
		want   string
	}{
		{"a stop that fails", func(h *Hosts) { h.StopFails[2] = 1 },
			run(2, "true"), run(2, "systemctl stop kafka-2"), true,
			`StopFails[2] = 1: broker 2's stop command "systemctl stop kafka-2" never came`},
		{"an unreachable host", func(h *Hosts) { h.Unreachable[1] = errors.New("ssh: connection refused") },
			run(2, "true"), run(1, "true"), true,
			"Unreachable[1]: no command for node 1 came"},
		{"a log dir the login may not write", func(h *Hosts) { h.Unwritable = map[int32]map[string]string{3: {"/data/k1": "parent"}} },
			run(3, list("/data/k2")), run(3, list("/data/k1")), false,
			`Unwritable[3]["/data/k1"] = "parent": no listing of /data/k1 on broker 3 came`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := Ghost(t)
			never := &cleanupTB{recTB: recTB{TB: t}}
			h := NewHosts(never, g.ZK, g.Ports.Target)
			tc.script(h)
			if err := tc.other(h); err != nil {
				t.Fatal(err)
			}
			never.end()
			if len(never.errs) != 1 || !strings.Contains(never.errs[0], "an expected command never came: "+tc.want) {
				t.Fatalf("the command never came; the fake said %q, want %q", never.errs, tc.want)
			}

			came := &cleanupTB{recTB: recTB{TB: t}}
			h = NewHosts(came, g.ZK, g.Ports.Target)
			tc.script(h)
			if err := tc.come(h); (err != nil) != tc.fails {
				t.Fatalf("the expected command: %v", err)
			}
			came.end()
			if len(came.errs) != 0 {
				t.Fatalf("the command came; the fake still said %q", came.errs)
			}
		})
	}
}
