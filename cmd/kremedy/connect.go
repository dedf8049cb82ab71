package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/internal/javatls"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/lease"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/remote"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// cluster is an inventory turned into the engine's ports.
type cluster struct {
	inv   *inventory.Inventory
	ports ports.Cluster
	zk    *zookeeper.Conn
	kafka *kafka.Client
	fleet *remote.Fleet
	// secrets never reach the journal or the report.
	secrets []string
}

func (c *cluster) Close() {
	if c.zk != nil {
		c.zk.Close()
	}
	if c.kafka != nil {
		c.kafka.Close()
	}
	if c.fleet != nil {
		c.fleet.Close()
	}
}

func sshTarget(s inventory.SSH, host string) (remote.Target, error) {
	t := remote.Target{Host: host, Port: s.Port, User: s.User, UseAgent: s.Agent, ProxyJump: s.ProxyJump,
		ConnectTimeout: s.ConnectTimeout.Duration, Become: s.Become,
		// As ssh: the agent's keys when one answers at SSH_AUTH_SOCK.
		TryAgent: os.Getenv("SSH_AUTH_SOCK") != ""}
	if s.IdentityFile != "" {
		t.IdentityFiles = []string{s.IdentityFile}
	}
	if s.KnownHosts != "" {
		t.KnownHostsFiles = []string{s.KnownHosts}
	}
	if s.Config == inventory.SSHConfigNone {
		return t, nil
	}
	// As `ssh host` would: the OpenSSH client evaluates the config (Match
	// blocks, Include, ProxyJump, ProxyCommand, HostKeyAlias, default
	// identities…). Host keys are still checked against known_hosts,
	// never relaxed.
	return remote.ResolveWithSSH(context.Background(), t, s.Config)
}

// readProperties reads a Java properties file the inventory names under
// key, config providers resolved, as Kafka's tools read it.
func readProperties(f, key string) (map[string]string, error) {
	b, err := os.ReadFile(f)
	if err != nil {
		return nil, usageErr(fmt.Errorf("%s: %w; %w", key, err, steps.ErrNothingDone))
	}
	props, err := kafka.ParseProperties(b)
	if err != nil {
		return nil, usageErr(fmt.Errorf("%s: %w; %w", f, err, steps.ErrNothingDone))
	}
	return props, nil
}

// clientPropertiesAt reads the client.properties file ("" is PLAINTEXT)
// the inventory names under key into franz-go options, its
// security.protocol and the secrets it holds; a GSSAPI login reads
// krb5Conf ("": $KRB5_CONFIG, else /etc/krb5.conf).
func clientPropertiesAt(f, key, krb5Conf string) (opts []kgo.Opt, protocol string, secrets []string, err error) {
	if f == "" {
		return nil, "PLAINTEXT", nil, nil
	}
	props, err := readProperties(f, key)
	if err != nil {
		return nil, "", nil, err
	}
	if opts, secrets, err = kafka.OptionsWith(props, krb5Conf); err != nil {
		return nil, "", nil, usageErr(fmt.Errorf("%s: %w; %w", f, err, steps.ErrNothingDone))
	}
	protocol = strings.ToUpper(props["security.protocol"])
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	return opts, protocol, secrets, nil
}

// connect loads an inventory and opens ZooKeeper and Kafka clients and the
// SSH fleet. Connections to hosts happen lazily, on first use.
func connect(ctx context.Context, path string) (*cluster, error) {
	inv, err := inventory.Load(path)
	if err != nil {
		return nil, usageErr(err)
	}
	c := &cluster{inv: inv}
	kopts, _, secrets, err := clientPropertiesAt(inv.Kafka.ClientProperties, "kafka.client_properties", inv.Kafka.Krb5Conf)
	if err != nil {
		return nil, err
	}
	c.secrets = secrets
	c.ports.Target = ports.Target{Name: inv.Name, Lab: inv.Lab, KRaft: inv.KRaft(), ZKConnect: inv.ZooKeeper.Connect, Bootstrap: inv.Kafka.Bootstrap}
	brokers := map[int32]remote.Target{}
	for _, b := range inv.Brokers {
		if brokers[b.ID], err = sshTarget(inv.SSHFor(b), b.Host); err != nil {
			return nil, usageErr(fmt.Errorf("%s: broker %d: %w", path, b.ID, err))
		}
		t := brokers[b.ID]
		c.ports.Target.Hosts = append(c.ports.Target.Hosts, ports.Host{ID: b.ID, Host: b.Host, Stop: b.Stop, Start: b.Start, LogDirs: b.LogDirs, Config: b.Config,
			Login: t.User, Sudo: t.Become == inventory.BecomeSudo})
	}
	// KRaft controllers' node ids differ from every broker id (the
	// inventory checks it): the fleet reaches both by id.
	for _, b := range inv.KRaftControllers {
		if brokers[b.ID], err = sshTarget(inv.SSHFor(b), b.Host); err != nil {
			return nil, usageErr(fmt.Errorf("%s: KRaft controller %d: %w", path, b.ID, err))
		}
		t := brokers[b.ID]
		c.ports.Target.Controllers = append(c.ports.Target.Controllers, ports.Host{ID: b.ID, Host: b.Host, Stop: b.Stop, Start: b.Start, Addr: b.Listener, Config: b.Config,
			Login: t.User, Sudo: t.Become == inventory.BecomeSudo})
	}
	clients := map[string]remote.Target{}
	for _, cl := range inv.Clients {
		if clients[cl.Name], err = sshTarget(inv.SSHFor(inventory.Broker{}), cl.Host); err != nil {
			return nil, usageErr(fmt.Errorf("%s: client %s: %w", path, cl.Name, err))
		}
		t := clients[cl.Name]
		c.ports.Target.Clients = append(c.ports.Target.Clients, ports.Client{Name: cl.Name, Host: cl.Host, Stop: cl.Stop, Start: cl.Start,
			Login: t.User, Sudo: t.Become == inventory.BecomeSudo})
	}
	c.fleet = remote.NewFleet(brokers, clients)
	opts := zookeeper.Options{MaxInFlight: inv.ZooKeeper.MaxInFlight}
	if verbose {
		// The adapters' own logs, on stderr: go-zookeeper's and franz-go's.
		opts.Log = os.Stderr
		kopts = append(kopts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string { return "kafka: " + time.Now().Format("15:04:05.000000 ") })))
	}
	if f := inv.ZooKeeper.TLSConfigFile; f != "" {
		props, err := readProperties(f, "zookeeper.tls_config_file")
		if err != nil {
			return nil, err
		}
		if opts.TLS, err = javatls.ZooKeeper(props); err != nil {
			return nil, usageErr(fmt.Errorf("%s: %w; %w", f, err, steps.ErrNothingDone))
		}
	}
	if inv.ZooKeeper.Auth != nil {
		pw, err := inv.ZKPassword()
		if err != nil {
			return nil, usageErr(err)
		}
		opts.DigestAuth = inv.ZooKeeper.Auth.User + ":" + pw
		c.secrets = append(c.secrets, pw)
	}
	// A KRaft cluster has no ZooKeeper: its ports.ZK stays nil, and what
	// needs ZooKeeper says so.
	if !inv.KRaft() {
		zctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if c.zk, err = zookeeper.Dial(zctx, inv.ZooKeeper.Connect, opts); err != nil {
			// Not reached: nothing was attempted. Exit 2 from every command
			// (diagnose, plan, run, resume, restore) alike.
			return nil, usageErr(fmt.Errorf("%w; %w", err, steps.ErrNothingDone))
		}
	}
	if c.kafka, err = kafka.New(inv.Kafka.Bootstrap, kopts...); err != nil {
		c.Close()
		return nil, failedErr(err)
	}
	if err := c.kafka.CheckSecurity(ctx); err != nil {
		c.Close()
		return nil, usageErr(fmt.Errorf("%s: %w", inv.Kafka.ClientProperties, err))
	}
	if f := inv.Kafka.ControllerClientProperties; f != "" {
		copts, _, csecrets, err := clientPropertiesAt(f, "kafka.controller_client_properties", inv.Kafka.Krb5Conf)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.secrets = append(c.secrets, csecrets...)
		c.kafka.SetControllerOptions(copts)
	}
	if c.zk != nil { // never an interface holding a nil *Conn
		c.ports.ZK = c.zk
		// One run per cluster: an ephemeral znode of this, the run's own
		// session.
		c.ports.Lease = lease.NewZK(c.zk, c.zk.SessionTimeout())
	} else if len(c.ports.Target.Controllers) > 0 {
		// KRaft: a lock directory on a majority of the controller hosts.
		c.ports.Lease = lease.NewKRaft(c.fleet, c.kafka, c.ports.Target.Controllers)
	}
	c.ports.Kafka, c.ports.Hosts = c.kafka, c.fleet
	return c, nil
}
