package kafka

import (
	"testing"
	"time"
)

// TestRetryBackoff: the first retry comes after 50 ms (a connection to a
// restarted broker's old process is found dead at its first read), the
// rest on franz-go's own schedule: 250 ms << (retry-1), ±20 %, at most 5 s.
func TestRetryBackoff(t *testing.T) {
	if got := retryBackoff(1); got != 50*time.Millisecond {
		t.Errorf("first retry after %s, want 50ms", got)
	}
	for _, tc := range []struct {
		fails  int
		lo, hi time.Duration
	}{
		{2, 400 * time.Millisecond, 600 * time.Millisecond},
		{3, 800 * time.Millisecond, 1200 * time.Millisecond},
		{5, 3200 * time.Millisecond, 4800 * time.Millisecond},
		{6, 5 * time.Second, 5 * time.Second},
		{40, 5 * time.Second, 5 * time.Second},
	} {
		for range 50 {
			if got := retryBackoff(tc.fails); got < tc.lo || got > tc.hi {
				t.Fatalf("retry %d after %s, want %s to %s", tc.fails, got, tc.lo, tc.hi)
			}
		}
	}
}
