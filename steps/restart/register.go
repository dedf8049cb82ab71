package restart

import "github.com/kremedy/kremedy/steps"

// Register adds the rolling restarts' kinds to r.
func Register(r *steps.Registry) {}
