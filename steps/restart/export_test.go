package restart

import "time"

// SetPreflightSettle shortens kraft-preflight's re-reads for a test.
func SetPreflightSettle(d time.Duration) (restore func()) {
	was := preflightSettle
	preflightSettle = d
	return func() { preflightSettle = was }
}
