package space

import (
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/brokers"
)

// TestLowerActions: a tiered partition's whole segments up to its highest
// uploaded offset are local copies (the active segment never); a topic
// with none uploaded, or without tiered storage, gets no action.
func TestLowerActions(t *testing.T) {
	seg := func(bases ...int64) []brokers.Segment {
		var out []brokers.Segment
		for _, b := range bases {
			out = append(out, brokers.Segment{Base: b, Bytes: 1 << 20})
		}
		return out
	}
	parts := []brokers.PartitionSpace{
		{Topic: "archive", Partition: 0, Bytes: 4 << 20, Segments: seg(0, 20, 35, 60)},
		{Topic: "archive", Partition: 1, Bytes: 2 << 20, Segments: seg(0, 10)},
		{Topic: "fresh", Partition: 0, Bytes: 2 << 20, Segments: seg(0, 10)},
		{Topic: "orders", Partition: 0, Bytes: 2 << 20, Segments: seg(0, 10)},
	}
	up := map[string]map[int32]int64{"archive": {0: 34, 1: 5}, "fresh": {0: -1}}
	acts, total := lowerActions(3, parts, up)
	if len(acts) != 1 || acts[0].Target != "archive" || total != 2<<20 {
		t.Fatalf("want one action on archive freeing 2 MiB (archive-0's segments 0 and 20), got %d actions, %d bytes: %+v", len(acts), total, acts)
	}
	args := acts[0].Args.(lowerArgs)
	if len(args.UpTo) != 1 || args.UpTo[0] != 34 || !strings.Contains(acts[0].Detail, "set local.retention.bytes=0 on tiered topic archive: about 2.0 MiB") {
		t.Fatalf("action: %+v", acts[0])
	}
	if got := uploadedCopies(parts[0], 59); got != 3<<20 {
		t.Errorf("up to 59: %d bytes of copies, want 3 MiB (the active segment 60 never)", got)
	}
}
