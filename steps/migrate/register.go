package migrate

import "github.com/kremedy/kremedy/steps"

// Register adds the ZooKeeper → KRaft migration's kinds to r.
func Register(r *steps.Registry) {
	steps.Register(r, "migration-preflight", nil, func(o preflightOpts) steps.Kind { return &preflight{o: o} })
	steps.Register(r, "start-controllers", nil, func(o ctrlOpts) steps.Kind { return &startControllers{o: o} })
	steps.Register(r, "roll-brokers", nil, func(o rollOpts) steps.Kind { return newRollBrokers(o) })
	steps.Register(r, "wait-migration", nil, func(o waitOpts) steps.Kind { return &waitMigration{o: o} })
	steps.Register(r, "finalize-migration", nil, func(o ctrlOpts) steps.Kind { return newFinalize(o) })
	steps.Register(r, "stop-controllers", nil, func(o ctrlOpts) steps.Kind { return &stopControllers{o: o} })
	steps.Register(r, "kraft-inventory", []string{artKRaftInventory}, func(struct{}) steps.Kind { return &kraftInventory{} })
	steps.Register(r, "reset-migration-znodes", []string{artZnodes}, func(struct{}) steps.Kind { return &resetZnodes{} })
}
