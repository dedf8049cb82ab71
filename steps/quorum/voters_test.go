package quorum

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
)

// testdata/bootstrap-4.1.2.checkpoint is the bootstrap checkpoint Kafka
// 4.1.2's kafka-storage format --initial-controllers wrote for the lab's
// dynamic quorum (3001-3003 on 127.72.3.x:9093): real Kafka's bytes.
func realBootstrap(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/bootstrap-4.1.2.checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVotersDecodeRealKafka(t *testing.T) {
	vs, off, found, err := LastVoters(realBootstrap(t))
	if err != nil || !found {
		t.Fatalf("LastVoters: found %v, %v", found, err)
	}
	if off != 2 || len(vs) != 3 {
		t.Fatalf("offset %d, voters %v: want offset 2 (header, kraft.version, voters), 3 voters", off, vs)
	}
	for i, v := range vs {
		want := int32(3001 + i)
		if v.ID != want || len(v.Endpoints) != 1 || v.Endpoints[0].Name != "CONTROLLER" || v.Endpoints[0].Port != 9093 || v.MaxKRaft != 1 || len(v.DirID) != 22 {
			t.Errorf("voter %d: %+v", i, v)
		}
	}
	if vs[0].DirID != "XsNef2Hg991xfDLWxPPW_A" {
		t.Errorf("voter 3001's directory id %s, want its meta.properties' XsNef2Hg991xfDLWxPPW_A", vs[0].DirID)
	}
}

// The encoder is held to real Kafka's bytes: what it writes for the voter
// set it decoded is the very value Kafka wrote.
func TestVotersEncodeIsKafkasBytes(t *testing.T) {
	seg := realBootstrap(t)
	vs, _, _, err := LastVoters(seg)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := EncodeVoters(vs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(seg, enc) {
		t.Fatalf("the encoded VotersRecord (%d bytes) is not in the checkpoint Kafka wrote:\n% x", len(enc), enc)
	}
	if _, err := EncodeVoters([]VoterEntry{{ID: 1, DirID: "not-a-uuid"}}); err == nil {
		t.Error("a directory id that is no uuid encoded")
	}
}

// A batch VotersBatch writes reads back through the same walk that reads
// Kafka's log: its CRC holds, its header says control, one record, the
// offset and epoch asked; the shrink takes 3 voters to 1 in two sets.
func TestVotersBatchReadsBack(t *testing.T) {
	vs, _, _, _ := LastVoters(realBootstrap(t))
	sets, err := ShrinkTo(vs, 3003)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 2 || len(sets[0]) != 2 || len(sets[1]) != 1 || sets[1][0].ID != 3003 {
		t.Fatalf("ShrinkTo 3003: %v", sets)
	}
	for _, s := range sets {
		for _, v := range s {
			if v.ID == 3001 && len(s) == 2 {
				t.Errorf("the first set still holds 3001 (removed first): %v", voterEntryIDs(s))
			}
		}
	}
	var seg []byte
	for i, s := range sets {
		b, err := VotersBatch(140+int64(i), 3, 1_700_000_000_000, s)
		if err != nil {
			t.Fatal(err)
		}
		seg = append(seg, b...)
	}
	if ValidLength(seg) != len(seg) || ValidLength(append(seg, 0, 0, 0)) != len(seg) {
		t.Errorf("ValidLength: %d of %d", ValidLength(seg), len(seg))
	}
	got, off, found, err := LastVoters(seg)
	if err != nil || !found || off != 141 || len(got) != 1 || got[0].ID != 3003 || got[0].DirID != vs[2].DirID {
		t.Fatalf("read back: %v at %d (found %v, %v)", got, off, found, err)
	}
	recs, err := DecodeSegment(seg, 0)
	if err != nil || len(recs) != 2 || recs[1].Name != "control: KRaftVoters" || recs[1].Epoch != 3 || recs[1].Offset != 141 {
		t.Fatalf("DecodeSegment: %+v, %v", recs, err)
	}
	if seg[16] != 2 || binary.BigEndian.Uint16(seg[21:]) != attrControl {
		t.Errorf("magic %d attributes %#x", seg[16], binary.BigEndian.Uint16(seg[21:]))
	}
	seg[len(seg)-1] ^= 0xff
	if _, _, _, err := LastVoters(seg); err == nil {
		t.Error("a batch whose bytes changed passed its CRC")
	}
	if _, err := ShrinkTo(vs, 9); err == nil {
		t.Error("ShrinkTo a voter not in the set")
	}
}
