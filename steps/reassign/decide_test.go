package reassign_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/reassign"
)

// move is orders-0 moving from [1,2] to [1,3]: the controller's replica
// set [1,3,2], adding 3, removing 2.
func move(isr, dead []int32, why string) brokers.Moving {
	return brokers.Moving{Reassignment: ports.Reassignment{Topic: "orders", Partition: 0, Replicas: []int32{1, 3, 2}, Adding: []int32{3}, Removing: []int32{2}},
		Leader: 1, ISR: isr, Dead: dead, Left: -1, Why: why}
}

const deadTarget = "target broker 3 down: it cannot copy the partition, so the move can never complete"

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name     string
		m        brokers.Moving
		want     reassign.Action
		live     []int32
		action   reassign.Action
		replicas []int32 // a retarget's
		brokers  []int32 // a raise's
		refused  []string
	}{
		{name: "cancel: the original replicas live and in the ISR", m: move([]int32{1, 2}, []int32{3}, deadTarget), want: reassign.Cancel, live: []int32{1, 2, 4}, action: reassign.Cancel},
		{name: "cancel refused: an original replica down (KAFKA-14424)", m: move([]int32{1}, []int32{2, 3}, deadTarget), want: reassign.Cancel, live: []int32{1, 4},
			refused: []string{"KAFKA-14424", "original replicas [1,2]", "[2] of them", "--set action=retarget", "Nothing was changed"}},
		{name: "cancel refused: an original replica live but out of the ISR", m: move([]int32{1}, []int32{3}, deadTarget), want: reassign.Cancel, live: []int32{1, 2, 4},
			refused: []string{"KAFKA-14424", "out of the ISR [1]"}},
		{name: "auto cancels when it may", m: move([]int32{1, 2}, []int32{3}, deadTarget), want: reassign.Auto, live: []int32{1, 2, 4}, action: reassign.Cancel},
		{name: "auto retargets when a cancel is unsafe: a live broker outside the set", m: move([]int32{1}, []int32{2, 3}, deadTarget), want: reassign.Auto, live: []int32{1, 4},
			action: reassign.Retarget, replicas: []int32{1, 4}},
		{name: "retarget prefers an in-sync original replica, in the dead one's place", m: move([]int32{1, 2}, []int32{3}, deadTarget), want: reassign.Retarget, live: []int32{1, 2, 4},
			action: reassign.Retarget, replicas: []int32{1, 2}},
		{name: "retarget refused: no live broker left", m: move([]int32{1}, []int32{2, 3}, deadTarget), want: reassign.Retarget, live: []int32{1},
			refused: []string{"cannot be retargeted away from broker [3]", "bring the broker back"}},
		{name: "auto refused when neither cancel nor retarget works, naming both", m: move([]int32{1}, []int32{2, 3}, deadTarget), want: reassign.Auto, live: []int32{1},
			refused: []string{"cannot be retargeted", "KAFKA-14424"}},
		{name: "retarget of a move onto live brokers leaves it", m: move([]int32{1, 2}, nil, ""), want: reassign.Retarget, live: []int32{1, 2, 3}, action: reassign.Leave},
		{name: "raise refused: the target is down", m: move([]int32{1, 2}, []int32{3}, deadTarget), want: reassign.Raise, live: []int32{1, 2},
			refused: []string{"would not help", "--set action=cancel"}},
		{name: "raise: the leader's and the targets' rates", m: move([]int32{1, 2}, nil, "throttle too low: …"), want: reassign.Raise, live: []int32{1, 2, 3},
			action: reassign.Raise, brokers: []int32{1, 3}},
		{name: "auto raises a throttle too low", m: move([]int32{1, 2}, nil, "throttle too low: …"), want: reassign.Auto, live: []int32{1, 2, 3},
			action: reassign.Raise, brokers: []int32{1, 3}},
		{name: "auto leaves a move that moves", m: move([]int32{1, 2}, nil, ""), want: reassign.Auto, live: []int32{1, 2, 3}, action: reassign.Leave},
		{name: "an unknown action is refused", m: move([]int32{1, 2}, nil, ""), want: "drop", live: []int32{1, 2, 3}, refused: []string{`action "drop"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := reassign.Decide(tc.m, tc.want, tc.live, 1000)
			if tc.refused != nil {
				if !errors.Is(err, ports.ErrRefused) {
					t.Fatalf("got %+v, %v; want a refusal", c, err)
				}
				for _, s := range tc.refused {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("refusal does not say %q: %v", s, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Action != tc.action || !slices.Equal(c.Replicas, tc.replicas) || !slices.Equal(c.Brokers, tc.brokers) || c.Why == "" {
				t.Fatalf("got %s replicas %v brokers %v (%s), want %s %v %v", c.Action, c.Replicas, c.Brokers, c.Why, tc.action, tc.replicas, tc.brokers)
			}
			if !slices.Equal(c.Original, []int32{1, 2}) || !slices.Equal(c.Target, []int32{1, 3}) {
				t.Errorf("original %v target %v, want [1 2] and [1 3]", c.Original, c.Target)
			}
		})
	}
}
