package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
)

// TestDiskFullTieredLab: a KRaft 4.1.2 lab with tiered storage on (Kafka's
// LocalTieredStorage, lab up --tiered). Topic archive (tiered, 1 MiB
// segments, on every broker) has 10 MiB written and uploaded but for its
// active segment; then kraft-disk-full fills one broker's dir until
// ENOSPC. diagnose's log-dir-full evidence splits archive-0's bytes into
// local copies of uploaded segments and bytes held only there (the highest
// uploaded offset read with ListOffsets LATEST_TIERED), says orders
// (not tiered) has no such copies, and the fix names lowering
// local.retention.bytes.
func TestDiskFullTieredLab(t *testing.T) {
	needLab(t)
	needRoot(t)
	t.Parallel()
	cfg := lab.KRaftConfig()
	cfg.Net, cfg.KafkaVersion, cfg.LogDirSize, cfg.KRaftControllers, cfg.Tiered = 78, "4.1.2", "64m", 1, true
	l := startLab(t, cfg)
	c := connectLab(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const archive = "archive"
	if _, err := c.kc.CreateTopic(ctx, archive, [][]int32{{1, 2, 3}}, 0, 0, map[string]string{"remote.storage.enable": "true", "segment.bytes": fmt.Sprint(1 << 20)}); err != nil {
		t.Fatal(err)
	}
	acked := make([]int, 1)
	produceUntil(t, ctx, l, archive, acked, func() bool { return acked[0] >= 40 }) // 10 MiB of 256 KiB records
	var up int64
	waitFor(t, ctx, "archive-0 uploaded but for its active segment", func() (bool, string) {
		got, err := c.kc.Tiered(ctx, []string{archive})
		if err != nil {
			return false, err.Error()
		}
		up = got[archive][0]
		return up >= int64(acked[0])-8, fmt.Sprintf("highest uploaded offset %d of %d records", up, acked[0])
	})
	rep := breakIt(t, l, "kraft-disk-full", "orders")
	d, code := diagnosis(t, l, "")
	causes := d.Causes()
	if code != 1 || len(causes) != 1 || causes[0].Kind != diagnose.FindLogDirFull || len(causes[0].Brokers) != 1 || causes[0].Brokers[0] != rep.Victim {
		t.Fatalf("want exit 1 and one cause log-dir-full on broker %d; exit %d, causes %+v", rep.Victim, code, causes)
	}
	ev := strings.Join(causes[0].Evidence, "\n")
	var line string
	for _, e := range causes[0].Evidence {
		if strings.HasPrefix(e, archive+"-0: ") {
			line = e
		}
	}
	if !strings.Contains(line, "tiered storage on, the remote store holds offsets up to ") || !strings.Contains(line, "of these segments are local copies of uploaded ones") || strings.Contains(line, ": 0 B of these") {
		t.Errorf("archive-0's evidence does not split its uploaded copies from what only the disk holds: %q\n%s", line, ev)
	}
	for _, e := range causes[0].Evidence {
		if strings.HasPrefix(e, "orders-") && strings.Contains(e, "tiered") {
			t.Errorf("a topic without tiered storage is said to have it: %q", e)
		}
	}
	if !strings.Contains(causes[0].Fix, fmt.Sprintf("lowering its local.retention.bytes (or .ms) frees them once broker %d runs again", rep.Victim)) {
		t.Errorf("the fix does not name lowering local retention: %s", causes[0].Fix)
	}
	t.Logf("archive-0 (highest uploaded offset %d of %d records): %s", up, acked[0], line)
}
