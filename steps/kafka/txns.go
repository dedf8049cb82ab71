package kafka

import (
	"context"
	"fmt"
	"slices"

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
	listed, err := c.adm.ListTransactions(ctx, producerIDs, nil)
	for try := 1; try < 4 && unissued(err) && ctx.Err() == nil; try++ {
		listed, err = c.adm.ListTransactions(ctx, producerIDs, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
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
