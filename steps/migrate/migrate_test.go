package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/migrate"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// cluster is a three-broker ZooKeeper-mode fake cluster (controller 3,
// replication factor 3, min.insync.replicas=2) with three KRaft
// controllers provisioned for its migration (3001-3003, formatted with the
// cluster's id, not started). The nodes' config files are real files in a
// temporary directory, read and edited by kremedy's own scripts under a
// real shell; stop and start are the fake's. The fake stands in for what
// Kafka does: the controllers form a quorum once all run; once every
// broker runs in migration mode the KRaft controller takes /controller and
// writes /migration; a broker started as a KRaft broker registers with the
// controllers, not in ZooKeeper.
type cluster struct {
	*steptest.Cluster
	dir string
}

const clusterID = "x"

func brokerConfig(id int32) string {
	return fmt.Sprintf(`# broker %d
broker.id=%d
listeners=PLAINTEXT://b%d:9092
log.dirs=/data/k1,/data/k2
zookeeper.connect=zk:2181/kafka
inter.broker.protocol.version=3.9
`, id, id, id)
}

func controllerConfig(id int32, dir string) string {
	return fmt.Sprintf(`process.roles=controller
node.id=%d
controller.quorum.voters=3001@c1:9093,3002@c2:9093,3003@c3:9093
controller.listener.names=CONTROLLER
listeners=CONTROLLER://c%d:9093
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
metadata.log.dir=%s
zookeeper.metadata.migration.enable=true
zookeeper.connect=zk:2181/kafka
inter.broker.listener.name=PLAINTEXT
`, id, id-3000, dir)
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	g := steptest.Ghost(t)
	g.ZK.Remove(kafkazk.DeleteTopicPath("orders"))
	// Not t.TempDir(): a subtest's name can put a ',' in it, which no log
	// dir may hold (log.dirs is a comma-separated list).
	dir, err := os.MkdirTemp("", "kremedy-migrate-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	target := g.Ports.Target
	for i := range target.Hosts {
		h := &target.Hosts[i]
		h.Config = filepath.Join(dir, fmt.Sprintf("server-%d.properties", h.ID))
		h.Addr = fmt.Sprintf("b%d:9092", h.ID)
		write(t, h.Config, brokerConfig(h.ID))
	}
	for k := int32(1); k <= 3; k++ {
		id := 3000 + k
		meta := filepath.Join(dir, fmt.Sprintf("meta-%d", id))
		c := ports.Host{ID: id, Host: fmt.Sprintf("c%d", k), Addr: fmt.Sprintf("c%d:9093", k),
			Stop: fmt.Sprintf("systemctl stop kafka-controller-%d", k), Start: fmt.Sprintf("systemctl start kafka-controller-%d", k),
			Config: filepath.Join(dir, fmt.Sprintf("controller-%d.properties", id))}
		write(t, c.Config, controllerConfig(id, meta))
		write(t, filepath.Join(meta, "meta.properties"), fmt.Sprintf("version=1\ncluster.id=%s\nnode.id=%d\n", clusterID, id))
		target.Controllers = append(target.Controllers, c)
	}
	hosts := steptest.NewHosts(t, g.ZK, target)
	for _, c := range target.Controllers {
		hosts.Running[c.ID] = false
	}
	// kremedy's scripts on the nodes' files run for real; the fake keeps
	// stop and start.
	hosts.Local = func(_ int32, cmd string) bool { return strings.Contains(cmd, dir) }
	kafka := steptest.NewKafka(t, g.ZK, hosts)
	kafka.Configs = map[string]string{"min.insync.replicas": "2"}
	c := &cluster{Cluster: &steptest.Cluster{ZK: g.ZK, Hosts: hosts, Kafka: kafka,
		Ports: ports.Cluster{Target: target, ZK: g.ZK, Kafka: kafka, Hosts: hosts}}, dir: dir}
	kafka.Live = func() []int32 {
		var up []int32
		for _, h := range target.Hosts {
			if hosts.Runs(h.ID) {
				up = append(up, h.ID)
			}
		}
		return up
	}
	hosts.OnStart = c.onStart
	return c
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) mode(t *testing.T, id int32) migrate.Mode {
	t.Helper()
	h, ok := c.Ports.Target.Host(id)
	if !ok {
		h, _ = c.Ports.Target.Controller(id)
	}
	b, err := os.ReadFile(h.Config)
	if err != nil {
		t.Fatal(err)
	}
	p, err := migrate.ParseProps(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		return p.BrokerMode()
	}
	return p.ControllerMode()
}

// inventory writes the cluster's ZooKeeper-mode inventory file.
func (c *cluster) inventory(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nzookeeper:\n  connect: zk:2181/kafka\nkafka:\n  bootstrap: [b1:9092]\nssh:\n  known_hosts: %s/known_hosts\nbrokers:\n", c.Ports.Target.Name, c.dir)
	for _, h := range c.Ports.Target.Hosts {
		fmt.Fprintf(&b, "  - id: %d\n    host: %s\n    stop: %s\n    start: %s\n    config: %s\n    log_dirs: [/data/k1, /data/k2]\n", h.ID, h.Host, h.Stop, h.Start, h.Config)
	}
	b.WriteString("kraft_controllers:\n")
	for _, k := range c.Ports.Target.Controllers {
		fmt.Fprintf(&b, "  - id: %d\n    host: %s\n    listener: %s\n    stop: %s\n    start: %s\n    config: %s\n", k.ID, k.Host, k.Addr, k.Stop, k.Start, k.Config)
	}
	path := filepath.Join(c.dir, "inventory.yaml")
	write(t, path, b.String())
	return path
}

// onStart is what Kafka does when a node starts (Hosts.OnStart runs it
// with the hosts' lock held: it reads files and the fake ZooKeeper only).
func (c *cluster) onStart(id int32) {
	t := c.Ports.Target
	if _, isCtrl := t.Controller(id); isCtrl {
		for _, k := range t.Controllers {
			if !c.Hosts.Running[k.ID] {
				return
			}
		}
		q := &ports.Quorum{Leader: 3001, Epoch: 1, HighWatermark: 100}
		for _, k := range t.Controllers {
			q.Voters = append(q.Voters, ports.Voter{ID: k.ID, LogEndOffset: 100, LastCaughtUpMs: 1})
		}
		c.Kafka.SetQuorum(q)
		return
	}
	h, _ := t.Host(id)
	b, _ := os.ReadFile(h.Config)
	p, err := migrate.ParseProps(string(b))
	if err != nil {
		return
	}
	switch p.BrokerMode() {
	case migrate.ModeKRaft:
		c.ZK.Remove(fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, id))
	case migrate.ModeMigration:
		for _, o := range t.Hosts {
			ob, _ := os.ReadFile(o.Config)
			op, err := migrate.ParseProps(string(ob))
			if err != nil || op.BrokerMode() != migrate.ModeMigration || !c.Hosts.Running[o.ID] {
				return
			}
		}
		c.ZK.Put(kafkazk.MigrationPath, `{"version":0,"kraft_metadata_offset":42,"kraft_metadata_epoch":1,"kraft_controller_id":3001,"kraft_controller_epoch":1}`)
		c.ZK.Put(kafkazk.ControllerPath, `{"version":2,"brokerid":3001,"timestamp":"1","kraftControllerEpoch":1}`)
	}
}

// typing approves every plan, typing the cluster's name.
type typing struct{ asked []string }

func (a *typing) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	a.asked = append(a.asked, info.ID)
	return steps.Approval{Decision: steps.Approve, Typed: "test", By: "test", Digest: p.Digest()}, nil
}

func (c *cluster) session(t *testing.T, runbook string, set ...string) *steps.Session {
	t.Helper()
	rb, err := runbooks.Get(runbook)
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{"health_checks": "1", "health_timeout": "3s"}
	if runbook == "zk-to-kraft" {
		params["migration_timeout"] = "5s"
	}
	for i := 0; i+1 < len(set); i += 2 {
		params[set[i]] = set[i+1]
	}
	bound, err := rb.Bind(params, c.Ports.Target.Name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := steps.Create(t.TempDir(), bound, steps.Meta{ID: "m1", Runbook: rb.Name, Params: bound.Params, Cluster: c.Ports.Target.Name, Inventory: c.inventory(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// restarts lists the nodes' stop and start commands in the order they
// ran ("1: stop", "3001: start").
func (c *cluster) restarts() []string {
	var out []string
	for _, cmd := range c.Hosts.Commands {
		id, rest, _ := strings.Cut(cmd, ": ")
		switch {
		case strings.HasPrefix(rest, "systemctl stop "):
			out = append(out, id+": stop")
		case strings.HasPrefix(rest, "systemctl start "):
			out = append(out, id+": start")
		}
	}
	return out
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// TestMigrationOnTheFakes runs zk-to-kraft from ZooKeeper mode to
// finalized on the fakes: every broker rolled twice (into migration mode,
// then to KRaft), ZooKeeper's controller last in the first roll, each
// controller once in finalize with the quorum's leader last, every config
// edited by kremedy's own script with its backup beside it.
func TestMigrationOnTheFakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		s := c.session(t, "zk-to-kraft")
		out := s.Run(context.Background(), c.Ports, &typing{}, nil)
		if out.Err != nil {
			t.Fatalf("zk-to-kraft: %v (%+v)", out.Err, out)
		}
		for _, id := range []int32{1, 2, 3} {
			if m := c.mode(t, id); m != migrate.ModeKRaft {
				t.Errorf("broker %d's config is %s, want kraft", id, m)
			}
			h, _ := c.Ports.Target.Host(id)
			for _, to := range []string{"migration", "kraft"} {
				b, err := os.ReadFile(h.Config + ".kremedy-before-" + to)
				if err != nil {
					t.Errorf("broker %d: no backup before %s: %v", id, to, err)
				} else if to == "migration" && string(b) != brokerConfig(id) {
					t.Errorf("broker %d: the backup before migration is not the original config:\n%s", id, b)
				}
			}
		}
		for _, id := range []int32{3001, 3002, 3003} {
			if m := c.mode(t, id); m != migrate.ModeController {
				t.Errorf("controller %d's config is %s, want out of migration mode", id, m)
			}
		}
		k, err := inventory.Load(filepath.Join(s.Dir(), "inventory-kraft.yaml"))
		if err != nil || !k.KRaft() || k.ZooKeeper.Connect != "" || len(k.Brokers) != 3 || len(k.KRaftControllers) != 3 || k.Brokers[0].Config == "" {
			t.Errorf("the cluster's KRaft inventory: %+v %v", k, err)
		}
		got := c.restarts()
		want := []string{
			"3001: start", "3002: start", "3003: start", // start-controllers
			"1: stop", "1: start", "2: stop", "2: start", "3: stop", "3: start", // into migration mode, the ZooKeeper controller last
			"1: stop", "1: start", "2: stop", "2: start", "3: stop", "3: start", // to KRaft (a KRaft controller holds /controller)
			"3002: stop", "3002: start", "3003: stop", "3003: start", "3001: stop", "3001: start", // finalize, the leader last
		}
		if !slices.Equal(got, want) {
			t.Fatalf("restarts:\n%v\nwant\n%v", got, want)
		}
	})
}

// TestMigrationRollRefusesAnUnsafeStop: a fully replicated topic whose
// replication factor is its min.insync.replicas (2 and 2): no broker of it
// can stop without acks=all writes failing, whatever the order. The
// readiness check judges every broker of the rolls, so the migration is
// refused at its preflight — no controller started, no config edited —
// naming the partition, its brokers and both ways out; accepted with
// accept_unavailable, the migration runs.
func TestMigrationRollRefusesAnUnsafeStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		c.ZK.Put(kafkazk.TopicPath("pair"), `{"version":3,"partitions":{"0":[1,2]},"topic_id":"DDDDDDDDDDDDDDDDDDDDDD"}`)
		c.ZK.Put(kafkazk.PartitionStatePath("pair", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`)
		c.ZK.Put(kafkazk.ConfigTopicPath("pair"), `{"version":1,"config":{"min.insync.replicas":"2"}}`)
		s := c.session(t, "zk-to-kraft")
		out := s.Run(context.Background(), c.Ports, &typing{}, nil)
		if !errors.Is(out.Err, steps.ErrRefused) {
			t.Fatalf("want a refusal, got %v (%+v)", out.Err, out)
		}
		if out.Failed != "preflight" {
			t.Fatalf("refused at %q", out.Failed)
		}
		for _, w := range []string{"(pair-0)",
			"the migration's rolls cannot keep 1 topic available: stopping brokers [1 2]", "--set accept_unavailable=pair", "Nothing was changed"} {
			if !strings.Contains(out.Err.Error(), w) {
				t.Errorf("the refusal lacks %q:\n%v", w, out.Err)
			}
		}
		if r := c.restarts(); len(r) != 0 {
			t.Errorf("nodes were touched: %v", r)
		}
		for _, id := range []int32{1, 2, 3} {
			if m := c.mode(t, id); m != migrate.ModeZK {
				t.Errorf("broker %d's config is %s: it was edited", id, m)
			}
		}
		// A typo accepts nothing: refused before anything changes too.
		s = c.session(t, "zk-to-kraft", "accept_unavailable", "piar")
		if out := s.Run(context.Background(), c.Ports, &typing{}, nil); !errors.Is(out.Err, steps.ErrRefused) || out.Failed != "preflight" || len(c.restarts()) != 0 {
			t.Fatalf("accept_unavailable=piar: %v at %q, restarts %v", out.Err, out.Failed, c.restarts())
		}
		s = c.session(t, "zk-to-kraft", "accept_unavailable", "pair")
		if out := s.Run(context.Background(), c.Ports, &typing{}, nil); out.Err != nil {
			t.Fatalf("accept_unavailable=pair: %v", out.Err)
		}
		if r := c.restarts(); !slices.Contains(r, "1: stop") || !slices.Contains(r, "2: stop") {
			t.Errorf("accepted, the brokers were not rolled: %v", r)
		}
	})
}

// TestMigrationResumesWithoutRollingTwice: an attempt interrupted while a
// broker is stopped (before its config is edited), or while a controller
// is stopped in finalize, resumes by finishing that node; no node is
// stopped twice in a step.
func TestMigrationResumesWithoutRollingTwice(t *testing.T) {
	for name, at := range map[string]struct {
		step, action string
	}{
		"broker 2 stopped, its config not edited yet": {"enter-migration", "gone-2"},
		"broker 1 stopped on its way to KRaft":        {"brokers-to-kraft", "gone-1"},
		"a controller stopped in finalize":            {"finalize", "gone-3003"},
		"broker 3 edited, not started":                {"enter-migration", "while-3-edit"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t)
				s := c.session(t, "zk-to-kraft")
				ctx, cancel := context.WithCancel(context.Background())
				s.AfterRecord(func(typ, step string) {
					if typ != "action-end" || step != at.step {
						return
					}
					ids, _ := steptest.EndedIDs(s.Dir(), at.step)
					if slices.Contains(ids, at.action) {
						cancel()
					}
				})
				out := s.Run(ctx, c.Ports, &typing{}, nil)
				if out.Interrupted != at.step {
					t.Fatalf("first attempt: %+v %v", out, out.Err)
				}
				s.AfterRecord(nil)
				if out := s.Run(context.Background(), c.Ports, &typing{}, nil); out.Err != nil {
					t.Fatalf("resume: %v", out.Err)
				}
				got := c.restarts()
				for _, id := range []string{"1", "2", "3"} {
					if n := count(got, id+": stop"); n != 2 {
						t.Errorf("broker %s stopped %d times, want 2 (once a roll): %v", id, n, got)
					}
				}
				for _, id := range []string{"3001", "3002", "3003"} {
					if n := count(got, id+": stop"); n != 1 {
						t.Errorf("controller %s stopped %d times, want 1: %v", id, n, got)
					}
				}
				for _, id := range []int32{1, 2, 3} {
					if m := c.mode(t, id); m != migrate.ModeKRaft {
						t.Errorf("broker %d's config is %s, want kraft", id, m)
					}
				}
			})
		})
	}
}

// TestControllerMetadataDirMustBePlain: a controller whose server.properties
// names a metadata log dir a script could misread ($(…)) is refused before
// any controller starts, naming the dir; kremedy puts no such path in a
// command (review L4).
func TestControllerMetadataDirMustBePlain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		ctl := c.Ports.Target.Controllers[0]
		write(t, ctl.Config, controllerConfig(ctl.ID, "/data/$(touch /tmp/pwned)"))
		s := c.session(t, "zk-to-kraft")
		out := s.Run(context.Background(), c.Ports, &typing{}, nil)
		if out.Err == nil || !strings.Contains(out.Err.Error(), `its metadata log dir "/data/$(touch /tmp/pwned)"`) {
			t.Fatalf("zk-to-kraft with a controller's metadata dir $(…): %v", out.Err)
		}
		if got := c.restarts(); len(got) != 0 {
			t.Fatalf("nodes were started or stopped: %v", got)
		}
	})
}
