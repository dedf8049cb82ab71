package diagnose_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// withoutGhost removes the fixture's ghost topic "orders" everywhere: the
// cluster then holds orders-v2 only, healthy.
func withoutGhost(f *fixture) {
	for _, p := range []string{kafkazk.TopicPath("orders"), kafkazk.ConfigTopicPath("orders"), kafkazk.DeleteTopicPath("orders")} {
		f.zk.Remove(p)
	}
	for id, dirs := range f.hosts.FS {
		for _, ents := range dirs {
			for name := range ents {
				if strings.HasPrefix(name, "orders-") && !strings.HasPrefix(name, "orders-v2") {
					delete(ents, name)
				}
			}
		}
		_ = id
	}
}

// TestMigrationReadiness: each condition that stalls or corrupts a ZooKeeper
// → KRaft migration makes the cluster not ready, names the blocker and why;
// a clean 3.9 cluster is ready; the check changes nothing.
func TestMigrationReadiness(t *testing.T) {
	cases := []struct {
		name  string
		setup func(f *fixture)
		want  []string // blocker kinds; nil = ready
	}{
		{"clean 3.9 cluster", withoutGhost, nil},
		{"the incident's ghost: a pending deletion", func(f *fixture) {}, []string{diagnose.FindStuckDeletion}},
		{"an assignment naming a broker that is gone", func(f *fixture) {
			withoutGhost(f)
			f.cachedBy(1, 2, 3)
			f.zk.Put(kafkazk.TopicPath("orders-v2"), `{"version":3,"partitions":{"0":[1,4],"1":[2,3,1],"2":[3,1,2]},"topic_id":"`+steptest.V2ID+`"}`)
		}, []string{diagnose.FindDisagreement, diagnose.FindStateNotInAssignment, diagnose.FindUnregisteredReplica}},
		{"a topic znode without topic_id", func(f *fixture) {
			withoutGhost(f)
			f.cachedBy(1, 2, 3)
			f.zk.Put(kafkazk.TopicPath("orders-v2"), `{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]}}`)
		}, []string{diagnose.FindMissingTopicID}},
		{"brokers on 2.8 with IBP 2.8", func(f *fixture) {
			withoutGhost(f)
			f.kafka.Release = ports.BrokerRelease{Guess: "v2.8", IBP: "2.8-IV1", DescribeProducers: true, MetadataIDs: true}
		}, []string{diagnose.FindMigrationJBOD, diagnose.FindMigrationRelease}}, // the fixture's brokers have two log dirs
		{"a null /migration left by zookeeper-security-migration", func(f *fixture) {
			withoutGhost(f)
			f.zk.Put(kafkazk.MigrationPath, "")
		}, []string{diagnose.FindMigrationZnode}},
		{"a reassignment in flight", func(f *fixture) {
			withoutGhost(f)
			f.zk.Put(kafkazk.ReassignPath, `{"version":1,"partitions":[]}`)
		}, []string{diagnose.FindMigrationReassignment}},
		{"a log without partition.metadata", func(f *fixture) {
			withoutGhost(f)
			f.hosts.AddDir(2, "/data/k2", "orders-v2-7", "")
		}, []string{diagnose.FindMigrationNoMetadata}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				tc.setup(f)
				d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Disk: true, Migration: true})
				if err != nil {
					t.Fatal(err)
				}
				m := d.Migration
				var got []string
				for _, id := range m.Blockers {
					kind, _, _ := strings.Cut(id, "/")
					got = append(got, kind)
					if m.Why[id] == "" {
						t.Errorf("blocker %s says nothing about the migration", id)
					}
				}
				slices.Sort(got)
				got = slices.Compact(got)
				if m.Ready != (tc.want == nil) || !slices.Equal(got, tc.want) {
					t.Fatalf("ready=%v blockers %v, want %v; findings %v", m.Ready, m.Blockers, tc.want, kinds(d))
				}
				if len(f.zk.Ops) != 0 || len(f.kafka.Created) != 0 {
					t.Fatalf("the readiness check changed something: %v %v", f.zk.Ops, f.kafka.Created)
				}
			})
		})
	}
}
