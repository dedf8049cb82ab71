package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/steps/ports"
)

// TestGroupsHolesAreAnError: a group whose OffsetFetch failed as a whole
// (its coordinator loading), one not described, a partition answered with
// an error and a broker whose ListGroups shard failed are each named in an
// error wrapping ports.ErrGroupsIncomplete; the groups read are still
// returned. Before, billing (at 100) was silently dropped and a (at 900)
// alone bounded DeleteRecords.
func TestGroupsHolesAreAnError(t *testing.T) {
	at := func(o int64) kadm.OffsetResponse { return kadm.OffsetResponse{Offset: kadm.Offset{At: o}} }
	described := kadm.DescribedGroups{
		"a":       {Group: "a", State: "Empty"},
		"billing": {Group: "billing", State: "Empty"},
		"c":       {Group: "c", State: "Empty"},
	}
	fetched := kadm.FetchOffsetsResponses{
		"a":       {Group: "a", Fetched: kadm.OffsetResponses{"orders": {0: at(900)}}},
		"billing": {Group: "billing", Err: kerr.CoordinatorLoadInProgress},
		"c":       {Group: "c", Fetched: kadm.OffsetResponses{"orders": {0: at(950), 1: {Err: kerr.UnstableOffsetCommit}}}},
		"d":       {Group: "d", Fetched: kadm.OffsetResponses{"orders": {0: at(990)}}},
	}
	out, holes := mergeGroups("orders", []string{"a", "billing", "c", "d"}, described, fetched)
	if len(out) != 3 || out[0].Group != "a" || out[0].Offsets[0] != 900 || out[1].Group != "c" || out[2].Group != "d" {
		t.Fatalf("groups read: %+v", out)
	}
	holes = append(shardHoles("ListGroups", &kadm.ShardErrors{Name: "ListGroups", Errs: []kadm.ShardError{{Broker: kadm.BrokerDetail{NodeID: 3}, Err: errors.New("connection refused")}}}), holes...)
	err := incomplete(holes)
	if !errors.Is(err, ports.ErrGroupsIncomplete) {
		t.Fatalf("want ErrGroupsIncomplete, got %v", err)
	}
	for _, want := range []string{"ListGroups to broker 3: connection refused", "group billing: OffsetFetch COORDINATOR_LOAD_IN_PROGRESS",
		"group c on orders-1: OffsetFetch UNSTABLE_OFFSET_COMMIT", "group d: no DescribeGroups answer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if incomplete(nil) != nil || shardHoles("ListGroups", nil) != nil {
		t.Error("a whole answer is an error")
	}
}

// TestUnissued: a ListGroups that reached no broker (its only shard has
// no broker: the metadata request timed out on a frozen broker) is asked
// again; one that some broker answered, or that a broker refused, is not.
func TestUnissued(t *testing.T) {
	timeout := errors.New("read tcp 127.0.0.1:49600->127.13.1.2:9092: i/o timeout")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no broker reached", &kadm.ShardErrors{Name: "ListGroups", AllFailed: true, Errs: []kadm.ShardError{{Broker: kadm.BrokerDetail{NodeID: -1}, Err: timeout}}}, true},
		{"every broker asked failed", &kadm.ShardErrors{Name: "ListGroups", AllFailed: true, Errs: []kadm.ShardError{{Broker: kadm.BrokerDetail{NodeID: 2}, Err: timeout}}}, false},
		{"one broker of two failed", &kadm.ShardErrors{Name: "ListGroups", Errs: []kadm.ShardError{{Broker: kadm.BrokerDetail{NodeID: 2}, Err: timeout}}}, false},
		{"not sharded", timeout, false},
		{"no error", nil, false},
	} {
		if got := unissued(c.err); got != c.want {
			t.Errorf("%s: unissued = %v, want %v", c.name, got, c.want)
		}
	}
}
