package lab

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
)

// What the KRaft scenarios share (scenario_stray_logs.go and the others):
// the precondition, the quorum, and the disks as Kafka names them.

// onKRaft is withEnv with readyKRaft's precondition checked before body,
// which is given the brokers' ids.
func onKRaft(body func(e *env, ids []int32) error) play {
	return withEnv(func(e *env) error {
		ids, err := e.readyKRaft()
		if err != nil {
			return err
		}
		return body(e, ids)
	})
}

// readyKRaft is every KRaft scenario's precondition: the quorum has a
// leader and every voter is caught up, every lab broker is registered and
// unfenced, and the scenario's topic is not in the cluster. It waits a
// little for a node `lab up` has just restarted.
func (e *env) readyKRaft() ([]int32, error) {
	c := e.l.State.Config
	if c.Brokers < 2 {
		return nil, fmt.Errorf("%w: scenarios need at least 2 brokers (this lab has 1)", ErrWrongLab)
	}
	want := c.brokerIDs()
	var q ports.Quorum
	var st BrokerStates
	var err error
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	werr := waitFor(ctx, 250*time.Millisecond, func() bool {
		if q, err = e.quorum(); err != nil || !e.l.quorumHealthy(q) {
			return false
		}
		st, err = kraftBrokers(ctx, e.kc)
		return err == nil && slices.Equal(st.Unfenced, want)
	})
	if werr != nil {
		return nil, fmt.Errorf("%w: the lab is not healthy: quorum %s; unfenced brokers %v of %v (fenced %v; %v). Run `kremedy lab up --dir %s` first",
			ErrWrongLab, quorumLine(q, err, time.Now()), st.Unfenced, want, st.Fenced, err, e.l.Dir)
	}
	return want, e.topicAbsentKRaft(e.t)
}

// quorum asks the controllers (DescribeQuorum).
func (e *env) quorum() (ports.Quorum, error) {
	return e.kc.Quorum(e.ctx, e.l.State.Config.controllerAddrs())
}

// topicAbsentKRaft refuses a topic the cluster already has.
func (e *env) topicAbsentKRaft(t string) error {
	names, err := e.kc.ListTopics(e.ctx)
	if err != nil {
		return err
	}
	if slices.Contains(names, t) {
		return fmt.Errorf("%w: topic %q already exists in the lab; pick another --topic, or start from a clean lab (`kremedy lab down --dir %s --purge`)", ErrWrongLab, t, e.l.Dir)
	}
	return nil
}

// waitAbsent waits until no broker in ids lists t (a deletion has reached
// every broker's metadata image).
func (e *env) waitAbsent(t string, ids []int32) error {
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	return waitFor(ctx, 200*time.Millisecond, func() bool {
		for _, id := range ids {
			v, err := e.kc.BrokerView(ctx, id, t)
			if err != nil || v.Topics[t].Present() {
				return false
			}
		}
		return true
	})
}

// strayDir is a directory Kafka moved aside as stray:
// <topic>-<partition>.<uuid>-stray (UnifiedLog.logStrayDirName: the
// partition's directory name, a dot, a random UUID without dashes).
var strayDir = regexp.MustCompile(`^(.+)-(\d+)\.([0-9a-f]{32})-stray$`)

// strayDirs lists broker n's -stray directories of topic t, parsed as
// Kafka names them.
func (e *env) strayDirs(n int32, t string) []string {
	var out []string
	for _, ld := range e.l.LogDirs(int(n)) {
		ents, _ := os.ReadDir(ld)
		for _, de := range ents {
			if m := strayDir.FindStringSubmatch(de.Name()); de.IsDir() && m != nil && m[1] == t {
				out = append(out, filepath.Join(ld, de.Name()))
			}
		}
	}
	sort.Strings(out)
	return out
}

// strayPartition is the partition a -stray directory held ("" if the name
// is not a stray's).
func strayPartition(dir string) string {
	if m := strayDir.FindStringSubmatch(filepath.Base(dir)); m != nil {
		return m[2]
	}
	return ""
}

// dirBytes is the disk space the files under dir take (allocated blocks,
// as du counts them: Kafka preallocates its index files sparse, so their
// length says 10 MiB where the disk holds a few KiB).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				} else {
					n += fi.Size()
				}
			}
		}
		return nil
	})
	return n
}

// serverLogLine is the first line of broker n's server.log holding every
// needle ("" when none does).
func (e *env) serverLogLine(n int32, needles ...string) string {
	b, err := os.ReadFile(filepath.Join(e.l.BrokerDir(int(n)), "logs", "server.log"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, s := range needles {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// inEveryISR checks, in a survivor's metadata, that broker id is in the
// ISR of every partition of t it replicates.
func (e *env) inEveryISR(t string, id, asked int32) (bool, string) {
	v, err := e.kc.BrokerView(e.ctx, asked, t)
	if err != nil {
		return false, err.Error()
	}
	ok := true
	for _, pv := range v.Topics[t].Partitions {
		if slices.Contains(pv.Replicas, id) && !slices.Contains(pv.ISR, id) {
			ok = false
		}
	}
	return ok, fmt.Sprintf("broker %d's metadata: %s", asked, isrSummary(v.Topics[t].Partitions))
}

// readsOnly reads every partition of t and checks that each holds exactly
// want records, all of the generation prefix.
func (e *env) readsOnly(t string, parts int, generation string, want int) (bool, string) {
	var ev []string
	ok := true
	for p := int32(0); p < int32(parts); p++ {
		vals, err := kafka.ReadPartition(e.ctx, e.l.State.Config.Bootstrap(), t, p, e.l.KafkaOpts()...)
		if err != nil {
			return false, fmt.Sprintf("%s-%d: %v", t, p, err)
		}
		other := 0
		for _, v := range vals {
			if !strings.HasPrefix(v, generation+" ") {
				other++
			}
		}
		ok = ok && other == 0 && len(vals) == want
		ev = append(ev, fmt.Sprintf("%s-%d: %d records, %d not %q", t, p, len(vals), other, generation))
	}
	return ok, strings.Join(ev, "; ")
}

// fillAssign sets the report's assignment facts.
func (e *env) fillAssign(assign [][]int32) {
	e.rep.Assign = assign
	for p, reps := range assign {
		e.rep.Leaders[int32(p)] = reps[0]
		e.rep.Messages[int32(p)] = MessagesPerPartition
	}
}

// kraftVictim is the broker a KRaft scenario stops: the highest-numbered.
func kraftVictim(ids []int32) int32 { return ids[len(ids)-1] }

// diagnoseNext is what an operator runs next on a KRaft lab until a
// runbook acts on it.
func (e *env) diagnoseNext() string {
	return fmt.Sprintf("`kremedy diagnose --inventory %s`", e.l.InventoryPath())
}

// strayCleanupNext is the command that cleans the strays up (with
// unproven, the ones without partition.metadata too).
func (e *env) strayCleanupNext(unproven bool) string {
	set := ""
	if unproven {
		set = " --set unproven=true"
	}
	return fmt.Sprintf("`kremedy run stray-cleanup --inventory %s%s`", e.l.InventoryPath(), set)
}

// victimTopic is the KRaft scenarios' prologue: topic e.t created with
// replication factor 3 over ids and written to (the "old" messages), and
// the broker the scenario breaks (Report.Victim).
func (e *env) victimTopic(ids []int32) (assign [][]int32, victim int32, err error) {
	assign = assignment(ids)
	e.fillAssign(assign)
	if e.rep.OldID, err = e.createAndFill(e.t, assign, "old"); err != nil {
		return nil, 0, err
	}
	e.did("created %q (replicas %v, topic ID %s) and wrote %d messages per partition with acks=all", e.t, assign, e.rep.OldID, MessagesPerPartition)
	e.rep.Victim = kraftVictim(ids)
	return assign, e.rep.Victim, nil
}
