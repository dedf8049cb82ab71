package tui

import (
	"strings"
	"unicode"

	"github.com/charmbracelet/x/ansi"
)

// maxOutputLines bounds one step's output pane; older lines leave the
// pane (the journal keeps every line).
const maxOutputLines = 200_000

// outLine is one line of a step's output pane.
type outLine struct {
	src  string // host, or "kremedy" for kremedy's own lines
	text string
}

// ring keeps a step's output lines; it grows to max, then overwrites the
// oldest. Rendering reads only the visible window through at.
type ring struct {
	buf     []outLine
	start   int
	max     int
	dropped int
}

func newRing(max int) *ring { return &ring{max: max} }

func (r *ring) push(l outLine) {
	if len(r.buf) < r.max {
		r.buf = append(r.buf, l)
		return
	}
	r.buf[r.start] = l
	r.start = (r.start + 1) % len(r.buf)
	r.dropped++
}

func (r *ring) len() int { return len(r.buf) }

func (r *ring) at(i int) outLine { return r.buf[(r.start+i)%len(r.buf)] }

// sanitize makes a remote line safe to draw: escape sequences are removed
// (a remote host must not drive the operator's terminal), a carriage
// return keeps what a terminal would show, tabs become spaces and other
// control characters are dropped.
func sanitize(s string) string {
	if i := strings.LastIndexByte(strings.TrimRight(s, "\r"), '\r'); i >= 0 {
		s = s[i+1:]
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	s = ansi.Strip(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString("    ")
		case unicode.IsControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
