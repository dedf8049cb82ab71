package lab

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kremedy/kremedy/steps/kafka"
)

// Disk-full's shape: DiskFullPartitions partitions of T, each on the
// victim and one other broker (the victim leads them all), so the victim
// holds twice what any other broker holds and fills first; DiskFullGroup
// commits half of each partition.
const (
	DiskFullPartitions = 4
	DiskFullGroup      = "disk-full-readers"
	DiskFullSegment    = 2 << 20
	// DiskFullCommitted is the offset the group commits on each partition.
	DiskFullCommitted = 16
	diskFullRecord    = 256 << 10
)

func init() {
	register(79, "disk-full", onReady((*env).diskFull),
		"(lab up --log-dir-size) T with 4 partitions (2 MiB segments), each on broker V (the leader) and one other broker, filled with 256 KiB records until V's log dir (a tmpfs) is full: Kafka 3.9.2 takes the dir offline on ENOSPC and, V's only dir gone, halts V; the others lead; group "+DiskFullGroup+" committed offset 16 of each partition early on")
}

// diskFull fills one broker's only log dir until ENOSPC. Observed on
// Kafka 3.9.2 (ZooKeeper mode): the append fails with "No space left on
// device", the LogDirFailureHandler marks the dir offline, and as it was
// the broker's only one the broker halts ("Shutdown broker because all
// log dirs in … have failed"); the dir stays 100% used, so a plain start
// fails again (docs/disk-full.md).
func (e *env) diskFull(ids []int32) error {
	if e.l.State.Config.LogDirSize == "" {
		return fmt.Errorf("%w: disk-full needs size-limited log dirs; bring a lab up with `kremedy lab up --log-dir-size 64m` (root)", ErrWrongLab)
	}
	victim, err := e.victim(ids)
	if err != nil {
		return err
	}
	return e.diskFullOn(victim, ids)
}

// diskFullOn is disk-full's body on either kind of lab, victim chosen.
func (e *env) diskFullOn(victim int32, ids []int32) error {
	var others []int32
	for _, id := range ids {
		if id != victim {
			others = append(others, id)
		}
	}
	assign := make([][]int32, DiskFullPartitions)
	for p := range assign {
		assign[p] = []int32{victim, others[p%len(others)]}
		e.rep.Leaders[int32(p)] = victim
	}
	e.rep.Assign, e.rep.Victim = assign, victim
	// Small segments, so that DeleteRecords frees whole segments of a 64
	// MiB dir (Kafka deletes a segment only once all of it is below the
	// log start offset).
	if _, err := e.kc.CreateTopic(e.ctx, e.t, assign, 0, 0, map[string]string{"segment.bytes": fmt.Sprint(DiskFullSegment)}); err != nil {
		return err
	}
	if err := e.waitServed(e.t, len(assign)); err != nil {
		return err
	}
	e.did("created %q: %d partitions, each on broker %d (leader) and one other broker %v", e.t, DiskFullPartitions, victim, others)
	// The group commits while every broker is up (its coordinator may be
	// the victim): half of what the first quarter of the dir holds.
	if err := e.fill(victim, DiskFullCommitted*2*DiskFullPartitions); err != nil {
		return err
	}
	if err := e.commitHalf(); err != nil {
		return err
	}
	if err := e.fill(victim, 4096); err != nil {
		return err
	}
	if err := e.record(Applied{DownBroker: victim}); err != nil {
		return err
	}
	e.diskFullSymptoms(victim)
	runbook := "disk-full"
	if e.l.State.KRaft() {
		runbook = "kraft-disk-full"
	}
	e.rep.Next = fmt.Sprintf("`kremedy diagnose` names broker %d's log dir full (log-dir-full); `kremedy run %s --set broker=%d --set quarantine=DIR` frees space without deleting what group %s has not read and starts it again", victim, runbook, victim, DiskFullGroup)
	return e.verdict()
}

// fill writes up to most 256 KiB records round-robin, stopping early when
// the victim's process is gone (it halts on the dir's failure) or a write
// fails.
func (e *env) fill(victim int32, most int) error {
	pr, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 15*time.Second, e.l.KafkaOpts()...)
	if err != nil {
		return err
	}
	defer pr.Close()
	// Random bytes: the producer compresses (snappy), and a repeated
	// letter would fill nothing.
	buf := make([]byte, diskFullRecord)
	_, _ = rand.Read(buf)
	value := string(buf)
	written := 0
	var last error
	for i := 0; e.l.BrokerPID(int(victim)) > 0 && i < most; i++ {
		p := int32(i % DiskFullPartitions)
		if last = pr.Produce(e.ctx, e.t, p, fmt.Sprintf("%s-%d %06d %s", e.t, p, e.rep.Messages[p], value)); last != nil {
			break
		}
		written++
		e.rep.Messages[p]++
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	if last != nil {
		e.did("wrote %d records of 256 KiB (acks=all) until a write failed (%v)", written, last)
	} else {
		e.did("wrote %d records of 256 KiB (acks=all)", written)
	}
	if written == 0 {
		return fmt.Errorf("%w: no record could be written to %q: %v", ErrNotObserved, e.t, last)
	}
	return nil
}

// diskFullSymptoms are what an operator sees: ENOSPC in the victim's log,
// the victim gone, its dir full, the others leading.
func (e *env) diskFullSymptoms(victim int32) {
	logs := filepath.Join(e.l.BrokerDir(int(victim)), "logs", "server.log")
	e.observe(fmt.Sprintf("broker %d's server.log says No space left on device", victim), 30*time.Second, false, func() (bool, string) {
		s := grepFile(logs, "No space left on device")
		return s != "", s
	})
	e.observe(fmt.Sprintf("broker %d halts: its only log dir is offline", victim), 60*time.Second, false, func() (bool, string) {
		if pid := e.l.BrokerPID(int(victim)); pid > 0 {
			return false, fmt.Sprintf("pid %d still runs", pid)
		}
		return true, grepFile(logs, "have failed")
	})
	dir := e.l.LogDirs(int(victim))[0]
	e.observe(fmt.Sprintf("broker %d's log dir %s is full", victim, dir), 5*time.Second, false, func() (bool, string) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			return false, err.Error()
		}
		free := st.Bavail * uint64(st.Bsize)
		return free < diskFullRecord, fmt.Sprintf("%d bytes free of %d", free, st.Blocks*uint64(st.Bsize))
	})
	e.observe(fmt.Sprintf("every partition of %q is led by a broker other than %d", e.t, victim), 30*time.Second, false, func() (bool, string) {
		v, err := e.kc.BrokerView(e.ctx, e.rep.Assign[0][1], e.t)
		if err != nil {
			return false, err.Error()
		}
		ok := len(v.Topics[e.t].Partitions) == DiskFullPartitions
		for _, pv := range v.Topics[e.t].Partitions {
			ok = ok && pv.Leader >= 0 && pv.Leader != victim && !slices.Contains(pv.ISR, victim)
		}
		return ok, isrSummary(v.Topics[e.t].Partitions)
	})
}

// commitHalf commits, for DiskFullGroup, DiskFullCommitted on each
// partition: what lies past it is what a consumer has not read.
func (e *env) commitHalf() error {
	offs := kadm.Offsets{}
	for p := range int32(DiskFullPartitions) {
		offs.Add(kadm.Offset{Topic: e.t, Partition: p, At: DiskFullCommitted, LeaderEpoch: -1})
	}
	rs, err := e.kc.Admin().CommitOffsets(e.ctx, DiskFullGroup, offs)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		return fmt.Errorf("commit %s's offsets: %w", DiskFullGroup, err)
	}
	e.did("group %s committed offset %d on each partition of %q (%v records written per partition so far)", DiskFullGroup, DiskFullCommitted, e.t, e.rep.Messages)
	return nil
}
