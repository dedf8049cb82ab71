package space

import "github.com/kremedy/kremedy/steps"

// Register adds the disk-full runbook's kinds to r.
func Register(r *steps.Registry) {
	steps.Register(r, "space-move-dirs", nil, func(o moveDirsOpts) steps.Kind { return &moveDirs{o: o} })
	steps.Register(r, "space-free-records", nil, func(o brokerOpts) steps.Kind { return &freeRecords{o: o} })
	steps.Register(r, "space-quarantine", nil, func(o quarantineOpts) steps.Kind { return &quarantine{o: o} })
	steps.Register(r, "space-start", nil, func(o startOpts) steps.Kind { return &start{o: o} })
	steps.Register(r, "space-lower-local", nil, func(o lowerOpts) steps.Kind { return &lowerLocal{o: o} })
	steps.Register(r, "space-restore-local", nil, func(struct{}) steps.Kind { return &restoreLocal{} })
}
