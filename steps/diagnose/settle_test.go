package diagnose_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// TestTransientIsSettling: a topic ZooKeeper has that no broker serves yet
// is settling (info, no runbook, exit 0) while it is younger than the
// settle window, or while a reassignment or a preferred-leader election of
// it is in flight; the same state on a topic created long ago, with nothing
// in flight, is the critical stale-metadata finding, as before.
func TestTransientIsSettling(t *testing.T) {
	for name, tc := range map[string]struct {
		setup    func(f *fixture)
		settling string // "" for the critical finding
	}{
		"created just now": {func(f *fixture) { f.zk.Created(kafkazk.TopicPath("fresh"), time.Now()) }, "created "},
		"being reassigned": {func(f *fixture) {
			f.zk.Put(kafkazk.ReassignPath, `{"version":1,"partitions":[{"topic":"fresh","partition":0,"replicas":[1,2]}]}`)
		}, "a partition reassignment of it is in flight"},
		"electing preferred leaders": {func(f *fixture) {
			f.zk.Put(diagnose.PreferredElectionPath, `{"version":1,"partitions":[{"topic":"fresh","partition":0}]}`)
		}, "a preferred-leader election of it is in flight"},
		"created long ago": {func(f *fixture) {}, ""},
		"created just now, then rewritten": {func(f *fixture) {
			f.zk.Created(kafkazk.TopicPath("fresh"), time.Now())
			f.zk.Bump(kafkazk.TopicPath("fresh"))
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				f.zk.Remove(kafkazk.DeleteTopicPath("orders"))
				f.zk.Put(kafkazk.TopicPath("fresh"), `{"version":3,"partitions":{"0":[1,2,3]},"topic_id":"FFFFFFFFFFFFFFFFFFFFFF"}`)
				f.zk.Put(kafkazk.PartitionStatePath("fresh", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`)
				for id := int32(1); id <= 3; id++ {
					f.kafka.Stale[id] = map[string]ports.TopicView{"fresh": {Name: "fresh", Err: ports.KafkaUnknownTopicOrPartition}}
				}
				tc.setup(f)
				d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "fresh", Settle: 2 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, x := range d.Findings {
					got = append(got, x.Kind)
					if tc.settling != "" && (x.Severity != diagnose.Info || x.Runbook != "") {
						t.Errorf("a settling topic has a %s finding with runbook %q: %s", x.Severity, x.Runbook, x.Summary)
					}
				}
				if tc.settling == "" {
					if d.Healthy || len(d.Findings) != 1 || d.Findings[0].Kind != diagnose.FindStaleMetadata || d.Findings[0].Severity != diagnose.Critical {
						t.Fatalf("an old topic no broker serves: %v", got)
					}
					return
				}
				if !d.Healthy || len(d.Findings) != 1 || d.Findings[0].Kind != diagnose.FindSettling || !strings.Contains(d.Findings[0].Summary, tc.settling) ||
					!strings.Contains(strings.Join(d.Findings[0].Evidence, "\n"), "would be stale-metadata [critical]") {
					t.Fatalf("findings %v: %+v", got, d.Findings)
				}
			})
		})
	}
}

// TestYoungTopicOfADownBrokerIsNotSettling: a topic created a moment ago
// whose replicas lag because a broker is down is explained by that broker,
// never called settling.
func TestYoungTopicOfADownBrokerIsNotSettling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.zk.Remove(kafkazk.DeleteTopicPath("orders"))
		f.zk.Created(kafkazk.TopicPath("orders-v2"), time.Now())
		f.hosts.Running[3] = false
		f.zk.Remove("/brokers/ids/3")
		for p := 0; p < 3; p++ {
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", int32(p)), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":1,"isr":[1,2]}`)
		}
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2", Settle: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		causes := d.Causes()
		if len(causes) != 1 || causes[0].Kind != diagnose.FindBrokerDown {
			t.Fatalf("causes %v", kinds(d))
		}
		for _, x := range d.Findings {
			if x.Kind == diagnose.FindSettling {
				t.Fatalf("a topic whose broker is down is called settling: %+v", x)
			}
		}
	})
}
