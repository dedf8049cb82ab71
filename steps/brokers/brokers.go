package brokers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Registered lists the broker ids in /brokers/ids, sorted.
func Registered(ctx context.Context, zk ports.ZooKeeper) ([]int32, error) {
	kids, err := zk.Children(ctx, kafkazk.BrokerIDsPath)
	if err != nil {
		if zk.IsNoNode(err) {
			return nil, nil
		}
		return nil, err
	}
	var ids []int32
	for _, k := range kids {
		var id int32
		if _, err := fmt.Sscanf(k, "%d", &id); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Controller returns the active controller id, -1 when none.
func Controller(ctx context.Context, zk ports.ZooKeeper) (int32, error) {
	b, _, err := zk.Get(ctx, kafkazk.ControllerPath)
	if err != nil {
		if zk.IsNoNode(err) {
			return -1, nil
		}
		return -1, err
	}
	var z kafkazk.ControllerZNode
	if err := kafkazk.DecodeZNode(zk.Chroot()+kafkazk.ControllerPath, b, &z); err != nil {
		return -1, err
	}
	return z.BrokerID, nil
}

// Registration reads broker id's registration: its listener and the
// ZooKeeper session that owns the ephemeral znode (a new broker process
// registers with a new session). ok is false when it is not registered.
func Registration(ctx context.Context, zk ports.ZooKeeper, id int32) (reg kafkazk.BrokerRegistration, session int64, ok bool, err error) {
	b, st, err := zk.Get(ctx, fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, id))
	if err != nil {
		if zk.IsNoNode(err) {
			return reg, 0, false, nil
		}
		return reg, 0, false, err
	}
	if err := kafkazk.DecodeZNode(zk.Chroot()+kafkazk.BrokerIDsPath, b, &reg); err != nil {
		return reg, st.EphemeralOwner, true, err
	}
	return reg, st.EphemeralOwner, true, nil
}

// Addr is broker id's Kafka listener from its registration, else fallback
// (what an earlier read or the inventory knows).
func Addr(ctx context.Context, zk ports.ZooKeeper, id int32, fallback string) string {
	reg, _, ok, err := Registration(ctx, zk, id)
	if err != nil || !ok {
		return fallback
	}
	return reg.Addr()
}

// HostIDs lists the inventory's broker ids, sorted.
func HostIDs(t ports.Target) []int32 {
	var ids []int32
	for _, h := range t.Hosts {
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	return ids
}

// ExitStatus extracts a remote command's exit status, if err carries one.
func ExitStatus(err error) (int, bool) {
	var es interface{ ExitStatus() int }
	if errors.As(err, &es) {
		return es.ExitStatus(), true
	}
	return 0, false
}

// WaitRegistered waits (a watch) until every broker of want is registered.
func WaitRegistered(ctx context.Context, zk ports.ZooKeeper, want []int32, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := zk.WaitChildren(wctx, kafkazk.BrokerIDsPath, func(kids []string) bool {
		for _, id := range want {
			if !slices.Contains(kids, fmt.Sprint(id)) {
				return false
			}
		}
		return true
	})
	if err != nil {
		reg, _ := Registered(ctx, zk)
		return fmt.Errorf("%w: not every broker registered: %s of %s after %s", ports.ErrCheckFailed, fmt.Sprint(reg), fmt.Sprint(want), timeout)
	}
	return nil
}
