package main

import (
	"testing"

	"github.com/kremedy/kremedy/lab"
)

// TestSecureKRaftDisastersLab runs the KRaft disaster runbooks that act on
// partitions and disks on secured KRaft 4.1.2 labs (`lab up --kraft
// --secure`: SASL_SSL with SCRAM, StandardAuthorizer ACLs, the
// controllers on SASL_SSL with PLAIN, every node the service user's, SSH
// as the operator through sudo), one lab after another on net 83, each
// checked exactly as its plaintext lab test is: kraft-offline-partitions
// (TestOfflinePartitionsKRaftLab's checks), kraft-disk-full
// (TestDiskFullKRaftLab's) and kraft-reassignment-unstick
// (TestReassignmentUnstickKRaftLab's), and quorum-to-dynamic on a secured
// static quorum (TestQuorumToDynamicLab's, the producer the app user's
// SCRAM login). controller-replace and quorum-recovery run on the secured
// dynamic quorum of TestSecureKRaftLab. In make test-versions, the heavy
// lane: make test keeps each runbook's plaintext lab.
func TestSecureKRaftDisastersLab(t *testing.T) {
	needSecureLab(t)
	needRoot(t)
	heavyLab(t, "the KRaft disaster runbooks on secured labs")
	t.Parallel()
	secured := func(mod func(*lab.Config)) lab.Config {
		cfg := lab.KRaftConfig()
		cfg.Net, cfg.KafkaVersion, cfg.Secure = 83, "4.1.2", true
		mod(&cfg)
		return cfg
	}
	t.Run("kraft-offline-partitions", func(t *testing.T) {
		cfg := secured(func(c *lab.Config) { c.Brokers, c.KRaftControllers = 4, 1 })
		offlineLab(t, startLab(t, cfg), "kraft-offline-partition", "kraft-offline-partitions")
	})
	t.Run("kraft-disk-full", func(t *testing.T) {
		cfg := secured(func(c *lab.Config) { c.LogDirSize = "64m" })
		diskFullCase(t, startLab(t, cfg), "kraft-disk-full", "kraft-disk-full")
	})
	t.Run("kraft-reassignment-unstick", func(t *testing.T) {
		reassignKRaftCase(t, startLab(t, secured(func(*lab.Config) {})))
	})
	t.Run("quorum-to-dynamic", func(t *testing.T) {
		l := startLab(t, secured(func(c *lab.Config) { c.KRaftQuorum = lab.QuorumStatic }))
		quorumToDynamicCase(t, l, "4.1.2", lab.AppPrefix+"-dledger", userOpts(t, l, lab.AppUser)...)
	})
}
