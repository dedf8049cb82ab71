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

// LogLinesScript is the one read-only command that finds the last n lines
// holding needle (a fixed string) in the last ServerLogTail bytes of the
// file at path. A file that is not there or not readable exits 3, saying so.
func LogLinesScript(path, needle string, n int) string {
	return shell.Script(fmt.Sprintf(`kremedy_lines() { test -r "$1" || { echo 'not there, or not readable by this login' >&2; exit 3; }; tail -c %d -- "$1" | grep -a -F -e "$2" | tail -n "$3"; }
kremedy_lines %s %s %d`, ServerLogTail, shell.Quote(path), shell.Quote(needle), n))
}

// LogLines runs LogLinesScript on host id: the last n lines of its server
// log at path holding needle, oldest first, each cut to 400 bytes.
func LogLines(ctx context.Context, h ports.Hosts, id int32, path, needle string, n int) ([]string, error) {
	var lines, errs []string
	err := h.Run(ctx, id, LogLinesScript(path, needle, n), func(l ports.Line) {
		if l.Stderr {
			errs = append(errs, l.Text)
			return
		}
		t := strings.TrimSpace(l.Text)
		if len(t) > 400 {
			t = t[:400] + "…"
		}
		lines = append(lines, t)
	})
	if err != nil {
		return nil, fmt.Errorf("read %s on node %d's host: %w (%s)", path, id, err, strings.Join(errs, "; "))
	}
	return lines, nil
}
