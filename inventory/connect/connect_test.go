package connect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/inventory/live"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// configs is a fake of the brokers' quorum settings: a value or an error
// per broker and key (controller.quorum.voters when the key is empty); a
// broker or key it does not know fails the test. Its Quorum is a dynamic
// quorum's leader's answer (nil: nobody answers).
type configs map[int32]map[string]struct {
	v   string
	err error
}

type quorumOf struct {
	configs
	q     *ports.Quorum
	asked *[]string
}

func (c configs) BrokerConfig(_ context.Context, id int32, key string) (string, error) {
	r, ok := c[id][key]
	if !ok {
		if key == "controller.listener.names" {
			return "", errors.New("not set")
		}
		panic(fmt.Sprintf("unexpected BrokerConfig(%d, %s)", id, key))
	}
	return r.v, r.err
}

func (c configs) Quorum(context.Context, []string) (ports.Quorum, error) {
	panic("unexpected Quorum: a static quorum's voters are in the config")
}

func (c quorumOf) Quorum(_ context.Context, addrs []string) (ports.Quorum, error) {
	*c.asked = append(*c.asked, addrs...)
	if c.q == nil {
		return ports.Quorum{}, errors.New("no controller answered")
	}
	return *c.q, nil
}

// static is one broker's controller.quorum.voters (or its error).
func static(v string, err error) map[string]struct {
	v   string
	err error
} {
	return map[string]struct {
		v   string
		err error
	}{"controller.quorum.voters": {v, err}}
}

// dynamic is one broker's settings of a dynamic quorum.
func dynamic(bootstrap, listener string) map[string]struct {
	v   string
	err error
} {
	return map[string]struct {
		v   string
		err error
	}{"controller.quorum.voters": {v: ""}, "controller.quorum.bootstrap.servers": {v: bootstrap}, "controller.listener.names": {v: listener}}
}

// TestVoters: the first broker that answers decides; one that does not is
// passed over; a value that is not id@host:port names the broker.
func TestVoters(t *testing.T) {
	down := errors.New("broker down")
	three := "3000@c1:9093,3001@c2:9093,3002@[::1]:9093"
	for _, tc := range []struct {
		name  string
		kc    configs
		want  []live.Voter
		error string
	}{
		{"first answers", configs{1: static(three, nil), 2: static("9@x:1", nil)}, []live.Voter{{ID: 3000, Host: "c1", Addr: "c1:9093"}, {ID: 3001, Host: "c2", Addr: "c2:9093"}, {ID: 3002, Host: "::1", Addr: "[::1]:9093"}}, ""},
		{"first down, second answers", configs{1: static("", down), 2: static("3000@c1:9093", nil)}, []live.Voter{{ID: 3000, Host: "c1", Addr: "c1:9093"}}, ""},
		{"no voters and no bootstrap servers", configs{1: {"controller.quorum.voters": {v: "  "}, "controller.quorum.bootstrap.servers": {v: ""}}, 2: static(three, nil)}, nil, ""},
		{"nobody answers", configs{1: static("", down), 2: static("", down)}, nil, ""},
		{"malformed", configs{1: static("", down), 2: static("c1:9093", nil)}, nil, `broker 2: controller.quorum.voters entry "c1:9093" is not id@host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Voters(context.Background(), tc.kc, []ports.BrokerNode{{ID: 1}, {ID: 2}})
			if tc.error != "" {
				if err == nil || err.Error() != tc.error {
					t.Fatalf("error %v, want %q", err, tc.error)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("voters %+v (%v), want %+v", got, err, tc.want)
			}
		})
	}
}

// TestDynamicVoters: a dynamic quorum's voters come from its leader
// (DescribeQuorum v2), asked at the bootstrap servers, each at its
// controller listener (controller.listener.names); a leader that does not
// answer, or a voter without that listener, is an error saying to list
// the controllers by hand.
func TestDynamicVoters(t *testing.T) {
	q := &ports.Quorum{Leader: 3001, Voters: []ports.Voter{{ID: 3001}, {ID: 3002}},
		Listeners: map[int32][]ports.Listener{3001: {{Name: "CONTROLLER", Host: "c1", Port: 9093}, {Name: "OTHER", Host: "x", Port: 1}}, 3002: {{Name: "CONTROLLER", Host: "::1", Port: 9094}}}}
	var asked []string
	got, err := Voters(context.Background(), quorumOf{configs{1: dynamic("c1:9093, c2:9093", "CONTROLLER")}, q, &asked}, []ports.BrokerNode{{ID: 1}})
	want := []live.Voter{{ID: 3001, Host: "c1", Addr: "c1:9093"}, {ID: 3002, Host: "::1", Addr: "[::1]:9094"}}
	if err != nil || !slices.Equal(got, want) || !slices.Equal(asked, []string{"c1:9093", "c2:9093"}) {
		t.Fatalf("voters %+v (%v) asked at %v; want %+v asked at both bootstrap servers", got, err, asked, want)
	}
	if _, err := Voters(context.Background(), quorumOf{configs{1: dynamic("c1:9093", "CONTROLLER")}, nil, &asked}, []ports.BrokerNode{{ID: 1}}); err == nil || !strings.Contains(err.Error(), "its leader did not answer DescribeQuorum") || !strings.Contains(err.Error(), "kraft_controllers") {
		t.Fatalf("a leader that does not answer: %v", err)
	}
	if _, err := Voters(context.Background(), quorumOf{configs{1: dynamic("c1:9093", "CTRL")}, q, &asked}, []ports.BrokerNode{{ID: 1}}); err == nil || !strings.Contains(err.Error(), `names no "CTRL" listener of voter 3001`) {
		t.Fatalf("a voter without the controller listener: %v", err)
	}
}

// kraftInventory is a KRaft inventory of a kfake cluster: its brokers, a
// controller, a client, no SSH config evaluated.
func kraftInventory(t *testing.T, opts ...kfake.Opt) (*inventory.Inventory, *kfake.Cluster) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	inv := &inventory.Inventory{Name: "k", Mode: inventory.ModeKRaft, Path: "/inv.yaml",
		Kafka:            inventory.Kafka{Bootstrap: c.ListenAddrs()},
		SSH:              inventory.SSH{User: "ops", Become: inventory.BecomeSudo, Config: inventory.SSHConfigNone},
		Brokers:          []inventory.Broker{{ID: 1, Host: "b1", Stop: "stop", Start: "start", LogDirs: []string{"/data"}}},
		KRaftControllers: []inventory.Broker{{ID: 3000, Host: "c1", Listener: "c1:9093", Stop: "cstop", Start: "cstart"}},
		Clients:          []inventory.Client{{Name: "app", Host: "a1", Stop: "astop", Start: "astart"}},
	}
	return inv, c
}

// TestOpenKRaft: a KRaft inventory opens without ZooKeeper (no interface
// holding a nil *Conn), with the hosts, controllers and clients as the
// engine sees them and the controllers' lease.
func TestOpenKRaft(t *testing.T) {
	inv, _ := kraftInventory(t)
	cl, err := Open(context.Background(), inv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p := cl.Ports
	if cl.ZK != nil || p.ZK != nil || p.Kafka == nil || p.Hosts == nil || p.Lease == nil {
		t.Fatalf("ports: ZK %v (conn %v), Kafka %v, Hosts %v, Lease %v", p.ZK, cl.ZK, p.Kafka, p.Hosts, p.Lease)
	}
	want := ports.Target{Name: "k", KRaft: true, Bootstrap: inv.Kafka.Bootstrap,
		Hosts:       []ports.Host{{ID: 1, Host: "b1", Stop: "stop", Start: "start", LogDirs: []string{"/data"}, Login: "ops", Sudo: true}},
		Controllers: []ports.Host{{ID: 3000, Host: "c1", Stop: "cstop", Start: "cstart", Addr: "c1:9093", Login: "ops", Sudo: true}},
		Clients:     []ports.Client{{Name: "app", Host: "a1", Stop: "astop", Start: "astart", Login: "ops", Sudo: true}},
	}
	if got := p.Target; got.Name != want.Name || got.KRaft != want.KRaft || !slices.Equal(got.Bootstrap, want.Bootstrap) ||
		len(got.Hosts) != 1 || !slices.Equal(got.Hosts[0].LogDirs, want.Hosts[0].LogDirs) ||
		got.Hosts[0].Login != "ops" || !got.Hosts[0].Sudo || len(got.Controllers) != 1 || got.Controllers[0].Addr != "c1:9093" ||
		!slices.Equal(got.Clients, want.Clients) {
		t.Fatalf("target %+v, want %+v", got, want)
	}
	if len(cl.Secrets) != 0 {
		t.Fatalf("secrets of a PLAINTEXT inventory: %q", cl.Secrets)
	}
	if _, err := cl.Kafka.DescribeCluster(context.Background()); err != nil {
		t.Fatalf("the Kafka client does not answer: %v", err)
	}
}

// TestOpenSecrets: the password a client.properties holds is a secret of
// the clients. (A password the brokers refuse is the secure lab's: kfake
// drops the connection where Kafka answers SASL_AUTHENTICATION_FAILED.)
func TestOpenSecrets(t *testing.T) {
	inv, _ := kraftInventory(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "s3cret-pw"))
	inv.Kafka.ClientProperties = filepath.Join(t.TempDir(), "client.properties")
	body := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n" +
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="s3cret-pw";` + "\n"
	if err := os.WriteFile(inv.Kafka.ClientProperties, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cl, err := Open(context.Background(), inv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if !slices.Contains(cl.Secrets, "s3cret-pw") {
		t.Fatalf("the SASL password is not kept out of the journal: secrets %q", cl.Secrets)
	}
}

// TestOpenConfigErrors: what the inventory or a file it names gets wrong
// is a ConfigError (exit 2), said before anything reaches the cluster.
func TestOpenConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tc := range []struct {
		name    string
		change  func(*inventory.Inventory)
		prefix  string
		nothing bool // wraps steps.ErrNothingDone
	}{
		{"client properties missing", func(inv *inventory.Inventory) { inv.Kafka.ClientProperties = missing }, "kafka.client_properties: ", true},
		{"controller client properties missing", func(inv *inventory.Inventory) { inv.Kafka.ControllerClientProperties = missing }, "kafka.controller_client_properties: ", true},
		{"ZooKeeper TLS config missing", func(inv *inventory.Inventory) { inv.ZooKeeper.TLSConfigFile = missing }, "zookeeper.tls_config_file: ", true},
		{"ZooKeeper password unset", func(inv *inventory.Inventory) {
			inv.ZooKeeper.Auth = &inventory.ZKAuth{User: "u", PasswordEnv: "KREMEDY_TEST_UNSET_PASSWORD"}
		}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv, _ := kraftInventory(t)
			tc.change(inv)
			_, err := Open(context.Background(), inv, Options{})
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tc.prefix) || tc.nothing != errors.Is(err, steps.ErrNothingDone) {
				t.Fatalf("%v: want a ConfigError starting %q (nothing done: %v)", err, tc.prefix, tc.nothing)
			}
		})
	}
	if _, err := Load(context.Background(), missing, Options{}); !errors.As(err, new(*ConfigError)) {
		t.Fatalf("an inventory that cannot be read: %v, want a ConfigError", err)
	}
}
