package restart

import "github.com/kremedy/kremedy/steps"

// Register adds the rolling restarts' kinds to r.
func Register(r *steps.Registry) {
	steps.Register(r, "cluster-preflight", nil, func(o preflightOpts) steps.Kind { return &preflight{o: o} })
	steps.Register(r, "rolling-restart", nil, func(o rollOpts) steps.Kind { return newRoll(o) })
}

// factsKey is where cluster-preflight saves what it learned.
const factsKey = "restart/facts"

// Facts are what cluster-preflight learned and the roll uses.
type Facts struct {
	ClusterID  string  `json:"cluster_id,omitempty"`
	Controller int32   `json:"controller"`
	Registered []int32 `json:"registered"`
}
