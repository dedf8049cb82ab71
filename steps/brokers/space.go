package brokers

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/internal/logdir"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/segments"
)

// Space is one log dir's filesystem and what fills it, as read over SSH
// (`df -P` and a `find` of the partition directories' files): what
// diagnose's log-dir-full and the disk-full runbook measure.
type Space struct {
	Dir string `json:"dir"`
	// Mount is the filesystem's mount point (df -P's last column): two
	// dirs on one filesystem share it.
	Mount string `json:"mount"`
	// Size, Used and Avail are bytes (df -P's 1024-blocks).
	Size  int64 `json:"size"`
	Used  int64 `json:"used"`
	Avail int64 `json:"avail"`
	// Partitions are the live partition directories, largest first.
	Partitions []PartitionSpace `json:"partitions,omitempty"`
}

// UsedPercent is df's Capacity: used over used+available, rounded up.
func (s Space) UsedPercent() int {
	if s.Used+s.Avail <= 0 {
		return 0
	}
	return int((s.Used*100 + s.Used + s.Avail - 1) / (s.Used + s.Avail))
}

// Full reports a dir whose filesystem is 95% used or more, or has less
// than 1 MiB left: Kafka's next segment roll or index may not fit.
func (s Space) Full() bool { return s.UsedPercent() >= 95 || s.Avail < 1<<20 }

// PartitionSpace is one partition directory: its bytes on disk and its
// segments.
type PartitionSpace struct {
	Name      string `json:"name"` // the directory's name, topic-partition
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Bytes are the blocks its files take on disk.
	Bytes int64 `json:"bytes"`
	// Segments by base offset, oldest first.
	Segments []Segment `json:"segments"`
	// Deleted are the bytes of files Kafka renamed *.deleted: deleted
	// from the log already, removed from the disk after
	// file.delete.delay.ms (a minute by default).
	Deleted int64 `json:"deleted,omitempty"`
}

// Segment is one log segment: its base offset (the file name) and the
// bytes on disk of its files (.log, .index, .timeindex, .snapshot,
// .txnindex).
type Segment struct {
	Base  int64 `json:"base"`
	Bytes int64 `json:"bytes"`
}

// Oldest is the base offset of the oldest segment (-1 for none).
func (p PartitionSpace) Oldest() int64 {
	if len(p.Segments) == 0 {
		return -1
	}
	return p.Segments[0].Base
}

// FreedBelow is what Kafka deletes once the log start offset is start: a
// segment goes when the next segment's base offset is at or below it
// (UnifiedLog.deleteLogStartOffsetBreachedSegments); the active segment
// never does. It returns the bytes and the segments.
func (p PartitionSpace) FreedBelow(start int64) (int64, int) {
	var b int64
	n := 0
	for i := 0; i+1 < len(p.Segments); i++ {
		if p.Segments[i+1].Base > start {
			break
		}
		b += p.Segments[i].Bytes
		n++
	}
	return b, n
}

// SpaceScript is the one command that reads dirs' filesystems and files:
// per dir its df -P line and its partition directories' files.
func SpaceScript(dirs []string) (string, error) {
	var b strings.Builder
	b.WriteString(`kremedy_space() { echo "dir $1"; df -P "$1" | tail -n 1 | sed 's/^/df /'; find "$1" -mindepth 2 -maxdepth 2 -type f -printf 'f %b %P\n'; }` + "\n")
	for _, d := range dirs {
		if err := logdir.Check(d); err != nil {
			return "", fmt.Errorf("%w: log dir %q: %w", ports.ErrRefused, d, err)
		}
		b.WriteString("kremedy_space " + shell.Quote(d) + "\n")
	}
	return shell.Script(b.String()), nil
}

// ReadSpace runs SpaceScript on broker id's host and parses its answer.
func ReadSpace(ctx context.Context, h ports.Hosts, id int32, dirs []string) ([]Space, error) {
	cmd, err := SpaceScript(dirs)
	if err != nil {
		return nil, err
	}
	var lines, errs []string
	err = h.Run(ctx, id, cmd, func(l ports.Line) {
		if l.Stderr {
			errs = append(errs, l.Text)
		} else {
			lines = append(lines, l.Text)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read log dirs' space on broker %d: %w (%s)", id, err, strings.Join(errs, "; "))
	}
	return ParseSpace(lines)
}

// ParseSpace reads SpaceScript's output: per dir a "dir D" line, a
// "df FS BLOCKS USED AVAIL CAP MOUNT" line and "f BLOCKS512 REL" lines.
func ParseSpace(lines []string) ([]Space, error) {
	var out []Space
	parts := map[string]*PartitionSpace{}
	segs := map[string]map[int64]int64{}
	flush := func() {
		if len(out) == 0 {
			return
		}
		s := &out[len(out)-1]
		for name, p := range parts {
			for base, b := range segs[name] {
				if base >= 0 && segs[name][-1-base] == 1 { // a .log: a segment
					p.Segments = append(p.Segments, Segment{Base: base, Bytes: b})
				}
			}
			sort.Slice(p.Segments, func(i, j int) bool { return p.Segments[i].Base < p.Segments[j].Base })
			s.Partitions = append(s.Partitions, *p)
		}
		sort.Slice(s.Partitions, func(i, j int) bool {
			a, b := s.Partitions[i], s.Partitions[j]
			return a.Bytes > b.Bytes || a.Bytes == b.Bytes && a.Name < b.Name
		})
		parts, segs = map[string]*PartitionSpace{}, map[string]map[int64]int64{}
	}
	for _, line := range lines {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "dir":
			flush()
			out = append(out, Space{Dir: f[1]})
		case len(f) >= 7 && f[0] == "df" && len(out) > 0:
			s := &out[len(out)-1]
			s.Size, s.Used, s.Avail = kib(f[2]), kib(f[3]), kib(f[4])
			s.Mount = strings.Join(f[6:], " ")
		case len(f) == 3 && f[0] == "f" && len(out) > 0:
			addFile(parts, segs, f[1], f[2])
		default:
			return nil, fmt.Errorf("log dir space: unexpected line %q", line)
		}
	}
	flush()
	return out, nil
}

func kib(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n * 1024 }

// addFile counts one file (blocks of 512 bytes, path dir/file) toward its
// partition directory and, when its name is a base offset, its segment.
func addFile(parts map[string]*PartitionSpace, segs map[string]map[int64]int64, blocks, rel string) {
	dir, file := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	pd, err := segments.ParseDir(dir)
	if err != nil || pd.Kind != segments.Live {
		return
	}
	b, _ := strconv.ParseInt(blocks, 10, 64)
	b *= 512
	p := parts[dir]
	if p == nil {
		p = &PartitionSpace{Name: dir, Topic: pd.Topic, Partition: pd.Partition}
		parts[dir] = p
		segs[dir] = map[int64]int64{}
	}
	p.Bytes += b
	stem, ext, ok := strings.Cut(file, ".")
	if !ok || len(stem) != 20 {
		return
	}
	if strings.HasSuffix(ext, ".deleted") {
		p.Deleted += b // renamed for deletion; gone after file.delete.delay.ms
		return
	}
	switch ext {
	case "log", "index", "timeindex", "snapshot", "txnindex":
		if base, err := strconv.ParseInt(stem, 10, 64); err == nil {
			segs[dir][base] += b
			if ext == "log" {
				segs[dir][-1-base] = 1 // marks a base that has a .log: a segment
			}
		}
	}
}
