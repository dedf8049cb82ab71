// Package brokers holds what several step kind packs do with a ZooKeeper-
// mode cluster's brokers, over the ports: read the registrations and the
// controller, run a broker's own stop or start command over SSH, wait on a
// ZooKeeper watch for a broker to go or come, hold the health gate after a
// restart, decide whether a broker can be stopped without taking a
// partition offline or below min.insync.replicas, and list the brokers' log
// dirs. It changes nothing on its own: the kinds decide and journal.
package brokers
