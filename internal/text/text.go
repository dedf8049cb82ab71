// Package text shapes the lists kremedy prints in messages and plans.
package text

import (
	"fmt"
	"slices"
	"strings"
)

// Summarize lists at most six items, sorted, and says how many more; the
// caller's slice is left as it was.
func Summarize(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	s = slices.Sorted(slices.Values(s))
	if len(s) > 6 {
		return strings.Join(s[:6], ", ") + fmt.Sprintf(" and %d more", len(s)-6)
	}
	return strings.Join(s, ", ")
}

// OrDash is s, or "-" when it is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Count is n and noun, plural unless n is 1 ("1 partition", "3 partitions").
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
