package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafka"
)

// TestDiskFullLab breaks a size-limited ZooKeeper-mode lab (Kafka 3.9.2)
// with disk-full (one broker's only log dir filled until Kafka stopped it),
// diagnoses it, repairs it with a headless `run disk-full`, and proves it
// with its own clients (diskFullCase).
func TestDiskFullLab(t *testing.T) {
	needLab(t)
	needRoot(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers, cfg.LogDirSize = 61, 1, "64m"
	diskFullCase(t, startLab(t, cfg), "disk-full", "disk-full")
}

// TestDiskFullKRaftLab is TestDiskFullLab on a KRaft lab (Kafka 4.1.2):
// scenario kraft-disk-full, runbook kraft-disk-full.
func TestDiskFullKRaftLab(t *testing.T) {
	needLab(t)
	needRoot(t)
	t.Parallel()
	cfg := lab.KRaftConfig()
	cfg.Net, cfg.KafkaVersion, cfg.LogDirSize = 66, "4.1.2", "64m"
	diskFullCase(t, startLab(t, cfg), "kraft-disk-full", "kraft-disk-full")
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("a disk-full lab test needs root: lab up --log-dir-size mounts a tmpfs per log dir")
	}
}

// diskFullCase breaks l with scenario, then: diagnose exits 1 with
// log-dir-full the one cause naming runbook; a headless run of runbook
// brings the dir online, keeps every record past the group's commit
// readable and every topic config as it was, and leaves the moved
// directories in the quarantine; a second run does nothing.
func diskFullCase(t *testing.T, l *lab.Lab, scenario, runbook string) {
	c := connectLab(t, l)
	const topic = "orders"
	rep := breakIt(t, l, scenario, topic)
	victim := rep.Victim
	configs := topicConfigs(t, c, topic)

	t.Run("diagnose names the full dir as the one cause, with the runbook", func(t *testing.T) {
		d, code := diagnosis(t, l, "")
		causes := d.Causes()
		if code != 1 || len(causes) != 1 || causes[0].Kind != diagnose.FindLogDirFull || causes[0].Runbook != runbook ||
			len(causes[0].Brokers) != 1 || causes[0].Brokers[0] != victim {
			t.Fatalf("want exit 1 and one cause log-dir-full on broker %d naming %s; exit %d, causes %+v", victim, runbook, code, causes)
		}
		ev := strings.Join(causes[0].Evidence, "\n")
		if !strings.Contains(ev, "100% used") {
			t.Errorf("evidence does not give df's numbers: %v", causes[0].Evidence)
		}
		// The inventory names the broker's server.log: its ENOSPC line,
		// read over SSH, is the evidence of why it stopped.
		serverLog := filepath.Join(l.BrokerDir(int(victim)), "logs", "server.log")
		if !strings.Contains(ev, fmt.Sprintf("broker %d's server log %s: [", victim, serverLog)) || !strings.Contains(ev, "No space left on device") ||
			!strings.Contains(causes[0].Summary, "its server log says No space left on device") {
			t.Errorf("the server log's ENOSPC line is not in the finding: %s\n%s", causes[0].Summary, ev)
		}
	})

	quarantine := filepath.Join(l.BrokerDir(int(victim)), "quarantine")
	if err := os.MkdirAll(quarantine, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(dir string) result {
		return kremedy(t, "run", runbook, "--inventory", l.InventoryPath(), "--set", fmt.Sprintf("broker=%d", victim),
			"--set", "quarantine="+quarantine, "--run-dir", dir, "--headless", "--yes", "--confirm", "kremedy-lab")
	}

	t.Run("run: the dir online, nothing a group had not committed past deleted, configs as before", func(t *testing.T) {
		r := run(filepath.Join(t.TempDir(), "run"))
		t.Logf("FIGURE headless %s took %.1fs", runbook, r.took.Seconds())
		if r.code != 0 || !strings.Contains(r.out, "CANNOT BE UNDONE") {
			t.Fatalf("%s: exit %d (want 0, with what cannot be undone said before the confirmation)\n%s", runbook, r.code, r.out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		dirs, err := c.kc.DescribeLogDirs(ctx, victim)
		if err != nil || len(dirs) != 1 || dirs[0].Err != "" {
			t.Fatalf("broker %d's log dirs: %+v, %v", victim, dirs, err)
		}
		for p := range int32(lab.DiskFullPartitions) {
			readBack(t, ctx, l, topic, p, rep.Messages[p])
		}
		if after := topicConfigs(t, c, topic); after != configs {
			t.Errorf("topic configs changed:\nbefore %s\nafter  %s", configs, after)
		}
		moved, _ := filepath.Glob(filepath.Join(quarantine, "kremedy-*", topic+"-*", "*.log"))
		if len(moved) == 0 {
			t.Errorf("no segment in the quarantine %s: the moved directories must be kept", quarantine)
		}
	})

	t.Run("a second run has nothing to do", func(t *testing.T) {
		r := run(filepath.Join(t.TempDir(), "run"))
		if r.code != 0 || !strings.Contains(r.out, "nothing to do: [lower-local move-dirs free-records quarantine start restore-local]") {
			t.Fatalf("second %s: exit %d, want 0 with no step done\n%s", runbook, r.code, r.out)
		}
	})
}

// readBack proves partition p keeps every record the group had not
// committed past: the log starts at or below the commit, and reading from
// it gives consecutive records up to at least every acknowledged one.
func readBack(t *testing.T, ctx context.Context, l *lab.Lab, topic string, p int32, acked int) {
	t.Helper()
	vals, err := kafka.ReadPartition(ctx, l.State.Config.Bootstrap(), topic, p, l.KafkaOpts()...)
	if err != nil {
		t.Fatalf("read %s-%d: %v", topic, p, err)
	}
	if len(vals) == 0 {
		t.Fatalf("%s-%d: nothing readable", topic, p)
	}
	var first int
	if _, err := fmt.Sscanf(vals[0], topic+"-%d %06d", new(int), &first); err != nil {
		t.Fatalf("%s-%d: first record %.40q: %v", topic, p, vals[0], err)
	}
	if first > lab.DiskFullCommitted {
		t.Errorf("%s-%d: the log starts at record %d, past the group's commit %d: records it had not read were deleted", topic, p, first, lab.DiskFullCommitted)
	}
	for i, v := range vals {
		want := fmt.Sprintf("%s-%d %06d ", topic, p, first+i)
		if !strings.HasPrefix(v, want) {
			t.Fatalf("%s-%d: record %d is %.40q, want %q", topic, p, i, v, want)
		}
	}
	if last := first + len(vals); last < acked {
		t.Errorf("%s-%d: records up to %d readable, %d were acknowledged", topic, p, last, acked)
	}
	t.Logf("%s-%d: records %d..%d readable (group committed %d, %d acknowledged)", topic, p, first, first+len(vals)-1, lab.DiskFullCommitted, acked)
}

// topicConfigs is topic's configs that are not Kafka's defaults, as one
// string to compare.
func topicConfigs(t *testing.T, c *clients, topic string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := c.kc.Admin().DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		for _, cfg := range r.Configs {
			if cfg.Source.String() != "DEFAULT_CONFIG" && cfg.Value != nil {
				out = append(out, cfg.Key+"="+*cfg.Value)
			}
		}
	}
	return strings.Join(out, ",")
}
