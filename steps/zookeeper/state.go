package zookeeper

import (
	"context"

	"github.com/kremedy/kremedy/steps"
)

var _ steps.StateReader = (*Conn)(nil)

// ReadState implements steps.StateReader with a pipelined Scan.
func (c *Conn) ReadState(ctx context.Context, topics ...string) (*steps.ClusterState, error) {
	snap, err := c.Scan(ctx, 0, topics...)
	if err != nil {
		return nil, err
	}
	out := &steps.ClusterState{Brokers: snap.Brokers, Controller: snap.Controller, Reads: snap.Reads, Errs: snap.Errs,
		Topics: make(map[string]*steps.TopicState, len(snap.Topics))}
	for name, t := range snap.Topics {
		out.Topics[name] = &steps.TopicState{
			Name: t.Name, Exists: t.Znode.Partitions != nil || !t.Stat.Ctime.IsZero() && t.Stat.Ctime.UnixMilli() != 0,
			Znode: t.Znode, Stat: t.Stat, States: t.States, Config: t.Config, PendingDelete: t.PendingDelete, Errs: t.Errs,
		}
	}
	return out, nil
}
