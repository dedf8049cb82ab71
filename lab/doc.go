// Package lab runs kremedy's local rehearsal cluster and breaks it the way
// the incident did. Every part is real: a ZooKeeper ensemble (QuorumPeerMain)
// on 127.<net>.2.N:2181, Kafka brokers (3.9.2 by default; any release from
// 2.4 to 3.9, installed from Maven Central, each with its own ZooKeeper and
// logging backend) in ZooKeeper mode on
// 127.<net>.1.N:9092, and beside each broker an OpenSSH sshd on :2222 with
// lab-made host keys, so that brokers are stopped and started over SSH with
// unit-like kafka-stop/kafka-start commands, as on a real fleet. A KRaft lab
// (`lab up --kraft`, kraftlab.go; 3.9.2 or 4.x, whose log4j2 logging.go
// configures) has no ZooKeeper at all: KRaft controllers (node.id 3001…) on
// 127.<net>.3.K:9093 with their own sshd, brokers in KRaft mode, every node
// formatted by Kafka's storage tool. A lab lives
// in one directory (lab.json, inventory.yaml, known_hosts, the user key, and
// per-part configs, data and logs); Up is idempotent, Down leaves no process
// behind. Scenarios reproduce the reports' states and prove each symptom
// with real clients before they claim it — the symptoms of the lab's
// release. Each lives in its own scenario_<name>.go, which registers it
// for ZooKeeper or KRaft labs (ScenarioOrder lists them in the report's
// order; `kremedy lab break --help` prints them); harness.go and
// harness_kraft.go hold what they share.
package lab
