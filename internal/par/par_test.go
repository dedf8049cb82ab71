package par

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestEachKeepsOrderAndBound: the answers come in the ids' order, however
// the calls finish, and never more than Limit run at once.
func TestEachKeepsOrderAndBound(t *testing.T) {
	var ids []int32
	for i := range int32(50) {
		ids = append(ids, 100-i)
	}
	var running, most atomic.Int32
	got := Each(ids, func(id int32) int32 {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Duration(id%7) * time.Millisecond)
		running.Add(-1)
		return id * 2
	})
	for i, id := range ids {
		if got[i] != id*2 {
			t.Fatalf("answer %d is %d, want %d: %v", i, got[i], id*2, got)
		}
	}
	if m := most.Load(); m > Limit || m < 2 {
		t.Fatalf("%d calls at once, want 2..%d", m, Limit)
	}
	if Each(nil, func(int32) int { return 1 }) == nil || !slices.Equal(Each([]int32{}, func(int32) int { return 1 }), []int{}) {
		t.Fatal("no ids: an empty answer")
	}
}

// TestEachNBound: EachN never runs more than n calls at once, and with
// n < 1 one at a time.
func TestEachNBound(t *testing.T) {
	ids := make([]int32, 40)
	for i := range ids {
		ids[i] = int32(i)
	}
	for _, n := range []int{0, 1, 3, 10} {
		var running, most atomic.Int32
		EachN(n, ids, func(id int32) bool {
			c := running.Add(1)
			for m := most.Load(); c > m && !most.CompareAndSwap(m, c); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			running.Add(-1)
			return true
		})
		if want := int32(max(n, 1)); most.Load() != want {
			t.Errorf("EachN(%d): at most %d at once, want %d", n, most.Load(), want)
		}
	}
}
