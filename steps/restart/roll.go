package restart

import (
	"time"

	"github.com/kremedy/kremedy/steps/roll"
)

// rollKind is the rolling-restart kind: the one roller (steps/roll) over
// the brokers its options name, seen in ZooKeeper.
type rollKind struct{ roll.Roll }

func newRoll(o rollOpts) *rollKind {
	return &rollKind{roll.Roll{
		Nodes:       &roll.ZooKeeperBrokers{Key: "restart/sessions", HealthChecks: o.HealthChecks, HealthTimeout: o.HealthTimeout},
		Only:        o.Brokers,
		StopTimeout: o.StopTimeout, StartTimeout: o.StartTimeout,
		Accept: o.Accept, HealWait: o.HealthTimeout, Batch: o.Batch,
	}}
}

// rollOpts are the rolling-restart kind's options.
type rollOpts struct {
	// Brokers to restart; empty: every broker of the inventory.
	Brokers []int32 `opt:"brokers" type:"brokers"`
	// StopTimeout bounds a broker's stop command and the wait for its
	// registration to vanish; StartTimeout its start command and the wait
	// for its new registration.
	StopTimeout  time.Duration `opt:"stop_timeout"`
	StartTimeout time.Duration `opt:"start_timeout"`
	// The health gate after each broker: Checks healthy rounds in a row,
	// one a second, within Timeout.
	HealthChecks  int           `opt:"health_checks"`
	HealthTimeout time.Duration `opt:"health_timeout"`
	// Accept: the topics whose partitions no restart can keep available
	// that the operator accepts (roll.AcceptParam).
	Accept []string `opt:"accept_unavailable" type:"topics" default:""`
	// Batch: how many brokers stop at once (roll.BatchParam): 1, N or auto.
	Batch int `opt:"batch" type:"batch" default:"1"`
}
