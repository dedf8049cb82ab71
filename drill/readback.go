package drill

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadBack reads topic from its start with a client of its own (no group)
// until it has been idle for a few polls, and counts the distinct records
// the drill's customers wrote (by sequence number) and the others: a count
// independent of the traffic's own ledger.
func ReadBack(ctx context.Context, bootstrap []string, topic string, opts ...kgo.Opt) (ours, other int, err error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	seen := map[int64]bool{}
	for idle := 0; idle < 6 && ctx.Err() == nil; {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if seq, ok := parseValue(r.Value); ok {
				seen[seq] = true
			} else {
				other++
			}
		})
		if n == 0 {
			idle++
		}
	}
	return len(seen), other, ctx.Err()
}
