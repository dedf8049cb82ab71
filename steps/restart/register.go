package restart

import "github.com/kremedy/kremedy/steps"

// Register adds the rolling restarts' kinds to r.
func Register(r *steps.Registry) {
	steps.Register(r, "cluster-preflight", nil, func(o preflightOpts) steps.Kind { return &preflight{o: o} })
	steps.Register(r, "rolling-restart", nil, func(o rollOpts) steps.Kind { return newRoll(o) })
	steps.Register(r, "kraft-preflight", nil, func(o kraftPreflightOpts) steps.Kind { return &kraftPreflight{o: o} })
	steps.Register(r, "kraft-rolling-restart", nil, func(o kraftRollOpts) steps.Kind { return newKRaftRoll(o) })
}

// factsKey is where cluster-preflight saves what it learned.
const factsKey = "restart/facts"

// Facts are what cluster-preflight learned and the roll uses.
type Facts struct {
	ClusterID  string  `json:"cluster_id,omitempty"`
	Controller int32   `json:"controller"`
	Registered []int32 `json:"registered"`
}
