package offline

import (
	"context"

	"github.com/kremedy/kremedy/steps"
)

// Register adds offline-partitions' kinds to r.
func Register(r *steps.Registry) {
	steps.Register(r, "offline-survey", nil, func(o surveyOpts) steps.Kind { return &survey{o: o} })
	steps.Register(r, "offline-elect", nil, func(o electOpts) steps.Kind { return &elect{o: o} })
	steps.Register(r, "offline-after", nil, func(o afterOpts) steps.Kind { return &after{o: o} })
}

// electedKey is where offline-elect keeps, before it acts, the partitions
// it elects and whom: its Verify and offline-after read them.
const electedKey = "offline/elected"

// Elected is one partition offline-elect elects.
type Elected struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Leader    int32  `json:"leader"`
	// End is the elected log's end when it was chosen (-1: not known, a
	// plan from the journal): offline-after compares the groups with it.
	End      int64   `json:"end"`
	Longest  int64   `json:"longest"`
	Lost     int64   `json:"lost"`
	Exact    bool    `json:"exact"`
	Replicas []int32 `json:"replicas"`
	// Window says when the lost records were written (Choice.Window).
	Window string `json:"window,omitempty"`
}

// Admin is what offline-elect asks of Kafka beyond ports.Kafka: the
// franz-go adapter (steps/kafka.Client) has it.
type Admin interface {
	Reorder(ctx context.Context, topic string, replicas map[int32][]int32) (map[int32]error, error)
	Reassigning(ctx context.Context, topic string, partitions []int32) (map[int32][]int32, error)
	ElectUnclean(ctx context.Context, topic string, partitions []int32) (map[int32]error, error)
}
