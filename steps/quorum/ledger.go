package quorum

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Ledger is what one copy holds beyond the seed's end: the records a
// recovery from the seed discards ("what this recovery discards").
type Ledger struct {
	Copy Copy `json:"copy"`
	// From is the seed's end: the first offset the seed does not hold.
	From    int64    `json:"from"`
	Records []Record `json:"records"`
	// Err says why the copy's tail could not be read whole ("": it was);
	// Records then holds what was read before it.
	Err string `json:"error,omitempty"`
}

// ReadLedger decodes the records of the copy whose files are in dir (a
// backup of its __cluster_metadata-0) from offset from: the segment that
// holds from (the last whose base offset is not above it) and every later
// one.
func ReadLedger(c Copy, dir string, from int64) Ledger {
	l := Ledger{Copy: c, From: from}
	segs, err := segmentsFrom(dir, from)
	if err != nil {
		l.Err = err.Error()
		return l
	}
	for _, s := range segs {
		b, err := os.ReadFile(filepath.Join(dir, s))
		if err != nil {
			l.Err = err.Error()
			return l
		}
		recs, err := DecodeSegment(b, from)
		l.Records = append(l.Records, recs...)
		if err != nil {
			l.Err = fmt.Sprintf("%s: %v", s, err)
			return l
		}
	}
	return l
}

// segmentsFrom lists dir's segments (20-digit base offset + .log) that may
// hold offsets from on, in order.
func segmentsFrom(dir string, from int64) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []string
	for _, e := range ents {
		if n := e.Name(); len(n) == 24 && strings.HasSuffix(n, ".log") {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	first := 0
	for i, s := range segs {
		if base, err := strconv.ParseInt(strings.TrimSuffix(s, ".log"), 10, 64); err == nil && base <= from {
			first = i
		}
	}
	if len(segs) == 0 {
		return nil, nil
	}
	return segs[first:], nil
}

// TopicsCreated are the topics whose TopicRecord the ledger holds, in log
// order.
func (l Ledger) TopicsCreated() []string {
	var out []string
	for _, r := range l.Records {
		if r.Name == "TopicRecord" {
			out = append(out, r.Topic)
		}
	}
	return out
}

// Lines is the ledger as the plan shows it: a heading, each record the
// ledger reads by what it says (a topic's partitions folded into its
// creation; a partition of a topic created before is a line of its own),
// then the other records by name and count.
func (l Ledger) Lines() []string {
	head := fmt.Sprintf("%s holds %d records beyond offset %d", l.Copy.Role(), len(l.Records), l.From)
	if len(l.Records) > 0 {
		head += fmt.Sprintf(" (offsets %d…%d)", l.Records[0].Offset, l.Records[len(l.Records)-1].Offset)
	}
	out := []string{head}
	parts, created := map[string]int{}, map[string]bool{}
	for _, r := range l.Records {
		switch r.Name {
		case "PartitionRecord":
			parts[r.TopicID]++
		case "TopicRecord":
			created[r.TopicID] = true
		}
	}
	counts := map[string]int{}
	var order []string
	for _, r := range l.Records {
		switch {
		case r.Name == "TopicRecord":
			out = append(out, fmt.Sprintf("  offset %d: %s, %d partitions", r.Offset, r.Detail, parts[r.TopicID]))
		case r.Name == "PartitionRecord" && created[r.TopicID]:
			// folded into its topic's line
		case r.Detail != "":
			out = append(out, fmt.Sprintf("  offset %d: %s", r.Offset, r.Detail))
		default:
			if counts[r.Name] == 0 {
				order = append(order, r.Name)
			}
			counts[r.Name]++
		}
	}
	for _, n := range order {
		out = append(out, fmt.Sprintf("  %d × %s", counts[n], n))
	}
	if l.Err != "" {
		out = append(out, "  NOT READ to its end: "+l.Err)
	}
	return out
}
