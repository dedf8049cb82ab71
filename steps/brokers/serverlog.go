package brokers

import (
	"context"
	"fmt"
	"strings"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/ports"
)

// ServerLogTail is how much of a server log's end LogLines reads: the
// lines that say why a broker stopped are its last ones, and a log rolled
// since holds older lines only.
const ServerLogTail = 8 << 20

// ENOSPC is what Kafka's server log says when a write found its
// filesystem full (the IOException's message, under KafkaStorageException).
const ENOSPC = "No space left on device"

// LogLinesScript is the one read-only command that finds the lines holding
// needle (a fixed string) in the last ServerLogTail bytes of the file at
// path, each with the line before it (log4j's header line of an exception,
// with its time and what failed), groups separated by "--" as grep -B1
// prints them; at most the last 3n lines. A file that is not there or not
// readable exits 3, saying so.
func LogLinesScript(path, needle string, n int) string {
	return shell.Script(fmt.Sprintf(`kremedy_lines() { test -r "$1" || { echo 'not there, or not readable by this login' >&2; exit 3; }; tail -c %d -- "$1" | grep -a -F -B1 -e "$2" | tail -n "$3"; }
kremedy_lines %s %s %d`, ServerLogTail, shell.Quote(path), shell.Quote(needle), 3*n))
}

// LogLines runs LogLinesScript on host id: the last n places its server
// log at path holds needle, oldest first, each the line before it and the
// line itself joined by " | ", cut to 600 bytes.
func LogLines(ctx context.Context, h ports.Hosts, id int32, path, needle string, n int) ([]string, error) {
	var groups [][]string
	var errs []string
	err := h.Run(ctx, id, LogLinesScript(path, needle, n), func(l ports.Line) {
		if l.Stderr {
			errs = append(errs, l.Text)
			return
		}
		switch t := strings.TrimSpace(l.Text); {
		case t == "--":
			groups = append(groups, nil)
		case t != "":
			if len(groups) == 0 {
				groups = append(groups, nil)
			}
			groups[len(groups)-1] = append(groups[len(groups)-1], t)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read %s on node %d's host: %w (%s)", path, id, err, strings.Join(errs, "; "))
	}
	var out []string
	for _, g := range groups {
		// tail may have cut a group's first line: a group must end with
		// the needle's line.
		if len(g) == 0 || !strings.Contains(g[len(g)-1], needle) {
			continue
		}
		s := strings.Join(g, " | ")
		if len(s) > 600 {
			s = strings.ToValidUTF8(s[:600], "") + "…"
		}
		out = append(out, s)
	}
	return out[max(0, len(out)-n):], nil
}
