package diagnose

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestKRaftDiagnosis: a table of KRaft cluster states on the fakes, each
// with the findings it must give (kind, and the brokers or topic named)
// and whether the diagnosis is healthy; nothing about ZooKeeper, and never
// Kafka's own metadata log.
func TestKRaftDiagnosis(t *testing.T) {
	for name, tc := range map[string]struct {
		setup   func(c *steptest.Cluster)
		want    []string // "kind" or "kind:topic" or "kind:[brokers]"
		healthy bool
		evident []string // substrings of some finding's summary or evidence
	}{
		"healthy": {func(*steptest.Cluster) {}, nil, true, nil},
		"a controller down": {func(c *steptest.Cluster) {
			c.Hosts.Running[3002] = false
		}, []string{"quorum-margin:[3002]"}, false, []string{"2 of 3 voters caught up; the quorum tolerates 0 more lost"}},
		"a voter lagging": {func(c *steptest.Cluster) {
			q, _ := c.Kafka.Quorum(context.Background(), []string{"c1:9093"})
			q.Voters[2].LastCaughtUpMs -= 30_000
			c.Kafka.SetQuorum(&q)
		}, []string{"quorum-margin:[3003]"}, false, []string{"last caught up 30s before the leader"}},
		"a broker down": {func(c *steptest.Cluster) {
			c.Hosts.Running[3] = false
			for p := 0; p < 3; p++ {
				c.ZK.Put(kafkazk.PartitionStatePath("orders-v2", int32(p)), `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":1,"isr":[1,2]}`)
			}
		}, []string{"broker-down:[3]", "under-replicated:orders-v2"}, false, []string{"not registered with the controllers"}},
		"a broker fenced": {func(c *steptest.Cluster) {
			c.Kafka.Fenced = map[int32]bool{2: true}
		}, []string{"broker-fenced:[2]"}, false, nil},
		"stray logs on a broker": {func(c *steptest.Cluster) {
			c.Hosts.AddDir(3, "/data/k1", "orders-0.0123456789abcdef0123456789abcdef-stray", steptest.OldID)
			c.Hosts.AddDir(3, "/data/k1", "orders-1.0123456789abcdef0123456789abcdee-stray", steptest.OldID)
		}, []string{"stray-logs:[3]"}, false, []string{"2 stray log directories", "old topic id " + steptest.OldID, "4 KiB, last changed", "the live orders-0 (topic id " + steptest.CurID + ") is in sync on it"}},
		"logs that will become strays": {func(c *steptest.Cluster) {
			for p := 0; p < 3; p++ {
				c.Hosts.AddDir(2, "/data/k1", fmt.Sprintf("orders-%d", p), steptest.OldID) // the recreated topic's old logs
			}
		}, []string{"would-be-stray:orders"}, false, []string{"topic id " + steptest.OldID + ", the live topic's is " + steptest.CurID}},
		"a topic the metadata does not have": {func(c *steptest.Cluster) {
			c.Hosts.AddDir(1, "/data/k2", "gone-0", steptest.OldID)
		}, []string{"would-be-stray:gone"}, false, []string{`the metadata has no topic "gone"`}},
		"a log without partition.metadata": {func(c *steptest.Cluster) {
			c.Hosts.AddDir(1, "/data/k2", "orders-v2-0", "")
		}, []string{"missing-partition-metadata:[1]"}, false, nil},
		"below min.insync.replicas, with eligible leaders": {func(c *steptest.Cluster) {
			c.ZK.Put(kafkazk.PartitionStatePath("orders", 0), `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":2,"isr":[1]}`)
			c.Kafka.ELRs = map[string]map[int32]ports.ELR{"orders": {0: {Eligible: []int32{2, 3}}}}
		}, []string{"under-min-isr:orders", "under-replicated:orders"}, false, []string{"orders-0: eligible leader replicas [2 3]: a clean election may pick them"}},
		"a silent wedge": {func(c *steptest.Cluster) {
			c.Kafka.QuorumWedged = true
		}, []string{"quorum-wedged:[3001]"}, false, []string{"the high watermark stayed at 1000 for 3s", "DescribeQuorum read 5 times, 750ms apart"}},
		"two controllers of three lost": {func(c *steptest.Cluster) {
			c.Hosts.Running[3002], c.Hosts.Running[3003] = false, false
			c.Kafka.SetQuorum(&ports.Quorum{Leader: -1, Epoch: 5})
		}, []string{"quorum-lost:[3002 3003]"}, false, []string{"1 of the 3 voters [3001 3002 3003] run (a majority is 2)", "kremedy run quorum-recovery --inventory", "its listener c2:9093 accepts no connection", "counted: the inventory's controllers, taken for the voters"}},
		"two controllers of three lost, the leader keeps its title": {func(c *steptest.Cluster) {
			c.Hosts.Running[3002], c.Hosts.Running[3003] = false, false
			c.Kafka.QuorumWedged = true // nothing commits without a majority
		}, []string{"quorum-lost:[3002 3003]"}, false, []string{"leader 3001, epoch 4, high watermark 1000; 1 of 3 voters caught up, a majority is 2: the leader keeps its title but commits nothing", "counted: the voters DescribeQuorum named"}},
		"metadata.version below the release": {func(c *steptest.Cluster) {
			c.Kafka.FeatureLevels = map[string]int16{"metadata.version": 21, "kraft.version": 0}
			c.Kafka.FeatureRange = map[string][2]int16{"metadata.version": {7, 27}, "kraft.version": {0, 1}}
		}, []string{"feature-level"}, true, []string{"not `--release-version`", "KAFKA-21426"}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := steptest.KRaft(t)
				tc.setup(c)
				d, err := Run(context.Background(), c.Ports, Options{Disk: true})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				var text []string
				for _, f := range d.Findings {
					k := f.Kind
					switch {
					case f.Topic != "":
						k += ":" + f.Topic
					case len(f.Brokers) > 0:
						k += ":" + fmt.Sprint(f.Brokers)
					}
					got = append(got, k)
					text = append(text, f.Summary)
					text = append(text, f.Evidence...)
					text = append(text, f.Fix)
					if strings.Contains(f.Summary+strings.Join(f.Evidence, " "), "__cluster_metadata") && f.Kind != FindQuorumLost {
						t.Errorf("a finding about Kafka's own metadata log: %+v", f)
					}
					if strings.Contains(strings.ToLower(f.Summary+f.Fix), "zookeeper") && f.Kind != FindMigrationLeftover {
						t.Errorf("a KRaft finding speaks of ZooKeeper: %+v", f)
					}
				}
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tc.want))
				if !slices.Equal(got, want) {
					t.Fatalf("findings %v, want %v:\n%s", got, want, strings.Join(text, "\n"))
				}
				if d.Healthy != tc.healthy || d.Mode != "kraft" || d.Quorum == nil && name != "healthy" && !strings.Contains(name, "controller") {
					t.Errorf("healthy %v (want %v), mode %q, quorum %v", d.Healthy, tc.healthy, d.Mode, d.Quorum)
				}
				all := strings.Join(text, "\n")
				for _, e := range tc.evident {
					if !strings.Contains(all, e) {
						t.Errorf("no finding says %q:\n%s", e, all)
					}
				}
			})
		})
	}
}

// TestKRaftDiagnosisCauses: a broker that is down is the cause of the
// partitions it leaves under-replicated, as in ZooKeeper mode.
func TestKRaftDiagnosisCauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := steptest.KRaft(t)
		c.Hosts.Running[3] = false
		for p := 0; p < 3; p++ {
			c.ZK.Put(kafkazk.PartitionStatePath("orders", int32(p)), `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":1,"isr":[1,2]}`)
		}
		d, err := Run(context.Background(), c.Ports, Options{})
		if err != nil {
			t.Fatal(err)
		}
		causes := d.Causes()
		if len(causes) != 1 || causes[0].Kind != FindBrokerDown || len(d.Explained(causes[0].ID)) == 0 {
			t.Fatalf("causes %+v, findings %+v", causes, d.Findings)
		}
	})
}

// TestKRaftDiagnosisRefusesMigrationReadiness: --migration is a
// ZooKeeper-mode question; a KRaft inventory gets a refusal saying so.
func TestKRaftDiagnosisRefusesMigrationReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := steptest.KRaft(t)
		if _, err := Run(context.Background(), c.Ports, Options{Migration: true}); err == nil || !strings.Contains(err.Error(), "KRaft cluster") {
			t.Fatalf("--migration on a KRaft cluster: %v", err)
		}
		var _ ports.Cluster = c.Ports
	})
}

// TestZooKeeperInventoryOfAMigratedCluster: a ZooKeeper-mode inventory of a
// cluster whose brokers are KRaft brokers now (no registration, a KRaft
// controller in /controller) gets one finding saying so — never "broker
// down" — and nothing about the metadata log on the disks.
func TestZooKeeperInventoryOfAMigratedCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := steptest.Ghost(t)
		g.ZK.Remove(kafkazk.DeleteTopicPath("orders"))
		for id := 1; id <= 3; id++ {
			g.ZK.Remove(fmt.Sprintf("/brokers/ids/%d", id))
			g.Hosts.AddDir(int32(id), "/data/k1", "__cluster_metadata-0", "")
		}
		g.ZK.Put("/controller", `{"version":2,"brokerid":3001,"timestamp":"1","kraftControllerEpoch":7}`)
		g.ZK.Put("/migration", `{"version":0,"kraft_metadata_offset":42,"kraft_metadata_epoch":1,"kraft_controller_id":3001,"kraft_controller_epoch":7}`)
		d, err := Run(context.Background(), g.Ports, Options{Disk: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Findings) != 1 || d.Findings[0].Kind != FindMigratedToKRaft || !strings.Contains(d.Findings[0].Fix, "inventory-kraft.yaml") {
			t.Fatalf("findings %+v", d.Findings)
		}
		// A ZooKeeper cluster with its brokers down is still "brokers down".
		g.ZK.Put("/controller", `{"version":2,"brokerid":3,"timestamp":"1","kraftControllerEpoch":-1}`)
		d, err = Run(context.Background(), g.Ports, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range d.Findings {
			if f.Kind == FindMigratedToKRaft {
				t.Fatalf("a ZooKeeper controller's cluster called migrated: %+v", f)
			}
		}
	})
}

// TestSameIDs: two replica sets are the same whatever their order, as
// multisets, on the stack's path and past it.
func TestSameIDs(t *testing.T) {
	long := make([]int32, 20)
	for i := range long {
		long[i] = int32(i)
	}
	rev := slices.Clone(long)
	slices.Reverse(rev)
	for _, tc := range []struct {
		a, b []int32
		want bool
	}{
		{[]int32{1, 2, 3}, []int32{3, 1, 2}, true},
		{[]int32{1, 2}, []int32{1, 2, 3}, false},
		{[]int32{1, 1, 2}, []int32{1, 2, 2}, false},
		{nil, []int32{}, true},
		{[]int32{0}, []int32{}, false},
		{long, rev, true},
		{long, append(slices.Clone(rev[:19]), 99), false},
	} {
		if got := sameIDs(tc.a, tc.b); got != tc.want {
			t.Errorf("sameIDs(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// quorumCounter counts the DescribeQuorum requests a diagnosis makes.
type quorumCounter struct {
	ports.Kafka
	calls int
}

func (k *quorumCounter) Quorum(ctx context.Context, addrs []string) (ports.Quorum, error) {
	k.calls++
	return k.Kafka.Quorum(ctx, addrs)
}

// TestKRaftQuorumWaitEndsWithCtx: a voter seen lagging is read again a
// second later before it counts, but a diagnosis whose ctx has ended does
// not sit out that second (it slept through it, ctx ignored): it judges
// the one read it has, at once.
func TestKRaftQuorumWaitEndsWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := steptest.KRaft(t)
		q, _ := c.Kafka.Quorum(context.Background(), []string{"c1:9093"})
		q.Voters[2].LastCaughtUpMs -= 30_000
		c.Kafka.SetQuorum(&q)
		k := &quorumCounter{Kafka: c.Ports.Kafka}
		cl := c.Ports
		cl.Kafka = k
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		g := &kraftDiag{diagnoser: diagnoser{c: cl, d: &Diagnosis{}}}
		began := time.Now()
		g.quorum(ctx)
		if took := time.Since(began); took >= time.Second || k.calls != 1 {
			t.Fatalf("the quorum check took %s and asked DescribeQuorum %d times with its ctx ended; want no wait and 1 request", took, k.calls)
		}
		if len(g.d.Findings) != 1 || g.d.Findings[0].Kind != FindQuorumMargin || !slices.Equal(g.d.Findings[0].Brokers, []int32{3003}) {
			t.Fatalf("findings %+v, want quorum-margin of 3003 from the one read", g.d.Findings)
		}
	})
}
