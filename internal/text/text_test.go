package text

import (
	"slices"
	"testing"
)

func TestSummarize(t *testing.T) {
	in := []string{"h", "g", "f", "e", "d", "c", "b", "a"}
	before := slices.Clone(in)
	if got := Summarize(in); got != "a, b, c, d, e, f and 2 more" {
		t.Fatalf("%q", got)
	}
	if !slices.Equal(in, before) {
		t.Fatalf("Summarize sorted its argument: %v", in)
	}
	if Summarize(nil) != "none" || Summarize([]string{"x"}) != "x" {
		t.Fatal("short lists")
	}
	if OrDash("") != "-" || OrDash("a") != "a" {
		t.Fatal("OrDash")
	}
}
