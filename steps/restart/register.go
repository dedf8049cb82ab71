package restart

import "github.com/kremedy/kremedy/steps"

// Register adds the rolling restarts' kinds to r.
func Register(r *steps.Registry) {
	steps.Register(r, "cluster-preflight", nil, func(o preflightOpts) steps.Kind { return &preflight{o: o} })
	steps.Register(r, "rolling-restart", nil, func(o rollOpts) steps.Kind { return &roll{o: o} })
}

// factsKey is where cluster-preflight saves what it learned.
const factsKey = "restart/facts"

// Facts are what cluster-preflight learned and the roll uses.
type Facts struct {
	ClusterID  string  `json:"cluster_id,omitempty"`
	Controller int32   `json:"controller"`
	Registered []int32 `json:"registered"`
	// Sessions are the ZooKeeper sessions of the brokers' registrations
	// when the run's first preflight looked: a broker registered under
	// another session since is a new process (it was restarted). A resume
	// keeps the first attempt's.
	Sessions map[int32]int64 `json:"sessions"`
}
