// Package logdir is the one rule a Kafka log dir's path must pass before
// kremedy puts it in a command, whether the inventory names it or a broker
// reports it (DescribeLogDirs, log.dirs in server.properties): an absolute,
// clean path of letters, digits and . _ - / + @ = : only. Such a path is
// never a glob (find -lname, case), never expands in double quotes ($, `,
// \), and never breaks a line, so a quoting mistake in a script cannot turn
// it into a command or another directory.
package logdir

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Allowed names the characters a log dir may hold, for messages.
const Allowed = "letters A-Z a-z, digits 0-9 and . _ - / + @ = :"

// ErrPath is wrapped by Check's errors.
var ErrPath = errors.New("not a log dir path kremedy uses")

// Check returns nil when dir is an absolute, clean path other than / made
// of Allowed characters only; else an error wrapping ErrPath that names the
// first character or rule it breaks (not dir itself: the caller names it).
func Check(dir string) error {
	switch {
	case !path.IsAbs(dir):
		return fmt.Errorf("%w: not an absolute path", ErrPath)
	case path.Clean(dir) != dir:
		return fmt.Errorf("%w: not a clean path (%q)", ErrPath, path.Clean(dir))
	case dir == "/":
		return fmt.Errorf("%w: the root directory", ErrPath)
	}
	if i := strings.IndexFunc(dir, func(r rune) bool { return !allowed(r) }); i >= 0 {
		r := []rune(dir[i:])[0]
		return fmt.Errorf("%w: it holds %q; a log dir may hold only %s", ErrPath, r, Allowed)
	}
	return nil
}

func allowed(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("._-/+@=:", r)
}
