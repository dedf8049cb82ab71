package drill

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func fakeCluster(t *testing.T, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestTrafficCountsWhatItWrites(t *testing.T) {
	c := fakeCluster(t, "orders", "bystander")
	addrs := c.ListenAddrs()
	tr, err := StartTraffic(TrafficOptions{Bootstrap: addrs, Topics: []string{"orders", "bystander"}, Group: "drill", Rate: 100, DeliveryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s := tr.Snapshot(); s["orders"].Consumed < 50 || s["bystander"].Consumed < 50; s = tr.Snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("traffic did not flow: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := tr.Snapshot()["orders"]; !s.Flowing(time.Now(), 2*time.Second) {
		t.Fatalf("not flowing: %+v", s)
	}
	final := tr.Stop(10 * time.Second)
	for _, topic := range []string{"orders", "bystander"} {
		f := final[topic]
		if f.Sent == 0 || f.Acked != f.Sent || f.Failed != 0 || f.Consumed != f.Acked || f.Lost != 0 || f.Duplicated != 0 || f.Foreign != 0 {
			t.Fatalf("%s: %+v", topic, f)
		}
		if ours, other, err := ReadBack(context.Background(), addrs, topic); err != nil || int64(ours) != f.Acked || other != 0 {
			t.Fatalf("%s: the topic holds %d of our records and %d others; the traffic says %d acknowledged", topic, ours, other, f.Acked)
		}
	}
	if again := tr.Stop(time.Second); again["orders"].Acked != final["orders"].Acked || again["orders"].Lost != final["orders"].Lost {
		t.Fatalf("a second Stop changed the counts: %+v vs %+v", again["orders"], final["orders"])
	}
}

// A topic whose writes the cluster refuses (no ACL lets the traffic's user
// at it): every send fails, none is acknowledged, none counts as lost, and
// the error is kept; the bystander flows.
func TestTrafficCountsRefusedWrites(t *testing.T) {
	allow := func(rt kmsg.ACLResourceType, name string) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "orders", "bystander"),
		kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
		kfake.User("PLAIN", "app", "app", allow(kmsg.ACLResourceTypeCluster, "kafka-cluster"),
			allow(kmsg.ACLResourceTypeTopic, "bystander"), allow(kmsg.ACLResourceTypeGroup, "drill-bystander")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	tr, err := StartTraffic(TrafficOptions{Bootstrap: c.ListenAddrs(), Topics: []string{"orders", "bystander"}, Group: "drill", Rate: 50,
		DeliveryTimeout: 3 * time.Second, Client: []kgo.Opt{kgo.SASL(plain.Auth{User: "app", Pass: "app"}.AsMechanism())}})
	if err != nil {
		t.Fatal(err)
	}
	// Stop once the refusals and the bystander's acknowledgements came in.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s := tr.Snapshot()
		if s["orders"].Failed > 0 && s["bystander"].Acked > 0 && s["bystander"].Consumed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refused write on orders, or no bystander traffic, within 10s: %+v", s)
		}
	}
	final := tr.Stop(5 * time.Second)
	o, b := final["orders"], final["bystander"]
	if o.Sent == 0 || o.Acked != 0 || o.Failed != o.Sent || o.Lost != 0 || len(o.Errors) == 0 || !strings.Contains(strings.Join(o.Errors, "\n"), "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("orders: %+v", o)
	}
	if b.Acked == 0 || b.Failed != 0 || b.Lost != 0 || b.Consumed != b.Acked {
		t.Fatalf("bystander: %+v", b)
	}
}

// A paused topic's customers detach — no writes, no member in its group —
// and come back on Resume; the bystander flows throughout.
func TestTrafficPauseDetaches(t *testing.T) {
	c := fakeCluster(t, "orders", "bystander")
	addrs := c.ListenAddrs()
	tr, err := StartTraffic(TrafficOptions{Bootstrap: addrs, Topics: []string{"orders", "bystander"}, Group: "drill", Rate: 100, DeliveryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func(map[string]Counts) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(tr.Snapshot()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, tr.Snapshot())
			}
		}
	}
	waitFor("flowing", func(s map[string]Counts) bool { return s["orders"].Consumed > 20 })
	if err := tr.Pause("orders"); err != nil {
		t.Fatal(err)
	}
	// Pause returned: no Produce call is in progress and none will come.
	// While the bystander sends 50 more records, orders gets none.
	before := tr.Snapshot()
	waitFor("the bystander flowing on", func(s map[string]Counts) bool { return s["bystander"].Sent >= before["bystander"].Sent+50 })
	after := tr.Snapshot()
	if after["orders"].Sent != before["orders"].Sent || after["bystander"].Sent <= before["bystander"].Sent {
		t.Fatalf("paused orders still written, or bystander stopped: %+v → %+v", before, after)
	}
	adm, err := kadm.NewOptClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	groups, err := adm.DescribeGroups(context.Background(), "drill-orders", "drill-bystander")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(groups["drill-orders"].Members); n != 0 {
		t.Fatalf("paused orders' group still has %d members", n)
	}
	if n := len(groups["drill-bystander"].Members); n != 1 {
		t.Fatalf("bystander's group has %d members", n)
	}
	if got := tr.Paused(); len(got) != 1 || got[0] != "orders" {
		t.Fatalf("Paused() = %v", got)
	}
	if err := tr.Pause("nope"); err == nil {
		t.Fatal("pausing an unknown topic: no error")
	}
	if err := tr.Resume("orders"); err != nil {
		t.Fatal(err)
	}
	sent := tr.Snapshot()["orders"].Sent
	waitFor("resumed", func(s map[string]Counts) bool { return s["orders"].Consumed > sent })
	final := tr.Stop(10 * time.Second)
	if o := final["orders"]; o.Lost != 0 || o.Duplicated != 0 || o.Consumed != o.Acked {
		t.Fatalf("orders: %+v", o)
	}
}

// Pause does not wait for the delivery timeout: records stuck on a topic
// the cluster does not serve are flushed for the grace period, then
// dropped and counted as failed — as a client's shutdown drops them.
func TestPauseDropsStuckRecordsAfterTheGrace(t *testing.T) {
	defer func(g time.Duration) { pauseGrace = g }(pauseGrace)
	pauseGrace = 500 * time.Millisecond
	c := fakeCluster(t, "orders")
	tr, err := StartTraffic(TrafficOptions{Bootstrap: c.ListenAddrs(), Topics: []string{"orders", "nowhere"}, Group: "drill", Rate: 100, DeliveryTimeout: time.Minute,
		Client: []kgo.Opt{kgo.UnknownTopicRetries(-1)}}) // the records to nowhere wait: stuck until the delivery timeout
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop(time.Second)
	for deadline := time.Now().Add(10 * time.Second); tr.Snapshot()["nowhere"].Sent < 20; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no sends to nowhere: %+v", tr.Snapshot())
		}
	}
	start := time.Now()
	if err := tr.Pause("nowhere"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Pause took %s with a 500ms grace: it waited for the delivery timeout", took)
	}
	s := tr.Snapshot()["nowhere"]
	if s.Acked != 0 || s.Failed != s.Sent || s.Sent == 0 || s.Lost != 0 {
		t.Fatalf("after the pause: %+v, want every send failed", s)
	}
}
