package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
const offlineSummary = "(field 2026c §2) T (3 partitions, replication factor 3 on brokers 1-3, unclean.leader.election.enable=false) written by an acks=1 producer while brokers 1 and 2 are stopped in turn, so that the replicas' logs diverge; broker 3, the last leader, killed with its host's sshd; brokers 1 and 2 started: every partition has no leader, the longest live log (broker 2) is not the first live replica in assignment order for partitions 0 and 2, and group offline-readers committed past broker 2's end; a transaction on partition 1 whose record reached broker 2 and whose commit marker only broker 3 hangs on broker 2 once elected. Needs 4 brokers (--brokers 4): broker 4 keeps __consumer_offsets and __transaction_state"

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
	// Txn is the transaction left hanging on the longest live log: its
	// record reached broker 2 before it stopped, its commit marker only
	// the last leader.
	Txn OfflineTxn `json:"txn"`
}

// OfflineTxn is offline-partition's hanging transaction: a transactional
// producer (TxnID) wrote one record at Start on Partition while brokers 2
// and 3 were in its ISR, broker 2 was stopped, and the commit's marker
// went to broker 3 alone. Once broker 2 is elected it holds the
// transaction open with no marker to come: it hangs.
type OfflineTxn struct {
	TxnID     string `json:"txn_id"`
	Partition int32  `json:"partition"`
	Start     int64  `json:"start"`
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
	tx, err := e.txnProducer(keeper, c, led)
	if err != nil {
		return err
	}
	defer tx.Close()
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
		if ph.stop == b {
			if err := e.txnOpen(tx, led); err != nil {
				return err
			}
		}
		if ph.stop != 0 {
			if err := e.brokerCmd(ph.stop, "stop"); err != nil {
				return err
			}
			e.did("stopped broker %d (controlled shutdown): its replicas keep the log they have", ph.stop)
		}
		if ph.stop == b {
			if err := e.txnCommit(tx, led, c); err != nil {
				return err
			}
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
	led.Ends[b][led.Txn.Partition]++ // the transaction's record
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
	return e.internalOn("__consumer_offsets", "group commits", keeper, last)
}

// internalOn puts internal topic off's partitions on keeper first and
// last second (at most one replica moved each), so that what what names
// survives the loss of the other brokers.
func (e *env) internalOn(off, what string, keeper, last int32) error {
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
	// Done when no move is in flight and keeper's metadata shows each
	// partition on exactly its new replicas, every one in the ISR: a
	// listing read just after the request can miss the move, and a move
	// still copying when a replica of the old set stops never completes.
	ok := e.observe(fmt.Sprintf("%s's partitions all have broker %d as a replica, no reassignment in flight", off, keeper), 60*time.Second, false, func() (bool, string) {
		r, err := e.kc.Reassigning(e.ctx, off, nil)
		if err != nil {
			return false, err.Error()
		}
		if len(r) > 0 {
			return false, fmt.Sprintf("in flight: %v", r)
		}
		v, err := e.kc.BrokerView(e.ctx, keeper, off)
		if err != nil {
			return false, err.Error()
		}
		for p, reps := range want {
			pv := v.Topics[off].Partitions[p]
			if !slices.Equal(pv.Replicas, reps) || len(pv.ISR) != len(reps) {
				return false, fmt.Sprintf("%s-%d: replicas %v, isr %v, want %v all in sync", off, p, pv.Replicas, pv.ISR, reps)
			}
		}
		return true, "moved, every replica in sync"
	})
	if !ok {
		return e.verdict()
	}
	e.did("moved %s onto broker %d first (%v): %s survive the loss of the topic's brokers", off, keeper, want, what)
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
	want := map[int32]int64{}
	for p := range led.Assign {
		want[int32(p)] = int64(len(led.Acked[int32(p)]))
	}
	if led.Txn.Start >= 0 && led.Txn.TxnID != "" {
		want[led.Txn.Partition] += 2 // the transaction's record and its marker
	}
	e.observe(fmt.Sprintf("phase %d: %d records per partition acknowledged (acks=1) and replicated to the ISR", phase, n), 30*time.Second, false, func() (bool, string) {
		ends, err := e.kc.EndOffsets(e.ctx, e.t)
		if err != nil {
			return false, err.Error()
		}
		if !maps.Equal(ends, want) {
			return false, fmt.Sprintf("high watermarks %v, want %v", ends, want)
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

// txnPartition is the partition offline-partition leaves a hanging
// transaction on: led by broker 2 (its first replica) while broker 1 is
// down, so that brokers 2 and 3 are its ISR when the record is written.
const txnPartition = 1

// txnProducer is a transactional producer for the topic, with
// __transaction_state created (a FindCoordinator for its id) and moved
// onto keeper and last first: its coordinator outlives brokers 1-3.
func (e *env) txnProducer(keeper, last int32, led *OfflineLedger) (*kgo.Client, error) {
	id := "offline-txn-" + e.t
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	for {
		err := e.kc.Admin().FindTxnCoordinators(ctx, id).Error()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("find the transaction coordinator of %q (creates __transaction_state): %w", id, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	if err := e.internalOn("__transaction_state", "transaction coordinators", keeper, last); err != nil {
		return nil, err
	}
	led.Txn = OfflineTxn{TxnID: id, Partition: txnPartition, Start: -1}
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.l.State.Config.Bootstrap()...), kgo.TransactionalID(id),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(5 * time.Minute)}, e.l.KafkaOpts()...)...)
}

// txnOpen begins the transaction and writes its one record (acks=all: on
// brokers 2 and 3, the partition's ISR while broker 1 is down).
func (e *env) txnOpen(tx *kgo.Client, led *OfflineLedger) error {
	if err := tx.BeginTransaction(); err != nil {
		return err
	}
	r, err := tx.ProduceSync(e.ctx, &kgo.Record{Topic: e.t, Partition: led.Txn.Partition, Value: []byte("transaction " + led.Txn.TxnID)}).First()
	if err != nil {
		return fmt.Errorf("the transaction's record to %s-%d: %w", e.t, led.Txn.Partition, err)
	}
	led.Txn.Start = r.Offset
	e.did("transaction %q open: its record at %s-%d offset %d, on brokers 2 and 3", led.Txn.TxnID, e.t, led.Txn.Partition, r.Offset)
	return nil
}

// txnCommit commits the transaction once broker 2 is down: its marker
// goes to the last leader alone.
func (e *env) txnCommit(tx *kgo.Client, led *OfflineLedger, last int32) error {
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit transaction %q: %w", led.Txn.TxnID, err)
	}
	e.did("committed transaction %q with broker 2 stopped: its marker is on broker %d only, so broker 2's copy of %s-%d holds the transaction open", led.Txn.TxnID, last, e.t, led.Txn.Partition)
	return nil
}
