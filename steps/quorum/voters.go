package quorum

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
)

// A dynamic quorum (KIP-853, kraft.version 1) keeps its voter set in the
// metadata log: KRaftVoters control records (ControlRecordType 6), the
// first in the bootstrap checkpoint kafka-storage format wrote, the later
// ones appended by AddRaftVoter and RemoveRaftVoter. The last one in the
// log — committed or not — is the voter set (KRaftControlRecordStateMachine).
// Its value is VotersRecord (ControlRecordUtils; clients/src/main/
// resources/common/message/VotersRecord.json, version 0, flexible, no
// framing — read off real 4.1.2 bytes, testdata/): Version int16, Voters
// compact array of {VoterId int32, VoterDirectoryId uuid, Endpoints
// compact array of {Name, Host compact string, Port uint16}, KRaftVersionFeature
// {MinSupportedVersion, MaxSupportedVersion int16}}, tagged fields after
// every struct.

// ctrlKRaftVoters is the KRaftVoters control record's type.
const ctrlKRaftVoters = 6

// Endpoint is one listener a voter is reached on.
type Endpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port uint16 `json:"port"`
}

// VoterEntry is one voter of a VotersRecord.
type VoterEntry struct {
	ID int32 `json:"id"`
	// DirID is the voter's metadata directory id (meta.properties
	// directory.id), as Kafka prints it (URL-safe base64, no padding).
	DirID     string     `json:"directory_id"`
	Endpoints []Endpoint `json:"endpoints"`
	MinKRaft  int16      `json:"min_kraft_version"`
	MaxKRaft  int16      `json:"max_kraft_version"`
}

// String is the voter as DescribeQuorum's tools print it: 3001@host:port
// (directory id).
func (v VoterEntry) String() string {
	var eps []string
	for _, e := range v.Endpoints {
		eps = append(eps, fmt.Sprintf("%s://%s:%d", e.Name, e.Host, e.Port))
	}
	return fmt.Sprintf("%d (directory %s, %s)", v.ID, v.DirID, strings.Join(eps, ","))
}

// DecodeVoters decodes a KRaftVoters control record's value.
func DecodeVoters(value []byte) ([]VoterEntry, error) {
	r := &reader{b: value}
	if v := r.int16(); r.err == nil && v != 0 {
		return nil, fmt.Errorf("VotersRecord version %d, not 0", v)
	}
	n := int(r.uvarint()) - 1
	if r.err != nil || n < 0 || n > 1<<12 {
		return nil, fmt.Errorf("VotersRecord: a voter count that does not decode")
	}
	out := make([]VoterEntry, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		v := VoterEntry{ID: r.int32(), DirID: r.uuid()}
		ne := int(r.uvarint()) - 1
		for j := 0; j < ne && r.err == nil; j++ {
			e := Endpoint{Name: r.compactString(), Host: r.compactString()}
			if b := r.take(2); b != nil {
				e.Port = binary.BigEndian.Uint16(b)
			}
			r.skipTags()
			v.Endpoints = append(v.Endpoints, e)
		}
		v.MinKRaft, v.MaxKRaft = r.int16(), r.int16()
		r.skipTags()
		r.skipTags()
		out = append(out, v)
	}
	r.skipTags()
	if r.err != nil {
		return nil, fmt.Errorf("VotersRecord: %w", r.err)
	}
	return out, nil
}

// EncodeVoters is DecodeVoters' inverse: a KRaftVoters record's value.
func EncodeVoters(vs []VoterEntry) ([]byte, error) {
	w := []byte{0, 0} // VotersRecord's Version
	w = binary.AppendUvarint(w, uint64(len(vs)+1))
	for _, v := range vs {
		dir, err := base64.RawURLEncoding.DecodeString(v.DirID)
		if err != nil || len(dir) != 16 {
			return nil, fmt.Errorf("voter %d: directory id %q is not a Kafka uuid", v.ID, v.DirID)
		}
		w = binary.BigEndian.AppendUint32(w, uint32(v.ID))
		w = append(w, dir...)
		w = binary.AppendUvarint(w, uint64(len(v.Endpoints)+1))
		for _, e := range v.Endpoints {
			w = appendCompactString(w, e.Name)
			w = appendCompactString(w, e.Host)
			w = binary.BigEndian.AppendUint16(w, e.Port)
			w = append(w, 0)
		}
		w = binary.BigEndian.AppendUint16(w, uint16(v.MinKRaft))
		w = binary.BigEndian.AppendUint16(w, uint16(v.MaxKRaft))
		w = append(w, 0, 0) // the feature's tags, the voter's
	}
	return append(w, 0), nil
}

func appendCompactString(w []byte, s string) []byte {
	return append(binary.AppendUvarint(w, uint64(len(s)+1)), s...)
}

// LastVoters is the last KRaftVoters record of a segment's (or a
// snapshot's) bytes, with its offset; found is false when it holds none.
// A batch cut short at the end ends the walk, as in DecodeSegment.
func LastVoters(seg []byte) (vs []VoterEntry, offset int64, found bool, err error) {
	for pos := 0; pos+batchHeaderSize <= len(seg); {
		base := int64(binary.BigEndian.Uint64(seg[pos:]))
		length := int(int32(binary.BigEndian.Uint32(seg[pos+8:])))
		if length < batchHeaderSize-12 || pos+12+length > len(seg) {
			break
		}
		b := seg[pos : pos+12+length]
		pos += 12 + length
		if b[16] != 2 || binary.BigEndian.Uint16(b[21:])&attrControl == 0 {
			continue
		}
		if crc32.Checksum(b[21:], castagnoli) != binary.BigEndian.Uint32(b[17:]) {
			return nil, 0, false, fmt.Errorf("the control batch at offset %d fails its CRC", base)
		}
		r := &reader{b: b[batchHeaderSize:]}
		for i := 0; i < int(int32(binary.BigEndian.Uint32(b[57:]))); i++ {
			rec, rerr := r.record()
			if rerr != nil {
				return nil, 0, false, fmt.Errorf("record %d of the control batch at offset %d: %w", i, base, rerr)
			}
			if len(rec.key) < 4 || int16(binary.BigEndian.Uint16(rec.key[2:])) != ctrlKRaftVoters {
				continue
			}
			got, derr := DecodeVoters(rec.value)
			if derr != nil {
				return nil, 0, false, fmt.Errorf("offset %d: %w", base+rec.offsetDelta, derr)
			}
			vs, offset, found = got, base+rec.offsetDelta, true
		}
	}
	return vs, offset, found, nil
}

// ValidLength is how far seg holds whole batches: a segment whose file is
// longer has a torn tail (a crash mid-write, which log recovery truncates).
func ValidLength(seg []byte) int {
	pos := 0
	for pos+batchHeaderSize <= len(seg) {
		length := int(int32(binary.BigEndian.Uint32(seg[pos+8:])))
		if length < batchHeaderSize-12 || pos+12+length > len(seg) {
			break
		}
		pos += 12 + length
	}
	return pos
}

// VotersBatch is one control batch holding one KRaftVoters record, as
// Kafka's MemoryRecordsBuilder writes it (magic 2, the control flag, no
// producer, CreateTime): at offset base, of leader epoch epoch.
func VotersBatch(base int64, epoch int32, tsMillis int64, vs []VoterEntry) ([]byte, error) {
	value, err := EncodeVoters(vs)
	if err != nil {
		return nil, err
	}
	key := []byte{0, 0, 0, ctrlKRaftVoters} // ControlRecordType key: version 0, type
	var body []byte
	body = append(body, 0)              // record attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, 0) // offset delta
	body = binary.AppendVarint(body, int64(len(key)))
	body = append(body, key...)
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // headers
	rec := append(binary.AppendVarint(nil, int64(len(body))), body...)

	b := make([]byte, batchHeaderSize, batchHeaderSize+len(rec))
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(batchHeaderSize-12+len(rec)))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], attrControl)
	binary.BigEndian.PutUint32(b[23:], 0) // last offset delta
	binary.BigEndian.PutUint64(b[27:], uint64(tsMillis))
	binary.BigEndian.PutUint64(b[35:], uint64(tsMillis))
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], ^uint16(0)) // producer epoch -1
	binary.BigEndian.PutUint32(b[53:], ^uint32(0)) // base sequence -1
	binary.BigEndian.PutUint32(b[57:], 1)
	b = append(b, rec...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b, nil
}

// ShrinkTo are the voter sets that take vs down to keep alone, one voter
// removed at a time: Kafka replays a voter set only when it overlaps the
// previous one's majority (VoterSetHistory.addAt,
// VoterSet.hasOverlappingMajority), so 3 → 1 is two records, 5 → 1 four.
// The voters removed go in the order vs lists them.
func ShrinkTo(vs []VoterEntry, keep int32) ([][]VoterEntry, error) {
	i := slices.IndexFunc(vs, func(v VoterEntry) bool { return v.ID == keep })
	if i < 0 {
		return nil, fmt.Errorf("voter %d is not in the voter set %v", keep, voterEntryIDs(vs))
	}
	cur := slices.Clone(vs)
	var out [][]VoterEntry
	for len(cur) > 1 {
		j := slices.IndexFunc(cur, func(v VoterEntry) bool { return v.ID != keep })
		cur = slices.Delete(slices.Clone(cur), j, j+1)
		out = append(out, cur)
	}
	return out, nil
}

func voterEntryIDs(vs []VoterEntry) []int32 {
	var ids []int32
	for _, v := range vs {
		ids = append(ids, v.ID)
	}
	return ids
}
