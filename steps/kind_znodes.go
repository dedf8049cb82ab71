package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// deleteZnodes removes the topic's metadata from ZooKeeper the way the
// controller itself does when a deletion completes (TopicDeletionManager):
// /brokers/topics/<t> children first, then /config/topics/<t>, then
// /admin/delete_topics/<t>; and the topic's entries in a legacy
// /admin/reassign_partitions. Every delete carries the version the plan
// read, and nothing is deleted before the whole set is backed up.
type deleteZnodes struct{}

// ZNodeBackup is one backed-up znode.
type ZNodeBackup struct {
	Path string `json:"path"` // chroot-relative
	Data []byte `json:"data"` // base64 in JSON; null for no data
	ACL  []ACL  `json:"acl"`
	Stat ZStat  `json:"stat"`
}

// Backup is the znode backup file a run writes before deleting.
type Backup struct {
	Format  int           `json:"format"`
	Cluster string        `json:"cluster"`
	Connect string        `json:"zookeeper"`
	Chroot  string        `json:"chroot"`
	Topic   string        `json:"topic"`
	Taken   time.Time     `json:"taken"`
	Nodes   []ZNodeBackup `json:"nodes"` // parents before children: the restore order
	// Reassign is /admin/reassign_partitions as it was, when it named the topic.
	Reassign *ZNodeBackup `json:"reassign,omitempty"`
}

type znodePlan struct {
	Deletes  []pathVersion `json:"deletes"` // in deletion order
	Reassign *reassignEdit `json:"reassign,omitempty"`
}

type pathVersion struct {
	Path    string `json:"path"`
	Version int32  `json:"version"`
}

type reassignEdit struct {
	Version int32  `json:"version"`
	Data    []byte `json:"data"` // nil: delete the znode (the topic was its only content)
}

// walk lists p's subtree, parents first, with versions.
func (r *Run) walk(ctx context.Context, p string) ([]pathVersion, error) {
	ok, st, err := r.ZK.Exists(ctx, p)
	if err != nil || !ok {
		return nil, err
	}
	out := []pathVersion{{p, st.Version}}
	kids, err := r.ZK.Children(ctx, p)
	if err != nil {
		if r.ZK.IsNoNode(err) {
			return out, nil
		}
		return nil, err
	}
	for _, k := range kids {
		sub, err := r.walk(ctx, path.Join(p, k))
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

func (k *deleteZnodes) Plan(ctx context.Context, r *Run) (*Plan, error) {
	if r.Facts.Clean {
		return r.cleanNoOp("delete"), nil
	}
	t := r.Topic()
	var zp znodePlan
	tree, err := r.walk(ctx, TopicPath(t))
	if err != nil {
		return nil, err
	}
	for i := len(tree) - 1; i >= 0; i-- { // children first
		zp.Deletes = append(zp.Deletes, tree[i])
	}
	for _, p := range []string{ConfigTopicPath(t), DeleteTopicPath(t)} {
		ok, st, err := r.ZK.Exists(ctx, p)
		if err != nil {
			return nil, err
		}
		if ok {
			zp.Deletes = append(zp.Deletes, pathVersion{p, st.Version})
		}
	}
	plan := &Plan{Summary: fmt.Sprintf("back up, then delete %d znodes of %q in the controller's order", len(zp.Deletes), t)}
	if b, st, err := r.ZK.Get(ctx, ReassignPath); err == nil {
		var rz ReassignZNode
		if err := DecodeZNode(r.ZK.Chroot()+ReassignPath, b, &rz); err != nil {
			return nil, err
		}
		var keep []ReassignEntry
		for _, e := range rz.Partitions {
			if e.Topic != t {
				keep = append(keep, e)
			}
		}
		if len(keep) < len(rz.Partitions) {
			edit := &reassignEdit{Version: st.Version}
			if len(keep) > 0 {
				rz.Partitions = keep
				edit.Data, _ = json.Marshal(rz)
			}
			zp.Reassign = edit
		}
	} else if !r.ZK.IsNoNode(err) {
		return nil, err
	}
	if len(zp.Deletes) == 0 && zp.Reassign == nil {
		plan.NoOp = true
		plan.Summary = fmt.Sprintf("ZooKeeper holds no znode of %q", t)
		return plan, nil
	}
	plan.Actions = append(plan.Actions, Action{Kind: "save", Target: r.BackupPath(), Detail: "data, ACLs and versions of every znode below, before any delete"})
	for _, d := range zp.Deletes {
		v := d.Version
		plan.Actions = append(plan.Actions, Action{Kind: "zk-delete", Target: r.ZK.Chroot() + d.Path, Version: &v})
	}
	if zp.Reassign != nil {
		v := zp.Reassign.Version
		what := "remove its entries"
		if zp.Reassign.Data == nil {
			what = "delete it: the topic is its only content"
		}
		plan.Actions = append(plan.Actions, Action{Kind: "zk-set", Target: r.ZK.Chroot() + ReassignPath, Version: &v, Detail: what})
	}
	plan.Notes = append(plan.Notes, "nothing else is touched: not /cluster/id, /controller_epoch, /brokers/ids, ACLs or any other topic")
	plan.Payload, _ = jsonRaw(zp)
	return plan, nil
}

// backup saves the planned znodes. A backup from an earlier attempt of this
// run is never overwritten: it holds the complete original state.
// takeBackup reads every planned znode (data, ACL, stat) and writes the
// backup file; it returns what it read.
func (k *deleteZnodes) takeBackup(ctx context.Context, r *Run, zp znodePlan) (*Backup, string, error) {
	b := Backup{Format: 1, Cluster: r.Target.Name, Connect: r.Target.ZKConnect, Chroot: r.ZK.Chroot(), Topic: r.Topic(), Taken: r.now().UTC()}
	// Restore order: the topic's subtree parents first, then its config,
	// then the deletion marker (restoring the exact pending state).
	var order []string
	for i := len(zp.Deletes) - 1; i >= 0; i-- {
		if p := zp.Deletes[i].Path; p == TopicPath(r.Topic()) || strings.HasPrefix(p, TopicPath(r.Topic())+"/") {
			order = append(order, p)
		}
	}
	for _, d := range zp.Deletes {
		if d.Path != TopicPath(r.Topic()) && !strings.HasPrefix(d.Path, TopicPath(r.Topic())+"/") {
			order = append(order, d.Path)
		}
	}
	for _, p := range order {
		data, st, err := r.ZK.Get(ctx, p)
		if err != nil {
			if r.ZK.IsNoNode(err) {
				continue
			}
			return nil, "", err
		}
		acl, err := r.ZK.GetACL(ctx, p)
		if err != nil && !r.ZK.IsNoNode(err) {
			return nil, "", err
		}
		b.Nodes = append(b.Nodes, ZNodeBackup{Path: p, Data: data, ACL: acl, Stat: st})
	}
	if zp.Reassign != nil {
		data, st, err := r.ZK.Get(ctx, ReassignPath)
		if err == nil {
			acl, _ := r.ZK.GetACL(ctx, ReassignPath)
			b.Reassign = &ZNodeBackup{Path: ReassignPath, Data: data, ACL: acl, Stat: st}
		}
	}
	dst := r.BackupPath()
	for n := 2; ; n++ {
		if _, err := os.Stat(dst); os.IsNotExist(err) {
			break
		}
		dst = filepath.Join(filepath.Dir(r.BackupPath()), fmt.Sprintf("znodes.%d.json", n))
	}
	return &b, dst, WriteJSON(dst, b)
}

func (k *deleteZnodes) Apply(ctx context.Context, r *Run, p *Plan) error {
	var zp znodePlan
	if err := fromRaw(p.Payload, &zp); err != nil {
		return err
	}
	var dst string
	var bk *Backup
	if err := r.Do(p.Actions[0], func() (err error) { bk, dst, err = k.takeBackup(ctx, r, zp); return err }); err != nil {
		return fmt.Errorf("backup failed, nothing was deleted: %w", err)
	}
	r.Logf("znode backup written to %s (restore: kremedy znodes restore %s --inventory %s)", dst, dst, r.Meta.Inventory)
	// The backup read every znode again: if one changed since the plan,
	// stop before the first delete rather than half-way through (the
	// versioned deletes below still catch a change after this point).
	for _, d := range zp.Deletes {
		for _, n := range bk.Nodes {
			if n.Path == d.Path && n.Stat.Version != d.Version {
				return fmt.Errorf("%w: %s%s is at version %d, the plan read version %d; nothing was deleted", ErrStalePlan, r.ZK.Chroot(), d.Path, n.Stat.Version, d.Version)
			}
		}
	}
	for i, d := range zp.Deletes {
		err := r.Do(p.Actions[i+1], func() error { return r.ZK.Delete(ctx, d.Path, d.Version) })
		switch {
		case err == nil:
		case r.ZK.IsNoNode(err):
			r.Logf("%s%s was already gone", r.ZK.Chroot(), d.Path)
		case r.ZK.IsBadVersion(err):
			return fmt.Errorf("%w: %s%s changed after it was planned (version %d expected); it was not deleted", ErrStalePlan, r.ZK.Chroot(), d.Path, d.Version)
		default:
			return err
		}
	}
	if zp.Reassign != nil {
		a := p.Actions[len(p.Actions)-1]
		err := r.Do(a, func() error {
			if zp.Reassign.Data == nil {
				return r.ZK.Delete(ctx, ReassignPath, zp.Reassign.Version)
			}
			_, err := r.ZK.Set(ctx, ReassignPath, zp.Reassign.Data, zp.Reassign.Version)
			return err
		})
		if err != nil && r.ZK.IsBadVersion(err) {
			return fmt.Errorf("%w: %s%s changed after it was planned", ErrStalePlan, r.ZK.Chroot(), ReassignPath)
		}
		if err != nil && !r.ZK.IsNoNode(err) {
			return err
		}
	}
	return nil
}

func (k *deleteZnodes) Verify(ctx context.Context, r *Run) ([]Check, error) {
	if r.Facts.Clean {
		return nil, nil
	}
	var checks []Check
	for _, p := range []string{TopicPath(r.Topic()), ConfigTopicPath(r.Topic()), DeleteTopicPath(r.Topic())} {
		ok, err := r.exists(ctx, p)
		if err != nil {
			return nil, err
		}
		checks = append(checks, Check{Name: r.ZK.Chroot() + p + " is gone", OK: !ok})
	}
	return checks, nil
}
