package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
)

// TestDiskFullTieredLab: a KRaft 4.1.2 lab with tiered storage on (Kafka's
// LocalTieredStorage, lab up --tiered), every log dir a 64 MiB tmpfs.
// Topic archive (tiered, 1 MiB segments, on every broker) is written until
// broker 3's dir is 95% used, and uploaded but for its active segment.
// diagnose's log-dir-full on broker 3 splits archive-0's bytes into local
// copies of uploaded segments and bytes only the disk holds (the highest
// uploaded offset read with ListOffsets LATEST_TIERED), and its fix says
// lowering local retention frees them. A headless run of kraft-disk-full
// lowers archive's local.retention.bytes to 0, waits for the broker to
// delete its copies, and sets the config back at the end: the dir has
// room again, every record is read back from offset 0 (the old ones from
// the remote store), archive has no override, and a second run does
// nothing.
func TestDiskFullTieredLab(t *testing.T) {
	needLab(t)
	needRoot(t)
	t.Parallel()
	cfg := lab.KRaftConfig()
	cfg.Net, cfg.KafkaVersion, cfg.LogDirSize, cfg.KRaftControllers, cfg.Tiered = 78, "4.1.2", "64m", 1, true
	l := startLab(t, cfg)
	c := connectLab(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const archive, victim = "archive", int32(3)
	dir := l.LogDirs(int(victim))[0]
	if _, err := c.kc.CreateTopic(ctx, archive, [][]int32{{1, 2, 3}}, 0, 0, map[string]string{"remote.storage.enable": "true", "segment.bytes": fmt.Sprint(1 << 20)}); err != nil {
		t.Fatal(err)
	}
	acked := make([]int, 1)
	produceUntil(t, ctx, l, archive, acked, func() bool { return usedPercent(t, dir) >= 95 })
	var up int64
	waitFor(t, ctx, "archive-0 uploaded but for its last segments", func() (bool, string) {
		got, err := c.kc.Tiered(ctx, []string{archive})
		if err != nil {
			return false, err.Error()
		}
		up = got[archive][0]
		return up >= int64(acked[0])-8, fmt.Sprintf("highest uploaded offset %d of %d records", up, acked[0])
	})
	t.Logf("%s: %d%% used; archive-0 has %d records, uploaded up to offset %d", dir, usedPercent(t, dir), acked[0], up)

	t.Run("diagnose splits the tiered partition's local copies from what only the disk holds", func(t *testing.T) {
		d, code := diagnosis(t, l, "")
		var f *diagnose.Finding
		for i, x := range d.Findings {
			if x.Kind == diagnose.FindLogDirFull && len(x.Brokers) == 1 && x.Brokers[0] == victim {
				f = &d.Findings[i]
			}
		}
		if code != 1 || f == nil {
			t.Fatalf("want exit 1 and log-dir-full on broker %d; exit %d, findings %+v", victim, code, d.Findings)
		}
		var line string
		for _, e := range f.Evidence {
			if strings.HasPrefix(e, archive+"-0: ") {
				line = e
			}
		}
		if !strings.Contains(line, "tiered storage on, the remote store holds offsets up to ") || !strings.Contains(line, "of these segments are local copies of uploaded ones") || strings.Contains(line, ": 0 B of these") {
			t.Errorf("archive-0's evidence does not split its uploaded copies from what only the disk holds: %q\n%s", line, strings.Join(f.Evidence, "\n"))
		}
		if !strings.Contains(f.Fix, "lowering its local.retention.bytes (or .ms) frees them and loses nothing") || !strings.Contains(f.Fix, "the runbook's first step does this") {
			t.Errorf("the fix does not name lowering local retention: %s", f.Fix)
		}
		t.Logf("evidence: %s", line)
	})

	run := func() result {
		return kremedy(t, "run", "kraft-disk-full", "--inventory", l.InventoryPath(), "--set", fmt.Sprintf("broker=%d", victim),
			"--run-dir", filepath.Join(t.TempDir(), "run"), "--headless", "--yes", "--confirm", "kremedy-lab")
	}
	t.Run("run: local copies freed, every record read back from offset 0, the config set back", func(t *testing.T) {
		r := run()
		t.Logf("FIGURE headless kraft-disk-full (tiered: local retention lowered and set back) took %.1fs", r.took.Seconds())
		if r.code != 0 || !strings.Contains(r.out, "set local.retention.bytes=0 on tiered topic archive") || !strings.Contains(r.out, "set local.retention.bytes of archive back to no override") {
			t.Fatalf("kraft-disk-full: exit %d (want 0, lowering archive's local retention and setting it back)\n%s", r.code, r.out)
		}
		if u := usedPercent(t, dir); u > 50 {
			t.Errorf("%s is %d%% used after the run, want the local copies gone", dir, u)
		}
		readFrom(t, ctx, l, archive, 0, acked[0], 0)
		// A broker answers DescribeConfigs from its metadata, a moment
		// behind the controller's.
		waitFor(t, ctx, "archive without a local.retention.bytes override, as before the run", func() (bool, string) {
			o, err := c.kc.TopicOverrides(ctx, "local.retention.bytes", []string{archive})
			return err == nil && len(o) == 0, fmt.Sprintf("%v, %v", o, err)
		})
	})
	t.Run("a second run has nothing to do", func(t *testing.T) {
		if r := run(); r.code != 0 || !strings.Contains(r.out, "nothing to do: [lower-local move-dirs free-records quarantine start restore-local]") {
			t.Fatalf("second kraft-disk-full: exit %d, want 0 with no step done\n%s", r.code, r.out)
		}
	})
}
