package connect

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/lease"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/remote"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// Clients are an inventory opened: the engine's ports and the adapters
// behind them. Close closes them all.
type Clients struct {
	Inv   *inventory.Inventory
	Ports ports.Cluster
	ZK    *zookeeper.Conn // nil for a KRaft cluster
	Kafka *kafka.Client
	Fleet *remote.Fleet
	// Secrets are the passwords and tokens the inventory's files hold:
	// they never reach the journal or the report.
	Secrets []string
}

// Close closes the ZooKeeper session, the Kafka client and the SSH
// connections. It returns nil: an io.Closer.
func (c *Clients) Close() error {
	if c.ZK != nil {
		c.ZK.Close()
	}
	if c.Kafka != nil {
		c.Kafka.Close()
	}
	if c.Fleet != nil {
		c.Fleet.Close()
	}
	return nil
}

// Options say how the clients are opened.
type Options struct {
	// Log, when not nil, receives the adapters' own logs: go-zookeeper's
	// and franz-go's (kremedy -v).
	Log io.Writer
}

// Load reads the inventory at path and opens it as Open does; errors name
// the inventory as path.
func Load(ctx context.Context, path string, o Options) (*Clients, error) {
	inv, err := inventory.Load(path)
	if err != nil {
		return nil, configErr(err)
	}
	return open(ctx, inv, path, o)
}

// Open opens inv's ZooKeeper (none for a KRaft cluster) and Kafka clients
// and its SSH fleet; hosts are reached lazily, on first use. Kafka must
// accept the client properties' security.
func Open(ctx context.Context, inv *inventory.Inventory, o Options) (*Clients, error) {
	return open(ctx, inv, inv.Path, o)
}

func open(ctx context.Context, inv *inventory.Inventory, path string, o Options) (*Clients, error) {
	c := &Clients{Inv: inv}
	kopts, _, secrets, err := KafkaOptions(inv.Kafka.ClientProperties, "kafka.client_properties", inv.Kafka.Krb5Conf)
	if err != nil {
		return nil, err
	}
	c.Secrets = secrets
	t, brokers, clients, err := target(ctx, inv, path)
	if err != nil {
		return nil, err
	}
	c.Ports.Target = t
	c.Fleet = remote.NewFleet(brokers, clients)
	zopts, zsecrets, err := ZooKeeperOptions(inv.ZooKeeper, o.Log)
	if err != nil {
		return nil, err
	}
	c.Secrets = append(c.Secrets, zsecrets...)
	if o.Log != nil {
		kopts = append(kopts, kafkaLog(o.Log))
	}
	if err := c.dial(ctx, zopts, kopts); err != nil {
		return nil, err
	}
	c.wire()
	return c, nil
}

// target is the cluster as the engine's ports see it, with the SSH
// targets of its broker and controller hosts (by node id) and of its
// clients (by name).
func target(ctx context.Context, inv *inventory.Inventory, path string) (ports.Target, map[int32]remote.Target, map[string]remote.Target, error) {
	pt := ports.Target{Name: inv.Name, Lab: inv.Lab, KRaft: inv.KRaft(), ZKConnect: inv.ZooKeeper.Connect, Bootstrap: inv.Kafka.Bootstrap}
	brokers := map[int32]remote.Target{}
	host := func(b inventory.Broker, what string) (remote.Target, error) {
		t, err := SSHTarget(ctx, inv.SSHFor(b), b.Host)
		if err != nil {
			return t, configErr(fmt.Errorf("%s: %s %d: %w", path, what, b.ID, err))
		}
		brokers[b.ID] = t
		return t, nil
	}
	for _, b := range inv.Brokers {
		t, err := host(b, "broker")
		if err != nil {
			return pt, nil, nil, err
		}
		pt.Hosts = append(pt.Hosts, ports.Host{ID: b.ID, Host: b.Host, Stop: b.Stop, Start: b.Start, LogDirs: b.LogDirs, Config: b.Config, ServerLog: b.ServerLog,
			Login: t.User, Sudo: t.Become == inventory.BecomeSudo})
	}
	// KRaft controllers' node ids differ from every broker id (the
	// inventory checks it) but a combined node's, whose two entries are one
	// host: the fleet reaches both by id.
	for _, b := range inv.KRaftControllers {
		t, err := host(b, "KRaft controller")
		if err != nil {
			return pt, nil, nil, err
		}
		pt.Controllers = append(pt.Controllers, ports.Host{ID: b.ID, Host: b.Host, Stop: b.Stop, Start: b.Start, Addr: b.Listener, Config: b.Config,
			Login: t.User, Sudo: t.Become == inventory.BecomeSudo})
	}
	clients := map[string]remote.Target{}
	for _, cl := range inv.Clients {
		t, err := SSHTarget(ctx, inv.SSHFor(inventory.Broker{}), cl.Host)
		if err != nil {
			return pt, nil, nil, configErr(fmt.Errorf("%s: client %s: %w", path, cl.Name, err))
		}
		clients[cl.Name] = t
		pt.Clients = append(pt.Clients, ports.Client{Name: cl.Name, Host: cl.Host, Stop: cl.Stop, Start: cl.Start,
			Login: t.User, Sudo: t.Become == inventory.BecomeSudo})
	}
	return pt, brokers, clients, nil
}

// dial opens the ZooKeeper session (not for a KRaft cluster) and the Kafka
// client, proves the brokers accept its security and sets the controller
// client's options.
func (c *Clients) dial(ctx context.Context, zopts zookeeper.Options, kopts []kgo.Opt) error {
	inv := c.Inv
	var err error
	// A KRaft cluster has no ZooKeeper: its ports.ZK stays nil, and what
	// needs ZooKeeper says so.
	if !inv.KRaft() {
		zctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if c.ZK, err = zookeeper.Dial(zctx, inv.ZooKeeper.Connect, zopts); err != nil {
			// Not reached: nothing was attempted. Exit 2 from every command
			// (diagnose, plan, run, resume, restore) alike.
			return configErr(fmt.Errorf("%w; %w", err, steps.ErrNothingDone))
		}
	}
	if c.Kafka, err = kafka.New(inv.Kafka.Bootstrap, kopts...); err != nil {
		c.Close()
		return err
	}
	if err := c.Kafka.CheckSecurity(ctx); err != nil {
		c.Close()
		return configErr(fmt.Errorf("%s: %w", inv.Kafka.ClientProperties, err))
	}
	if f := inv.Kafka.ControllerClientProperties; f != "" {
		copts, _, csecrets, err := KafkaOptions(f, "kafka.controller_client_properties", inv.Kafka.Krb5Conf)
		if err != nil {
			c.Close()
			return err
		}
		c.Secrets = append(c.Secrets, csecrets...)
		c.Kafka.SetControllerOptions(copts)
	}
	return nil
}

// wire sets the ports over the open adapters: ZooKeeper when there is one
// (never an interface holding a nil *Conn), the run's lease, Kafka and the
// hosts.
func (c *Clients) wire() {
	if c.ZK != nil {
		c.Ports.ZK = c.ZK
		// One run per cluster: an ephemeral znode of this, the run's own
		// session.
		c.Ports.Lease = lease.NewZK(c.ZK, c.ZK.SessionTimeout())
	} else if len(c.Ports.Target.Controllers) > 0 {
		// KRaft: a lock directory on a majority of the controller hosts.
		c.Ports.Lease = lease.NewKRaft(c.Fleet, c.Kafka, c.Ports.Target.Controllers)
	}
	c.Ports.Kafka, c.Ports.Hosts = c.Kafka, c.Fleet
}
