package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/roll"
)

// waitOpts: how long the metadata migration may take.
type waitOpts struct {
	Timeout time.Duration `opt:"timeout" default:"10m"`
}

// waitMigration waits, read-only, for the KRaft controller to complete the
// metadata migration, observed from the cluster: /migration holds the
// KRaft metadata offset the migration reached and /controller names the
// KRaft controller (it took ZooKeeper's controller role). Log lines are
// not a signal kremedy depends on.
type waitMigration struct{ o waitOpts }

func (k *waitMigration) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Summary: "wait for the KRaft controller to migrate the metadata from ZooKeeper", Facts: st.Facts()}
	switch {
	case st.Migrated():
		p.NoOp, p.Summary = true, fmt.Sprintf("the metadata is migrated (KRaft metadata offset %d, /controller is KRaft controller %d)", st.Migration.MetadataOffset, st.ZKController)
		return p, nil
	case st.Phase != PhaseMigration:
		return nil, fmt.Errorf("%w: not every broker is in migration mode (phase %s: %s); the migration starts when the last one registers with the controllers", steps.ErrRefused, st.Phase, st.Why)
	}
	p.Actions = []steps.Action{{ID: "migrated", Op: steps.OpWait, Target: env.ZK.Chroot() + kafkazk.MigrationPath,
		Detail: fmt.Sprintf("/migration holds a KRaft metadata offset and /controller names a KRaft controller; at most %s", k.o.Timeout)}}
	return p, nil
}

func (k *waitMigration) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	start := env.Now()
	return env.Do(p.Actions[0], func() error {
		err := roll.WaitFor(ctx, env, k.o.Timeout, "the metadata migration", func() (bool, string) {
			s, err := zkState(ctx, env)
			if err != nil {
				return false, err.Error()
			}
			if s.Migrated() {
				env.Logf("metadata migrated %s after the wait began: KRaft metadata offset %d, /controller is KRaft controller %d", env.Now().Sub(start).Round(time.Millisecond), s.Migration.MetadataOffset, s.ZKController)
				return true, ""
			}
			switch {
			case s.Migration == nil:
				return false, "no /migration yet"
			case s.Migration.Null:
				return false, "/migration is null (KAFKA-19480: delete it, the controller recreates it)"
			}
			return false, fmt.Sprintf("/migration offset %d, /controller %d", s.Migration.MetadataOffset, s.ZKController)
		})
		if err != nil {
			return fmt.Errorf("%w. Read the active controller's log (Still waiting for ZK brokers … means a broker id of some topic's assignment is not registered); nothing was changed by this wait", err)
		}
		return nil
	})
}

func (k *waitMigration) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	s, err := zkState(ctx, env)
	if err != nil {
		return nil, err
	}
	d := "no /migration"
	if s.Migration != nil {
		d = fmt.Sprintf("/migration offset %d, /controller %d (KRaft: %v)", s.Migration.MetadataOffset, s.ZKController, s.KRaftController)
	}
	return []steps.Check{{Name: "the metadata is migrated and a KRaft controller is ZooKeeper's controller", OK: s.Migrated(), Detail: d}}, nil
}

// artZnodes is the copy of /controller and /migration the revert keeps.
const artZnodes = "znodes"

// resetZnodes is the revert's ZooKeeper part (Kafka 3.9 docs, "Reverting
// to ZooKeeper mode"; KAFKA-17146): with the controllers stopped, delete
// /controller so the ZooKeeper brokers elect one of their own, and delete
// /migration — a copy of both kept first — so that a later attempt starts
// with a full metadata load instead of skipping it.
type resetZnodes struct{}

type znodeArgs struct {
	Path string `json:"path"`
	Data string `json:"data"`
}

func (k *resetZnodes) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	st, err := Observe(ctx, env)
	if err != nil {
		return nil, err
	}
	if len(st.Running) > 0 {
		return nil, fmt.Errorf("%w: KRaft controllers %s still run: they would take /controller back; stop them first", steps.ErrRefused, fmt.Sprint(st.Running))
	}
	if ok, how := st.Phase.Revertible(); !ok {
		return nil, fmt.Errorf("%w: %s", steps.ErrRefused, how)
	}
	p := &steps.Plan{Summary: "delete /controller and /migration in one ZooKeeper transaction, a copy of both kept first", Facts: st.Facts()}
	var saved []znodeArgs
	var dels []steps.Action
	migration, _, err := env.ZK.Exists(ctx, kafkazk.MigrationPath)
	if err != nil {
		return nil, err
	}
	for _, path := range []string{kafkazk.ControllerPath, kafkazk.MigrationPath} {
		full := env.ZK.Chroot() + path
		data, stat, err := env.ZK.Get(ctx, path)
		if env.ZK.IsNoNode(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", full, err)
		}
		if path == kafkazk.ControllerPath && !st.KRaftController {
			if !migration {
				p.Facts = append(p.Facts, fmt.Sprintf("%s names ZooKeeper broker %d: left alone", full, st.ZKController))
				continue
			}
			// A ZooKeeper broker elected while /migration still exists
			// (a run stopped between two deletes, or a hand-made revert)
			// took over under the migration's state: it is elected again
			// once /migration is gone, in the same transaction.
			p.Facts = append(p.Facts, fmt.Sprintf("%s names ZooKeeper broker %d, elected while /migration exists: deleted with it, so that a broker is elected again without it", full, st.ZKController))
		}
		saved = append(saved, znodeArgs{Path: full, Data: string(data)})
		v := stat.Version
		dels = append(dels, steps.Action{ID: "delete" + path, Op: steps.OpZKDelete, Target: full, Version: &v, Args: znodeArgs{Path: path, Data: string(data)}})
	}
	if len(dels) == 0 {
		p.NoOp, p.Summary = true, "neither /migration nor a KRaft /controller is left"
		return p, nil
	}
	p.Actions = append([]steps.Action{{ID: "save", Op: steps.OpSave, Target: env.Artifact(artZnodes), Detail: "the znodes' data, before they are deleted", Args: saved}}, dels...)
	p.Notes = append(p.Notes, "the ZooKeeper brokers elect a controller of their own as soon as /controller is gone: both znodes go in one transaction, so that no broker is elected while /migration still exists")
	return p, nil
}

func (k *resetZnodes) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		var err error
		switch {
		case a.ID == "save":
			err = env.Do(a, func() error {
				b, err := json.MarshalIndent(a.Args, "", "  ")
				if err != nil {
					return err
				}
				if _, err := os.Stat(a.Target); err == nil {
					return nil // a resume: the first copy is the one taken before any delete
				}
				return atomicfile.WriteFile(a.Target, append(b, '\n'))
			})
		}
		if err != nil {
			return err
		}
	}
	return deleteTogether(ctx, env, p.Actions)
}

// deleteTogether deletes the plan's znodes in one transaction, each
// action journaled as begun before and ended after it.
func deleteTogether(ctx context.Context, env *steps.Env, acts []steps.Action) error {
	var paths []string
	var versions []int32
	var ends []func(error) error
	for _, a := range acts {
		if a.Op != steps.OpZKDelete {
			continue
		}
		z, err := steps.ArgsOf[znodeArgs](a)
		if err != nil {
			return err
		}
		end, err := env.Begin(a)
		if err != nil {
			return err
		}
		paths, versions, ends = append(paths, z.Path), append(versions, *a.Version), append(ends, end)
	}
	if len(paths) == 0 {
		return nil
	}
	err := env.ZK.DeleteAll(ctx, paths, versions)
	if env.ZK.IsNoNode(err) || env.ZK.IsBadVersion(err) {
		err = fmt.Errorf("%w: %v changed since the plan (%v); nothing was deleted", steps.ErrStalePlan, paths, err)
	}
	for _, end := range ends {
		if eerr := end(err); eerr != nil && err == nil {
			err = eerr
		}
	}
	return err
}

func (k *resetZnodes) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	ok, _, err := env.ZK.Exists(ctx, kafkazk.MigrationPath)
	if err != nil {
		return nil, err
	}
	checks := []steps.Check{{Name: "/migration is gone", OK: !ok}}
	s := &State{ZKController: -1}
	err = roll.WaitFor(ctx, env, 60*time.Second, "a ZooKeeper broker to become controller", func() (bool, string) {
		if s, err = zkState(ctx, env); err != nil {
			return false, err.Error()
		}
		return s.ZKController >= 0 && !s.KRaftController, fmt.Sprintf("/controller %d (KRaft: %v)", s.ZKController, s.KRaftController)
	})
	c := steps.Check{Name: "a ZooKeeper broker is the controller", OK: err == nil, Detail: fmt.Sprintf("/controller %d", s.ZKController)}
	checks = append(checks, c)
	if !c.OK {
		return checks, nil
	}
	detail, err := waitBrokersKnow(ctx, env, s.ZKController, 60*time.Second)
	return append(checks, steps.Check{Name: "every broker names the ZooKeeper controller", OK: err == nil, Detail: detail}), nil
}

// knownReads is how many Metadata answers in a row must name the ZooKeeper
// controller before a broker counts as knowing it. A migrating broker whose
// metadata still holds the KRaft controller answers with a random live
// broker instead (Kafka 3.9 KafkaApis.handleTopicMetadataRequest:
// KRaftCachedControllerId → metadataCache.getRandomAliveBrokerId), so one
// answer can name the right broker by chance; six in a row do so by chance
// with odds of (1/brokers)^6.
const knownReads = 6

// waitBrokersKnow waits until every registered broker names controller in
// knownReads Metadata answers in a row. A migrating broker stopped before
// it knows the ZooKeeper controller notifies the KRaft controller of its
// controlled shutdown and waits up to 5 minutes for its approval (Kafka
// 3.9 KafkaServer.controlledShutdown) — with the controllers stopped, its
// stop hangs. The new controller tells each broker with its first
// UpdateMetadata, usually within a second of its election; on a loaded
// cluster later (CI saw a broker stopped 0.9 s after the election hang).
func waitBrokersKnow(ctx context.Context, env *steps.Env, controller int32, timeout time.Duration) (string, error) {
	ids, err := brokers.Registered(ctx, env.ZK)
	if err != nil {
		return err.Error(), err
	}
	streak := map[int32]int{}
	var last string
	err = roll.WaitFor(ctx, env, timeout, fmt.Sprintf("every broker to name ZooKeeper controller %d", controller), func() (bool, string) {
		var behind []string
		for _, id := range ids {
			// Up to two answers a broker each poll, so a streak builds
			// in a few polls; one topic named keeps each Metadata
			// answer small (none named would be every topic's).
			for range 2 {
				v, err := env.Kafka.BrokerView(ctx, id, "__consumer_offsets")
				switch {
				case err != nil:
					streak[id] = 0
					behind = append(behind, fmt.Sprintf("broker %d: %v", id, err))
				case v.Controller != controller:
					streak[id] = 0
					behind = append(behind, fmt.Sprintf("broker %d names %d", id, v.Controller))
				default:
					streak[id]++
				}
				if streak[id] == 0 {
					break
				}
			}
			if n := streak[id]; n > 0 && n < knownReads {
				behind = append(behind, fmt.Sprintf("broker %d: %d of %d answers", id, n, knownReads))
			}
		}
		last = strings.Join(behind, "; ")
		return len(behind) == 0, last
	})
	if err != nil {
		return last, err
	}
	return fmt.Sprintf("brokers %v: controller %d in %d answers in a row each", ids, controller, knownReads), nil
}
