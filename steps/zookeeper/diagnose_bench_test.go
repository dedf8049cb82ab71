package zookeeper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// viewsCluster is a Kafka side whose three brokers all answer, instantly,
// with views that agree with ZooKeeper: the benchmark measures kremedy's own
// cost (the pipelined scan plus comparing every broker's view with
// ZooKeeper and with each other), not a real cluster's network.
type viewsCluster struct {
	ports.Kafka // nil: any call not listed here panics (strict)
	view        ports.BrokerView
}

func (c *viewsCluster) BrokerView(_ context.Context, id int32, _ ...string) (ports.BrokerView, error) {
	v := c.view
	v.Broker = id
	return v, nil
}

func (c *viewsCluster) BrokerConfig(_ context.Context, _ int32, key string) (string, error) {
	return map[string]string{"delete.topic.enable": "true", "min.insync.replicas": "1"}[key], nil
}

// Releases answers as 3.9 brokers would (the capability probe).
func (c *viewsCluster) Releases(_ context.Context, ids []int32) []ports.BrokerRelease {
	var out []ports.BrokerRelease
	for _, id := range ids {
		out = append(out, ports.BrokerRelease{Broker: id, Guess: "v3.9", IBP: "3.9-IV0", DescribeProducers: true, MetadataIDs: true, Release30: true})
	}
	return out
}

// BenchmarkDiagnoseCluster is the cluster-wide diagnosis of 2,000 topics ×
// 10 partitions: the ZooKeeper scan plus the per-broker comparison for
// three brokers (60,000 partition views), without the disk listing.
func BenchmarkDiagnoseCluster(b *testing.B) {
	connect := benchCluster(b)
	ctx := context.Background()
	zc, err := zookeeper.Dial(ctx, connect, zookeeper.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer zc.Close()
	for _, p := range []string{"/brokers/ids/1", "/brokers/ids/2", "/brokers/ids/3"} {
		if ok, _, _ := zc.Exists(ctx, p); !ok {
			if err := zc.Create(ctx, p, []byte(`{"version":5,"host":"127.0.0.1","port":9092,"endpoints":["PLAINTEXT://127.0.0.1:9092"]}`), nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	if ok, _, _ := zc.Exists(ctx, "/controller"); !ok {
		if err := zc.Create(ctx, "/controller", []byte(`{"version":2,"brokerid":1}`), nil); err != nil {
			b.Fatal(err)
		}
	}
	st, err := zc.ReadState(ctx)
	if err != nil {
		b.Fatal(err)
	}
	view := ports.BrokerView{Controller: st.Controller, Brokers: st.Brokers, Topics: map[string]ports.TopicView{}}
	for name, ts := range st.Topics {
		tv := ports.TopicView{Name: name, ID: ts.Znode.TopicID, Partitions: map[int32]ports.PartitionView{}}
		as, _ := ts.Znode.Assignment()
		for p, reps := range as {
			s := ts.States[p]
			tv.Partitions[p] = ports.PartitionView{Partition: p, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, Replicas: reps, ISR: s.ISR}
		}
		view.Topics[name] = tv
	}
	kc := &viewsCluster{view: view}
	target := ports.Target{Name: "bench", ZKConnect: connect}
	resetPeakRSS()
	b.ResetTimer()
	var d *diagnose.Diagnosis
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		d, err = diagnose.Run(ctx, ports.Cluster{Target: target, ZK: zc, Kafka: kc}, diagnose.Options{})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if d.Topics != benchTopics || !d.Healthy {
		b.Fatalf("diagnosis of the seeded cluster: %d topics, %d findings (want %d, none): %v", d.Topics, len(d.Findings), benchTopics, fmt.Sprint(d.Findings))
	}
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MB")
	b.ReportMetric(float64(benchTopics*benchParts*3), "partition-views")
}
