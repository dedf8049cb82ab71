// Package ports declares the small interfaces through which step kinds,
// diagnose and the restore commands reach a cluster — ZooKeeper (through its
// chroot), Kafka (each broker asked on its own, never auto-creating a
// topic) and the broker hosts (commands over SSH with verified host keys) —
// and the values that cross them. Adapters implement them in
// steps/zookeeper, steps/kafka and steps/remote; strict fakes in
// steps/steptest. It imports no client library: only the model in
// steps/kafkazk.
package ports
