package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary files to Read and Open. Read must not panic, must
// not change the file, and must either fail with ErrCorrupt or return records
// numbered 1, 2, 3 …. Open must agree with Read, and when it succeeds an
// Append followed by Read must give back the same records plus the new one.
func FuzzRead(f *testing.F) {
	valid := func() []byte {
		path := filepath.Join(f.TempDir(), "seed.jsonl")
		j, err := Create(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, r := range []struct {
			typ, step string
			data      any
		}{
			{RunStart, "", map[string]string{"runbook": "wipe-topic", "topic": "orders"}},
			{Plan, "wipe-orders", []string{"/brokers/topics/orders", "mv /data/orders-0 /quarantine/"}},
			{Approval, "wipe-orders", map[string]any{"by": "alice", "typed": "orders"}},
			{ActionStart, "wipe-orders", nil},
			{Output, "wipe-orders", "line with \"quotes\" and \\ and \u2028"},
		} {
			if _, err := j.Append(r.typ, r.step, r.data); err != nil {
				f.Fatal(err)
			}
		}
		_ = j.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}()
	last := bytes.LastIndexByte(valid[:len(valid)-1], '\n') + 1
	for _, seed := range [][]byte{
		valid,
		valid[:last],                     // ends cleanly one record earlier
		valid[:len(valid)-1],             // last newline missing
		valid[:last+(len(valid)-last)/2], // half of the last line
		valid[:last+1],                   // just "{"
		append(bytes.Clone(valid), 0, 0, 0, 0),
		append(bytes.Clone(valid[:last]), '\n'),
		append(bytes.Clone(valid), valid[:last]...), // seq starts over: corrupt
		append(bytes.Clone(valid[:20]), valid...),   // torn line in the middle: corrupt
		[]byte(line(1) + line(3)),
		[]byte(line(1) + `{"seq":2,"type":"note","time":"yesterday"}` + "\n"),
		[]byte(`{"seq":1,"type":"note"}`),
		[]byte(`{"seq":1,"type":"note"}` + "\n"),
		[]byte("null\n"),
		[]byte("[]\n{}\n"),
		{},
		[]byte("\n"),
		[]byte("\x00\xff\xfe garbage \r\n\x1b[31m"),
		[]byte("{\"seq\":1,\"type\":\"\xff\xfe\"}\n"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(t.TempDir(), "journal.jsonl")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		recs, err := Read(path)
		if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
			t.Fatal("Read changed the file")
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Read: %v, want nil or ErrCorrupt", err)
		}
		for i, rec := range recs {
			if rec.Seq != int64(i+1) {
				t.Fatalf("record %d has Seq %d", i, rec.Seq)
			}
		}

		j, orecs, oerr := Open(path)
		if (err == nil) != (oerr == nil) {
			t.Fatalf("Read said %v, Open said %v", err, oerr)
		}
		if oerr != nil {
			if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
				t.Fatal("a failed Open changed the file")
			}
			return
		}
		defer j.Close()
		if len(orecs) != len(recs) {
			t.Fatalf("Open returned %d records, Read %d", len(orecs), len(recs))
		}
		kept, _ := os.ReadFile(path)
		if !bytes.HasPrefix(content, kept) || (len(kept) > 0 && kept[len(kept)-1] != '\n') {
			t.Fatalf("Open left %q, want a prefix of the file that ends a line", kept)
		}
		rec, err := j.Append(Note, "fuzz", map[string]int{"after": len(orecs)})
		if err != nil {
			t.Fatalf("Append after Open: %v", err)
		}
		if rec.Seq != int64(len(orecs)+1) {
			t.Fatalf("Append after Open: Seq %d, want %d", rec.Seq, len(orecs)+1)
		}
		again, err := Read(path)
		if err != nil {
			t.Fatalf("Read after Open and Append: %v", err)
		}
		if len(again) != len(orecs)+1 || !sameRecord(again[len(again)-1], rec) {
			t.Fatalf("Read after Append: %d records, want %d ending in %+v", len(again), len(orecs)+1, rec)
		}
		for i := range orecs {
			if !sameRecord(again[i], orecs[i]) {
				t.Fatalf("record %d changed across Open and Append", i+1)
			}
		}
	})
}
