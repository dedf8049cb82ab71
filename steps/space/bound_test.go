package space

import (
	"testing"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

func gu(name string, offs map[int32]int64) ports.GroupUse {
	return ports.GroupUse{Group: name, Offsets: offs}
}

// TestBoundIsTheLowestCommit: DeleteRecords goes to the lowest offset
// every group committed on the partition, never beyond, and not at all
// when a group has no commit there or no group committed.
func TestBoundIsTheLowestCommit(t *testing.T) {
	for _, c := range []struct {
		name       string
		groups     []ports.GroupUse
		start, end int64
		want       int64
		ok         bool
	}{
		{"lowest of two groups", []ports.GroupUse{gu("a", map[int32]int64{0: 500}), gu("b", map[int32]int64{0: 120})}, 0, 1000, 120, true},
		{"one group", []ports.GroupUse{gu("a", map[int32]int64{0: 500})}, 100, 1000, 500, true},
		{"no group", nil, 0, 1000, 0, false},
		{"a group without a commit on this partition", []ports.GroupUse{gu("a", map[int32]int64{0: 500}), gu("b", map[int32]int64{1: 900})}, 0, 1000, 0, false},
		{"commit at the log start", []ports.GroupUse{gu("a", map[int32]int64{0: 100})}, 100, 1000, 100, false},
		{"commit below the log start", []ports.GroupUse{gu("a", map[int32]int64{0: 50})}, 100, 1000, 100, false},
		{"commit past the end is clamped to it", []ports.GroupUse{gu("a", map[int32]int64{0: 2000})}, 0, 1000, 1000, true},
		{"end unknown: the lowest commit", []ports.GroupUse{gu("a", map[int32]int64{0: 2000})}, 0, -1, 2000, true},
	} {
		got, ok, why := Bound(c.groups, 0, c.start, c.end)
		if got != c.want || ok != c.ok || why == "" {
			t.Errorf("%s: Bound = %d, %v (%s); want %d, %v", c.name, got, ok, why, c.want, c.ok)
		}
		if ok {
			for _, g := range c.groups {
				if o := g.Offsets[0]; got > o {
					t.Errorf("%s: bound %d is past group %s's commit %d", c.name, got, g.Group, o)
				}
			}
		}
	}
}

// TestStillBoundRefusesAGroupThatMovedBack: at apply time a group reset
// below the plan's bound stops the deletion.
func TestStillBoundRefusesAGroupThatMovedBack(t *testing.T) {
	gs := []ports.GroupUse{gu("a", map[int32]int64{0: 500})}
	if ok, why := StillBound(gs, 0, 500); !ok {
		t.Fatalf("a group at the bound: refused (%s)", why)
	}
	gs = append(gs, gu("late", map[int32]int64{0: 10}))
	if ok, _ := StillBound(gs, 0, 500); ok {
		t.Fatal("a group at 10 with a planned bound of 500: allowed")
	}
	if ok, _ := StillBound(nil, 0, 500); ok {
		t.Fatal("no group any more: allowed")
	}
}

// TestFreedBelowCountsWholeSegmentsOnly: a segment goes only when the
// next one starts at or below the new log start; the active one never.
func TestFreedBelowCountsWholeSegmentsOnly(t *testing.T) {
	p := brokers.PartitionSpace{Segments: []brokers.Segment{{Base: 0, Bytes: 10}, {Base: 100, Bytes: 20}, {Base: 200, Bytes: 40}}}
	for _, c := range []struct {
		start int64
		bytes int64
		n     int
	}{{0, 0, 0}, {99, 0, 0}, {100, 10, 1}, {150, 10, 1}, {200, 30, 2}, {10000, 30, 2}} {
		if b, n := p.FreedBelow(c.start); b != c.bytes || n != c.n {
			t.Errorf("FreedBelow(%d) = %d, %d; want %d, %d", c.start, b, n, c.bytes, c.n)
		}
	}
}
