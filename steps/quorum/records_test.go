package quorum

import (
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The wire format built by hand, field by field, as Kafka writes it:
// DefaultRecordBatch v2, DefaultRecord, MetadataRecordSerde's frame and
// the flexible encoding of common/metadata/<Name>.json.

func uv(v uint64) []byte { return binary.AppendUvarint(nil, v) }
func sv(v int64) []byte  { return binary.AppendVarint(nil, v) }
func cstr(s string) []byte {
	return append(uv(uint64(len(s)+1)), s...)
}
func i8(v int8) []byte { return []byte{byte(v)} }
func i16(v int16) []byte {
	return binary.BigEndian.AppendUint16(nil, uint16(v))
}
func i32(v int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(v))
}
func i64(v int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(v))
}
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// uuidOf is a 16-byte Kafka Uuid and how Kafka prints it.
func uuidOf(seed byte) ([]byte, string) {
	b := make([]byte, 16)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b, base64.RawURLEncoding.EncodeToString(b)
}

// frame is a metadata record's value: frame version 1, apiKey, version,
// then the record's fields and its (empty) tagged fields.
func frame(apiKey, version uint64, fields ...[]byte) []byte {
	return cat(uv(1), uv(apiKey), uv(version), cat(fields...), uv(0))
}

// rec is a DefaultRecord: attributes, timestamp delta, offset delta, key
// (nil: null), value, no headers — its length first.
func rec(offsetDelta int64, key, value []byte) []byte {
	body := cat(i8(0), sv(0), sv(offsetDelta))
	if key == nil {
		body = append(body, sv(-1)...)
	} else {
		body = cat(body, sv(int64(len(key))), key)
	}
	body = cat(body, sv(int64(len(value))), value, sv(0))
	return cat(sv(int64(len(body))), body)
}

// mbatch is a v2 batch at base in epoch holding records (their offset
// deltas 0…n-1), its CRC-32C over attributes onwards.
func mbatch(base int64, epoch int32, control bool, records ...[]byte) []byte {
	attrs := int16(0)
	if control {
		attrs = attrControl
	}
	tail := cat(i16(attrs), i32(int32(len(records)-1)), i64(1700000000000), i64(1700000000000),
		i64(-1), i16(-1), i32(-1), i32(int32(len(records))))
	for _, r := range records {
		tail = append(tail, r...)
	}
	crc := crc32.Checksum(tail, crc32.MakeTable(crc32.Castagnoli))
	return cat(i64(base), i32(int32(4+1+4+len(tail))), i32(epoch), i8(2), binary.BigEndian.AppendUint32(nil, crc), tail)
}

// segment builds the test's segment: offsets 0…13 over four batches and
// a torn fifth; it returns the topic ids it used.
func segment(t *testing.T) (seg []byte, oldID, newID string) {
	t.Helper()
	ob, oldID := uuidOf(1)
	nb, newID := uuidOf(40)
	aclID, _ := uuidOf(90)
	topic := func(name string, id []byte) []byte { return frame(2, 0, cstr(name), id) }
	part := func(p int32, id []byte) []byte {
		return frame(3, 0, i32(p), id, uv(2), i32(1), uv(2), i32(1), uv(1), uv(1), i32(1), i32(0), i32(0))
	}
	seg = cat(
		// 0-2: an old topic, before the ledger's start
		mbatch(0, 3, false, rec(0, nil, topic("old", ob)), rec(1, nil, part(0, ob)), rec(2, nil, frame(20, 0))),
		// 3: a control batch (LeaderChange: key version 0, type 2)
		mbatch(3, 4, true, rec(0, cat(i16(0), i16(2)), []byte{0, 0, 0, 0})),
		// 4-8: a topic of two partitions, a config, a NoOp, the old topic removed
		mbatch(4, 4, false, rec(0, nil, topic("fresh", nb)), rec(1, nil, part(0, nb)), rec(2, nil, part(1, nb)),
			rec(3, nil, frame(4, 0, i8(2), cstr("fresh"), cstr("retention.ms"), cstr("60000"))),
			rec(4, nil, frame(9, 0, ob))),
		// 9-12: an ACL, a SCRAM credential (its secret must never show), a producer-id block, a NoOp
		mbatch(9, 4, false,
			rec(0, nil, frame(18, 0, aclID, i8(2), cstr("fresh"), i8(3), cstr("User:alice"), cstr("*"), i8(3), i8(3))),
			rec(1, nil, frame(11, 0, cstr("alice"), uv(2), i8(1), cat(uv(5), []byte("salt")), cat(uv(13), []byte("SECRETSECRET")), i32(4096), uv(0))),
			rec(2, nil, frame(15, 0, i32(2), i64(7), i64(2000))),
			rec(3, nil, frame(20, 0))),
	)
	torn := mbatch(13, 4, false, rec(0, nil, topic("torn", nb)))
	return append(seg, torn[:len(torn)-5]...), oldID, newID
}

// TestDecodeSegment decodes hand-built bytes of Kafka's wire format from
// offset 3 on: the batch below it skipped, the control batch named, the
// records the ledger reads decoded field by field, a SCRAM credential
// named by its user only, the torn last batch ignored.
func TestDecodeSegment(t *testing.T) {
	seg, oldID, newID := segment(t)
	_, aclID := uuidOf(90)
	recs, err := DecodeSegment(seg, 3)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Name+"|"+r.Detail)
	}
	want := []string{
		"control: LeaderChange|",
		"TopicRecord|topic fresh created (id " + newID + ")",
		"PartitionRecord|partition 0 of topic id " + newID,
		"PartitionRecord|partition 1 of topic id " + newID,
		`ConfigRecord|config retention.ms of topic "fresh" set (its value not shown)`,
		"RemoveTopicRecord|topic id " + oldID + " deleted",
		`AccessControlEntryRecord|ACL ` + aclID + `: User:alice ALLOW READ on topic literal:"fresh" from host "*"`,
		`UserScramCredentialRecord|SCRAM credential of user "alice" set (its secret not shown)`,
		"ProducerIdsRecord|producer ids below 2000 handed out (block for broker 2): the recovered quorum may hand some out again",
		"NoOpRecord|",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("decoded:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i, r := range recs {
		if r.Offset != int64(i+3) || r.Epoch != 4 {
			t.Errorf("record %d: offset %d epoch %d, want %d and 4", i, r.Offset, r.Epoch, i+3)
		}
		if strings.Contains(r.Detail, "SECRET") || strings.Contains(r.Detail, "salt") || strings.Contains(r.Detail, "60000") {
			t.Errorf("a SCRAM secret in the ledger: %s", r.Detail)
		}
	}
	if recs[1].Topic != "fresh" || recs[2].Partition != 0 || recs[3].Partition != 1 {
		t.Errorf("topic fields: %+v %+v %+v", recs[1], recs[2], recs[3])
	}
	// From 6 on: the middle of a batch.
	if mid, _ := DecodeSegment(seg, 6); len(mid) != 7 || mid[0].Name != "PartitionRecord" || mid[0].Partition != 1 {
		t.Errorf("from offset 6: %+v", mid)
	}
}

func TestDecodeSegmentCorrupt(t *testing.T) {
	seg, _, _ := segment(t)
	bad := slices.Clone(seg)
	bad[len(mbatch(0, 3, false))+200] ^= 0xff // inside the third batch
	recs, err := DecodeSegment(bad, 0)
	if err == nil || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("a flipped byte: %v (%d records)", err, len(recs))
	}
	unknown := mbatch(0, 1, false, rec(0, nil, frame(99, 0, i32(5))), rec(1, nil, cat(uv(7), uv(2), uv(0))))
	recs, err = DecodeSegment(unknown, 0)
	if err == nil || !strings.Contains(err.Error(), "frame version 7") || len(recs) != 1 || recs[0].Name != "metadata record apiKey 99" {
		t.Fatalf("an unknown apiKey and a bad frame: %+v %v", recs, err)
	}
}

// TestLedger reads a backed-up copy's segments from the seed's end and
// shows them: the topic with its partitions, each record it reads, the
// others counted.
func TestLedger(t *testing.T) {
	seg, _, _ := segment(t)
	dir := t.TempDir()
	// Two segments: offsets 0-2 in the first, 3… in the second.
	split := batchEnd(t, seg, 1)
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), seg[:split], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000003.log"), seg[split:], 0o644); err != nil {
		t.Fatal(err)
	}
	l := ReadLedger(Copy{Node: 2}, dir, 4)
	if l.Err != "" || !slices.Equal(l.TopicsCreated(), []string{"fresh"}) {
		t.Fatalf("ledger: %+v", l)
	}
	lines := strings.Join(l.Lines(), "\n")
	for _, want := range []string{"broker 2 holds 9 records beyond offset 4 (offsets 4…12)", "topic fresh created", "2 partitions",
		"retention.ms", "deleted", "User:alice", `user "alice"`, "producer ids below 2000", "1 × NoOpRecord"} {
		if !strings.Contains(lines, want) {
			t.Errorf("the ledger does not say %q:\n%s", want, lines)
		}
	}
	if strings.Contains(lines, "PartitionRecord") {
		t.Errorf("the partitions of a topic the ledger creates are not folded into its line:\n%s", lines)
	}
	if l := ReadLedger(Copy{Node: 2}, filepath.Join(dir, "none"), 0); l.Err == "" {
		t.Error("a missing copy read without an error")
	}
}

// batchEnd is the byte position after the first n batches of seg.
func batchEnd(t *testing.T, seg []byte, n int) int {
	t.Helper()
	pos := 0
	for i := 0; i < n; i++ {
		pos += 12 + int(binary.BigEndian.Uint32(seg[pos+8:]))
	}
	return pos
}
