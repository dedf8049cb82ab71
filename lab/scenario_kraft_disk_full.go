package lab

import "fmt"

func init() {
	registerKRaft(126, "kraft-disk-full", onKRaft((*env).diskFullKRaft),
		"(lab up --kraft --log-dir-size) disk-full on a KRaft lab: T with 4 partitions (2 MiB segments), each on the highest-numbered broker V (the leader) and one other, filled until V's only log dir (a tmpfs, also its metadata log's) is full: Kafka takes it offline and V stops; group "+DiskFullGroup+" committed offset 16 of each partition early on")
}

// diskFullKRaft is disk-full on a KRaft lab: the victim is the highest
// broker id (no broker is the controller here).
func (e *env) diskFullKRaft(ids []int32) error {
	if e.l.State.Config.LogDirSize == "" {
		return fmt.Errorf("%w: kraft-disk-full needs size-limited log dirs; bring a lab up with `kremedy lab up --kraft --log-dir-size 64m` (root)", ErrWrongLab)
	}
	return e.diskFullOn(ids[len(ids)-1], ids)
}
