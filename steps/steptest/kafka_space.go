package steptest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/steps/ports"
)

var _ ports.Records = (*Kafka)(nil)

// DescribeLogDirs answers as a running broker does: its inventory log
// dirs, those in OfflineDirs[broker] with KAFKA_STORAGE_ERROR.
func (k *Kafka) DescribeLogDirs(_ context.Context, id int32) ([]ports.LogDirState, error) {
	if !k.running(id) {
		return nil, fmt.Errorf("describe log dirs of broker %d: connection refused", id)
	}
	h, _ := k.hosts.target.Host(id)
	var out []ports.LogDirState
	for _, d := range h.LogDirs {
		s := ports.LogDirState{Dir: d, Total: -1, Usable: -1}
		if k.OfflineDirs[id][d] {
			s.Err = "KAFKA_STORAGE_ERROR"
		}
		out = append(out, s)
	}
	return out, nil
}

// DeleteRecords moves each partition's log start up to the offset given,
// refusing one past the log end (OFFSET_OUT_OF_RANGE) as Kafka does; it
// records every request in DeletedRecords. With DeleteRecordsTimeout it
// moves the log starts and then answers REQUEST_TIMED_OUT, as a leader
// does whose follower on a live broker cannot fetch (an offline dir).
func (k *Kafka) DeleteRecords(_ context.Context, t string, before map[int32]int64) (map[int32]int64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[int32]int64{}
	for p, o := range before {
		span := k.logs[t][p]
		if o > span[1] {
			return out, fmt.Errorf("delete records of %s-%d below %d: %s", t, p, o, "OFFSET_OUT_OF_RANGE")
		}
		span[0] = max(span[0], o)
		k.logs[t][p] = span
		out[p] = span[0]
		k.DeletedRecords = append(k.DeletedRecords, fmt.Sprintf("%s-%d<%d", t, p, o))
	}
	if k.DeleteRecordsTimeout {
		return nil, fmt.Errorf("delete records of %s: REQUEST_TIMED_OUT", t)
	}
	return out, nil
}

// StartOffsets are the topic's log starts, from what Produce and
// DeleteRecords did.
func (k *Kafka) StartOffsets(ctx context.Context, t string) (map[int32]int64, error) {
	tv := k.truth(ctx, t)
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[int32]int64{}
	for p := range tv.Partitions {
		out[p] = k.logs[t][p][0]
	}
	return out, nil
}

var _ ports.DirMover = (*Kafka)(nil)

// Replicas answers where a running broker keeps each replica: the
// partition directories its host's Space lines list per log dir (an
// offline dir lists none), each with its files' bytes.
func (k *Kafka) Replicas(_ context.Context, id int32) ([]ports.ReplicaDir, error) {
	if !k.running(id) {
		return nil, fmt.Errorf("describe log dirs of broker %d: connection refused", id)
	}
	h, _ := k.hosts.target.Host(id)
	k.hosts.mu.Lock()
	defer k.hosts.mu.Unlock()
	var out []ports.ReplicaDir
	for _, d := range h.LogDirs {
		if k.OfflineDirs[id][d] {
			continue
		}
		sizes := map[string]int64{}
		var names []string
		for _, l := range k.hosts.Space[id][d] {
			if name, kib, ok := spaceFile(l); ok {
				if _, seen := sizes[name]; !seen {
					names = append(names, name)
				}
				sizes[name] += kib << 10
			}
		}
		slices.Sort(names)
		for _, n := range names {
			i := strings.LastIndex(n, "-")
			p, _ := strconv.Atoi(n[i+1:])
			out = append(out, ports.ReplicaDir{Dir: d, Topic: n[:i], Partition: int32(p), Bytes: sizes[n]})
		}
	}
	return out, nil
}

// MoveReplicaDir moves a running broker's replica to another of its dirs
// at once (the future replica caught up and swapped): its files' lines
// move from one dir's Space to the other's, and both dirs' df lines
// follow. A dir in OfflineDirs answers KAFKA_STORAGE_ERROR, as Kafka does.
// Each move is recorded in DirMoves, "broker:topic-partition>dir".
func (k *Kafka) MoveReplicaDir(_ context.Context, id int32, dir, topic string, p int32) error {
	if !k.running(id) {
		return fmt.Errorf("move %s-%d on broker %d: connection refused", topic, p, id)
	}
	name := fmt.Sprintf("%s-%d", topic, p)
	k.hosts.mu.Lock()
	defer k.hosts.mu.Unlock()
	h, _ := k.hosts.target.Host(id)
	from := ""
	for _, d := range h.LogDirs {
		for _, l := range k.hosts.Space[id][d] {
			if n, _, ok := spaceFile(l); ok && n == name {
				from = d
			}
		}
	}
	switch {
	case !slices.Contains(h.LogDirs, dir):
		return fmt.Errorf("move %s to %s on broker %d: LOG_DIR_NOT_FOUND", name, dir, id)
	case k.OfflineDirs[id][dir] || k.OfflineDirs[id][from]:
		return fmt.Errorf("move %s to %s on broker %d: KAFKA_STORAGE_ERROR", name, dir, id)
	}
	k.DirMoves = append(k.DirMoves, fmt.Sprintf("%d:%s>%s", id, name, dir))
	if from == "" || from == dir {
		return nil
	}
	var kept, moved []string
	var kib int64
	for _, l := range k.hosts.Space[id][from] {
		if n, b, ok := spaceFile(l); ok && n == name {
			moved, kib = append(moved, l), kib+b
			continue
		}
		kept = append(kept, l)
	}
	if k.hosts.Space[id][dir] == nil {
		k.hosts.Space[id][dir] = []string{fmt.Sprintf("df fake 1048576 10240 1038336 1%% %s", dir)}
	}
	k.hosts.Space[id][from] = dfMinus(kept, kib)
	k.hosts.Space[id][dir] = append(dfMinus(k.hosts.Space[id][dir], -kib), moved...)
	return nil
}

// spaceFile reads one "f BLOCKS512 NAME/FILE" line of a space reading:
// the partition directory and the file's KiB.
func spaceFile(l string) (string, int64, bool) {
	f := strings.Fields(l)
	if len(f) != 3 || f[0] != "f" {
		return "", 0, false
	}
	b, _ := strconv.ParseInt(f[1], 10, 64)
	return strings.SplitN(f[2], "/", 2)[0], b / 2, true
}

// dfMinus is lines with kib KiB fewer used (more available) on the df
// line.
func dfMinus(lines []string, kib int64) []string {
	out := slices.Clone(lines)
	for i, l := range out {
		if f := strings.Fields(l); len(f) >= 7 && f[0] == "df" {
			used, _ := strconv.ParseInt(f[3], 10, 64)
			avail, _ := strconv.ParseInt(f[4], 10, 64)
			f[3], f[4] = fmt.Sprint(used-kib), fmt.Sprint(avail+kib)
			out[i] = strings.Join(f, " ")
		}
	}
	return out
}
