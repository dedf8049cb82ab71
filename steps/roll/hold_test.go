package roll

import (
	"testing"
	"time"
)

// TestRetryAfter: after a failing round the gate asks again at twice the
// round's read, no sooner than 200 ms (a small cluster is not hammered)
// and no later than the second between passing rounds.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct{ read, want time.Duration }{
		{0, 200 * time.Millisecond},
		{15 * time.Millisecond, 200 * time.Millisecond},
		{300 * time.Millisecond, 600 * time.Millisecond},
		{2 * time.Second, time.Second},
	} {
		if got := retryAfter(tc.read); got != tc.want {
			t.Errorf("retryAfter(%s) = %s, want %s", tc.read, got, tc.want)
		}
	}
}
