package brokers

import (
	"strings"
	"testing"
)

// TestParseSpace reads SpaceScript's answer: df's numbers in bytes, the
// partition directories largest first, segments by base offset with their
// files' bytes, a snapshot without a .log not taken for a segment, and
// what is not a live partition directory left out.
func TestParseSpace(t *testing.T) {
	out := strings.Split(`dir /d/1
df tmpfs 65536 65536 0 100% /d/1
f 4096 orders-0/00000000000000000000.log
f 8 orders-0/00000000000000000000.index
f 4096 orders-0/00000000000000000007.log
f 16 orders-0/00000000000000000014.snapshot
f 8 orders-0/partition.metadata
f 2048 orders-1/00000000000000000000.log
f 9999 orders-1.0123456789abcdef0123456789abcdef-delete/00000000000000000000.log
dir /d/2
df /dev/sda1 100000 1000 99000 2% /`, "\n")
	sp, err := ParseSpace(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sp) != 2 || sp[0].Dir != "/d/1" || sp[0].Size != 65536*1024 || sp[0].Avail != 0 || sp[0].Mount != "/d/1" || !sp[0].Full() || sp[0].UsedPercent() != 100 {
		t.Fatalf("dirs: %+v", sp)
	}
	if sp[1].Full() || sp[1].Mount != "/" || len(sp[1].Partitions) != 0 {
		t.Fatalf("second dir: %+v", sp[1])
	}
	ps := sp[0].Partitions
	if len(ps) != 2 || ps[0].Name != "orders-0" || ps[1].Name != "orders-1" || ps[0].Partition != 0 || ps[0].Topic != "orders" {
		t.Fatalf("partitions: %+v", ps)
	}
	if ps[0].Bytes != (4096+8+4096+16+8)*512 || len(ps[0].Segments) != 2 || ps[0].Segments[0].Bytes != (4096+8)*512 || ps[0].Segments[1].Base != 7 || ps[0].Oldest() != 0 {
		t.Fatalf("orders-0: %+v", ps[0])
	}
	if _, err := ParseSpace([]string{"dir /d/1", "what is this"}); err == nil {
		t.Fatal("an unexpected line was accepted")
	}
}

// TestSpaceScriptRefusesAnUnsafeDir: a log dir a script could misread is
// never put in the command.
func TestSpaceScriptRefusesAnUnsafeDir(t *testing.T) {
	if _, err := SpaceScript([]string{"/data/kafka$(reboot)"}); err == nil {
		t.Fatal("an unsafe log dir was accepted")
	}
	s, err := SpaceScript([]string{"/data/kafka-1"})
	if err != nil || !strings.Contains(s, "kremedy_space ") || !strings.HasPrefix(s, "exec /bin/sh -c ") {
		t.Fatalf("script %q, %v", s, err)
	}
}
