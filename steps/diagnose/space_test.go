package diagnose_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// TestFullDirIsTheCause: a broker down with a full log dir (df over SSH)
// is one cause, log-dir-full, naming the disk-full runbook and the
// largest partitions; its broker-down is explained by it. A running
// broker whose DescribeLogDirs reports a dir offline is one too, with a
// filesystem that is not full.
func TestFullDirIsTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fullDirDown(t,
			"f 409600 orders-2/00000000000000000000.log",
			"f 8 orders-2/00000000000000000000.index",
		)
		// Broker 3's inventory entry names its server log, which says
		// why it stopped; broker 2's names one that is not there, but
		// its dirs are fine and it runs: it is not read.
		const serverLog = "/var/log/kafka/server.log"
		for i := range f.Ports.Target.Hosts {
			f.Ports.Target.Hosts[i].ServerLog = serverLog
		}
		f.hosts.Logs = map[int32]map[string][]string{3: {serverLog: {
			"[2026-12-06 08:00:00,001] INFO started",
			"[2026-12-06 09:00:00,002] ERROR Error while appending records to orders-2 in dir /data/k1 (org.apache.kafka.storage.internals.log.LogDirFailureChannel)",
			"java.io.IOException: No space left on device",
			"\tat java.base/sun.nio.ch.FileDispatcherImpl.write0(Native Method)",
			"[2026-12-06 09:00:00,003] ERROR Shutdown broker because all log dirs in /data/k1 have failed",
		}}}
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Disk: true, Topic: "orders-v2"})
		if err != nil {
			t.Fatal(err)
		}
		causes := d.Causes()
		if n := len(f.hosts.Commands); n == 0 || countLogReads(f.hosts.Commands) != 1 {
			t.Fatalf("want one server-log read (broker 3's), got %d in %q", countLogReads(f.hosts.Commands), f.hosts.Commands)
		}
		if len(causes) == 0 {
			t.Fatalf("no cause: %+v", d.Findings)
		}
		if ev := strings.Join(causes[0].Evidence, "\n"); !strings.Contains(ev, "broker 3's server log "+serverLog+": [2026-12-06 09:00:00,002] ERROR Error while appending records to orders-2 in dir /data/k1 (org.apache.kafka.storage.internals.log.LogDirFailureChannel) | java.io.IOException: No space left on device") ||
			!strings.Contains(causes[0].Summary, "its server log says No space left on device") {
			t.Fatalf("the server log's ENOSPC line is not the evidence: %s\n%s", causes[0].Summary, ev)
		}
		if len(causes) != 1 || causes[0].Kind != diagnose.FindLogDirFull || causes[0].Runbook != "disk-full" || !strings.Contains(causes[0].Fix, "--set broker=3") {
			t.Fatalf("want one cause log-dir-full on broker 3 naming disk-full, got %+v", causes)
		}
		ev := strings.Join(causes[0].Evidence, "\n")
		if !strings.Contains(ev, "100% used, 0 B free of 1.0 GiB") || !strings.Contains(ev, "orders-2: 200.0 MiB in 1 segments, the oldest from offset 0") {
			t.Fatalf("evidence: %s", ev)
		}
		explained := 0
		for _, e := range d.Explained(causes[0].ID) {
			if e.Kind == diagnose.FindBrokerDown {
				explained++
			}
		}
		if explained != 1 {
			t.Fatalf("broker-down is not explained by the full dir: %+v", d.Findings)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.zk.Remove(kafkazk.DeleteTopicPath("orders"))
		f.kafka.OfflineDirs = map[int32]map[string]bool{2: {"/data/k2": true}}
		// Its server log is named but not there: the evidence says so.
		for i := range f.Ports.Target.Hosts {
			f.Ports.Target.Hosts[i].ServerLog = "/opt/kafka/logs/server.log"
		}
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Disk: true, Topic: "orders-v2"})
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, fd := range d.Findings {
			if fd.Kind == diagnose.FindLogDirFull {
				ev := strings.Join(fd.Evidence, "\n")
				found = len(fd.Brokers) == 1 && fd.Brokers[0] == 2 && strings.Contains(ev, "/data/k2 is offline (KAFKA_STORAGE_ERROR)") &&
					strings.Contains(ev, "broker 2's server log /opt/kafka/logs/server.log not read: ")
			}
		}
		if !found {
			t.Fatalf("an offline dir of a running broker: no log-dir-full on broker 2: %+v", d.Findings)
		}
	})
}

func countLogReads(cmds []string) int {
	n := 0
	for _, c := range cmds {
		if strings.Contains(c, "kremedy_lines") {
			n++
		}
	}
	return n
}

// TestFullDirSaysWhatTieredStorageHolds: a partition of a tiered topic in
// the full dir: the evidence splits its bytes into local copies of
// uploaded segments (up to the highest offset the remote store holds;
// the active segment never) and bytes held only here, and the fix names
// lowering local.retention; a tiered topic with nothing uploaded yet is
// all local; a topic without tiered storage gets no such word.
func TestFullDirSaysWhatTieredStorageHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fullDirDown(t,
			"f 204800 archive-0/00000000000000000000.log",
			"f 204800 archive-0/00000000000000000100.log",
			"f 102400 archive-0/00000000000000000200.log",
			"f 204800 fresh-0/00000000000000000000.log",
			"f 409600 orders-2/00000000000000000000.log",
		)
		f.hosts.AddDir(3, "/data/k1", "archive-0", "")
		f.hosts.AddDir(3, "/data/k1", "fresh-0", "")
		f.kafka.TieredUpTo = map[string]map[int32]int64{"archive": {0: 199}, "fresh": {0: -1}}
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{Disk: true, Topic: "orders-v2"})
		if err != nil {
			t.Fatal(err)
		}
		causes := d.Causes()
		if len(causes) != 1 || causes[0].Kind != diagnose.FindLogDirFull {
			t.Fatalf("want one log-dir-full cause: %+v", causes)
		}
		ev := strings.Join(causes[0].Evidence, "\n")
		for _, want := range []string{
			"archive-0: 250.0 MiB in 3 segments, the oldest from offset 0; tiered storage on, the remote store holds offsets up to 199: 200.0 MiB of these segments are local copies of uploaded ones",
			"50.0 MiB is held only here",
			"fresh-0: 100.0 MiB in 1 segments, the oldest from offset 0; tiered storage on, nothing uploaded as far as its leader knows",
			"orders-2: 200.0 MiB in 1 segments, the oldest from offset 0\n",
		} {
			if !strings.Contains(ev+"\n", want) {
				t.Errorf("evidence lacks %q:\n%s", want, ev)
			}
		}
		if !strings.Contains(causes[0].Fix, "lowering its local.retention.bytes (or .ms) frees them once broker 3 runs again (a stopped broker deletes nothing) and loses nothing") {
			t.Errorf("the fix does not name lowering local retention: %s", causes[0].Fix)
		}
	})
}

// fullDirDown is the ghost fixture with broker 3 down and its /data/k1
// 100% used, holding the space-reading lines files ("f BLOCKS PATH").
func fullDirDown(t *testing.T, files ...string) *fixture {
	f := newFixture(t)
	f.zk.Remove(kafkazk.DeleteTopicPath("orders"))
	f.hosts.Running[3] = false
	f.zk.Remove("/brokers/ids/3")
	f.hosts.Space = map[int32]map[string][]string{3: {"/data/k1": append([]string{"df /dev/sdb 1048576 1048576 0 100% /data"}, files...)}}
	return f
}
