package steptest

import (
	"context"
	"fmt"

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
// records every request in DeletedRecords.
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
