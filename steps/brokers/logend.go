package brokers

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/ports"
)

// LogEnd is one replica's log end as its disk holds it: read over SSH, so
// it works while the replica's broker is down (an offline partition's
// replicas, the dead last leader when its host answers).
type LogEnd struct {
	Broker    int32  `json:"broker"`
	Partition string `json:"partition"`     // topic-p
	Dir       string `json:"dir,omitempty"` // the partition directory
	// End is the log end offset: the offset the next record would get
	// (the last whole batch's baseOffset + lastOffsetDelta + 1, or the last
	// segment's base offset when it holds no batch).
	End int64 `json:"end"`
	// Epoch is the last leader epoch: the leader-epoch-checkpoint's last
	// entry, or the last batch's partitionLeaderEpoch when later (-1: none).
	Epoch int32 `json:"epoch"`
	// EpochStart is the start offset of the checkpoint's last epoch (-1).
	EpochStart int64 `json:"epoch_start"`
	// LastWrite is the last whole batch's maxTimestamp, in Unix ms: when
	// the log was last written (0: no batch; with message.timestamp.type
	// CreateTime, the producer's clock).
	LastWrite int64  `json:"last_write_ms,omitempty"`
	Segment   string `json:"segment,omitempty"` // the last segment's file
	// Err says why End is unknown ("" when it is known).
	Err string `json:"error,omitempty"`
}

// Known reports whether the replica's log end was read.
func (l LogEnd) Known() bool { return l.Err == "" }

// endFunc prints, for one partition directory found in one of the log dirs
// given, lines "E<token>\t<name>\t<what>\t<value>": dir (its path), c (each
// line of leader-epoch-checkpoint), seg (the last segment's file and size),
// batch (the last whole batch's position and its first 43 header bytes in
// hex, through maxTimestamp) and done; or absent, noseg, err. The last segment is found by name
// (20-digit base offsets sort as numbers). Its batches are walked from the
// last entry of its offset index (sparse: an entry every
// index.interval.bytes; an all-zero entry is preallocated padding), header
// by header — baseOffset int64, batchLength int32, partitionLeaderEpoch
// int32, magic int8 (2), crc int32, attributes int16, lastOffsetDelta int32,
// baseTimestamp int64, maxTimestamp int64 (DefaultRecordBatch.java) — and from the start again should the index
// point at no batch. A batch cut short at the end (a crash mid-write, which
// log recovery truncates) ends the walk.
const endFunc = `kremedy_walk() {
  seg=$1 size=$2 pos=$3 last=
  while [ $((pos + 61)) -le "$size" ]; do
    set -- $(od -An -v -tx1 -j "$pos" -N 43 "$seg" 2>/dev/null)
    [ $# -eq 43 ] || break
    len=$((0x$9${10}${11}${12}))
    { [ "${17}" = 02 ] && [ "$len" -ge 49 ] && [ $((pos + 12 + len)) -le "$size" ]; } || break
    last="$pos $*"
    pos=$((pos + 12 + len))
  done
  printf '%s\n' "$last"
}
kremedy_end() {
  ( T=$1 N=$2; shift 2
    for d in "$@"; do
      [ -d "$d/$N" ] || continue
      cd -- "$d/$N" 2>/dev/null || { printf 'E%s\t%s\terr\tcannot enter %s\n' "$T" "$N" "$d/$N"; exit 0; }
      printf 'E%s\t%s\tdir\t%s\n' "$T" "$N" "$d/$N"
      if [ -r leader-epoch-checkpoint ]; then
        while IFS= read -r l || [ -n "$l" ]; do printf 'E%s\t%s\tc\t%s\n' "$T" "$N" "$l"; done < leader-epoch-checkpoint
      fi
      seg=$(ls | grep '^[0-9]\{20\}\.log$' | sort | tail -n 1)
      [ -n "$seg" ] || { printf 'E%s\t%s\tnoseg\t\n' "$T" "$N"; exit 0; }
      size=$(wc -c < "$seg") || { printf 'E%s\t%s\terr\tcannot read %s\n' "$T" "$N" "$seg"; exit 0; }
      size=$((size + 0)) start=0
      idx=${seg%.log}.index
      if [ -r "$idx" ]; then
        set -- $(od -An -v -tx1 -w8 "$idx" 2>/dev/null | grep -v '^[ 0]*$' | tail -n 1)
        if [ $# -eq 8 ]; then p=$((0x$5$6$7$8)); [ "$p" -lt "$size" ] && start=$p; fi
      fi
      b=$(kremedy_walk "$seg" "$size" "$start")
      [ -z "$b" ] && [ "$start" -ne 0 ] && b=$(kremedy_walk "$seg" "$size" 0)
      printf 'E%s\t%s\tseg\t%s %s\n' "$T" "$N" "$seg" "$size"
      printf 'E%s\t%s\tbatch\t%s\n' "$T" "$N" "$b"
      printf 'E%s\t%s\tdone\t\n' "$T" "$N"
      exit 0
    done
    printf 'E%s\t%s\tabsent\t\n' "$T" "$N" )
}
`

// LogEndScript is the command that reads the log ends of the partition
// directories names (topic-p, checked by the caller) from the log dirs
// dirs on one host, and the token its own lines carry.
func LogEndScript(dirs, names []string) (script, token string) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token = hex.EncodeToString(b)
	var sb strings.Builder
	sb.WriteString(endFunc)
	for _, n := range names {
		fmt.Fprintf(&sb, "kremedy_end %s %s", token, shell.Quote(n))
		for _, d := range dirs {
			sb.WriteString(" " + shell.Quote(d))
		}
		sb.WriteString("\n")
	}
	return shell.Script(sb.String()), token
}

// ParseLogEnds reads LogEndScript's output lines (others are ignored) into
// one LogEnd per partition directory named.
func ParseLogEnds(broker int32, token string, lines []string) map[string]LogEnd {
	mark := "E" + token + "\t"
	type acc struct {
		le         LogEnd
		cp         []string
		seg, batch string
		done       bool
	}
	got := map[string]*acc{}
	var order []string
	for _, line := range lines {
		rest, ok := strings.CutPrefix(line, mark)
		if !ok {
			continue
		}
		f := strings.SplitN(rest, "\t", 3)
		if len(f) != 3 {
			continue
		}
		a := got[f[0]]
		if a == nil {
			a = &acc{le: LogEnd{Broker: broker, Partition: f[0], Epoch: -1, EpochStart: -1}}
			got[f[0]] = a
			order = append(order, f[0])
		}
		switch f[1] {
		case "dir":
			a.le.Dir = f[2]
		case "c":
			a.cp = append(a.cp, f[2])
		case "seg":
			a.seg = f[2]
		case "batch":
			a.batch = f[2]
		case "done":
			a.done = true
		case "absent":
			a.le.Err = "no directory " + f[0] + " in its log dirs"
		case "noseg":
			a.le.Err = "no .log segment in " + a.le.Dir
		case "err":
			a.le.Err = f[2]
		}
	}
	out := map[string]LogEnd{}
	for _, n := range order {
		a := got[n]
		if a.le.Err == "" && !a.done {
			a.le.Err = "the host's answer ended early"
		}
		if a.le.Err == "" {
			if err := a.le.fill(a.cp, a.seg, a.batch); err != nil {
				a.le.Err = err.Error()
			}
		}
		out[n] = a.le
	}
	return out
}

// fill sets End and Epoch from the checkpoint's lines, the seg line
// ("NAME SIZE") and the batch line ("POS HEX…", "" for none).
func (l *LogEnd) fill(cp []string, seg, batch string) error {
	if len(cp) > 0 {
		ep, start, err := ParseCheckpoint(cp)
		if err != nil {
			return fmt.Errorf("%s/leader-epoch-checkpoint: %w", l.Dir, err)
		}
		l.Epoch, l.EpochStart = ep, start
	}
	name, _, _ := strings.Cut(seg, " ")
	l.Segment = name
	base, err := strconv.ParseInt(strings.TrimSuffix(name, ".log"), 10, 64)
	if err != nil {
		return fmt.Errorf("segment name %q: %w", name, err)
	}
	l.End = base
	if batch == "" {
		return nil
	}
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return fmt.Errorf("%s/%s: %w", l.Dir, name, err)
	}
	l.End = h.BaseOffset + int64(h.LastOffsetDelta) + 1
	l.Epoch = max(l.Epoch, h.LeaderEpoch)
	l.LastWrite = h.MaxTimestamp
	return nil
}

// ParseCheckpoint reads a leader-epoch-checkpoint's lines: a version line
// (0), the entry count, then "epoch startOffset" per entry
// (LeaderEpochCheckpointFile.java, CheckpointFile.java). It returns the
// last entry (-1, -1 for none).
func ParseCheckpoint(lines []string) (epoch int32, start int64, err error) {
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return -1, -1, fmt.Errorf("not a version-0 checkpoint (first line %q)", first(lines))
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || len(lines) < 2+n {
		return -1, -1, fmt.Errorf("entry count %q does not match its %d entry lines", lines[1], len(lines)-2)
	}
	epoch, start = -1, -1
	for _, l := range lines[2 : 2+n] {
		f := strings.Fields(l)
		if len(f) != 2 {
			return -1, -1, fmt.Errorf("entry %q is not \"epoch startOffset\"", l)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		s, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return -1, -1, fmt.Errorf("entry %q is not \"epoch startOffset\"", l)
		}
		epoch, start = int32(e), s
	}
	return epoch, start, nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// BatchHeader is the start of a v2 record batch.
type BatchHeader struct {
	Pos             int64
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	LastOffsetDelta int32
	MaxTimestamp    int64 // Unix ms
}

// ParseBatchHeader reads "POS B0 B1 … B42": a batch's position and its
// first 43 bytes in hex, as od prints them.
func ParseBatchHeader(s string) (BatchHeader, error) {
	f := strings.Fields(s)
	if len(f) != 44 {
		return BatchHeader{}, fmt.Errorf("batch header %q: want a position and 43 bytes", s)
	}
	pos, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return BatchHeader{}, fmt.Errorf("batch position %q: %w", f[0], err)
	}
	b, err := hex.DecodeString(strings.Join(f[1:], ""))
	if err != nil {
		return BatchHeader{}, fmt.Errorf("batch header bytes: %w", err)
	}
	if b[16] != 2 {
		return BatchHeader{}, fmt.Errorf("batch at %d has magic %d, not 2", pos, b[16])
	}
	return BatchHeader{Pos: pos, BaseOffset: int64(binary.BigEndian.Uint64(b[0:8])), Length: int32(binary.BigEndian.Uint32(b[8:12])),
		LeaderEpoch: int32(binary.BigEndian.Uint32(b[12:16])), LastOffsetDelta: int32(binary.BigEndian.Uint32(b[23:27])),
		MaxTimestamp: int64(binary.BigEndian.Uint64(b[35:43]))}, nil
}

// ReadLogEnds reads, on broker's host over SSH, the log ends of the
// partition directories names (topic-p) from its log dirs dirs. A host
// that cannot be reached is the error; a partition it could not read has
// its LogEnd.Err.
func ReadLogEnds(ctx context.Context, h ports.Hosts, broker int32, dirs, names []string) (map[string]LogEnd, error) {
	if err := CheckLogDirs(broker, dirs, "as given to the log-end reading"); err != nil {
		return nil, err
	}
	script, token := LogEndScript(dirs, names)
	var lines []string
	if err := h.Run(ctx, broker, script, func(l ports.Line) {
		if !l.Stderr {
			lines = append(lines, l.Text)
		}
	}); err != nil {
		return nil, fmt.Errorf("read log ends on broker %d: %w", broker, err)
	}
	return ParseLogEnds(broker, token, lines), nil
}
