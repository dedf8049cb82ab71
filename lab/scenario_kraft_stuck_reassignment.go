package lab

func init() {
	registerKRaft(120, "kraft-stuck-reassignment", onKRaft((*env).kraftStuckReassignment),
		"stuck-reassignment on a KRaft lab: T (2 partitions, ~4 MiB each) reassigned onto a third broker throttled at 1 KB/s, which is then stopped (fenced): the moves never finish and the throttles stay")
}

// kraftStuckReassignment is stuck-reassignment on a KRaft lab: the
// target is the highest broker (the controllers are nodes of their own).
func (e *env) kraftStuckReassignment(ids []int32) error {
	return e.stuckMove(ids, kraftVictim(ids), "kraft-reassignment-unstick")
}
