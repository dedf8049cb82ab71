package space

import (
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/brokers"
)

// TestLowerActions: a tiered partition's whole segments up to its highest
// uploaded offset are local copies (the active segment never); a topic
// with none uploaded, or without tiered storage, gets no action; one
// with uploads off, one this run lowered already, and one at 0 that this
// run did not set are left alone, each said.
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
		{Topic: "frozen", Partition: 0, Bytes: 2 << 20, Segments: seg(0, 10)},
		{Topic: "left", Partition: 0, Bytes: 2 << 20, Segments: seg(0, 10)},
		{Topic: "mine", Partition: 0, Bytes: 2 << 20, Segments: seg(0, 10)},
	}
	up := map[string]map[int32]int64{"archive": {0: 34, 1: 5}, "fresh": {0: -1}, "frozen": {0: 9}, "left": {0: 9}, "mine": {0: 9}}
	cur := map[string]map[string]string{"archive": {localKey: "1073741824"}, "frozen": {copyOff: "true"}, "left": {localKey: "0"}}
	acts, total, notes := lowerActions(3, parts, up, cur, []lowered{{Topic: "mine"}})
	if len(acts) != 1 || acts[0].Target != "archive" || total != 2<<20 {
		t.Fatalf("want one action on archive freeing 2 MiB (archive-0's segments 0 and 20), got %d actions, %d bytes: %+v", len(acts), total, acts)
	}
	args := acts[0].Args.(lowerArgs)
	if len(args.UpTo) != 1 || args.UpTo[0] != 34 || !args.Had || args.Old != "1073741824" ||
		!strings.Contains(acts[0].Detail, "set local.retention.bytes=0 on tiered topic archive (now: 1073741824): about 2.0 MiB") {
		t.Fatalf("action: %+v", acts[0])
	}
	n := strings.Join(notes, "\n")
	for _, want := range []string{"frozen: remote.log.copy.disable=true", "mine: lowered by this run already", "left: local.retention.bytes is 0 already, and this run did not set it"} {
		if !strings.Contains(n, want) {
			t.Errorf("notes lack %q:\n%s", want, n)
		}
	}
}

// TestRestoreLeavesAChangedValue: a value someone set since the run
// lowered it is not overwritten; one still at the run's 0 is set back.
func TestRestoreLeavesAChangedValue(t *testing.T) {
	n := func(v string) localNow { return localNow{value: v, set: true} }
	d := lowered{Topic: "t", Had: true, Old: "500"}
	if !asBefore(n("500"), d) || asBefore(n("0"), d) || asBefore(localNow{}, d) || !asBefore(localNow{}, lowered{Topic: "t"}) {
		t.Fatal("asBefore")
	}
}
