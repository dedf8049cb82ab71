package lab

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

func init() {
	registerKRaft(80, "stray-logs", onKRaft((*env).strayLogs),
		"T with RF 3 written to; broker B stopped; T deleted and created again under the same name; B started: Kafka renames B's old directories T-N.<uuid>-stray and never deletes them — clients are fine, B's disks hold the strays")
}

// strayLogs is issue 24's stray case: a topic deleted while a broker is
// down and recreated under the same name. When the broker returns, its old
// directories' topic ID is not in the metadata image: LogManager.loadLog
// marks them stray and renames them <t>-<p>.<uuid>-stray, kept, never
// deleted (KAFKA-14616, 3.7.0; KAFKA-15605: "It will be up to the operator
// to manually delete the stray partitions"). DescribeLogDirs does not list
// them: only the disk shows them.
func (e *env) strayLogs(ids []int32) error {
	t := e.t
	assign, b, err := e.victimTopic(ids)
	if err != nil {
		return err
	}
	old := e.partitionDirs(b, t)
	if err := e.recreateWhileDown(ids, assign, b, old); err != nil {
		return err
	}
	e.observeStrays(ids, assign, b, old)
	e.rep.Next = e.strayLogsNext(b)
	return e.verdict()
}

// recreateWhileDown breaks the lab: it stops broker b (whose disks hold
// old, its directories of the topic), deletes the topic, creates it again
// with assign and new messages while b is down, records that, and starts
// b again.
func (e *env) recreateWhileDown(ids []int32, assign [][]int32, b int32, old []string) error {
	t := e.t
	var err error
	if err := e.brokerCmd(b, "stop"); err != nil {
		return err
	}
	e.did("stopped broker %d over SSH (its kafka-stop: a controlled shutdown); its disks keep %d directories of %q", b, len(old), t)
	if err := e.kc.DeleteTopic(e.ctx, t); err != nil {
		return err
	}
	var live []int32
	for _, id := range ids {
		if id != b {
			live = append(live, id)
		}
	}
	if err := e.waitAbsent(t, live); err != nil {
		return fmt.Errorf("%q deleted, but the running brokers still list it: %w", t, err)
	}
	if e.rep.NewID, err = e.createAndFill(t, assign, "new"); err != nil {
		return err
	}
	e.did("deleted %q (Admin API) while broker %d was down, created it again under the same name and assignment (new topic ID %s; broker %d, fenced, stays in every replica list) and wrote %d new messages per partition",
		t, b, e.rep.NewID, b, MessagesPerPartition)
	if err := e.record(Applied{}); err != nil {
		return err
	}
	if err := e.brokerCmd(b, "start"); err != nil {
		return err
	}
	e.did("started broker %d again over SSH", b)
	return nil
}

// observeStrays checks what broker b does on its return: it renames its
// old directories -stray, logs it, recreates the partitions with the new
// topic ID; clients read only the new messages, and DescribeLogDirs does
// not list the strays.
func (e *env) observeStrays(ids []int32, assign [][]int32, b int32, old []string) {
	t := e.t
	e.observe(fmt.Sprintf("broker %d renamed its %d old directories of %q to %s-N.<uuid>-stray, each still holding the old topic ID %s", b, len(old), t, t, e.rep.OldID), 30*time.Second, false, func() (bool, string) {
		strays := e.strayDirs(b, t)
		var ev []string
		ok := len(strays) == len(old) && len(old) > 0
		for _, s := range strays {
			id := diskTopicID(s)
			ok = ok && id == e.rep.OldID
			ev = append(ev, fmt.Sprintf("%s (partition.metadata topic_id %s, %d bytes on disk)", s, id, dirBytes(s)))
		}
		if len(strays) == 0 {
			ev = append(ev, fmt.Sprintf("no -stray directory of %q on broker %d yet", t, b))
		}
		return ok, strings.Join(ev, "\n")
	})
	e.observe(fmt.Sprintf("broker %d's server.log says so (\"marked stray and renamed\")", b), 10*time.Second, false, func() (bool, string) {
		line := e.serverLogLine(b, "marked stray", t+"-")
		return line != "", line
	})
	e.observe(fmt.Sprintf("broker %d created %q's partitions again with the new topic ID and is back in every ISR", b, t), 60*time.Second, false, func() (bool, string) {
		dirs := e.partitionDirs(b, t)
		ok := len(dirs) == len(assign)
		var ev []string
		for _, d := range dirs {
			id := diskTopicID(d)
			ok = ok && id == e.rep.NewID
			ev = append(ev, fmt.Sprintf("%s (topic_id %s)", d, id))
		}
		isr, isrEv := e.inEveryISR(t, b, ids[0])
		return ok && isr, strings.Join(append(ev, isrEv), "\n")
	})
	e.observe(fmt.Sprintf("clients are fine: a consumer of %q reads the %d new messages of each partition, none of the old", t, MessagesPerPartition), 20*time.Second, false, func() (bool, string) {
		return e.readsOnly(t, len(assign), "new", MessagesPerPartition)
	})
	e.observe(fmt.Sprintf("DescribeLogDirs on broker %d lists only the live logs of %q, not the strays", b, t), 10*time.Second, true, func() (bool, string) {
		ds, err := e.kc.Admin().DescribeBrokerLogDirs(e.ctx, b, nil)
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, d := range ds {
			n += len(d.Topics[t])
		}
		return n == len(assign), fmt.Sprintf("DescribeLogDirs of broker %d: %d partitions of %q", b, n, t)
	})
}

// strayLogsNext is the report's next step: the -stray directories left on
// broker b's disks, and the commands that name and quarantine them.
func (e *env) strayLogsNext(b int32) string {
	t := e.t
	var bytes int64
	strays := e.strayDirs(b, t)
	for _, s := range strays {
		bytes += dirBytes(s)
	}
	dirs := make([]string, len(strays))
	for i, s := range strays {
		dirs[i] = filepath.Base(s)
	}
	return fmt.Sprintf("clients see nothing wrong; broker %d's disks hold %d -stray directories of %q (%s, %d bytes on disk) that Kafka never deletes. %s names them; %s moves them into a quarantine while the brokers run (`kremedy segments restore` undoes it)",
		b, len(strays), t, strings.Join(dirs, ", "), bytes, e.diagnoseNext(), e.strayCleanupNext(false))
}
