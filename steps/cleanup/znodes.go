package cleanup

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// deleteZnodes removes the topic's metadata from ZooKeeper the way the
// controller itself does when a deletion completes (TopicDeletionManager):
// /brokers/topics/<t> children first, then /config/topics/<t>, then
// /admin/delete_topics/<t>; and the topic's entries in a legacy
// /admin/reassign_partitions. Every delete carries the version the plan
// read, and nothing is deleted before the whole set is backed up.
type deleteZnodes struct{ o topicOpts }

// ZNodeBackup is one backed-up znode.
type ZNodeBackup struct {
	Path string        `json:"path"` // chroot-relative
	Data []byte        `json:"data"` // base64 in JSON; null for no data
	ACL  []kafkazk.ACL `json:"acl"`
	Stat kafkazk.ZStat `json:"stat"`
}

// Backup is the znode backup file a run writes before deleting.
type Backup struct {
	Format  int    `json:"format"`
	Cluster string `json:"cluster"`
	// ClusterID is /cluster/id as the backup was taken: a restore onto
	// another cluster (another inventory with the same chroot) is refused.
	ClusterID string `json:"cluster_id,omitempty"`
	Connect   string `json:"zookeeper"`
	Chroot    string `json:"chroot"`
	Topic     string `json:"topic"`
	// Topics are a several-topic run's topics (Topic is then the first).
	Topics []string      `json:"topics,omitempty"`
	Taken  time.Time     `json:"taken"`
	Nodes  []ZNodeBackup `json:"nodes"` // parents before children: the restore order
	// Reassign is /admin/reassign_partitions as it was, when it named the topic.
	Reassign *ZNodeBackup `json:"reassign,omitempty"`
}

type pathVersion struct {
	Path    string `json:"path"`
	Version int32  `json:"version"`
}

// backupArgs: what the backup action reads (every znode the plan deletes,
// in deletion order, with the version the plan read) before any delete.
type backupArgs struct {
	Nodes    []pathVersion `json:"nodes"`
	Reassign bool          `json:"reassign,omitempty"`
}

// reassignArgs: the legacy reassignment rewritten without the topic.
type reassignArgs struct {
	Data []byte `json:"data"` // nil: delete the znode (the topic was its only content)
}

// walk lists p's subtree, parents first, with versions.
func walk(ctx context.Context, env *steps.Env, p string) ([]pathVersion, error) {
	ok, st, err := env.ZK.Exists(ctx, p)
	if err != nil || !ok {
		return nil, err
	}
	out := []pathVersion{{p, st.Version}}
	kids, err := env.ZK.Children(ctx, p)
	if err != nil {
		if env.ZK.IsNoNode(err) {
			return out, nil
		}
		return nil, err
	}
	for _, k := range kids {
		sub, err := walk(ctx, env, path.Join(p, k))
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

func (k *deleteZnodes) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	f, err := facts(env)
	if err != nil {
		return nil, err
	}
	if f.Clean {
		return cleanNoOp(k.o, "delete"), nil
	}
	names := k.o.names()
	zk := env.ZK
	var deletes []pathVersion
	for _, t := range names {
		tree, err := walk(ctx, env, kafkazk.TopicPath(t))
		if err != nil {
			return nil, err
		}
		for i := len(tree) - 1; i >= 0; i-- { // children first
			deletes = append(deletes, tree[i])
		}
		for _, p := range []string{kafkazk.ConfigTopicPath(t), kafkazk.DeleteTopicPath(t)} {
			ok, st, err := zk.Exists(ctx, p)
			if err != nil {
				return nil, err
			}
			if ok {
				deletes = append(deletes, pathVersion{p, st.Version})
			}
		}
	}
	var reassign *steps.Action
	if b, st, err := zk.Get(ctx, kafkazk.ReassignPath); err == nil {
		var rz kafkazk.ReassignZNode
		if err := kafkazk.DecodeZNode(zk.Chroot()+kafkazk.ReassignPath, b, &rz); err != nil {
			return nil, err
		}
		var keep []kafkazk.ReassignEntry
		for _, e := range rz.Partitions {
			if !slices.Contains(names, e.Topic) {
				keep = append(keep, e)
			}
		}
		if len(keep) < len(rz.Partitions) {
			v := st.Version
			a := steps.Action{ID: "reassign", Op: steps.OpZKSet, Target: zk.Chroot() + kafkazk.ReassignPath, Version: &v,
				Detail: fmt.Sprintf("delete it: %s its only content", map[bool]string{false: "the topic is", true: "these topics are"}[k.o.several()]), Args: reassignArgs{}}
			if len(keep) > 0 {
				rz.Partitions = keep
				data, _ := json.Marshal(rz)
				a.Detail, a.Args = "remove its entries", reassignArgs{Data: data}
			}
			reassign = &a
		}
	} else if !zk.IsNoNode(err) {
		return nil, err
	}
	plan := &steps.Plan{Summary: fmt.Sprintf("back up, then delete %d znodes of %s in the controller's order", len(deletes), k.o.quoted())}
	if len(deletes) == 0 && reassign == nil {
		plan.NoOp = true
		plan.Summary = fmt.Sprintf("ZooKeeper holds no znode of %s", k.o.quoted())
		return plan, nil
	}
	plan.Actions = append(plan.Actions, steps.Action{ID: "backup", Op: steps.OpSave, Target: env.Artifact(artBackup),
		Detail: "data, ACLs and versions of every znode below, before any delete", Args: backupArgs{Nodes: deletes, Reassign: reassign != nil}})
	for i, d := range deletes {
		v := d.Version
		plan.Actions = append(plan.Actions, steps.Action{ID: fmt.Sprintf("delete-%d", i), Op: steps.OpZKDelete, Target: zk.Chroot() + d.Path, Version: &v, Args: d})
	}
	if reassign != nil {
		plan.Actions = append(plan.Actions, *reassign)
	}
	plan.Notes = append(plan.Notes, "nothing else is touched: not /cluster/id, /controller_epoch, /brokers/ids, ACLs or any other topic")
	if k.o.several() {
		plan.Notes = append(plan.Notes, fmt.Sprintf("one backup file holds the znodes of all %d topics; `kremedy znodes restore` puts them all back", len(names)))
	}
	return plan, nil
}

// takeBackup reads every planned znode (data, ACL, stat) and writes the
// backup file; it returns what it read. A backup from an earlier attempt of
// this run is never overwritten: it holds the complete original state.
func (k *deleteZnodes) takeBackup(ctx context.Context, env *steps.Env, args backupArgs) (*Backup, string, error) {
	zk, names := env.ZK, k.o.names()
	b := Backup{Format: 1, Cluster: env.Target.Name, Connect: env.Target.ZKConnect, Chroot: zk.Chroot(), Topic: names[0], Taken: env.Now().UTC()}
	if id, _, err := zk.Get(ctx, kafkazk.ClusterIDPath); err == nil {
		b.ClusterID = kafkazk.ClusterID(id)
	}
	if k.o.several() {
		b.Topics = names
	}
	// Restore order: the topics' subtrees parents first, then their
	// configs, then the deletion markers (restoring the exact pending
	// state).
	inTopic := func(p string) bool {
		for _, t := range names {
			if p == kafkazk.TopicPath(t) || strings.HasPrefix(p, kafkazk.TopicPath(t)+"/") {
				return true
			}
		}
		return false
	}
	var order []string
	for i := len(args.Nodes) - 1; i >= 0; i-- {
		if p := args.Nodes[i].Path; inTopic(p) {
			order = append(order, p)
		}
	}
	for _, d := range args.Nodes {
		if !inTopic(d.Path) {
			order = append(order, d.Path)
		}
	}
	for _, p := range order {
		data, st, err := zk.Get(ctx, p)
		if err != nil {
			if zk.IsNoNode(err) {
				continue
			}
			return nil, "", err
		}
		acl, err := zk.GetACL(ctx, p)
		if err != nil && !zk.IsNoNode(err) {
			return nil, "", err
		}
		b.Nodes = append(b.Nodes, ZNodeBackup{Path: p, Data: data, ACL: acl, Stat: st})
	}
	if args.Reassign {
		if data, st, err := zk.Get(ctx, kafkazk.ReassignPath); err == nil {
			acl, _ := zk.GetACL(ctx, kafkazk.ReassignPath)
			b.Reassign = &ZNodeBackup{Path: kafkazk.ReassignPath, Data: data, ACL: acl, Stat: st}
		}
	}
	first := env.Artifact(artBackup)
	dst := first
	for n := 2; ; n++ {
		if _, err := os.Stat(dst); os.IsNotExist(err) {
			break
		}
		dst = filepath.Join(filepath.Dir(first), fmt.Sprintf("znodes.%d.json", n))
	}
	return &b, dst, atomicfile.WriteJSON(dst, b)
}

func (k *deleteZnodes) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	zk := env.ZK
	for _, a := range p.Actions {
		switch a.Op {
		case steps.OpSave:
			args, err := steps.ArgsOf[backupArgs](a)
			if err != nil {
				return err
			}
			var dst string
			var bk *Backup
			if err := env.Do(a, func() (err error) { bk, dst, err = k.takeBackup(ctx, env, args); return err }); err != nil {
				return fmt.Errorf("backup failed, nothing was deleted: %w", err)
			}
			env.Logf("znode backup written to %s (restore: kremedy znodes restore %s --inventory %s)", dst, dst, env.Inventory())
			// The backup read every znode again: if one changed since the
			// plan, stop before the first delete rather than half-way
			// through (the versioned deletes still catch a change after
			// this point).
			for _, d := range args.Nodes {
				for _, n := range bk.Nodes {
					if n.Path == d.Path && n.Stat.Version != d.Version {
						return fmt.Errorf("%w: %s%s is at version %d, the plan read version %d; nothing was deleted", steps.ErrStalePlan, zk.Chroot(), d.Path, n.Stat.Version, d.Version)
					}
				}
			}
		case steps.OpZKDelete:
			d, err := steps.ArgsOf[pathVersion](a)
			if err != nil {
				return err
			}
			err = env.Do(a, func() error { return zk.Delete(ctx, d.Path, d.Version) })
			switch {
			case err == nil:
			case zk.IsNoNode(err):
				env.Logf("%s%s was already gone", zk.Chroot(), d.Path)
			case zk.IsBadVersion(err):
				return fmt.Errorf("%w: %s%s changed after it was planned (version %d expected); it was not deleted", steps.ErrStalePlan, zk.Chroot(), d.Path, d.Version)
			default:
				return err
			}
		case steps.OpZKSet:
			args, err := steps.ArgsOf[reassignArgs](a)
			if err != nil {
				return err
			}
			err = env.Do(a, func() error {
				if args.Data == nil {
					return zk.Delete(ctx, kafkazk.ReassignPath, *a.Version)
				}
				_, err := zk.Set(ctx, kafkazk.ReassignPath, args.Data, *a.Version)
				return err
			})
			if err != nil && zk.IsBadVersion(err) {
				return fmt.Errorf("%w: %s%s changed after it was planned", steps.ErrStalePlan, zk.Chroot(), kafkazk.ReassignPath)
			}
			if err != nil && !zk.IsNoNode(err) {
				return err
			}
		}
	}
	return nil
}

func (k *deleteZnodes) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	f, err := facts(env)
	if err != nil || f.Clean {
		return nil, err
	}
	var checks []steps.Check
	for _, t := range k.o.names() {
		for _, p := range []string{kafkazk.TopicPath(t), kafkazk.ConfigTopicPath(t), kafkazk.DeleteTopicPath(t)} {
			ok, err := exists(ctx, env, p)
			if err != nil {
				return nil, err
			}
			checks = append(checks, steps.Check{Name: env.ZK.Chroot() + p + " is gone", OK: !ok})
		}
	}
	return checks, nil
}
