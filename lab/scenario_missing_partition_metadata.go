package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func init() {
	registerKRaft(90, "missing-partition-metadata", onKRaft((*env).missingPartitionMetadata),
		"(3.7.1+) broker B stopped, partition.metadata removed from one of its directories of T, B started: the directory becomes T-N.<uuid>-stray and B copies the partition again from its leader (3.7.0 refused to start instead, KAFKA-16814)")
}

// missingPartitionMetadata leaves a broker a log directory without
// partition.metadata (the topic ID), as a copy or restore by hand does.
// Since 3.7.1 (KAFKA-16814) a KRaft broker treats such a log as stray
// ("The topicId does not exist in …, treat it as a stray log"), renames it
// aside and replicates the partition afresh; 3.7.0 refused to start ("does
// not have a topic ID, which is not allowed when running in KRaft mode").
func (e *env) missingPartitionMetadata(ids []int32) error {
	if !e.l.State.StraysMissingMetadata() {
		return fmt.Errorf("%w: on Kafka %s a KRaft broker refuses to start on a log without partition.metadata (fixed in 3.7.1, KAFKA-16814): this scenario shows 3.7.1+'s stray behaviour; run it on a %s or 4.x KRaft lab", ErrWrongLab, e.l.State.Kafka, KafkaVersion)
	}
	t := e.t
	assign, b, err := e.victimTopic(ids)
	if err != nil {
		return err
	}
	e.rep.NewID = e.rep.OldID
	if err := e.brokerCmd(b, "stop"); err != nil {
		return err
	}
	dirs := e.partitionDirs(b, t)
	if len(dirs) == 0 {
		return fmt.Errorf("broker %d has no directory of %q in %v", b, t, e.l.LogDirs(int(b)))
	}
	dir := dirs[0]
	part := dir[strings.LastIndexByte(dir, '-')+1:]
	pm := filepath.Join(dir, "partition.metadata")
	if err := os.Remove(pm); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	e.did("stopped broker %d over SSH and removed %s (the directory keeps its segments, but no topic ID)", b, pm)
	if err := e.record(Applied{}); err != nil {
		return err
	}
	if err := e.brokerCmd(b, "start"); err != nil {
		return err
	}
	e.did("started broker %d again over SSH", b)

	e.observe(fmt.Sprintf("broker %d renamed %s (no partition.metadata) to %s.<uuid>-stray", b, filepath.Base(dir), filepath.Base(dir)), 30*time.Second, false, func() (bool, string) {
		var ev []string
		ok := false
		for _, s := range e.strayDirs(b, t) {
			_, err := os.Stat(filepath.Join(s, "partition.metadata"))
			has := err == nil
			ok = ok || strayPartition(s) == part && !has
			ev = append(ev, fmt.Sprintf("%s (partition.metadata present: %v, %d bytes on disk)", s, has, dirBytes(s)))
		}
		if len(ev) == 0 {
			ev = append(ev, fmt.Sprintf("no -stray directory of %q on broker %d yet", t, b))
		}
		return ok, strings.Join(ev, "\n")
	})
	e.observe(fmt.Sprintf("broker %d's server.log says why: no topic ID, treated as stray, renamed", b), 10*time.Second, false, func() (bool, string) {
		why := e.serverLogLine(b, "topicId does not exist", filepath.Base(dir))
		renamed := e.serverLogLine(b, "marked stray", dir)
		return renamed != "", strings.TrimSpace(why + "\n" + renamed)
	})
	e.observe(fmt.Sprintf("broker %d copied %s-%s again from its leader: a new %s with the topic ID %s, and broker %d is back in every ISR", b, t, part, filepath.Base(dir), e.rep.OldID, b), 60*time.Second, false, func() (bool, string) {
		id := diskTopicID(dir)
		isr, ev := e.inEveryISR(t, b, ids[0])
		return id == e.rep.OldID && isr, fmt.Sprintf("%s topic_id %q\n%s", dir, id, ev)
	})
	e.observe(fmt.Sprintf("clients are fine: every partition of %q still holds its %d messages", t, MessagesPerPartition), 20*time.Second, false, func() (bool, string) {
		return e.readsOnly(t, len(assign), "old", MessagesPerPartition)
	})
	e.rep.Next = fmt.Sprintf("the cluster serves %q as before; broker %d's disk holds a -stray copy of %s-%s that Kafka never deletes, without partition.metadata: kremedy cannot prove from a topic id whose data it holds. %s names it; once you have compared it with the live partition, %s moves it into a quarantine",
		t, b, t, part, e.diagnoseNext(), e.strayCleanupNext(true))
	return e.verdict()
}
