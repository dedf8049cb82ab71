package live_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/inventory/live"
	"github.com/kremedy/kremedy/steps/ports"
)

// dirsKafka answers LogDirs (DescribeLogDirs) with its broker's dirs; any
// other call panics.
type dirsKafka struct {
	ports.Kafka
	dirs map[int32][]string
}

func (k dirsKafka) LogDirs(_ context.Context, id int32) ([]string, error) {
	return slices.Clone(k.dirs[id]), nil
}

// noHosts reaches no host.
type noHosts struct{ ports.Hosts }

func (noHosts) Run(context.Context, int32, string, func(ports.Line)) error {
	return errors.New("no host in this test")
}

// TestInitWritesNoLogDirAScriptCouldMisread: a broker that reports a log
// dir kremedy would not put in a command (security review L4) gets no
// log_dirs in the inventory (not some of them: a cleanup would miss the
// others), and the inventory's notes name the dir.
func TestInitWritesNoLogDirAScriptCouldMisread(t *testing.T) {
	kc := dirsKafka{dirs: map[int32][]string{1: {"/data/ok", "/data/k[1]"}, 2: {"/data/b", "/data/a"}}}
	inv, err := live.Init(context.Background(), []live.Registration{{ID: 1, Host: "b1"}, {ID: 2, Host: "b2"}}, kc, noHosts{}, live.Options{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.Brokers[0].LogDirs; len(got) != 0 {
		t.Errorf("broker 1's log_dirs %q; want none", got)
	}
	if got := inv.Brokers[1].LogDirs; !slices.Equal(got, []string{"/data/a", "/data/b"}) {
		t.Errorf("broker 2's log_dirs %q", got)
	}
	if !strings.Contains(inv.Note, `broker 1: no log_dirs written: refused: broker 1's log dir "/data/k[1]"`) || !strings.Contains(inv.Note, "it holds '['") {
		t.Errorf("notes:\n%s", inv.Note)
	}
}

// TestInitKRaftCombinedNode: a voter whose node id is a broker's is a
// combined node (process.roles=broker,controller): its controller entry is
// the broker's own process (host, stop, start, config) with the voter's
// listener, whatever name controller.quorum.voters gives its host; a
// voter of its own stays as it was found.
func TestInitKRaftCombinedNode(t *testing.T) {
	kc := dirsKafka{dirs: map[int32][]string{1: {"/data/a"}, 2: {"/data/a"}}}
	cv := ports.ClusterView{Brokers: []ports.BrokerNode{{ID: 1, Host: "b1", Port: 9092}, {ID: 2, Host: "b2", Port: 9092}}}
	voters := []live.Voter{{ID: 1, Host: "b1.internal", Addr: "b1.internal:9093"}, {ID: 3001, Host: "c1", Addr: "c1:9093"}}
	inv, err := live.InitKRaft(context.Background(), cv, voters, kc, noHosts{}, live.Options{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	c, b := inv.KRaftControllers[0], inv.Brokers[0]
	if c.ID != 1 || c.Host != b.Host || c.Stop != b.Stop || c.Start != b.Start || c.Config != b.Config || c.Listener != "b1.internal:9093" || len(c.LogDirs) != 0 {
		t.Errorf("combined node 1: controller %+v, broker %+v", c, b)
	}
	if o := inv.KRaftControllers[1]; o.ID != 3001 || o.Host != "c1" {
		t.Errorf("controller 3001: %+v", o)
	}
	if !strings.Contains(inv.Note, "controller 1: a combined node (process.roles=broker,controller), listed with broker 1's host, stop, start and config") {
		t.Errorf("notes:\n%s", inv.Note)
	}
}

// TestInitKRaftSecuredNamesTheControllersProperties: on a secured cluster
// (client properties given), init writes the controllers' own client
// properties when given, and says to review them when not.
func TestInitKRaftSecuredNamesTheControllersProperties(t *testing.T) {
	kc := dirsKafka{dirs: map[int32][]string{1: {"/data/a"}}}
	cv := ports.ClusterView{Brokers: []ports.BrokerNode{{ID: 1, Host: "b1", Port: 9092}}}
	voters := []live.Voter{{ID: 3001, Host: "c1", Addr: "c1:9093"}}
	for _, tc := range []struct {
		o      live.Options
		review bool
	}{
		{live.Options{Name: "t"}, false},
		{live.Options{Name: "t", ClientProperties: "/etc/kafka/client.properties"}, true},
		{live.Options{Name: "t", ClientProperties: "/etc/kafka/client.properties", ControllerClientProperties: "/etc/kafka/controller.properties"}, false},
	} {
		inv, err := live.InitKRaft(context.Background(), cv, voters, kc, noHosts{}, tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if inv.Kafka.ControllerClientProperties != tc.o.ControllerClientProperties || strings.Contains(inv.Note, "REVIEW kafka.controller_client_properties") != tc.review {
			t.Errorf("%+v: controller_client_properties %q, notes:\n%s", tc.o, inv.Kafka.ControllerClientProperties, inv.Note)
		}
	}
}
