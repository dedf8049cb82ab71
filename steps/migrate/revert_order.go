package migrate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// newestFirst orders the brokers for the revert's back-to-zookeeper roll:
// the process registered last (/brokers/ids/N's timestamp) restarts first,
// the ZooKeeper controller's rule of going last set aside.
//
// Why: a broker in migration mode switches its broker-to-controller
// channels from the KRaft controller to the ZooKeeper controller once
// /controller is reset, rebuilding each channel's network client
// (NodeToControllerRequestThread.maybeResetNetworkClient, Kafka 3.9).
// Seen on the lab (3.9.2): a broker whose process had started under the
// KRaft controller — its channels rebuilt together at its start — died on
// that second rebuild ("A metric named … alter-partition-metrics already
// exists", the thread stopped for good), so it never sent AlterPartition
// again: partitions it led stayed under-replicated once a follower
// restarted, and the roll's health gate waited for ever. The processes
// started latest are the ones started under the KRaft controller; rolled
// first, they come back in ZooKeeper mode with fresh channels before any
// follower of a partition they lead restarts. A broker whose
// registration cannot be read keeps its place after them.
func newestFirst(ctx context.Context, env *steps.Env) ([]int32, string) {
	type reg struct {
		id int32
		ts int64
	}
	var regs []reg
	for _, h := range env.Target.Hosts {
		b, _, err := env.ZK.Get(ctx, path.Join(kafkazk.BrokerIDsPath, strconv.Itoa(int(h.ID))))
		if err != nil {
			continue
		}
		var r kafkazk.BrokerRegistration
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		ts, err := strconv.ParseInt(r.Timestamp, 10, 64)
		if err != nil {
			continue
		}
		regs = append(regs, reg{h.ID, ts})
	}
	slices.SortStableFunc(regs, func(a, b reg) int { return cmp.Or(cmp.Compare(b.ts, a.ts), cmp.Compare(a.id, b.id)) })
	var ids []int32
	for _, r := range regs {
		ids = append(ids, r.id)
	}
	if len(ids) == 0 {
		return nil, ""
	}
	return ids, fmt.Sprintf("brokers %v restart newest process first (registered last first, the ZooKeeper controller's turn included): a broker started under the KRaft controller can lose its AlterPartition channel when it switches to the ZooKeeper controller (Kafka 3.9), so it goes before any follower of its partitions restarts", ids)
}
