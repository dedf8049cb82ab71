package main

// The figure issue 42 asks for, measured rather than asserted: a rolling
// restart of six real brokers in three racks, one at a time and then with
// batch=auto, on one lab. Run it alone (`make bench-roll`), never beside
// the lab tests: it uses TestBatchRollLab's net, and a loaded machine
// measures the load.

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/kafka"
)

// BenchmarkBatchRollLab brings up a lab of 6 ZooKeeper-mode brokers in 3
// racks (Kafka 3.9.2, net 41), makes a 6-partition topic of replication
// factor 3 at min.insync.replicas 2, and times rolling-restart one at a
// time, then with batch=auto, each under an acks=all producer that must
// lose nothing, the lab healthy before each. sec/op is the run's wall time
// (kremedy's process, plan to report). Go runs each sub-benchmark -count
// times in a row on this one lab; make bench-roll runs -count 1 in a loop
// instead, a new lab a pass, so that the modes alternate. Compare the two
// with benchstat -col /mode.
func BenchmarkBatchRollLab(b *testing.B) {
	if _, _, err := lab.ResolveKafkaHome("", ""); err != nil {
		b.Fatalf("lab parts missing: %v (run `make lab-install`)", err)
	}
	cfg := lab.DefaultConfig()
	cfg.Brokers, cfg.Racks, cfg.Net = 6, 3, 41
	parent, err := os.MkdirTemp("", "kremedy-bench-")
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(parent, "lab")
	b.Cleanup(func() {
		_ = lab.Down(context.Background(), dir, false, io.Discard)
		os.RemoveAll(parent)
	})
	l, err := lab.Up(context.Background(), dir, cfg, nil, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	kc, err := kafka.New(cfg.Bootstrap())
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kc.CreateTopic(ctx, ledger, nil, batchParts, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name  string
		extra []string
	}{{"mode=one-at-a-time", nil}, {"mode=batch-auto", []string{"--set", "batch=auto"}}} {
		b.Run(mode.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				waitHealthy(b, l)
				stop := make(chan struct{})
				done := produceDuringN(b, l, ledger, batchParts, stop)
				run := filepath.Join(b.TempDir(), "run")
				b.StartTimer()
				r := runRoll(b, l, run, mode.extra...)
				b.StopTimer()
				close(stop)
				got := done()
				if r.code != 0 {
					b.Fatalf("rolling-restart %v: exit %d\n%s", mode.extra, r.code, r.out)
				}
				if got.failed != 0 || got.acked == 0 {
					b.Fatalf("%d sends failed (%d acknowledged): %v", got.failed, got.acked, got.errs)
				}
				b.StartTimer()
			}
		})
	}
}
