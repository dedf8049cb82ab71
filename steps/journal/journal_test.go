package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// newPath returns a journal path inside a directory that does not exist yet.
func newPath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "run", "journal.jsonl")
}

// line is one well-formed journal line with the given seq.
func line(seq int64) string {
	b, err := json.Marshal(Record{
		Seq:  seq,
		Time: time.Date(2026, 3, 1, 12, 0, 0, int(seq), time.UTC),
		Type: Note,
		Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq)),
	})
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}

func writeFile(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustCreate(t testing.TB, path string) *Journal {
	t.Helper()
	j, err := Create(path)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

func mustAppend(t testing.TB, j *Journal, typ, step string, data any) Record {
	t.Helper()
	rec, err := j.Append(typ, step, data)
	if err != nil {
		t.Fatalf("Append(%s, %q): %v", typ, step, err)
	}
	return rec
}

func mustRead(t testing.TB, path string) []Record {
	t.Helper()
	recs, err := Read(path)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return recs
}

func sameRecord(a, b Record) bool {
	return a.Seq == b.Seq && a.Time.Equal(b.Time) && a.Type == b.Type && a.Step == b.Step && bytes.Equal(a.Data, b.Data)
}

func TestAppendReadRoundTrip(t *testing.T) {
	type plan struct {
		Topic string   `json:"topic"`
		Paths []string `json:"paths"`
		Vers  int32    `json:"version"`
	}
	tests := []struct {
		name     string
		typ      string
		step     string
		data     any
		wantData string // "" for no data
	}{
		{"run-level, no data", RunStart, "", nil, ""},
		{"struct", Plan, "wipe-orders", plan{"orders", []string{"/brokers/topics/orders"}, 7}, `{"topic":"orders","paths":["/brokers/topics/orders"],"version":7}`},
		{"map keeps keys sorted", Approval, "wipe-orders", map[string]any{"by": "alice", "at": 1}, `{"at":1,"by":"alice"}`},
		{"string with newline and quotes", Output, "wipe-orders", "rm: cannot remove \"x\"\nsecond line", `"rm: cannot remove \"x\"\nsecond line"`},
		{"raw message", Check, "verify", json.RawMessage(`{ "ok" : true }`), `{"ok":true}`},
		{"nil raw message is no data", StepDone, "verify", json.RawMessage(nil), ""},
		{"bytes are base64", Output, "dump", []byte{0, 1, 2}, `"AAEC"`},
		{"unicode step", Note, "schritt-ü", "ok", `"ok"`},
	}
	path := newPath(t)
	j := mustCreate(t, path)
	var written []Record
	for i, tc := range tests {
		before := time.Now()
		rec := mustAppend(t, j, tc.typ, tc.step, tc.data)
		if rec.Seq != int64(i+1) {
			t.Errorf("%s: Seq = %d, want %d", tc.name, rec.Seq, i+1)
		}
		if rec.Type != tc.typ || rec.Step != tc.step || string(rec.Data) != tc.wantData {
			t.Errorf("%s: Append returned %+v (data %s), want type %s step %q data %s", tc.name, rec, rec.Data, tc.typ, tc.step, tc.wantData)
		}
		if rec.Time.Location() != time.UTC || rec.Time.Before(before.Add(-time.Second)) || rec.Time.After(time.Now().Add(time.Second)) {
			t.Errorf("%s: Time = %v, want about now in UTC", tc.name, rec.Time)
		}
		written = append(written, rec)
	}
	got := mustRead(t, path)
	if len(got) != len(written) {
		t.Fatalf("Read returned %d records, want %d", len(got), len(written))
	}
	for i := range got {
		if !sameRecord(got[i], written[i]) {
			t.Errorf("record %d: read %+v, appended %+v", i+1, got[i], written[i])
		}
	}
	// Every line is one compact JSON object with the time in RFC3339Nano.
	for i, l := range strings.Split(strings.TrimSuffix(readFile(t, path), "\n"), "\n") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		var ts string
		_ = json.Unmarshal(m["time"], &ts)
		if p, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasSuffix(ts, "Z") || !p.Equal(written[i].Time) {
			t.Errorf("line %d: time %q is not the UTC RFC3339Nano of %v (%v)", i+1, ts, written[i].Time, err)
		}
	}
	if p, err := Decode[plan](got[1]); err != nil || p.Topic != "orders" || p.Vers != 7 {
		t.Errorf("Decode[plan] = %+v, %v", p, err)
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		rec     Record
		want    int
		wantErr string
	}{
		{"number", Record{Seq: 1, Type: Note, Data: json.RawMessage(`42`)}, 42, ""},
		{"no data", Record{Seq: 2, Type: StepDone, Step: "s"}, 0, `decode step-done record 2 (step "s"): the record has no data`},
		{"wrong type", Record{Seq: 3, Type: Note, Data: json.RawMessage(`"x"`)}, 0, "decode note record 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode[int](tc.rec)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Decode: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Decode error = %v, want it to contain %q", err, tc.wantErr)
			case got != tc.want:
				t.Fatalf("Decode = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestOpenContinuesSeq(t *testing.T) {
	tests := []struct {
		name   string
		before int   // records appended after Create
		rounds []int // records appended after each Open
	}{
		{"empty journal", 0, []int{3}},
		{"one record", 1, []int{1}},
		{"several reopens", 4, []int{2, 0, 5, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			j := mustCreate(t, path)
			for range tc.before {
				mustAppend(t, j, Note, "", "before")
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			total := tc.before
			for r, n := range tc.rounds {
				j, recs, err := Open(path)
				if err != nil {
					t.Fatalf("round %d: Open: %v", r, err)
				}
				if len(recs) != total {
					t.Fatalf("round %d: Open returned %d records, want %d", r, len(recs), total)
				}
				if j.Path() != path {
					t.Errorf("Path() = %q, want %q", j.Path(), path)
				}
				for range n {
					total++
					if rec := mustAppend(t, j, Note, "", r); rec.Seq != int64(total) {
						t.Fatalf("round %d: Seq = %d, want %d", r, rec.Seq, total)
					}
				}
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
			}
			recs := mustRead(t, path)
			for i, rec := range recs {
				if rec.Seq != int64(i+1) {
					t.Fatalf("record %d has Seq %d", i, rec.Seq)
				}
			}
			if len(recs) != total {
				t.Fatalf("Read returned %d records, want %d", len(recs), total)
			}
		})
	}
}

func TestCreateModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	base := t.TempDir()
	path := filepath.Join(base, "runs", "2026-03-01", "journal.jsonl")
	mustCreate(t, path)
	for _, tc := range []struct {
		path string
		want fs.FileMode
	}{
		{path, 0o600},
		{filepath.Dir(path), fs.ModeDir | 0o700},
		{filepath.Dir(filepath.Dir(path)), fs.ModeDir | 0o700},
	} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != tc.want {
			t.Errorf("%s: mode %v, want %v", tc.path, fi.Mode(), tc.want)
		}
	}
}

func TestCreateExisting(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"journal from an earlier Create", func(t *testing.T, path string) {
			j := mustCreate(t, path)
			mustAppend(t, j, RunStart, "", "first run")
		}},
		{"empty file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.jsonl")
			tc.prepare(t, path)
			before, _ := os.ReadFile(path)
			j, err := Create(path)
			if err == nil {
				_ = j.Close()
				t.Fatal("Create on an existing path succeeded")
			}
			if !errors.Is(err, fs.ErrExist) {
				t.Errorf("error %v does not wrap fs.ErrExist", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Errorf("Create changed the existing file")
			}
		})
	}
}

func TestOpenReadMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.jsonl")
	if _, _, err := Open(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open: %v, want fs.ErrNotExist", err)
	}
	if _, err := Read(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open created the file")
	}
}

func TestTornTail(t *testing.T) {
	good := line(1) + line(2)
	full := line(3)
	tests := []struct {
		name string
		tail string
	}{
		{"no tail", ""},
		{"half JSON, no newline", full[:len(full)/2]},
		{"complete JSON, no newline", strings.TrimSuffix(full, "\n")},
		{"one byte", "{"},
		{"half JSON then newline", full[:len(full)/2] + "\n"},
		{"zeros after power loss", "\x00\x00\x00\x00\x00\x00"},
		{"empty last line", "\n"},
		{"over-long line, no newline", `{"seq":3,"data":"` + strings.Repeat("x", maxLineSize+10)},
		{"over-long line with newline", `{"seq":3,"data":"` + strings.Repeat("x", maxLineSize+10) + "\"}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, good+tc.tail)

			recs := mustRead(t, path)
			if len(recs) != 2 || recs[1].Seq != 2 {
				t.Fatalf("Read returned %d records, want seq 1 and 2", len(recs))
			}
			if readFile(t, path) != good+tc.tail {
				t.Fatal("Read changed the file")
			}

			j, recs, err := Open(path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer j.Close()
			if len(recs) != 2 {
				t.Fatalf("Open returned %d records, want 2", len(recs))
			}
			if got := readFile(t, path); got != good {
				t.Fatalf("after Open the file holds %d bytes, want the %d bytes of the complete lines", len(got), len(good))
			}
			rec := mustAppend(t, j, Note, "after-crash", "resumed")
			if rec.Seq != 3 {
				t.Fatalf("Append after Open: Seq = %d, want 3", rec.Seq)
			}
			recs = mustRead(t, path)
			if len(recs) != 3 || !sameRecord(recs[2], rec) {
				t.Fatalf("Read after Append: %d records, last %+v, want 3 ending in %+v", len(recs), recs[len(recs)-1], rec)
			}
		})
	}
}

func TestCorrupt(t *testing.T) {
	long := `{"seq":2,"type":"note","data":"` + strings.Repeat("x", maxLineSize) + "\"}\n"
	tests := []struct {
		name     string
		content  string
		wantLine int
		wantMsg  string
	}{
		{"bad middle line", line(1) + "{\"seq\":2,\"ty\n" + line(2), 2, "not valid JSON"},
		{"appended after a torn line", line(1) + line(2)[:20] + line(2) + line(3), 2, "not valid JSON"},
		{"blank middle line", line(1) + "\n" + line(2), 2, "not valid JSON"},
		{"over-long middle line", line(1) + long + line(3), 2, "longer than"},
		{"seq gap", line(1) + line(2) + line(4), 3, "records 3 to 3 are missing"},
		{"seq repeat", line(1) + line(2) + line(2), 3, "seq 2 follows seq 2"},
		{"seq goes back", line(1) + line(2) + line(1), 3, "seq 1 follows seq 2"},
		{"first seq is not 1", line(2) + line(3), 1, "first record has seq 2"},
		{"last line valid JSON but not a record", line(1) + `{"seq":"two"}` + "\n", 2, "not a journal record"},
		{"last line without type", line(1) + `{"seq":2}` + "\n", 2, "record 2 has no type"},
		{"gap in the last complete line", line(1) + line(3), 2, "records 2 to 2 are missing"},
		{"line 17", func() string {
			var b strings.Builder
			for i := range int64(16) {
				b.WriteString(line(i + 1))
			}
			return b.String() + "garbage\n" + line(17)
		}(), 17, "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.content)
			prefix := fmt.Sprintf("journal.jsonl:%d: ", tc.wantLine)
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s: %v, want ErrCorrupt", op, err)
				}
				if msg := err.Error(); !strings.Contains(msg, prefix) || !strings.Contains(msg, tc.wantMsg) {
					t.Fatalf("%s: %q, want it to contain %q and %q", op, msg, prefix, tc.wantMsg)
				}
			}
			recs, err := Read(path)
			check("Read", err)
			if recs != nil {
				t.Errorf("Read returned records with its error")
			}
			j, recs, err := Open(path)
			check("Open", err)
			if j != nil || recs != nil {
				t.Errorf("Open returned a journal or records with its error")
			}
			if readFile(t, path) != tc.content {
				t.Fatal("the corrupt file was changed")
			}
		})
	}
}

func TestConcurrentAppend(t *testing.T) {
	const workers, each = 8, 40
	path := newPath(t)
	j := mustCreate(t, path)
	got := make([][]Record, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				rec, err := j.Append(Output, fmt.Sprintf("worker-%d", w), map[string]int{"w": w, "i": i})
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				got[w] = append(got[w], rec)
			}
		})
	}
	wg.Wait()
	recs := mustRead(t, path)
	if len(recs) != workers*each {
		t.Fatalf("Read returned %d records, want %d", len(recs), workers*each)
	}
	for i, rec := range recs {
		if rec.Seq != int64(i+1) {
			t.Fatalf("record %d has Seq %d", i, rec.Seq)
		}
	}
	seen := map[int64]bool{}
	for w, rs := range got {
		for i, rec := range rs {
			if seen[rec.Seq] {
				t.Errorf("Seq %d returned twice", rec.Seq)
			}
			seen[rec.Seq] = true
			if i > 0 && rec.Seq <= rs[i-1].Seq {
				t.Errorf("worker %d: Seq %d after %d", w, rec.Seq, rs[i-1].Seq)
			}
			if !sameRecord(recs[rec.Seq-1], rec) {
				t.Errorf("Seq %d: file has %+v, Append returned %+v", rec.Seq, recs[rec.Seq-1], rec)
			}
		}
	}
}

func TestAppendRefuses(t *testing.T) {
	tests := []struct {
		name    string
		typ     string
		data    any
		wantErr string
	}{
		{"empty type", "", "x", "record type is empty"},
		{"data that does not marshal", Note, make(chan int), "encode data"},
		{"invalid raw message", Note, json.RawMessage(`{"a":`), "encode data"},
		{"data over 1 MiB", Output, strings.Repeat("x", maxLineSize), "at most 1048576 (1 MiB)"},
		{"data just over 1 MiB with escapes", Output, strings.Repeat("\"", maxLineSize/2), "at most 1048576 (1 MiB)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			j := mustCreate(t, path)
			_, err := j.Append(tc.typ, "s", tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "nothing was written") {
				t.Fatalf("Append error = %v, want %q and \"nothing was written\"", err, tc.wantErr)
			}
			if readFile(t, path) != "" {
				t.Fatal("a refused Append wrote to the file")
			}
			if rec := mustAppend(t, j, Note, "", "next"); rec.Seq != 1 {
				t.Fatalf("Seq after a refused Append = %d, want 1", rec.Seq)
			}
		})
	}
}

func TestLargeRecord(t *testing.T) {
	path := newPath(t)
	j := mustCreate(t, path)
	big := strings.Repeat("0123456789abcdef", (maxLineSize-1024)/16) // far beyond bufio's 64 KiB
	mustAppend(t, j, Output, "dump", big)
	mustAppend(t, j, Note, "", "after")
	recs := mustRead(t, path)
	if len(recs) != 2 {
		t.Fatalf("Read returned %d records, want 2", len(recs))
	}
	if s, err := Decode[string](recs[0]); err != nil || s != big {
		t.Fatalf("large record did not round-trip (%d bytes, %v)", len(s), err)
	}
}

func TestClose(t *testing.T) {
	path := newPath(t)
	j := mustCreate(t, path)
	mustAppend(t, j, RunStart, "", nil)
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := j.Append(Note, "", "late"); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Append after Close: %v, want os.ErrClosed", err)
	}
	if recs := mustRead(t, path); len(recs) != 1 {
		t.Errorf("Read returned %d records, want 1", len(recs))
	}
}

func TestNotRegularFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/zero")
	}
	for _, path := range []string{"/dev/zero", t.TempDir()} {
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Read(%s): %v, want \"not a regular file\"", path, err)
		}
		if _, _, err := Open(path); err == nil {
			t.Errorf("Open(%s) succeeded", path)
		}
	}
}

func TestLineSizeLimit(t *testing.T) {
	prefix := `{"seq":2,"type":"note","data":"`
	exact := prefix + strings.Repeat("x", maxLineSize-len(prefix)-3) + "\"}\n"
	over := prefix + strings.Repeat("x", maxLineSize-len(prefix)-2) + "\"}\n"
	if len(exact) != maxLineSize || len(over) != maxLineSize+1 {
		t.Fatalf("bad fixture: %d and %d bytes", len(exact), len(over))
	}
	tests := []struct {
		name     string
		content  string
		wantRecs int
		wantErr  bool
	}{
		{"1 MiB line with its newline is read", line(1) + exact, 2, false},
		{"1 MiB line in the middle is read", line(1) + exact + line(3), 3, false},
		{"one byte more as the last line is a torn tail", line(1) + over, 1, false},
		{"one byte more in the middle is corrupt", line(1) + over + line(3), 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := Read(writeFile(t, tc.content))
			if tc.wantErr != (err != nil) || len(recs) != tc.wantRecs {
				t.Fatalf("Read: %d records, %v; want %d records, error %v", len(recs), err, tc.wantRecs, tc.wantErr)
			}
			if tc.wantErr && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "journal.jsonl:2: ")) {
				t.Fatalf("Read: %v, want ErrCorrupt at line 2", err)
			}
		})
	}
}

// TestWriteFailureStops breaks the file under the journal: the failed Append
// must stop every later one, and Open must recover the file afterwards.
func TestWriteFailureStops(t *testing.T) {
	path := newPath(t)
	j := mustCreate(t, path)
	mustAppend(t, j, RunStart, "", nil)
	_ = j.f.Close() // the disk goes away
	_, err := j.Append(Note, "", "lost")
	if err == nil || !strings.Contains(err.Error(), "accepts no more records") {
		t.Fatalf("Append on a broken file: %v", err)
	}
	if _, err2 := j.Append(Note, "", "again"); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("second Append: %v, want the first failure again", err2)
	}
	j2, recs, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if len(recs) != 1 {
		t.Fatalf("Open returned %d records, want 1", len(recs))
	}
	if rec := mustAppend(t, j2, Interrupted, "", nil); rec.Seq != 2 {
		t.Fatalf("Seq after resume = %d, want 2", rec.Seq)
	}
}
