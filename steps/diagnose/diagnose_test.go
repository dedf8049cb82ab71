package diagnose_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"testing"

	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// fixture is the ghost-topic state (steptest.Ghost).
type fixture struct {
	*steptest.Cluster
	zk    *steptest.ZK
	hosts *steptest.Hosts
	kafka *steptest.Kafka
}

func newFixture(t *testing.T) *fixture {
	g := steptest.Ghost(t)
	return &fixture{Cluster: g, zk: g.ZK, hosts: g.Hosts, kafka: g.Kafka}
}

func kinds(d *diagnose.Diagnosis) []string {
	var out []string
	for _, f := range d.Findings {
		out = append(out, f.Kind+":"+f.Topic)
	}
	sort.Strings(out)
	return out
}

func TestDiagnoseDetectors(t *testing.T) {
	cases := []struct {
		name  string
		topic string
		setup func(f *fixture)
		want  []string
	}{
		{"healthy", "orders-v2", func(f *fixture) {}, nil},
		{"stuck deletion names the missing broker", "orders", func(f *fixture) {
			f.hosts.Running[3] = false
			f.zk.Remove("/brokers/ids/3")
		}, []string{"foreign-segments:orders", "stuck-deletion:orders"}},
		{"corrupt topic znode", "bad", func(f *fixture) { f.zk.Put(kafkazk.TopicPath("bad"), "{not json") }, []string{"corrupt-znode:bad"}},
		{"partition with no leader", "orders-v2", func(f *fixture) {
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":3,"isr":[2]}`)
		}, []string{"offline-partitions:orders-v2", "under-replicated:orders-v2"}},
		{"broker that does not answer", "orders-v2", func(f *fixture) { f.hosts.Running[2] = false }, []string{"broker-unreachable:"}},
		{"stale cache on one broker", "orders-v2", func(f *fixture) {
			f.kafka.Stale[1] = map[string]ports.TopicView{"orders-v2": {Name: "orders-v2", Err: "UNKNOWN_TOPIC_OR_PARTITION"}}
		}, []string{"stale-metadata:orders-v2"}},
		{"ghost: brokers serve a topic ZooKeeper lost", "gone", func(f *fixture) {
			f.kafka.Stale[2] = map[string]ports.TopicView{"gone": {Name: "gone", ID: "X", Partitions: map[int32]ports.PartitionView{0: {Leader: 2, Replicas: []int32{2}, ISR: []int32{2}}}}}
			f.hosts.AddDir(2, "/data/k1", "gone-0", "X")
		}, []string{"orphaned-segments:gone", "stale-metadata:gone"}},
		{"stray directory blocks start-up", "orders-v2", func(f *fixture) { f.hosts.AddDir(1, "/data/k2", "orders-v2-0.bak", "") }, []string{"stray-directory:"}},
		{"one host unreachable over SSH: the others' disks are still read", "orders-v2", func(f *fixture) {
			f.hosts.Unreachable[3] = errors.New("ssh: connection refused")
			f.hosts.AddDir(1, "/data/k2", "orders-v2-0.bak", "")
		}, []string{"disk-unlisted:", "stray-directory:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.setup(f)
			d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: tc.topic, Disk: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(d); !slices.Equal(got, tc.want) {
				b, _ := json.MarshalIndent(d.Findings, "", " ")
				t.Fatalf("findings %v, want %v\n%s", got, tc.want, b)
			}
			if d.Healthy != (len(tc.want) == 0) {
				t.Fatalf("healthy=%v with %d findings", d.Healthy, len(d.Findings))
			}
			if len(f.zk.Ops) != 0 || len(f.kafka.Created) != 0 {
				t.Fatalf("diagnose changed something: %v %v", f.zk.Ops, f.kafka.Created)
			}
		})
	}
}

func TestDiagnoseNamesTheBroker(t *testing.T) {
	f := newFixture(t)
	f.hosts.Running[3] = false
	f.zk.Remove("/brokers/ids/3")
	d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders", Disk: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range d.Findings {
		if fd.Kind == diagnose.FindStuckDeletion && (!slices.Equal(fd.Brokers, []int32{3}) || fd.Runbook != "topic-cleanup" || fd.Fix == "" || fd.DoNot == "") {
			t.Fatalf("stuck deletion finding: %+v", fd)
		}
		if fd.Kind == diagnose.FindForeignSegments && !slices.Equal(fd.Brokers, []int32{2}) {
			t.Fatalf("foreign segments should name broker 2 (old topic id): %+v", fd)
		}
	}
}

// A broker one leader move behind: ZooKeeper says partition 1 is led by
// broker 2 at epoch 1, broker 3 still has broker 1 at epoch 0.
func lagging(f *fixture) {
	f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":1,"isr":[1,2,3]}`)
	tv := ports.TopicView{Name: "orders-v2", ID: "CCCCCCCCCCCCCCCCCCCCCC", Partitions: map[int32]ports.PartitionView{}}
	for p := int32(0); p < 3; p++ {
		tv.Partitions[p] = ports.PartitionView{Partition: p, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	}
	f.kafka.Stale[3] = map[string]ports.TopicView{"orders-v2": tv}
}

// TestDiagnoseRereadsADisagreement: ZooKeeper and the brokers cannot be read
// at one instant, and brokers learn of a leader move a moment after
// ZooKeeper. A disagreement that is gone on the next read is not reported;
// one that lasts is, with the lagging broker and partition named.
func TestDiagnoseRereadsADisagreement(t *testing.T) {
	for _, whole := range []bool{false, true} {
		topic := "orders-v2"
		if whole {
			topic = ""
		}
		t.Run("caught up on the next read, topic "+topic, func(t *testing.T) {
			f := newFixture(t)
			lagging(f)
			f.kafka.StaleReads = 1
			d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: topic})
			if err != nil {
				t.Fatal(err)
			}
			for _, fd := range d.Findings {
				if fd.Kind == diagnose.FindDisagreement {
					t.Fatalf("a disagreement gone on the second read was reported: %+v", fd)
				}
			}
		})
	}
	t.Run("still behind after 3 reads", func(t *testing.T) {
		f := newFixture(t)
		lagging(f)
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2"})
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(d); !slices.Equal(got, []string{"metadata-disagreement:orders-v2"}) {
			t.Fatalf("findings %v", got)
		}
		fd := d.Findings[0]
		if !slices.Equal(fd.Brokers, []int32{3}) || !slices.Equal(fd.Partitions, []int32{1}) || len(fd.Evidence) != 1 {
			t.Fatalf("finding should name broker 3, partition 1: %+v", fd)
		}
	})
}
