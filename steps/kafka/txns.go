package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kremedy/kremedy/steps/ports"
)

var _ ports.Transactions = (*Client)(nil)

// Transactions asks every broker which transactional ids use the
// producer ids (ListTransactions, Kafka 3.0+), then their coordinators for
// each (DescribeTransactions). Any broker or coordinator that did not
// answer makes the whole answer an error: a transaction it holds would be
// missing and its partitions' open transactions called hanging.
func (c *Client) Transactions(ctx context.Context, producerIDs []int64) (map[int64]ports.TxnState, error) {
	out := map[int64]ports.TxnState{}
	if len(producerIDs) == 0 {
		return out, nil
	}
	if err := c.knowsListTransactions(ctx); err != nil {
		return nil, err
	}
	listed, err := askAll(ctx, func() (kadm.ListedTransactions, error) { return c.adm.ListTransactions(ctx, producerIDs, nil) })
	if err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
	}
	// ListTransactions answers only from the transaction log partitions
	// some broker leads: with one offline, a transactional id it holds is
	// missing without an error, and its producer's open transaction would
	// be called hanging.
	if err := c.txnLogLed(ctx); err != nil {
		return nil, err
	}
	ids := listed.TransactionalIDs()
	if len(ids) == 0 {
		return out, nil
	}
	described, err := c.adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("describe transactions: %w", err)
	}
	for _, id := range ids {
		l := listed[id]
		if !slices.Contains(producerIDs, l.ProducerID) { // an old broker ignores the filter
			continue
		}
		d, ok := described[id]
		switch {
		case !ok:
			return nil, fmt.Errorf("describe transactions: no answer for %q", id)
		case d.Err != nil:
			return nil, fmt.Errorf("describe transactions: %q: %s", id, kerrName(d.Err))
		case d.ProducerID != l.ProducerID:
			continue // the id took a new producer id since it was listed: the one asked about is not its
		}
		st := ports.TxnState{TxnID: id, State: d.State, ProducerEpoch: d.ProducerEpoch, TimeoutMillis: d.TimeoutMillis, Partitions: map[string][]int32{}}
		for t, ps := range d.Topics {
			for p := range ps {
				st.Partitions[t] = append(st.Partitions[t], p)
			}
			slices.Sort(st.Partitions[t])
		}
		out[l.ProducerID] = st
	}
	return out, nil
}

// txnLogLed is an error naming each __transaction_state partition without a
// leader (no such topic: no transaction was ever begun, nothing is missing).
func (c *Client) txnLogLed(ctx context.Context) error {
	const txnLog = "__transaction_state"
	md, err := c.adm.Metadata(ctx, txnLog)
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", txnLog, err)
	}
	td, ok := md.Topics[txnLog]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	if td.Err != nil {
		return fmt.Errorf("metadata of %s: %s", txnLog, kerrName(td.Err))
	}
	var leaderless []string
	for _, p := range td.Partitions.Sorted() {
		if p.Leader < 0 {
			leaderless = append(leaderless, fmt.Sprintf("%s-%d", txnLog, p.Partition))
		}
	}
	if len(leaderless) > 0 {
		return fmt.Errorf("transaction log partitions %s have no leader: the coordinators of the transactional ids they hold cannot answer, so a transaction missing from ListTransactions may be one of theirs. Bring those partitions back first (they may be offline with the same brokers), then run this again", strings.Join(leaderless, ", "))
	}
	return nil
}

// knowsListTransactions is an error naming the brokers that do not answer
// ListTransactions (KIP-664, Kafka 3.0+): without it no coordinator can be
// asked which transactional id uses a producer id.
func (c *Client) knowsListTransactions(ctx context.Context) error {
	return c.needVersion(ctx, kmsg.ListTransactions.Int16(), 0, "do not answer ListTransactions (it came with Kafka 3.0, KIP-664)")
}
