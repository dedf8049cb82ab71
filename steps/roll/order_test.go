package roll

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// lastNodes is a Nodes whose only answers order reads: its hosts and
// which one goes last.
type lastNodes struct {
	Nodes
	ids  []int32
	last int32
}

func (n lastNodes) Hosts(*steps.Env) []ports.Host {
	var hs []ports.Host
	for _, id := range n.ids {
		hs = append(hs, ports.Host{ID: id})
	}
	return hs
}

func (n lastNodes) Last(context.Context, *steps.Env) (int32, string) { return n.last, "the controller" }

// TestOrderFirst: Roll.First goes first in its own order; the last-one
// rule holds among the others, and is set aside when the last one is
// among the first.
func TestOrderFirst(t *testing.T) {
	for _, tc := range []struct {
		first    []int32
		last     int32
		want     []int32
		wantLast int32
	}{
		{nil, 1, []int32{2, 3, 4, 1}, 1},
		{[]int32{3}, 1, []int32{3, 2, 4, 1}, 1},
		{[]int32{1, 3, 2}, 1, []int32{1, 3, 2, 4}, -1},
		{[]int32{9, 4}, 2, []int32{4, 1, 3, 2}, 2}, // 9: not a node of the roll
	} {
		r := &Roll{Nodes: lastNodes{ids: []int32{4, 3, 2, 1}, last: tc.last}, First: tc.first, StopTimeout: time.Second}
		got, last, _, err := r.order(context.Background(), &steps.Env{})
		if err != nil || !slices.Equal(got, tc.want) || last != tc.wantLast {
			t.Errorf("First %v, last %d: order %v, last %d (%v); want %v, last %d", tc.first, tc.last, got, last, err, tc.want, tc.wantLast)
		}
	}
}
