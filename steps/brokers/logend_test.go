package brokers

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// batch is a v2 record batch's bytes: the header fields LogEndScript
// reads, a body of filler up to its length.
func batch(base int64, epoch, lastDelta int32, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[27:], uint64(stamp(base)-1000))
	binary.BigEndian.PutUint64(b[35:], uint64(stamp(base)))
	for i := 43; i < size; i++ {
		b[i] = 0xab
	}
	return b
}

// stamp is the maxTimestamp batch() writes for a batch at base: a
// millisecond per offset after a fixed instant.
func stamp(base int64) int64 { return 1_700_000_000_000 + base }

func indexEntry(rel, pos uint32) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, rel)
	binary.BigEndian.PutUint32(b[4:], pos)
	return b
}

// runEnds runs LogEndScript on this machine's /bin/sh against dirs.
func runEnds(t *testing.T, dirs, names []string) map[string]LogEnd {
	t.Helper()
	script, token := LogEndScript(dirs, names)
	out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return ParseLogEnds(2, token, strings.Split(strings.TrimRight(string(out), "\n"), "\n"))
}

func write(t *testing.T, path string, parts ...[]byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	if err := os.WriteFile(path, all, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLogEndScript reads log ends the way a host does, from canned
// segments: the last segment by name, the walk from the index's last
// real entry (padding skipped), a torn last batch ignored, an index
// pointing at no batch walked from the start, an empty last segment's
// base offset, the checkpoint's epoch against the last batch's.
func TestLogEndScript(t *testing.T) {
	root := t.TempDir()
	d1, d2 := filepath.Join(root, "d1"), filepath.Join(root, "d2")
	if err := os.MkdirAll(d1, 0o755); err != nil {
		t.Fatal(err)
	}
	// orders-0 in d2: an old segment, then the last one at base 100 with
	// three batches (10 records each) and a torn fourth.
	p0 := filepath.Join(d2, "orders-0")
	write(t, filepath.Join(p0, "00000000000000000000.log"), batch(0, 1, 99, 200))
	b1, b2, b3 := batch(100, 3, 9, 100), batch(110, 3, 9, 120), batch(120, 4, 9, 90)
	write(t, filepath.Join(p0, "00000000000000000100.log"), b1, b2, b3, batch(130, 4, 9, 300)[:80])
	write(t, filepath.Join(p0, "00000000000000000100.index"), indexEntry(10, 100), make([]byte, 64))
	write(t, filepath.Join(p0, "leader-epoch-checkpoint"), []byte("0\n2\n3 100\n4 120\n"))
	// orders-1: an index whose last entry points into a batch's body.
	p1 := filepath.Join(d1, "orders-1")
	write(t, filepath.Join(p1, "00000000000000000000.log"), batch(0, 0, 4, 100), batch(5, 7, 2, 100))
	write(t, filepath.Join(p1, "00000000000000000000.index"), indexEntry(3, 50))
	write(t, filepath.Join(p1, "leader-epoch-checkpoint"), []byte("0\n1\n5 0\n"))
	// orders-2: a segment just rolled, empty.
	write(t, filepath.Join(d1, "orders-2", "00000000000000000042.log"))

	got := runEnds(t, []string{d1, d2}, []string{"orders-0", "orders-1", "orders-2", "orders-3"})
	for name, want := range map[string]LogEnd{
		"orders-0": {End: 130, Epoch: 4, EpochStart: 120, LastWrite: stamp(120), Segment: "00000000000000000100.log", Dir: p0},
		"orders-1": {End: 8, Epoch: 7, EpochStart: 0, LastWrite: stamp(5), Segment: "00000000000000000000.log", Dir: p1},
		"orders-2": {End: 42, Epoch: -1, EpochStart: -1, Segment: "00000000000000000042.log", Dir: filepath.Join(d1, "orders-2")},
	} {
		g := got[name]
		want.Broker, want.Partition = 2, name
		if g != want {
			t.Errorf("%s: got %+v, want %+v", name, g, want)
		}
	}
	if g := got["orders-3"]; g.Known() || !strings.Contains(g.Err, "no directory orders-3") {
		t.Errorf("orders-3 (absent): %+v", g)
	}
}

func TestParseCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		epoch int32
		start int64
		bad   bool
	}{
		{lines: []string{"0", "0"}, epoch: -1, start: -1},
		{lines: []string{"0", "3", "0 0", "2 17", "5 40"}, epoch: 5, start: 40},
		{lines: []string{"1", "0"}, bad: true},
		{lines: []string{"0", "2", "0 0"}, bad: true},
		{lines: []string{"0", "1", "x 0"}, bad: true},
		{lines: []string{"0"}, bad: true},
	} {
		e, s, err := ParseCheckpoint(tc.lines)
		if (err != nil) != tc.bad || !tc.bad && (e != tc.epoch || s != tc.start) {
			t.Errorf("%q: %d %d %v", tc.lines, e, s, err)
		}
	}
}

func TestParseBatchHeader(t *testing.T) {
	b := batch(1<<40+5, 9, 31, 61)
	var hx []string
	for _, c := range b[:43] {
		hx = append(hx, fmt.Sprintf("%02x", c))
	}
	h, err := ParseBatchHeader("4096 " + strings.Join(hx, " "))
	if err != nil || h != (BatchHeader{Pos: 4096, BaseOffset: 1<<40 + 5, Length: 49, LeaderEpoch: 9, LastOffsetDelta: 31, MaxTimestamp: stamp(1<<40 + 5)}) {
		t.Fatalf("%+v %v", h, err)
	}
	b[16] = 1
	hx[16] = "01"
	if _, err := ParseBatchHeader("0 " + strings.Join(hx, " ")); err == nil {
		t.Fatal("a magic-1 batch parsed")
	}
	if _, err := ParseBatchHeader("0 00 01"); err == nil {
		t.Fatal("a short header parsed")
	}
}

func TestParseLogEndsEndedEarly(t *testing.T) {
	got := ParseLogEnds(1, "tok", []string{"Etok\tt-0\tdir\t/d/t-0", "noise", "Etok\tt-0\tseg\t00000000000000000000.log 0"})
	if g := got["t-0"]; g.Known() || !strings.Contains(g.Err, "ended early") {
		t.Fatalf("%+v", g)
	}
}
