package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// scan reads records from r, a journal named name. It returns the records,
// the offset just past the last one (good) and the number of bytes read
// (end). A torn last line lies between good and end. Every other defect is
// an error wrapping ErrCorrupt that names the line.
func scan(r io.Reader, name string) (recs []Record, good, end int64, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		buf    []byte
		lineNo int
		// torn is the defect of the previous line if it could be a torn
		// write: it is corruption only if another line follows.
		torn error
	)
	for {
		line, n, nl, long, err := readLine(br, buf)
		if err == io.EOF {
			return recs, good, end, nil
		}
		if err != nil {
			return nil, 0, 0, fmt.Errorf("read journal %s: %w", name, err)
		}
		if torn != nil {
			return nil, 0, 0, torn
		}
		lineNo++
		end += n
		buf = line[:0]
		if !nl {
			continue // the last line and unfinished: not written; readLine says EOF next
		}
		if long {
			torn = corrupt(name, lineNo, "the line is longer than %d bytes", maxLineSize)
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			if _, ok := errors.AsType[*json.SyntaxError](err); ok {
				torn = corrupt(name, lineNo, "the line is not valid JSON: %v", err)
				continue
			}
			// Valid JSON cannot be a torn write: a strict prefix of an
			// object is never valid.
			return nil, 0, 0, corrupt(name, lineNo, "the line is not a journal record: %v", err)
		}
		want := int64(len(recs)) + 1
		switch {
		case rec.Seq == want:
		case len(recs) == 0:
			return nil, 0, 0, corrupt(name, lineNo, "the first record has seq %d, want 1", rec.Seq)
		case rec.Seq > want:
			return nil, 0, 0, corrupt(name, lineNo, "seq %d follows seq %d: records %d to %d are missing",
				rec.Seq, want-1, want, rec.Seq-1)
		default:
			return nil, 0, 0, corrupt(name, lineNo, "seq %d follows seq %d: seq must grow by one per line",
				rec.Seq, want-1)
		}
		if rec.Type == "" {
			return nil, 0, 0, corrupt(name, lineNo, "record %d has no type", rec.Seq)
		}
		recs = append(recs, rec)
		good = end
	}
}

func corrupt(name string, line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %w: %s; the file was not changed. The records before line %d are intact: "+
		"move the journal aside and inspect it before resuming from it",
		name, line, ErrCorrupt, fmt.Sprintf(format, args...), line)
}

// readLine reads the next line into buf. It returns the line without its
// newline, the bytes consumed, whether a newline ended the line and whether
// the line (newline included) exceeds maxLineSize, in which case its content
// is dropped. It returns io.EOF only when no byte was left.
func readLine(br *bufio.Reader, buf []byte) (line []byte, n int64, nl, long bool, err error) {
	buf = buf[:0]
	for {
		frag, err := br.ReadSlice('\n')
		n += int64(len(frag))
		if !long {
			if len(buf)+len(frag) > maxLineSize {
				long, buf = true, buf[:0]
			} else {
				buf = append(buf, frag...)
			}
		}
		switch {
		case err == nil:
			if !long {
				buf = buf[:len(buf)-1]
			}
			return buf, n, true, long, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF) && n > 0:
			return buf, n, false, long, nil
		default:
			return buf, n, false, long, err
		}
	}
}
