package reassign

import "github.com/kremedy/kremedy/steps"

// Artifacts the kinds write in the run directory.
const (
	// ArtRollback is the assignment before the move, in
	// kafka-reassign-partitions' --reassignment-json-file form.
	ArtRollback = "rollback"
	// ArtThrottles is every throttle config before the run, with its value.
	ArtThrottles = "throttles"
)

// Register adds reassignment-unstick's kinds to r.
func Register(r *steps.Registry) {
	steps.Register(r, "reassign-save", []string{ArtRollback, ArtThrottles}, func(o saveOpts) steps.Kind { return &save{o: o} })
	steps.Register(r, "reassign-unstick", nil, func(o unstickOpts) steps.Kind { return &unstick{o: o} })
	steps.Register(r, "throttle-sweep", nil, func(o sweepOpts) steps.Kind { return &sweep{o: o} })
	steps.Register(r, "reassign-verify", nil, func(o verifyOpts) steps.Kind { return &verify{o: o} })
}
