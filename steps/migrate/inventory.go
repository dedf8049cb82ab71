package migrate

import (
	"context"
	"fmt"
	"os"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps"
)

// artKRaftInventory is the cluster's KRaft inventory, written at finalize.
const artKRaftInventory = "kraft_inventory"

// kraftInventory writes, once the migration is finalized, the cluster's
// inventory as a KRaft cluster: the run's inventory with mode: kraft and no
// zookeeper section — the same hosts, SSH settings, log dirs, configs,
// clients and controllers. From then on ZooKeeper no longer describes the
// cluster, and every kremedy command needs this one.
type kraftInventory struct{}

// kraftOf is inv as its KRaft-mode cluster's inventory.
func kraftOf(inv *inventory.Inventory, run string) *inventory.Inventory {
	k := *inv
	k.Mode = inventory.ModeKRaft
	k.ZooKeeper = inventory.ZooKeeper{}
	k.Note = fmt.Sprintf("Written by kremedy's zk-to-kraft run %s at finalize, from %s:\nthe same cluster in KRaft mode (no zookeeper section). Use it from now on.", run, inv.Path)
	return &k
}

func (k *kraftInventory) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	path := env.Artifact(artKRaftInventory)
	if st.Phase != PhaseFinalized && !env.Preview() {
		return nil, fmt.Errorf("%w: the migration is not finalized (phase %s: %s); the KRaft inventory is written once ZooKeeper no longer describes the cluster", steps.ErrRefused, st.Phase, st.Why)
	}
	inv, err := inventory.Load(env.Inventory())
	if err != nil {
		return nil, fmt.Errorf("%w: the run's inventory %s: %v", steps.ErrRefused, env.Inventory(), err)
	}
	b, err := kraftOf(inv, env.RunID()).Marshal()
	if err != nil {
		return nil, err
	}
	if cur, err := os.ReadFile(path); err == nil && string(cur) == string(b) {
		return &steps.Plan{NoOp: true, Summary: "the cluster's KRaft inventory is written: " + path}, nil
	}
	return &steps.Plan{Summary: "write the cluster's KRaft inventory: " + path,
		Actions: []steps.Action{{ID: "write", Op: steps.OpSave, Target: path,
			Detail: fmt.Sprintf("%s with mode: kraft and no zookeeper section: the same brokers, controllers, SSH settings, log dirs and clients", env.Inventory())}},
		Notes: []string{"use it for every kremedy command from now on: `kremedy diagnose --inventory " + path + "`"}}, nil
}

func (k *kraftInventory) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		err := env.Do(a, func() error {
			inv, err := inventory.Load(env.Inventory())
			if err != nil {
				return err
			}
			b, err := kraftOf(inv, env.RunID()).Marshal()
			if err != nil {
				return err
			}
			if _, err := inventory.Parse(a.Target, b); err != nil {
				return fmt.Errorf("the KRaft inventory does not read back: %w", err)
			}
			return atomicfile.WriteFile(a.Target, b)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (k *kraftInventory) Verify(_ context.Context, env *steps.Env) ([]steps.Check, error) {
	path := env.Artifact(artKRaftInventory)
	inv, err := inventory.Load(path)
	c := steps.Check{Name: "the cluster's KRaft inventory reads back, mode: kraft", OK: err == nil && inv.KRaft(), Detail: path}
	if err != nil {
		c.Detail = err.Error()
	}
	return []steps.Check{c}, nil
}
