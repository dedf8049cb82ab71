package ports

import "context"

// LogDirState is one log dir as its broker describes it
// (DescribeLogDirs): Err is Kafka's error for the dir ("" when online;
// KAFKA_STORAGE_ERROR for a dir the broker took offline).
type LogDirState struct {
	Dir string `json:"dir"`
	Err string `json:"error,omitempty"`
	// Total and Usable are the volume's bytes (-1: below Kafka 3.3).
	Total  int64 `json:"total"`
	Usable int64 `json:"usable"`
}

// Records is the optional capability of a Kafka port the disk-full
// runbook and diagnose's log-dir-full need: the brokers' own view of
// their log dirs, and DeleteRecords. The franz-go adapter has it; a port
// without it is refused with what to do instead.
type Records interface {
	// DescribeLogDirs is broker's log dirs, offline ones with their error.
	DescribeLogDirs(ctx context.Context, broker int32) ([]LogDirState, error)
	// DeleteRecords moves each partition's log start offset up to the
	// offset given (records below it are deleted, for good), on each
	// partition's leader, and returns the new log start offsets.
	DeleteRecords(ctx context.Context, topic string, before map[int32]int64) (map[int32]int64, error)
	// StartOffsets are topic's log start offsets (ListOffsets earliest,
	// which a leader answers even while its high watermark has not caught
	// up after an election, when latest is OFFSET_NOT_AVAILABLE).
	StartOffsets(ctx context.Context, topic string) (map[int32]int64, error)
}

// ReplicaDir is one replica a broker holds in one of its log dirs, as
// DescribeLogDirs lists it: Future is the copy AlterReplicaLogDirs is
// making (it replaces the current one once it caught up), Lag how far
// behind it is.
type ReplicaDir struct {
	Dir       string `json:"dir"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Bytes     int64  `json:"bytes"`
	Future    bool   `json:"future,omitempty"`
	Lag       int64  `json:"lag,omitempty"`
}

// DirMover is the optional capability of a Kafka port to move replicas
// between the log dirs of one broker (JBOD): the disk-full runbook's
// space-move-dirs. The franz-go adapter has it.
type DirMover interface {
	// Replicas is every replica broker holds, per online log dir (an
	// offline dir lists none), futures included.
	Replicas(ctx context.Context, broker int32) ([]ReplicaDir, error)
	// MoveReplicaDir asks broker to move its replica of topic-partition
	// to dir (AlterReplicaLogDirs): Kafka copies it into a future replica
	// there and swaps it in once caught up; the call returns at once.
	MoveReplicaDir(ctx context.Context, broker int32, dir, topic string, partition int32) error
}
