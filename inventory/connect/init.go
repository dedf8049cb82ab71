package connect

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/inventory/live"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/remote"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// Init reads a live ZooKeeper-mode cluster through o.ZooKeeper.Connect
// (session options zopts) and returns its inventory (live.Init): brokers
// from their registrations, reached over Kafka through o.Bootstrap (by
// default every broker's listener that speaks the client properties'
// security.protocol) and over SSH.
func Init(ctx context.Context, o live.Options, zopts zookeeper.Options) (*inventory.Inventory, error) {
	zc, err := zookeeper.Dial(ctx, o.ZooKeeper.Connect, zopts)
	if err != nil {
		return nil, configErr(fmt.Errorf("%w; %w", err, steps.ErrNothingDone))
	}
	defer zc.Close()
	regs, err := live.Registrations(ctx, zc)
	if err != nil {
		return nil, err
	}
	kopts, protocol, _, err := KafkaOptions(o.ClientProperties, "--client-properties", o.Krb5Conf)
	if err != nil {
		return nil, err
	}
	if len(o.Bootstrap) == 0 {
		if o.Bootstrap, err = live.Bootstrap(regs, protocol); err != nil {
			return nil, configErr(err)
		}
	}
	kc, err := initKafka(ctx, o.Bootstrap, kopts)
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	var nodes []node
	for _, r := range regs {
		nodes = append(nodes, node{r.ID, r.Host, "broker"})
	}
	fleet, err := initFleet(ctx, o.SSH, nodes)
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	return live.Init(ctx, regs, kc, fleet, o)
}

// InitKRaft reads a live KRaft cluster through its brokers (o.Bootstrap)
// and returns its inventory (live.InitKRaft): brokers from
// DescribeCluster, controllers from the brokers' controller.quorum.voters or
// a dynamic quorum's leader (Voters).
func InitKRaft(ctx context.Context, o live.Options) (*inventory.Inventory, error) {
	kopts, _, _, err := KafkaOptions(o.ClientProperties, "--client-properties", o.Krb5Conf)
	if err != nil {
		return nil, err
	}
	kc, err := initKafka(ctx, o.Bootstrap, kopts)
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	if f := o.ControllerClientProperties; f != "" {
		copts, _, _, err := KafkaOptions(f, "--controller-client-properties", o.Krb5Conf)
		if err != nil {
			return nil, err
		}
		kc.SetControllerOptions(copts)
	}
	cv, err := kc.DescribeCluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was written", err)
	}
	voters, err := Voters(ctx, kc, cv.Brokers)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was written", err)
	}
	var nodes []node
	for _, b := range cv.Brokers {
		nodes = append(nodes, node{b.ID, b.Host, "broker"})
	}
	for _, v := range voters {
		nodes = append(nodes, node{v.ID, v.Host, "controller"})
	}
	fleet, err := initFleet(ctx, o.SSH, nodes)
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	return live.InitKRaft(ctx, cv, voters, kc, fleet, o)
}

// BrokerConfigs is what Voters asks of Kafka (ports.Kafka has it).
type BrokerConfigs interface {
	BrokerConfig(ctx context.Context, broker int32, key string) (string, error)
	Quorum(ctx context.Context, addrs []string) (ports.Quorum, error)
}

// Voters finds a KRaft cluster's controllers through its brokers' configs:
// the first broker that answers decides. A static quorum's
// controller.quorum.voters lists them; a dynamic quorum (KIP-853: no
// voters, controller.quorum.bootstrap.servers) keeps its voter set in the
// metadata log, so its leader is asked (DescribeQuorum v2 names every
// voter's listeners; the one of controller.listener.names is taken). A
// broker that does not answer is passed over; a value that is not
// id@host:port,… is an error; a dynamic quorum whose leader cannot be
// asked is an error naming the bootstrap servers.
func Voters(ctx context.Context, kc BrokerConfigs, brokers []ports.BrokerNode) ([]live.Voter, error) {
	for _, b := range brokers {
		v, err := kc.BrokerConfig(ctx, b.ID, "controller.quorum.voters")
		if err != nil {
			continue
		}
		if strings.TrimSpace(v) != "" {
			voters, err := live.ParseVoters(v)
			if err != nil {
				return nil, fmt.Errorf("broker %d: %w", b.ID, err)
			}
			return voters, nil
		}
		return dynamicVoters(ctx, kc, b.ID)
	}
	return nil, nil
}

// dynamicVoters asks a dynamic quorum's leader, found through broker's
// controller.quorum.bootstrap.servers, for its voters' controller
// listeners. No bootstrap servers either: no voters (the operator lists
// them).
func dynamicVoters(ctx context.Context, kc BrokerConfigs, broker int32) ([]live.Voter, error) {
	bs, err := kc.BrokerConfig(ctx, broker, "controller.quorum.bootstrap.servers")
	if err != nil || strings.TrimSpace(bs) == "" {
		return nil, nil
	}
	var addrs []string
	for _, a := range strings.Split(bs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	names, _ := kc.BrokerConfig(ctx, broker, "controller.listener.names")
	listener, _, _ := strings.Cut(strings.TrimSpace(names), ",")
	q, err := kc.Quorum(ctx, addrs)
	if err != nil {
		way := "list the controllers in the inventory's kraft_controllers"
		if live.RefusedCredentials(err) {
			way = "the controllers' listener refused the credentials of --client-properties: give it its own with --controller-client-properties F (security.protocol, sasl.mechanism and a login that listener takes)"
		}
		return nil, fmt.Errorf("broker %d: a dynamic quorum (controller.quorum.bootstrap.servers=%s): its voters are in the metadata log and its leader did not answer DescribeQuorum: %w; %s", broker, bs, err, way)
	}
	var out []live.Voter
	for _, v := range q.Voters {
		l, ok := pickListener(q.Listeners[v.ID], strings.TrimSpace(listener))
		if !ok {
			return nil, fmt.Errorf("broker %d: a dynamic quorum: DescribeQuorum names no %q listener of voter %d (its listeners: %v; Kafka before 3.9 does not say); list the controllers in the inventory's kraft_controllers", broker, listener, v.ID, q.Listeners[v.ID])
		}
		out = append(out, live.Voter{ID: v.ID, Host: l.Host, Addr: net.JoinHostPort(l.Host, strconv.Itoa(l.Port))})
	}
	return out, nil
}

// pickListener is the listener named name, or the only one when name is
// empty.
func pickListener(ls []ports.Listener, name string) (ports.Listener, bool) {
	for _, l := range ls {
		if l.Name == name {
			return l, true
		}
	}
	if name == "" && len(ls) == 1 {
		return ls[0], true
	}
	return ports.Listener{}, false
}

// initKafka opens a Kafka client through bootstrap and proves the brokers
// accept its security.
func initKafka(ctx context.Context, bootstrap []string, kopts []kgo.Opt) (*kafka.Client, error) {
	kc, err := kafka.New(bootstrap, kopts...)
	if err != nil {
		return nil, err
	}
	if err := kc.CheckSecurity(ctx); err != nil {
		kc.Close()
		return nil, configErr(err)
	}
	return kc, nil
}

// node is a host inventory init reaches over SSH: a broker or a
// controller, by node id.
type node struct {
	id         int32
	host, what string
}

// initFleet is the SSH fleet over nodes, with the SSH settings init was
// given.
func initFleet(ctx context.Context, s inventory.SSH, nodes []node) (*remote.Fleet, error) {
	targets := map[int32]remote.Target{}
	for _, n := range nodes {
		t, err := SSHTarget(ctx, s, n.host)
		if err != nil {
			return nil, configErr(fmt.Errorf("%s %d (%s): %w", n.what, n.id, n.host, err))
		}
		targets[n.id] = t
	}
	return remote.NewFleet(targets, nil), nil
}
