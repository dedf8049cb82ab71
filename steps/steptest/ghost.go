package steptest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Topic ids of the ghost-topic state.
const (
	OldID = "AAAAAAAAAAAAAAAAAAAAAA" // the deleted "orders", still on broker 2's disk
	CurID = "BBBBBBBBBBBBBBBBBBBBBB" // the recreated "orders"
	V2ID  = "CCCCCCCCCCCCCCCCCCCCCC" // the bystander "orders-v2"
)

// Cluster is a fake cluster: the fakes and the ports they make.
type Cluster struct {
	ZK    *ZK
	Hosts *Hosts
	Kafka *Kafka
	Ports ports.Cluster
}

// Ghost is the ghost-topic state the unit tests of topic-cleanup and of
// diagnose start from: three brokers (controller 3), each with log dirs
// /data/k1 and /data/k2 under chroot /kafka; "orders" recreated (CurID) and
// still pending deletion, while broker 2 holds its directories with the
// old id and broker 1 a -delete form; "orders-v2", a healthy bystander that
// shares the prefix.
func Ghost(t testing.TB) *Cluster {
	t.Helper()
	target := ports.Target{Name: "test", ZKConnect: "zk:2181/kafka", Bootstrap: []string{"b1:9092"}}
	for id := int32(1); id <= 3; id++ {
		target.Hosts = append(target.Hosts, ports.Host{ID: id, Host: fmt.Sprintf("b%d", id),
			Stop: fmt.Sprintf("systemctl stop kafka-%d", id), Start: fmt.Sprintf("systemctl start kafka-%d", id),
			LogDirs: []string{"/data/k1", "/data/k2"}})
	}
	zk := NewZK(t, "/kafka")
	zk.Put("/cluster/id", `{"version":"1","id":"x"}`).Put("/controller", `{"version":2,"brokerid":3}`).Put("/controller_epoch", "7")
	for topic, id := range map[string]string{"orders": CurID, "orders-v2": V2ID} {
		zk.Put(kafkazk.TopicPath(topic), fmt.Sprintf(`{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},"topic_id":"%s"}`, id))
		for p := 0; p < 3; p++ {
			zk.Put(kafkazk.PartitionStatePath(topic, int32(p)), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`)
		}
		zk.Put(kafkazk.ConfigTopicPath(topic), `{"version":1,"config":{"retention.ms":"3600000"}}`)
	}
	zk.Put(kafkazk.DeleteTopicPath("orders"), "")
	hosts := NewHosts(t, zk, target)
	for id := int32(1); id <= 3; id++ {
		for p := 0; p < 3; p++ {
			tid := CurID
			if id == 2 {
				tid = OldID
			}
			hosts.AddDir(id, "/data/k1", fmt.Sprintf("orders-%d", p), tid)
			hosts.AddDir(id, "/data/k2", fmt.Sprintf("orders-v2-%d", p), V2ID)
		}
	}
	hosts.AddDir(1, "/data/k2", "orders-1.0123456789abcdef0123456789abcdef-delete", OldID)
	kafka := NewKafka(t, zk, hosts)
	return &Cluster{ZK: zk, Hosts: hosts, Kafka: kafka, Ports: ports.Cluster{Target: target, ZK: zk, Kafka: kafka, Hosts: hosts}}
}

// KRaft is a healthy KRaft-mode fake cluster: brokers 1–3 and controllers
// 3001–3003 all running, the quorum led by 3001 with every voter caught
// up, "orders" (CurID) and "orders-v2" (V2ID) with replication factor 3,
// each broker holding their live directories (and Kafka's own
// __cluster_metadata-0) in /data/k1 and /data/k2. Its ports have no
// ZooKeeper; the fake Kafka keeps its truth in a fake ZooKeeper of its own.
func KRaft(t testing.TB) *Cluster {
	t.Helper()
	return kraft(t, false)
}

// KRaftCombined is KRaft with combined nodes (process.roles=
// broker,controller): brokers 1–3 are the controllers too, each one
// process (the same host, stop and start; the controller listener on
// port 9093), the quorum led by 1.
func KRaftCombined(t testing.TB) *Cluster {
	t.Helper()
	return kraft(t, true)
}

func kraft(t testing.TB, combined bool) *Cluster {
	target := Ghost(t).Ports.Target
	target.KRaft, target.ZKConnect = true, ""
	for k := int32(1); k <= 3; k++ {
		c := ports.Host{ID: 3000 + k, Host: fmt.Sprintf("c%d", k), Addr: fmt.Sprintf("c%d:9093", k),
			Stop: fmt.Sprintf("systemctl stop kafka-controller-%d", k), Start: fmt.Sprintf("systemctl start kafka-controller-%d", k)}
		if combined {
			c, _ = target.Host(k)
			c.Addr = c.Host + ":9093"
		}
		target.Controllers = append(target.Controllers, c)
	}
	zk := NewZK(t, "")
	zk.Put("/cluster/id", `{"version":"1","id":"kraft-cluster"}`).Put("/controller", `{"version":2,"brokerid":1}`)
	for topic, id := range map[string]string{"orders": CurID, "orders-v2": V2ID} {
		zk.Put(kafkazk.TopicPath(topic), fmt.Sprintf(`{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},"topic_id":"%s"}`, id))
		for p := 0; p < 3; p++ {
			zk.Put(kafkazk.PartitionStatePath(topic, int32(p)), `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`)
		}
	}
	hosts := NewHosts(t, zk, target)
	for _, c := range target.Controllers {
		hosts.Running[c.ID] = true
	}
	for id := int32(1); id <= 3; id++ {
		hosts.AddDir(id, "/data/k1", "__cluster_metadata-0", "")
		for p := 0; p < 3; p++ {
			hosts.AddDir(id, "/data/k1", fmt.Sprintf("orders-%d", p), CurID)
			hosts.AddDir(id, "/data/k2", fmt.Sprintf("orders-v2-%d", p), V2ID)
		}
	}
	kafka := NewKafka(t, zk, hosts)
	kafka.Configs = map[string]string{"min.insync.replicas": "2"}
	kafka.Live = func() []int32 {
		var up []int32
		for _, h := range target.Hosts {
			if hosts.Runs(h.ID) {
				up = append(up, h.ID)
			}
		}
		return up
	}
	q := &ports.Quorum{Leader: target.Controllers[0].ID, Epoch: 4, HighWatermark: 1000}
	for _, c := range target.Controllers {
		q.Voters = append(q.Voters, ports.Voter{ID: c.ID, LogEndOffset: 1000, LastCaughtUpMs: 1_700_000_000_000, LastFetchMs: 1_700_000_000_000})
	}
	kafka.SetQuorum(q)
	return &Cluster{ZK: zk, Hosts: hosts, Kafka: kafka, Ports: ports.Cluster{Target: target, Kafka: kafka, Hosts: hosts}}
}

// Racked is a healthy ZooKeeper-mode cluster of n brokers (4 to 9; the
// controller is broker 1) in racks racks — broker id's broker.rack is
// r((id-1) % racks + 1) — with "orders" (CurID; replication factor 3, n
// partitions, partition p on brokers p+1, p+2, p+3 around the ring, fully in
// sync) and min.insync.replicas=2: with 3 racks each partition has one
// replica per rack. The batch roll's fixture.
func Racked(t testing.TB, n, racks int) *Cluster {
	t.Helper()
	target := ports.Target{Name: "test", ZKConnect: "zk:2181/kafka", Bootstrap: []string{"b1:9092"}}
	for id := int32(1); id <= int32(n); id++ {
		target.Hosts = append(target.Hosts, ports.Host{ID: id, Host: fmt.Sprintf("b%d", id),
			Stop: fmt.Sprintf("systemctl stop kafka-%d", id), Start: fmt.Sprintf("systemctl start kafka-%d", id),
			LogDirs: []string{"/data/k1"}})
	}
	zk := NewZK(t, "/kafka")
	zk.Put("/cluster/id", `{"version":"1","id":"x"}`).Put("/controller", `{"version":2,"brokerid":1}`).Put("/controller_epoch", "7")
	var assign []string
	for p := 0; p < n; p++ {
		r := []int{p%n + 1, (p+1)%n + 1, (p+2)%n + 1}
		assign = append(assign, fmt.Sprintf(`"%d":[%d,%d,%d]`, p, r[0], r[1], r[2]))
		zk.Put(kafkazk.PartitionStatePath("orders", int32(p)), fmt.Sprintf(`{"controller_epoch":7,"leader":%d,"version":1,"leader_epoch":0,"isr":[%d,%d,%d]}`, r[0], r[0], r[1], r[2]))
	}
	zk.Put(kafkazk.TopicPath("orders"), fmt.Sprintf(`{"version":3,"partitions":{%s},"topic_id":"%s"}`, strings.Join(assign, ","), CurID))
	hosts := NewHosts(t, zk, target)
	hosts.Racks = map[int32]string{}
	for _, h := range target.Hosts {
		hosts.Racks[h.ID] = fmt.Sprintf("r%d", (int(h.ID)-1)%racks+1)
		hosts.register(h)
		for p := 0; p < n; p++ {
			if d := (int(h.ID) - 1 - p + n) % n; d < 3 {
				hosts.AddDir(h.ID, "/data/k1", fmt.Sprintf("orders-%d", p), CurID)
			}
		}
	}
	kafka := NewKafka(t, zk, hosts)
	kafka.Configs = map[string]string{"min.insync.replicas": "2"}
	return &Cluster{ZK: zk, Hosts: hosts, Kafka: kafka, Ports: ports.Cluster{Target: target, ZK: zk, Kafka: kafka, Hosts: hosts}}
}

// AddGhost adds to a Ghost cluster another topic left like "orders": its
// znodes (replication factor 3, three partitions, id cur) pending
// deletion, broker 2 holding its directories with the old id old, brokers
// 1 and 3 with the current one, in /data/k1. Several ghosts of one outage.
func (c *Cluster) AddGhost(topic, cur, old string) {
	c.ZK.Put(kafkazk.TopicPath(topic), fmt.Sprintf(`{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},"topic_id":"%s"}`, cur))
	for p := 0; p < 3; p++ {
		c.ZK.Put(kafkazk.PartitionStatePath(topic, int32(p)), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`)
	}
	c.ZK.Put(kafkazk.ConfigTopicPath(topic), `{"version":1,"config":{"retention.ms":"3600000"}}`)
	c.ZK.Put(kafkazk.DeleteTopicPath(topic), "")
	for id := int32(1); id <= 3; id++ {
		tid := cur
		if id == 2 {
			tid = old
		}
		for p := 0; p < 3; p++ {
			c.Hosts.AddDir(id, "/data/k1", fmt.Sprintf("%s-%d", topic, p), tid)
		}
	}
}
