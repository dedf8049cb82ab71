package remote

import "github.com/kremedy/kremedy/steps"

// Quote returns s as one POSIX shell word (steps.ShQuote): safe words bare,
// anything else single-quoted; '=' is always quoted. Validate inputs first:
// quoting does not stop option injection, and a NUL cannot be quoted.
func Quote(s string) string { return steps.ShQuote(s) }

// Command quotes each argument and joins them with spaces.
func Command(argv ...string) string { return steps.ShCommand(argv...) }
