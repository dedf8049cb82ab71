package lab

func init() {
	registerKRaft(123, "kraft-offline-partition", onKRaft((*env).offlinePartition),
		offlineSummary+"; on KRaft (4 brokers: `lab up --kraft --brokers 4`) the partitions' eligible leader replicas (ELR, KIP-966) hold at most the dead broker 3")
}

// The body is offline-partition's (scenario_offline_partition.go): the
// brokers are stopped, killed and started the same way; only the wait for
// the dead broker differs (fenced by the controller, not a ZooKeeper
// session that expires).
