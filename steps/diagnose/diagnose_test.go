package diagnose_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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

// cachedBy freezes what brokers ids serve of orders-v2 now, as brokers do
// that receive no update after a hand edit of ZooKeeper.
func (f *fixture) cachedBy(ids ...int32) {
	for _, id := range ids {
		v, err := f.kafka.BrokerView(context.Background(), id, "orders-v2")
		if err != nil {
			panic(err)
		}
		if f.kafka.Stale[id] == nil {
			f.kafka.Stale[id] = map[string]ports.TopicView{}
		}
		f.kafka.Stale[id]["orders-v2"] = v.Topics["orders-v2"]
	}
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
		}, []string{"broker-down:", "foreign-segments:orders", "stuck-deletion:orders"}},
		{"corrupt topic znode", "bad", func(f *fixture) { f.zk.Put(kafkazk.TopicPath("bad"), "{not json") }, []string{"corrupt-znode:bad"}},
		{"partition with no leader", "orders-v2", func(f *fixture) {
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":3,"isr":[2]}`)
		}, []string{"offline-partitions:orders-v2", "under-replicated:orders-v2"}},
		{"broker that does not answer", "orders-v2", func(f *fixture) { f.hosts.Running[2] = false }, []string{"broker-unreachable:"}},
		{"stale cache on one broker", "orders-v2", func(f *fixture) {
			f.kafka.Stale[1] = map[string]ports.TopicView{"orders-v2": {Name: "orders-v2", Err: ports.KafkaUnknownTopicOrPartition}}
		}, []string{"stale-metadata:orders-v2"}},
		{"a broker kremedy may not ask about the topic has not lost it", "orders-v2", func(f *fixture) {
			f.kafka.Stale[1] = map[string]ports.TopicView{"orders-v2": {Name: "orders-v2", Err: ports.KafkaTopicAuthorizationFailed}}
		}, nil},
		{"ghost: brokers serve a topic ZooKeeper lost", "gone", func(f *fixture) {
			f.kafka.Stale[2] = map[string]ports.TopicView{"gone": {Name: "gone", ID: "X", Partitions: map[int32]ports.PartitionView{0: {Leader: 2, Replicas: []int32{2}, ISR: []int32{2}}}}}
			f.hosts.AddDir(2, "/data/k1", "gone-0", "X")
		}, []string{"orphaned-segments:gone", "stale-metadata:gone"}},
		{"ghost assignment: ZooKeeper names a broker nobody has, the brokers serve the old replicas", "orders-v2", func(f *fixture) {
			f.cachedBy(1, 2, 3) // the brokers keep the assignment they were sent
			f.zk.Put(kafkazk.TopicPath("orders-v2"), `{"version":3,"partitions":{"0":[1,4],"1":[2,3,1],"2":[3,1,2]},"topic_id":"`+steptest.V2ID+`"}`)
		}, []string{"metadata-disagreement:orders-v2", "state-not-in-assignment:orders-v2", "unregistered-replica:orders-v2"}},
		{"an inventory broker that is down holds replicas", "orders-v2", func(f *fixture) {
			f.hosts.Running[3] = false
			f.zk.Remove("/brokers/ids/3")
		}, []string{"broker-down:", "unregistered-replica:orders-v2"}},
		{"a partition without its state znode", "orders-v2", func(f *fixture) {
			f.zk.Remove(kafkazk.PartitionStatePath("orders-v2", 2))
		}, []string{"missing-partition-state:orders-v2"}},
		{"a topic znode without topic_id on IBP 3.9", "orders-v2", func(f *fixture) {
			f.kafka.Configs = map[string]string{"inter.broker.protocol.version": "3.9-IV0"}
			f.cachedBy(1, 2, 3)
			f.zk.Put(kafkazk.TopicPath("orders-v2"), `{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]}}`)
		}, []string{"missing-topic-id:orders-v2"}},
		{"no topic_id on IBP 2.7 is how it should be", "orders-v2", func(f *fixture) {
			f.kafka.Configs = map[string]string{"inter.broker.protocol.version": "2.7-IV2"}
			f.zk.Put(kafkazk.TopicPath("orders-v2"), `{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]}}`)
		}, nil},
		{"a partition in ZooKeeper that no broker serves", "orders-v2", func(f *fixture) {
			f.cachedBy(1, 2, 3)
			f.zk.Put(kafkazk.TopicPath("orders-v2"), `{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2],"3":[1,2,3]},"topic_id":"`+steptest.V2ID+`"}`)
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 3), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`)
		}, []string{"partitions-unknown-to-brokers:orders-v2"}},
		{"a partition one broker serves that ZooKeeper does not assign", "orders-v2", func(f *fixture) {
			f.cachedBy(2)
			tv := f.kafka.Stale[2]["orders-v2"]
			tv.Partitions[3] = ports.PartitionView{Partition: 3, Leader: 2, Replicas: []int32{2}, ISR: []int32{2}}
		}, []string{"partitions-unknown-to-zookeeper:orders-v2"}},
		{"a partition only some brokers know", "orders-v2", func(f *fixture) {
			f.cachedBy(3)
			delete(f.kafka.Stale[3]["orders-v2"].Partitions, 2)
		}, []string{"metadata-disagreement:orders-v2"}},
		{"stray directory blocks start-up", "orders-v2", func(f *fixture) { f.hosts.AddDir(1, "/data/k2", "orders-v2-0.bak", "") }, []string{"stray-directory:"}},
		{"one host unreachable over SSH: the others' disks are still read", "orders-v2", func(f *fixture) {
			f.hosts.Unreachable[3] = errors.New("ssh: connection refused")
			f.hosts.AddDir(1, "/data/k2", "orders-v2-0.bak", "")
		}, []string{"disk-unlisted:", "stray-directory:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
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
		})
	}
}

func TestDiagnoseNamesTheBroker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	})
}

// A broker one leader move behind: ZooKeeper says partition 1 is led by
// broker 2 at epoch 1, broker 3 still has broker 1 at epoch 0.
func lagging(f *fixture) {
	f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":1,"isr":[1,2,3]}`)
	tv := ports.TopicView{Name: "orders-v2", ID: "CCCCCCCCCCCCCCCCCCCCCC", Partitions: map[int32]ports.PartitionView{}}
	for p, reps := range [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}} { // the assignment
		tv.Partitions[int32(p)] = ports.PartitionView{Partition: int32(p), Leader: 1, Replicas: reps, ISR: []int32{1, 2, 3}}
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
			synctest.Test(t, func(t *testing.T) {
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
		})
	}
	t.Run("still behind after the settle window", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t)
			lagging(f)
			d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2", Settle: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(d); !slices.Equal(got, []string{"metadata-disagreement:orders-v2"}) {
				t.Fatalf("findings %v", got)
			}
			fd := d.Findings[0]
			if !slices.Equal(fd.Brokers, []int32{3}) || !slices.Equal(fd.Partitions, []int32{1}) || len(fd.Evidence) != 3 ||
				fd.Evidence[0] != "orders-v2-1 leader epoch: ZooKeeper 1; brokers [3] 0" || fd.Evidence[1] != "orders-v2-1 leader: ZooKeeper 2; brokers [3] 1" ||
				!strings.HasPrefix(fd.Evidence[2], "lasted at least 3") || !strings.Contains(fd.Evidence[2], "seen in 4 reads") {
				t.Fatalf("finding should name broker 3, partition 1, ZooKeeper's and the broker's values, and how long: %+v", fd)
			}
		})
	})
}

// TestDiagnoseNamesZooKeepersView: each ZooKeeper-against-broker finding
// names both values, the brokers holding each, the partitions, and whether
// a missing broker is down or gone.
func TestDiagnoseNamesZooKeepersView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.cachedBy(1, 2, 3)
		f.zk.Put(kafkazk.TopicPath("orders-v2"), `{"version":3,"partitions":{"0":[1,4],"1":[2,3,1],"2":[3,1,2]},"topic_id":"`+steptest.V2ID+`"}`)
		f.hosts.Running[3] = false
		f.zk.Remove("/brokers/ids/3")
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2"})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]diagnose.Finding{}
		for _, fd := range d.Findings {
			got[fd.Kind] = append(got[fd.Kind], fd)
		}
		dis := got[diagnose.FindDisagreement]
		if len(dis) != 1 || !slices.Contains(dis[0].Evidence, "orders-v2-0 replicas: ZooKeeper [1 4]; brokers [1 2] [1 2 3]") || !slices.Equal(dis[0].Partitions, []int32{0}) {
			t.Errorf("disagreement: %+v", dis)
		}
		un := got[diagnose.FindUnregisteredReplica]
		if len(un) != 2 {
			t.Fatalf("unregistered replicas: %+v", un)
		}
		for _, fd := range un {
			switch {
			case slices.Equal(fd.Brokers, []int32{3}):
				if fd.Severity != diagnose.Warning || !strings.Contains(fd.Summary, "in the inventory, but it is down") || !slices.Equal(fd.Partitions, []int32{1, 2}) {
					t.Errorf("broker 3 (down): %+v", fd)
				}
			case slices.Equal(fd.Brokers, []int32{4}):
				if fd.Severity != diagnose.Critical || !strings.Contains(fd.Summary, "neither registered nor in the inventory") || !slices.Equal(fd.Partitions, []int32{0}) ||
					!strings.Contains(fd.Fix, "kafka-reassign-partitions") || !strings.Contains(fd.Fix, "--broker-list 1,2") || fd.DoNot == "" {
					t.Errorf("broker 4 (gone): %+v", fd)
				}
			default:
				t.Errorf("unexpected: %+v", fd)
			}
		}
		if st := got[diagnose.FindStateNotInAssignment]; len(st) != 1 || !slices.Equal(st[0].Partitions, []int32{0}) || !slices.Equal(st[0].Brokers, []int32{2, 3}) {
			t.Errorf("state outside the assignment: %+v", st)
		}
	})
}

// TestBrokerDownIsTheCause: a broker that is simply down is one finding
// naming what it affects, and the under-replicated partitions it explains
// are not sent to a destructive runbook.
func TestBrokerDownIsTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.hosts.Running[3] = false
		f.zk.Remove("/brokers/ids/3")
		for p, st := range []string{
			`{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}`,
			`{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":4,"isr":[2,1]}`,
			`{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}`,
		} {
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", int32(p)), st)
		}
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2"})
		if err != nil {
			t.Fatal(err)
		}
		var down, urp *diagnose.Finding
		for i, fd := range d.Findings {
			switch fd.Kind {
			case "broker-down":
				down = &d.Findings[i]
			case "under-replicated":
				urp = &d.Findings[i]
			}
		}
		if down == nil || !slices.Equal(down.Brokers, []int32{3}) || !strings.Contains(down.Summary, "broker 3 is down") || !strings.Contains(strings.Join(down.Evidence, "\n"), "replica of 3 partitions of 1 topics") {
			t.Fatalf("broker-down finding: %+v", down)
		}
		if urp == nil || urp.Runbook != "" || strings.Contains(urp.Fix, "topic-cleanup") || !strings.Contains(urp.Fix, "broker [3] being down") {
			t.Fatalf("under-replicated finding should name the down broker as its cause and suggest no cleanup: %+v", urp)
		}
		if !strings.Contains(strings.Join(urp.Evidence, "\n"), "orders-v2-1: leader 2, replicas [2 3 1], isr [2 1]") {
			t.Fatalf("the evidence should name the new leaders: %v", urp.Evidence)
		}
	})
}

// TestCausesAreLinked: a ghost topic's findings are folded under its root
// (the stuck deletion), each finding has an ID, and roots come first.
func TestCausesAreLinked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders", Disk: true})
		if err != nil {
			t.Fatal(err)
		}
		causes := d.Causes()
		if len(causes) != 1 || causes[0].ID != "stuck-deletion/orders" {
			t.Fatalf("causes %+v: want the stuck deletion alone", causes)
		}
		ex := d.Explained("stuck-deletion/orders")
		if len(ex) != len(d.Findings)-1 || len(ex) < 1 {
			t.Fatalf("explained %d of %d findings", len(ex), len(d.Findings))
		}
		if d.Findings[0].Cause != "" {
			t.Fatalf("a root must come first: %+v", d.Findings[0])
		}
		for _, f := range ex {
			if f.ID == "" || f.Topic != "orders" {
				t.Fatalf("folded finding %+v", f)
			}
		}
	})
}

// TestNoControllerIsTheCause: without /controller, one no-controller cause
// explains the offline partitions it leaves.
func TestNoControllerIsTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.zk.Remove("/controller")
		f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":3,"isr":[2]}`)
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2"})
		if err != nil {
			t.Fatal(err)
		}
		causes := d.Causes()
		if len(causes) != 1 || causes[0].Kind != diagnose.FindNoController {
			t.Fatalf("causes %+v: want no-controller alone", causes)
		}
		var offline bool
		for _, f := range d.Explained(causes[0].ID) {
			offline = offline || f.Kind == diagnose.FindOffline
		}
		if !offline {
			t.Fatalf("the offline partition is not folded under no-controller: %+v", d.Findings)
		}
	})
}

// TestZooKeeperServerDown: a server of the ensemble that refuses
// connections is a cause of its own, with the margin left.
func TestZooKeeperServerDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		const connect = "z1:2181,z2:2181,z3:2181/kafka"
		f.hosts.SetZKConnect(connect)
		f.Ports.Target.ZKConnect = connect
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2"})
		if err != nil || !d.Healthy {
			t.Fatalf("every server up: %v %+v", err, d.Findings)
		}
		f.kafka.ZKDown = []string{"z2:2181"}
		d, err = diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2"})
		if err != nil || len(d.Findings) != 1 {
			t.Fatalf("one server down: %v %+v", err, d.Findings)
		}
		if fd := d.Findings[0]; fd.Kind != diagnose.FindZKServerDown || fd.Severity != diagnose.Critical || !strings.Contains(fd.Summary, "runs on 2 of 3, and tolerates 0 more lost") {
			t.Fatalf("finding %+v", fd)
		}
	})
}

// TestSeveralGhostsShareACause: three ghosts of one outage are one shared
// cause with the one command that repairs them all; one ghost is not.
func TestSeveralGhostsShareACause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Disk: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Shared) != 0 {
			t.Fatalf("one ghost is no shared cause: %+v", d.Shared)
		}
		f.AddGhost("payments", "DDDDDDDDDDDDDDDDDDDDDD", "EEEEEEEEEEEEEEEEEEEEEE")
		f.AddGhost("audit", "FFFFFFFFFFFFFFFFFFFFFF", "GGGGGGGGGGGGGGGGGGGGGG")
		if d, err = diagnose.Run(context.Background(), f.Ports, diagnose.Options{Disk: true}); err != nil {
			t.Fatal(err)
		}
		if len(d.Shared) != 1 {
			t.Fatalf("shared causes %+v, want one", d.Shared)
		}
		s := d.Shared[0]
		if !slices.Equal(s.Topics, []string{"audit", "orders", "payments"}) || s.Runbook != "topic-cleanup" ||
			!strings.Contains(s.Fix, "`kremedy run topic-cleanup --inventory INV --set topics=audit,orders,payments`") ||
			!strings.Contains(s.Summary, "3 topics share one cause") || !strings.Contains(s.Summary, "stuck-deletion: 3") {
			t.Fatalf("shared cause %+v", s)
		}
		b, _ := json.Marshal(d)
		if !strings.Contains(string(b), `"shared_causes":[{"runbook":"topic-cleanup","topics":["audit","orders","payments"]`) {
			t.Fatalf("JSON lacks the shared cause: %s", b)
		}
	})
}

// TestARefusedListingIsNotAnSSHProblem: a host that answered with a name
// Kafka cannot make has its disk unexamined, and the finding says so and
// what to do — not "fix SSH".
func TestARefusedListingIsNotAnSSHProblem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.hosts.AddDir(2, "/data/k1", "zzz\norders-v2-0", "FORGED")
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Topic: "orders-v2", Disk: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range d.Findings {
			if fd.Kind != diagnose.FindDiskUnlisted {
				continue
			}
			if !strings.Contains(fd.Summary, "kremedy refused what its log dirs hold") || strings.Contains(fd.Fix, "fix SSH") || !strings.Contains(strings.Join(fd.Evidence, " "), "zzz") {
				t.Fatalf("the finding of a refused listing: %+v", fd)
			}
			return
		}
		t.Fatalf("no disk-unlisted finding for a host whose listing holds a forged name: %v", kinds(d))
	})
}
