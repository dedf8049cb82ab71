// Package kafkazk is Kafka's ZooKeeper data model as a ZooKeeper-mode
// cluster writes it (Kafka 3.9, core/src/main/scala/kafka/zk/ZkData.scala):
// the znode paths relative to the chroot, the JSON shape of each znode and
// its strict decoding (ErrCorrupt), Kafka's topic-name rules (ValidateTopic),
// the zookeeper.connect string (ParseConnect), and one model of a cluster's
// topic state (ClusterState) with the contract that reads it (StateReader).
//
// It is a leaf: standard library only. The ZooKeeper adapter, the fakes,
// the step kinds, diagnose, the inventory loader and the lab all share it,
// so a znode shape or a path is written down once.
package kafkazk
