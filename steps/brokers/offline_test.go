package brokers

import "testing"

// TestChoose: the longest live log is elected even when it is not the
// first live replica (Kafka's pick); a dead broker whose log was read and is
// the longest is waited for; an unread dead log makes the loss a floor,
// raised by what a group had read.
func TestChoose(t *testing.T) {
	end := func(b int32, e int64) LogEnd { return LogEnd{Broker: b, End: e, Epoch: 1} }
	for _, tc := range []struct {
		name string
		o    Offline
		want Choice
	}{
		{"dead leader unread, a group read past the live logs",
			Offline{Replicas: []int32{1, 2, 3}, Dead: []int32{3}, Ends: map[int32]LogEnd{1: end(1, 20), 2: end(2, 35)}, Unread: map[int32]string{3: "no route"}, Committed: 45, Group: "g"},
			Choice{Elect: 2, ElectEnd: 35, FirstLive: 1, Longest: 45, Lost: 10, Exact: false}},
		{"dead leader read and longest: wait",
			Offline{Replicas: []int32{1, 2, 3}, Dead: []int32{3}, Ends: map[int32]LogEnd{1: end(1, 20), 2: end(2, 35), 3: end(3, 45)}, Committed: -1},
			Choice{Wait: 3, Elect: 2, ElectEnd: 35, FirstLive: 1, Longest: 45, Lost: 0, Exact: true}},
		{"every log read, a live one longest",
			Offline{Replicas: []int32{3, 1, 2}, Dead: []int32{3}, Ends: map[int32]LogEnd{1: end(1, 20), 2: end(2, 35), 3: end(3, 30)}, Committed: 10},
			Choice{Elect: 2, ElectEnd: 35, FirstLive: 1, Longest: 35, Lost: 0, Exact: true}},
		{"a tie with a dead log: electing loses nothing, no wait",
			Offline{Replicas: []int32{3, 1, 2}, Dead: []int32{3}, Ends: map[int32]LogEnd{1: end(1, 20), 2: end(2, 35), 3: end(3, 35)}, Committed: -1},
			Choice{Elect: 2, ElectEnd: 35, FirstLive: 1, Longest: 35, Lost: 0, Exact: true}},
		{"a dead log longer at an older leader epoch: a divergent tail, not waited for",
			Offline{Replicas: []int32{3, 1, 2}, Dead: []int32{3}, Ends: map[int32]LogEnd{1: {Broker: 1, End: 20, Epoch: 5}, 2: {Broker: 2, End: 45, Epoch: 5}, 3: {Broker: 3, End: 50, Epoch: 4}}, Committed: -1},
			Choice{Elect: 2, ElectEnd: 45, FirstLive: 1, Longest: 45, Lost: 0, Exact: true}},
		{"a dead log shorter at a newer leader epoch: waited for",
			Offline{Replicas: []int32{3, 1, 2}, Dead: []int32{3}, Ends: map[int32]LogEnd{1: {Broker: 1, End: 20, Epoch: 5}, 2: {Broker: 2, End: 45, Epoch: 5}, 3: {Broker: 3, End: 44, Epoch: 6}}, Committed: -1},
			Choice{Wait: 3, Elect: 2, ElectEnd: 45, FirstLive: 1, Longest: 45, Lost: 0, Exact: true}},
	} {
		got := tc.o.Choose()
		got.Why = ""
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
