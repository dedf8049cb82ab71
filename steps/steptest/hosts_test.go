package steptest

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
