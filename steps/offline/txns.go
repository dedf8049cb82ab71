package offline

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// txnRecheck is how long a transaction seen hanging is given before it is
// read again: a coordinator ending a transaction writes its markers within
// milliseconds, so one still without its marker then hangs.
const txnRecheck = 2 * time.Second

// openTxns reads the producers with a transaction open on t's elected
// partitions and asks their coordinators about each (kafka-transactions.sh
// find-hanging's test, without its wait of transaction.max.timeout.ms):
// a transaction the coordinator no longer has ongoing on the partition
// will never get its marker, and holds the partition's last stable offset
// back for good. One seen hanging is read again txnRecheck later before it
// counts. It returns the report's lines and the step's checks: a hanging
// transaction fails its check (kremedy aborts nothing).
func openTxns(ctx context.Context, env *steps.Env, t string, parts []int32, boot string) ([]string, []steps.Check) {
	name := "open transactions on " + t
	prods, err := env.Kafka.Producers(ctx, t, parts, nil)
	if err != nil {
		return nil, []steps.Check{{Name: name, OK: true, Detail: "not checked: " + err.Error() + "; run kafka-transactions.sh find-hanging --broker-id N on each leader"}}
	}
	open := slices.DeleteFunc(prods, func(pu ports.ProducerUse) bool { return pu.TxnStart < 0 })
	if len(open) == 0 {
		return nil, []steps.Check{{Name: name, OK: true, Detail: "no producer has a transaction open on the partitions elected (DescribeProducers)"}}
	}
	tx, ok := env.Kafka.(ports.Transactions)
	if !ok {
		return unjudged(t, open, boot, "this Kafka port cannot ask coordinators"), []steps.Check{{Name: name, OK: true, Detail: "coordinators not asked; kafka-transactions.sh find-hanging --broker-id N lists the hanging ones"}}
	}
	why, err := hanging(ctx, tx, t, open)
	if err != nil {
		return unjudged(t, open, boot, err.Error()), []steps.Check{{Name: name, OK: true, Detail: "coordinators not asked: " + err.Error() + "; kafka-transactions.sh find-hanging --broker-id N lists the hanging ones"}}
	}
	var unsure error // the re-read failed: those seen hanging once are not judged
	if len(why) > 0 {
		unsure = recheck(ctx, env, tx, t, parts, why)
	}
	var lines []string
	var checks []steps.Check
	for _, pu := range open {
		w, hangs := why[txnKey{pu.Partition, pu.ProducerID, pu.TxnStart}]
		if hangs && unsure != nil {
			lines = append(lines, fmt.Sprintf("producer %d's transaction on %s-%d, open since offset %d, was seen hanging once (%s), but the re-read %s later failed (%v), so it is not judged: run kafka-transactions.sh --bootstrap-server %s find-hanging --broker-id N on the partition's leader, and if it lists it, abort it: kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --start-offset %d",
				pu.ProducerID, t, pu.Partition, pu.TxnStart, w, txnRecheck, unsure, boot, boot, t, pu.Partition, pu.TxnStart))
			continue
		}
		if !hangs {
			lines = append(lines, fmt.Sprintf("producer %d has a transaction open on %s-%d since offset %d; its coordinator has it in progress: not hanging, it ends when its producer commits or aborts it, or when the coordinator aborts it at its timeout", pu.ProducerID, t, pu.Partition, pu.TxnStart))
			continue
		}
		line := fmt.Sprintf("producer %d's transaction on %s-%d, open since offset %d, HANGS: %s. Until it is aborted the partition's last stable offset stays at %d: read_committed consumers read nothing past it, and neither compaction nor retention goes past it. Abort it (it writes an abort marker: the transaction's records on this partition are never read by read_committed consumers): kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --start-offset %d",
			pu.ProducerID, t, pu.Partition, pu.TxnStart, w, pu.TxnStart, boot, t, pu.Partition, pu.TxnStart)
		lines = append(lines, line)
		checks = append(checks, steps.Check{Name: fmt.Sprintf("no hanging transaction of producer %d on %s-%d (kremedy aborts nothing)", pu.ProducerID, t, pu.Partition), Detail: line})
	}
	judged := fmt.Sprintf("%d hanging (seen twice %s apart without their coordinator)", len(why), txnRecheck)
	if unsure != nil {
		judged = fmt.Sprintf("%d seen hanging once and not judged: the re-read failed (%v)", len(why), unsure)
	}
	checks = append(checks, steps.Check{Name: name, OK: true, Detail: fmt.Sprintf("%d transactions open on the partitions elected (DescribeProducers), %s", len(open), judged)})
	return lines, checks
}

// recheck reads the open transactions again txnRecheck later and keeps in
// why only those still hanging (a transaction ending as it was read has
// its markers a moment later). On an error why is left as it was.
func recheck(ctx context.Context, env *steps.Env, tx ports.Transactions, t string, parts []int32, why map[txnKey]string) error {
	if err := env.Sleep(ctx, txnRecheck); err != nil {
		return err
	}
	again, err := env.Kafka.Producers(ctx, t, parts, nil)
	if err != nil {
		return err
	}
	still, err := hanging(ctx, tx, t, again)
	if err != nil {
		return err
	}
	for k := range why {
		if _, ok := still[k]; !ok {
			delete(why, k)
		}
	}
	return nil
}

// txnKey is one open transaction: its partition, producer and start.
type txnKey struct {
	partition int32
	producer  int64
	start     int64
}

// hanging asks the coordinators about the open transactions and says why
// each hanging one hangs.
func hanging(ctx context.Context, tx ports.Transactions, t string, open []ports.ProducerUse) (map[txnKey]string, error) {
	var ids []int64
	for _, pu := range open {
		if pu.TxnStart >= 0 && !slices.Contains(ids, pu.ProducerID) {
			ids = append(ids, pu.ProducerID)
		}
	}
	states, err := tx.Transactions(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := map[txnKey]string{}
	for _, pu := range open {
		if pu.TxnStart < 0 {
			continue
		}
		st, found := states[pu.ProducerID]
		if w := hangs(t, pu, st, found); w != "" {
			out[txnKey{pu.Partition, pu.ProducerID, pu.TxnStart}] = w
		}
	}
	return out, nil
}

// hangs says why pu's open transaction on t hangs, given its coordinator's
// state of the producer; "" when the coordinator has it in progress on
// this partition (ongoing, or ending with this partition's marker still to
// write, whatever the epochs).
func hangs(t string, pu ports.ProducerUse, st ports.TxnState, found bool) string {
	if !found {
		return fmt.Sprintf("no transactional id uses producer %d any more (ListTransactions): no coordinator will write this partition's marker", pu.ProducerID)
	}
	in := slices.Contains(st.Partitions[t], pu.Partition)
	switch st.State {
	case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		// No epoch comparison, as Kafka's find-hanging: a coordinator
		// ending a transaction bumps the epoch (transaction version 2,
		// and timeouts and fencing in version 1), and its marker of the
		// higher epoch still ends the one open on the partition.
		if !in {
			return fmt.Sprintf("its coordinator's transaction %q (%s) does not include %s-%d: the marker it writes goes elsewhere", st.TxnID, st.State, t, pu.Partition)
		}
		return ""
	}
	return fmt.Sprintf("its coordinator has transaction %q %s (producer epoch %d), so it writes no marker to %s-%d", st.TxnID, st.State, st.ProducerEpoch, t, pu.Partition)
}

// unjudged are the report's lines of open transactions no coordinator was
// asked about.
func unjudged(t string, open []ports.ProducerUse, boot, why string) []string {
	var out []string
	for _, pu := range open {
		out = append(out, fmt.Sprintf("producer %d has a transaction open on %s-%d since offset %d (whether it hangs was not checked: %s): if its coordinator lost it, abort it: kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition %d --start-offset %d",
			pu.ProducerID, t, pu.Partition, pu.TxnStart, why, boot, t, pu.Partition, pu.TxnStart))
	}
	return out
}
