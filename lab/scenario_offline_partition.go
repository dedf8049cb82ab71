package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/steps/kafka"
)

// Offline-partition's phases: records written per partition while all
// three replicas' brokers run, after the first stopped, after the second.
const (
	offlinePhase1 = 20
	offlinePhase2 = 15
	offlinePhase3 = 10
	// OfflineGroup is the consumer group that read (and committed) every
	// record the last leader acknowledged.
	OfflineGroup = "offline-readers"
)

func init() {
	register(77, "offline-partition", onReady((*env).offlinePartition), offlineSummary)
}

// offlineSummary is what offline-partition and its KRaft twin do.
const offlineSummary = "(field 2026c §2) T (3 partitions, replication factor 3 on brokers 1-3, unclean.leader.election.enable=false) written by an acks=1 producer while brokers 1 and 2 are stopped in turn, so that the replicas' logs diverge; broker 3, the last leader, killed with its host's sshd; brokers 1 and 2 started: every partition has no leader, the longest live log (broker 2) is not the first live replica in assignment order for partitions 0 and 2, and group offline-readers committed past broker 2's end. Needs 4 brokers (--brokers 4): broker 4 keeps __consumer_offsets"

// OfflineLedger is what offline-partition's acks=1 producer was
// acknowledged, kept in the lab directory (OfflineLedgerPath) so that a
// test can compare a read-back of the topic against it.
type OfflineLedger struct {
	Topic string `json:"topic"`
	// Acked[p] maps each acknowledged record's value to its offset.
	Acked map[int32]map[string]int64 `json:"acked"`
	// Ends[b][p] is the log end offset each replica's broker b holds.
	Ends      map[int32]map[int32]int64 `json:"ends"`
	Committed map[int32]int64           `json:"committed"` // OfflineGroup's offsets
	Assign    [][]int32                 `json:"assign"`
	Dead      int32                     `json:"dead"` // the last leader, killed
}

// OfflineLedgerPath is where offline-partition keeps topic's ledger.
func (l *Lab) OfflineLedgerPath(topic string) string {
	return l.path("offline-partition-" + topic + ".json")
}

// ReadOfflineLedger reads offline-partition's ledger of topic.
func (l *Lab) ReadOfflineLedger(topic string) (*OfflineLedger, error) {
	b, err := os.ReadFile(l.OfflineLedgerPath(topic))
	if err != nil {
		return nil, err
	}
	var o OfflineLedger
	return &o, json.Unmarshal(b, &o)
}

// offlinePartition is ranked feature 2's rehearsal (field-2026c.md).
func (e *env) offlinePartition(ids []int32) error {
	if len(ids) < 4 {
		return fmt.Errorf("%w: offline-partition needs 4 brokers (brokers 1-3 hold the topic and fail; the 4th keeps __consumer_offsets): start a lab with `kremedy lab up --brokers 4 --dir OTHER`", ErrWrongLab)
	}
	a, b, c, keeper := ids[0], ids[1], ids[2], ids[3]
	assign := [][]int32{{a, b, c}, {b, c, a}, {c, a, b}}
	e.rep.Assign, e.rep.Victim = assign, c
	led := &OfflineLedger{Topic: e.t, Acked: map[int32]map[string]int64{}, Ends: map[int32]map[int32]int64{}, Assign: assign, Dead: c}
	if _, err := e.kc.CreateTopic(e.ctx, e.t, assign, 0, 0, map[string]string{"unclean.leader.election.enable": "false", "min.insync.replicas": "1"}); err != nil {
		return err
	}
	if err := e.waitServed(e.t, len(assign)); err != nil {
		return err
	}
	e.did("created %q: partitions %v on brokers %d, %d, %d, unclean.leader.election.enable=false, min.insync.replicas=1", e.t, assign, a, b, c)
	if err := e.offsetsOn(keeper, c); err != nil {
		return err
	}
	pr, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 30*time.Second, append(e.l.KafkaOpts(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())...)
	if err != nil {
		return err
	}
	defer pr.Close()
	for i, ph := range []struct {
		n    int
		stop int32
	}{{offlinePhase1, a}, {offlinePhase2, b}, {offlinePhase3, 0}} {
		if err := e.offlineWrite(pr, led, i+1, ph.n); err != nil {
			return err
		}
		if ph.stop != 0 {
			if err := e.brokerCmd(ph.stop, "stop"); err != nil {
				return err
			}
			e.did("stopped broker %d (controlled shutdown): its replicas keep the log they have", ph.stop)
		}
	}
	return e.offlineEnd(led, a, b, c, keeper)
}

// offlineEnd commits the group past what will survive, kills the last
// leader and its host's sshd, starts the others and checks the symptoms.
func (e *env) offlineEnd(led *OfflineLedger, a, b, c, keeper int32) error {
	ends, err := e.kc.EndOffsets(e.ctx, e.t)
	if err != nil {
		return err
	}
	led.Committed = ends
	if err := e.commit(ends); err != nil {
		return err
	}
	e.did("group %s committed %v on %q: it read every record broker %d acknowledged", OfflineGroup, ends, e.t, c)
	for _, pid := range []int{e.l.BrokerPID(int(c)), e.l.SSHDPID(int(c))} {
		if pid > 0 {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return fmt.Errorf("SIGKILL pid %d of broker %d's host: %w", pid, c, err)
			}
		}
	}
	e.did("killed broker %d, the last leader of every partition, and its host's sshd with SIGKILL: its host no longer answers", c)
	if err := e.record(Applied{DownBroker: c}); err != nil {
		return err
	}
	if !e.observe(fmt.Sprintf("broker %d no longer serves (ZooKeeper session expired, or fenced by the KRaft controller)", c), 60*time.Second, false, func() (bool, string) {
		live, err := e.liveBrokers()
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(live, c), fmt.Sprintf("serving: %v", live)
	}) {
		return e.verdict()
	}
	for _, id := range []int32{a, b} {
		if err := e.brokerCmd(id, "start"); err != nil {
			return err
		}
	}
	e.did("started brokers %d and %d again: neither is in any ISR", a, b)
	led.Ends = map[int32]map[int32]int64{a: {}, b: {}, c: {}}
	for p := range led.Assign {
		led.Ends[a][int32(p)], led.Ends[b][int32(p)], led.Ends[c][int32(p)] = offlinePhase1, offlinePhase1+offlinePhase2, ends[int32(p)]
	}
	if err := e.saveLedger(led); err != nil {
		return err
	}
	e.offlineSymptoms(keeper, led)
	e.rep.Next = fmt.Sprintf("`kremedy diagnose` names the offline partitions and each replica's log end read from its disk; `kremedy run offline-partitions` elects the longest live log (broker %d), not Kafka's first live replica (broker %d for partitions 0 and 2); the acks are in %s", b, a, e.l.OfflineLedgerPath(e.t))
	return e.verdict()
}

// offsetsOn puts __consumer_offsets' partitions on keeper first and last
// second (at most one replica moved; tiny), so that commits survive the
// loss of the other three brokers and, while last alone leads the topic,
// still meet the lab's min.insync.replicas=2 (a commit short of it fails
// with COORDINATOR_NOT_AVAILABLE).
func (e *env) offsetsOn(keeper, last int32) error {
	if err := e.commit(map[int32]int64{0: 0}); err != nil { // creates __consumer_offsets
		return err
	}
	const off = "__consumer_offsets"
	v, err := e.kc.BrokerView(e.ctx, keeper, off)
	if err != nil {
		return err
	}
	want := map[int32][]int32{}
	for p, pv := range v.Topics[off].Partitions {
		r := []int32{keeper, last}
		for _, x := range pv.Replicas {
			if !slices.Contains(r, x) && len(r) < len(pv.Replicas) {
				r = append(r, x)
			}
		}
		want[p] = r
	}
	errs, err := e.kc.Reorder(e.ctx, off, want)
	if err != nil {
		return err
	}
	for p, err := range errs {
		if err != nil {
			return fmt.Errorf("move %s-%d onto broker %d: %w", off, p, keeper, err)
		}
	}
	ok := e.observe(fmt.Sprintf("%s's partitions all have broker %d as a replica, no reassignment in flight", off, keeper), 60*time.Second, false, func() (bool, string) {
		r, err := e.kc.Reassigning(e.ctx, off, nil)
		if err != nil {
			return false, err.Error()
		}
		return len(r) == 0, fmt.Sprintf("in flight: %v", r)
	})
	if !ok {
		return e.verdict()
	}
	e.did("moved %s onto broker %d first (%v): group commits survive the loss of the topic's brokers", off, keeper, want)
	return nil
}

// commit commits OfflineGroup's offsets on the topic, read again every
// 500 ms for up to 3 minutes while the coordinator is not available: the
// first commit creates __consumer_offsets (its 50 partitions and their
// coordinators loading took over a minute on a loaded 2-core machine).
func (e *env) commit(offs map[int32]int64) error {
	var o kadm.Offsets
	for p, at := range offs {
		o.Add(kadm.Offset{Topic: e.t, Partition: p, At: at, LeaderEpoch: -1})
	}
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	for {
		r, err := e.kc.Admin().CommitOffsets(ctx, OfflineGroup, o)
		if err == nil {
			err = r.Error()
		}
		if err == nil || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("commit %s's offsets: %w", OfflineGroup, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// offlineWrite writes n records to every partition with the acks=1
// producer, keeping each acknowledged one, then waits until the followers
// in the ISR have them (the high watermark reaches the leader's end), so
// that the broker stopped next holds exactly what was acknowledged.
func (e *env) offlineWrite(pr *kafka.Client, led *OfflineLedger, phase, n int) error {
	for p := range led.Assign {
		if led.Acked[int32(p)] == nil {
			led.Acked[int32(p)] = map[string]int64{}
		}
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("phase %d record %d of %s-%d", phase, i, e.t, p)
			r, err := pr.Kgo().ProduceSync(e.ctx, &kgo.Record{Topic: e.t, Partition: int32(p), Value: []byte(v)}).First()
			if err != nil {
				return fmt.Errorf("phase %d: write to %s-%d: %w", phase, e.t, p, err)
			}
			led.Acked[int32(p)][v] = r.Offset
		}
	}
	want := int64(offlinePhase1)
	if phase >= 2 {
		want += offlinePhase2
	}
	if phase == 3 {
		want += offlinePhase3
	}
	e.observe(fmt.Sprintf("phase %d: %d records per partition acknowledged (acks=1) and replicated to the ISR", phase, n), 30*time.Second, false, func() (bool, string) {
		ends, err := e.kc.EndOffsets(e.ctx, e.t)
		if err != nil {
			return false, err.Error()
		}
		for p := range led.Assign {
			if ends[int32(p)] != want {
				return false, fmt.Sprintf("high watermarks %v, want %d", ends, want)
			}
		}
		return true, fmt.Sprintf("high watermarks %v", ends)
	})
	e.did("phase %d: wrote %d records to each partition with an acks=1 producer", phase, n)
	return e.verdict()
}

func (e *env) saveLedger(led *OfflineLedger) error {
	b, err := json.MarshalIndent(led, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.l.Dir, filepath.Base(e.l.OfflineLedgerPath(e.t))), b, 0o644)
}

// offlineSymptoms: every partition without a leader, in a broker's
// metadata.
func (e *env) offlineSymptoms(keeper int32, led *OfflineLedger) {
	e.observe(fmt.Sprintf("every partition of %q has no leader (its ISR holds only dead broker %d)", e.t, led.Dead), 60*time.Second, false, func() (bool, string) {
		v, err := e.kc.BrokerView(e.ctx, keeper, e.t)
		if err != nil {
			return false, err.Error()
		}
		parts := v.Topics[e.t].Partitions
		for p := range led.Assign {
			if pv, ok := parts[int32(p)]; !ok || !pv.IsOffline() {
				return false, isrSummary(parts)
			}
		}
		return true, isrSummary(parts)
	})
}
