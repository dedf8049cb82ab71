package cleanup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/segments"
)

// RestoreZnodes recreates the znodes of a backup (data and ACLs), parents
// first. It refuses to overwrite a node that exists unless force is set, in
// which case it leaves that node as it is and says so. It writes what it
// did to out.
func RestoreZnodes(ctx context.Context, zk ports.ZooKeeper, backupPath string, force bool, out io.Writer) error {
	b, err := os.ReadFile(backupPath)
	if err != nil {
		return err
	}
	var bk Backup
	if err := json.Unmarshal(b, &bk); err != nil || bk.Format != 1 {
		return fmt.Errorf("%s is not a kremedy znode backup (%v); nothing was restored", backupPath, err)
	}
	if bk.Chroot != zk.Chroot() {
		return fmt.Errorf("%w: the backup was taken under chroot %q, this inventory uses %q; nothing was restored", steps.ErrRefused, bk.Chroot, zk.Chroot())
	}
	if bk.ClusterID != "" {
		idData, _, err := zk.Get(ctx, kafkazk.ClusterIDPath)
		if err != nil && !zk.IsNoNode(err) {
			return fmt.Errorf("read %s%s to check the backup is this cluster's: %w; nothing was restored", zk.Chroot(), kafkazk.ClusterIDPath, err)
		}
		if now := kafkazk.ClusterID(idData); now != bk.ClusterID {
			return fmt.Errorf("%w: the backup was taken on cluster id %q (%s), but this inventory's ZooKeeper holds cluster id %q: it is another cluster; nothing was restored — use the inventory of the cluster the backup came from", steps.ErrRefused, bk.ClusterID, bk.Cluster, now)
		}
	} else {
		fmt.Fprintf(out, "note: the backup does not say its cluster id (an earlier kremedy's): only its chroot %q was checked\n", bk.Chroot)
	}
	var exist []string
	for _, n := range bk.Nodes {
		if ok, _, err := zk.Exists(ctx, n.Path); err != nil {
			return err
		} else if ok {
			exist = append(exist, zk.Chroot()+n.Path)
		}
	}
	if len(exist) > 0 && !force {
		return fmt.Errorf("%w: %d znodes of the backup exist already (%v); nothing was restored. Delete them first, or pass --force to restore only the missing ones", steps.ErrRefused, len(exist), exist)
	}
	created := 0
	for _, n := range bk.Nodes {
		if slices.Contains(exist, zk.Chroot()+n.Path) {
			fmt.Fprintf(out, "kept    %s%s (exists)\n", zk.Chroot(), n.Path)
			continue
		}
		acl := n.ACL
		if len(acl) == 0 {
			acl = nil
		}
		if err := zk.Create(ctx, n.Path, n.Data, acl); err != nil {
			return fmt.Errorf("restore %s%s: %w (%d znodes were restored before it)", zk.Chroot(), n.Path, err, created)
		}
		created++
		fmt.Fprintf(out, "created %s%s (%d bytes, %d ACL entries)\n", zk.Chroot(), n.Path, len(n.Data), len(acl))
	}
	fmt.Fprintf(out, "restored %d znodes of %s from %s (taken %s)\n", created, quoteAll(topicsOf(bk.Topics, bk.Topic)), backupPath, bk.Taken.Format("2006-01-02 15:04:05Z"))
	if bk.Reassign != nil {
		fmt.Fprintf(out, "note: /admin/reassign_partitions was edited by the run; its earlier content is in the backup's \"reassign\" field and was not restored (a legacy reassignment should not be replayed blindly)\n")
	}
	return nil
}

// RestoreSegments moves the directories of a quarantine manifest back into
// their log dirs, only on brokers that are stopped (not registered, port
// closed), and never over an existing directory.
func RestoreSegments(ctx context.Context, c ports.Cluster, manifestPath string, out io.Writer) error {
	b, err := os.ReadFile(manifestPath)
	if err != nil {
		return err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil || m.Format != 1 {
		return fmt.Errorf("%s is not a kremedy quarantine manifest (%v); nothing was moved", manifestPath, err)
	}
	if err := restorable(ctx, c, &m); err != nil {
		return err
	}
	moved := 0
	for _, mv := range m.Moves {
		if mv.State != "moved" {
			fmt.Fprintf(out, "skipped %s on broker %d: the manifest says it was never moved (%s)\n", mv.From, mv.Broker, mv.State)
			continue
		}
		script := fmt.Sprintf(`set -e
src=%s; dst=%s
if [ -e "$dst" ] && [ ! -e "$src" ]; then echo "already back: $dst"; exit 0; fi
if [ -e "$dst" ]; then echo "refusing: $dst exists in the log dir" >&2; exit 3; fi
mv -- "$src" "$dst"
echo "moved back $src -> $dst"`, shell.Quote(mv.To), shell.Quote(mv.From))
		if m.Kind == strayManifestKind && mv.Kind == segments.Stray.String() {
			script = strayFunc + "kremedy_straycheck " + shell.Quote(mv.From) + " || exit $?\n" + script
		}
		h, _ := c.Target.Host(mv.Broker)
		if err := c.Hosts.Run(ctx, mv.Broker, shell.Script(script), func(l ports.Line) { fmt.Fprintf(out, "broker %d (%s): %s\n", mv.Broker, h.Host, l.Text) }); err != nil {
			return fmt.Errorf("move %s back on broker %d: %w (%d directories were moved back before it)", mv.To, mv.Broker, err, moved)
		}
		moved++
	}
	if m.Kind == strayManifestKind {
		fmt.Fprintf(out, "moved %d directories back into their log dirs; Kafka loads the -stray ones as stray logs again at each broker's next start, as before the cleanup\n", moved)
		return nil
	}
	fmt.Fprintf(out, "moved %d directories of %s back; restore the znodes from %s with them (kremedy znodes restore), then start the brokers\n", moved, quoteAll(topicsOf(m.Topics, m.Topic)), m.Backup)
	return nil
}

// restorable refuses a restore that a running broker could see: a topic's
// directories go back only while their brokers are stopped. -stray
// directories (a stray-cleanup's manifest) may go back while the brokers
// run: Kafka opens a -stray path only at its start (LogManager.loadLog),
// so putting one back is the state before the cleanup — but only -stray
// names, checked here and again on the host.
func restorable(ctx context.Context, c ports.Cluster, m *Manifest) error {
	switch {
	case m.Kind == strayManifestKind:
		return strayRestorable(ctx, c, m)
	case m.Kind != "":
		return fmt.Errorf("%w: the manifest is of kind %q, which this kremedy does not know. Nothing was moved", steps.ErrRefused, m.Kind)
	case c.ZK == nil:
		return fmt.Errorf("%w: this manifest is a topic cleanup's (ZooKeeper mode), and the inventory describes a KRaft cluster, which kremedy cannot prove the brokers stopped on without ZooKeeper; pass --inventory with the ZooKeeper-mode inventory of the run. Nothing was moved", steps.ErrRefused)
	}
	reg, err := brokers.Registered(ctx, c.ZK)
	if err != nil {
		return err
	}
	for _, mv := range m.Moves {
		if mv.State == "moved" && slices.Contains(reg, mv.Broker) {
			return fmt.Errorf("%w: broker %d is registered (running); stop it first — a broker must never see its log dirs change under it. Nothing was moved", steps.ErrRefused, mv.Broker)
		}
	}
	return nil
}

// strayRestorable: a stray cleanup's -stray directories may go back while
// the brokers run; a live log (a would-be stray) only while its broker is
// stopped, as it was moved. The cluster is asked once, and only when such
// a log is to go back.
func strayRestorable(ctx context.Context, c ports.Cluster, m *Manifest) error {
	var live []Move
	for _, mv := range m.Moves {
		switch {
		case mv.Kind == segments.Stray.String() && !strings.HasSuffix(mv.From, "-stray"):
			return fmt.Errorf("%w: the manifest of a stray cleanup lists %s on broker %d as a -stray directory, which its name is not: it was edited or is corrupt. Nothing was moved", steps.ErrRefused, mv.From, mv.Broker)
		case mv.Kind != segments.Stray.String() && mv.State == "moved":
			live = append(live, mv)
		}
	}
	if len(live) == 0 {
		return nil
	}
	cv, err := c.Kafka.DescribeCluster(ctx)
	if err != nil {
		return fmt.Errorf("describe the cluster to see which brokers run: %w. Nothing was moved", err)
	}
	for _, mv := range live {
		if slices.ContainsFunc(cv.Brokers, func(b ports.BrokerNode) bool { return b.ID == mv.Broker && !b.Fenced }) {
			return fmt.Errorf("%w: %s was a live log of broker %d, and broker %d runs: stop it first (its stop command), restore, then start it — a broker must never see a live log appear under it. Nothing was moved", steps.ErrRefused, mv.From, mv.Broker, mv.Broker)
		}
	}
	return nil
}

// topicsOf is a backup's or manifest's topics: its list, else its one topic.
func topicsOf(topics []string, topic string) []string {
	if len(topics) > 0 {
		return topics
	}
	return []string{topic}
}
