package quorum

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The metadata log's wire format, read without Kafka's classes: record
// batches v2 (DefaultRecordBatch.java, DefaultRecord.java) whose record
// values are metadata records framed by MetadataRecordSerde
// (AbstractApiMessageSerde: frame version, apiKey and version as unsigned
// varints, then the record in the flexible encoding of
// metadata/src/main/resources/common/metadata/<Name>.json — every metadata
// record is flexibleVersions 0+ in 3.9 and 4.1: compact strings and
// arrays, uuids as 16 bytes, tagged fields after the fields).

// batchHeaderSize is a v2 batch's header: baseOffset int64, batchLength
// int32, partitionLeaderEpoch int32, magic int8, crc uint32, attributes
// int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
// producerId int64, producerEpoch int16, baseSequence int32, records
// count int32.
const batchHeaderSize = 61

// Batch attributes (DefaultRecordBatch): compression in bits 0-2, the
// control flag in bit 5.
const (
	attrCompression = 0x07
	attrControl     = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one record of the metadata log, decoded as far as the ledger
// needs.
type Record struct {
	Offset int64 `json:"offset"`
	Epoch  int32 `json:"epoch"`
	// Name is the metadata record's name (TopicRecord…), or a control
	// record's ("control: LeaderChange").
	Name    string `json:"name"`
	Control bool   `json:"control,omitempty"`
	// What the record says, for the records the ledger reads
	// (TopicRecord: the topic and its id; ConfigRecord: the resource, the
	// key and the value…); "" for the others. Never a secret: a SCRAM
	// credential is named by its user only.
	Detail string `json:"detail,omitempty"`
	// Topic and TopicID: a TopicRecord's; TopicID also a PartitionRecord's
	// and a RemoveTopicRecord's.
	Topic   string `json:"topic,omitempty"`
	TopicID string `json:"topic_id,omitempty"`
	// Partition is a PartitionRecord's partition (-1 otherwise).
	Partition int32 `json:"partition,omitempty"`
}

// recordNames are the metadata records by apiKey (Kafka 3.9 and 4.1's
// common/metadata/*.json).
var recordNames = map[uint64]string{
	0: "RegisterBrokerRecord", 1: "UnregisterBrokerRecord", 2: "TopicRecord", 3: "PartitionRecord",
	4: "ConfigRecord", 5: "PartitionChangeRecord", 7: "FenceBrokerRecord", 8: "UnfenceBrokerRecord",
	9: "RemoveTopicRecord", 10: "DelegationTokenRecord", 11: "UserScramCredentialRecord",
	12: "FeatureLevelRecord", 14: "ClientQuotaRecord", 15: "ProducerIdsRecord",
	17: "BrokerRegistrationChangeRecord", 18: "AccessControlEntryRecord",
	19: "RemoveAccessControlEntryRecord", 20: "NoOpRecord", 21: "ZkMigrationStateRecord",
	22: "RemoveUserScramCredentialRecord", 23: "BeginTransactionRecord", 24: "EndTransactionRecord",
	25: "AbortTransactionRecord", 26: "RemoveDelegationTokenRecord", 27: "RegisterControllerRecord",
	28: "ClearElrRecord",
}

// controlNames are the control records by type (ControlRecordType.java).
var controlNames = map[int16]string{
	0: "Abort", 1: "Commit", 2: "LeaderChange", 3: "SnapshotHeader", 4: "SnapshotFooter",
	5: "KRaftVersion", 6: "KRaftVoters",
}

// DecodeSegment decodes the records of a segment's bytes whose offset is
// from or later. A batch cut short at the end (a crash mid-write, which
// log recovery truncates) ends the walk without an error; a batch whose
// CRC does not match, or a record that does not decode, is an error
// naming its offset, with the records before it.
func DecodeSegment(seg []byte, from int64) ([]Record, error) {
	var out []Record
	for pos := 0; pos+batchHeaderSize <= len(seg); {
		base := int64(binary.BigEndian.Uint64(seg[pos:]))
		length := int(int32(binary.BigEndian.Uint32(seg[pos+8:])))
		if length < batchHeaderSize-12 || pos+12+length > len(seg) {
			return out, nil
		}
		b := seg[pos : pos+12+length]
		pos += 12 + length
		if b[16] != 2 {
			return out, fmt.Errorf("the batch at offset %d has magic %d, not 2", base, b[16])
		}
		lastDelta := int32(binary.BigEndian.Uint32(b[23:]))
		if base+int64(lastDelta) < from {
			continue
		}
		if crc32.Checksum(b[21:], castagnoli) != binary.BigEndian.Uint32(b[17:]) {
			return out, fmt.Errorf("the batch at offset %d fails its CRC", base)
		}
		recs, err := decodeBatch(b, from)
		out = append(out, recs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// decodeBatch decodes one whole batch's records from offset from.
func decodeBatch(b []byte, from int64) ([]Record, error) {
	base := int64(binary.BigEndian.Uint64(b))
	epoch := int32(binary.BigEndian.Uint32(b[12:]))
	attrs := binary.BigEndian.Uint16(b[21:])
	count := int(int32(binary.BigEndian.Uint32(b[57:])))
	if attrs&attrCompression != 0 {
		return []Record{{Offset: base, Epoch: epoch, Name: fmt.Sprintf("a compressed batch of %d records (codec %d), not decoded", count, attrs&attrCompression), Partition: -1}}, nil
	}
	r := &reader{b: b[batchHeaderSize:]}
	var out []Record
	for i := 0; i < count; i++ {
		rec, err := r.record()
		if err != nil {
			return out, fmt.Errorf("record %d of the batch at offset %d: %w", i, base, err)
		}
		off := base + rec.offsetDelta
		if off < from {
			continue
		}
		d := Record{Offset: off, Epoch: epoch, Partition: -1}
		if attrs&attrControl != 0 {
			d.Control = true
			d.Name = "control: " + controlName(rec.key)
		} else if err := describe(&d, rec.value); err != nil {
			return out, fmt.Errorf("the record at offset %d: %w", off, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func controlName(key []byte) string {
	if len(key) < 4 {
		return "unknown (no key)"
	}
	t := int16(binary.BigEndian.Uint16(key[2:]))
	if n, ok := controlNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type %d", t)
}

// rawRecord is a DefaultRecord's key and value.
type rawRecord struct {
	offsetDelta int64
	key, value  []byte
}

// reader reads Kafka's primitive types from b.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("cut short")

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = errShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int8() int8 {
	if b := r.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *reader) int16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

// skipTags skips a flexible version's tagged fields.
func (r *reader) skipTags() {
	n := r.uvarint()
	for i := uint64(0); i < n && r.err == nil; i++ {
		r.uvarint()
		r.take(int(r.uvarint()))
	}
}

func (r *reader) int32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// uuid is a Kafka Uuid as Kafka prints it (URL-safe base64, no padding).
func (r *reader) uuid() string {
	if b := r.take(16); b != nil {
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return ""
}

// compactString is a flexible version's (nullable) string: its length
// plus one as an unsigned varint (0: null), then its bytes.
func (r *reader) compactString() string {
	n := r.uvarint()
	if n == 0 {
		return "<null>"
	}
	return string(r.take(int(n - 1)))
}

// record reads one DefaultRecord: length varint, attributes int8,
// timestampDelta varlong, offsetDelta varint, key and value (varint
// length, -1: null), headers.
func (r *reader) record() (rawRecord, error) {
	n := r.varint()
	body := r.take(int(n))
	if r.err != nil {
		return rawRecord{}, r.err
	}
	in := &reader{b: body}
	in.int8()
	in.varint()
	rec := rawRecord{offsetDelta: in.varint()}
	if kl := in.varint(); kl >= 0 {
		rec.key = in.take(int(kl))
	}
	if vl := in.varint(); vl >= 0 {
		rec.value = in.take(int(vl))
	}
	return rec, in.err
}
