package main

// Lab test of the offline-partitions runbook: the real binary, headless,
// against a real ZooKeeper-mode Kafka 3.9 lab broken by offline-partition.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/internal/kafkaver"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
)

// TestOfflinePartitionsLab: diagnose names the offline partitions and each
// replica's log end read from disk; the run elects the longest live log
// (broker 2), not Kafka's first live replica in assignment order (broker 1
// for partitions 0 and 2); the records it says are lost are exactly the
// acknowledged records a read-back no longer finds; the consumer group
// committed past the new end is named with its reset.
func TestOfflinePartitionsLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net = 63
	cfg.Brokers = 4
	offlineLab(t, startLab(t, cfg), "offline-partition", "offline-partitions")
}

// TestOfflinePartitionsKRaftLab is TestOfflinePartitionsLab on a KRaft
// Kafka 4.1.2 lab (one controller, ELR on by default for a new 4.1
// cluster) with the kraft-offline-partitions runbook.
func TestOfflinePartitionsKRaftLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.KRaftConfig()
	cfg.Net = 187
	cfg.Brokers = 4
	cfg.KRaftControllers = 1
	cfg.KafkaVersion = "4.1.2"
	offlineLab(t, startLab(t, cfg), "kraft-offline-partition", "kraft-offline-partitions")
}

// TestOfflinePartitionsOlderLab and TestOfflinePartitionsKRaft39Lab are
// the same on the oldest releases the runbooks support: ZooKeeper-mode
// 2.8.2 (the first with topic ids; no ELR) and KRaft 3.9.2 (ELR off by
// default, a static quorum). In make test-versions, the heavy lane.
func TestOfflinePartitionsOlderLab(t *testing.T) {
	needLab(t)
	heavyLab(t, "offline-partitions on ZooKeeper-mode Kafka 2.8.2")
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net = 74
	cfg.Brokers = 4
	cfg.KafkaVersion = "2.8.2"
	offlineLab(t, startLab(t, cfg), "offline-partition", "offline-partitions")
}

func TestOfflinePartitionsKRaft39Lab(t *testing.T) {
	needLab(t)
	heavyLab(t, "kraft-offline-partitions on KRaft 3.9.2")
	t.Parallel()
	cfg := lab.KRaftConfig()
	cfg.Net = 75
	cfg.Brokers = 4
	cfg.KRaftControllers = 1
	cfg.KafkaVersion = "3.9.2"
	offlineLab(t, startLab(t, cfg), "kraft-offline-partition", "kraft-offline-partitions")
}

// offlineLab breaks l with scenario, then checks diagnose and a headless
// run of runbook.
func offlineLab(t *testing.T, l *lab.Lab, scenario, runbook string) {
	const topic = "payments"
	breakIt(t, l, scenario, topic)
	led, err := l.ReadOfflineLedger(topic)
	if err != nil {
		t.Fatal(err)
	}

	d, code := diagnosis(t, l, "")
	offlineDiagnosed(t, d, code, led, runbook)

	// The dead leader's host answers again, its broker still down: its
	// log, the longest, is read from its disk. Waiting for it is the way
	// that loses nothing, so the run elects nothing and says so.
	if err := l.StartHost(int(led.Dead)); err != nil {
		t.Fatal(err)
	}
	offlineWaitFor(t, l, led, runbook)
	// The operator says broker 3 will not come back: the longest live log
	// is elected, and what only broker 3 holds is lost, now exactly (its
	// log read) and in time (its batches' timestamps).
	run := filepath.Join(t.TempDir(), "run")
	r := kremedy(t, "run", runbook, "--inventory", l.InventoryPath(), "--run-dir", run, "--set", fmt.Sprintf("lost_brokers=%d", led.Dead), "--headless", "--yes", "--confirm", l.Inventory().Name)
	t.Logf("%s took %s:\n%s", runbook, r.took.Round(time.Millisecond), r.out)
	// The group committed past the elected end fails the after step's
	// check: the run exits 1 there, every partition elected, until the
	// group is reset (kremedy resets nothing).
	if r.code != 1 || !strings.Contains(r.out, "step after") {
		t.Fatalf("%s: exit %d, want 1 with the after step's check failing on the group past the elected end", runbook, r.code)
	}
	rep, err := os.ReadFile(filepath.Join(run, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	c := connectLab(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := led.Assign[0][1] // broker 2
	v, err := c.kc.BrokerView(ctx, b, topic)
	if err != nil {
		t.Fatal(err)
	}
	total := offlineReadBack(t, ctx, l, string(rep), led, v)
	if n := strings.Count(string(rep), "of writes, after "); n != len(led.Assign) {
		t.Errorf("the report gives the loss in time (the batches' timestamps) for %d of %d partitions:\n%s", n, len(led.Assign), rep)
	}
	if !strings.Contains(string(rep), fmt.Sprintf("records lost in all: %d", total)) {
		t.Errorf("the report does not state the %d records lost in all:\n%s", total, rep)
	}
	offlineTxnReported(t, l, string(rep), led)
	wantGroup := fmt.Sprintf("group %s is committed at %d on %s-0, past its new end %d: it needs a reset to %d", lab.OfflineGroup, led.Committed[0], topic, led.Ends[b][0], led.Ends[b][0])
	if !strings.Contains(string(rep), wantGroup) {
		t.Errorf("the report does not name the group past the end (%q):\n%s", wantGroup, rep)
	}
}

// offlineReadBack checks each partition against the ledger: led by broker
// 2, the longest live log, not Kafka's first live replica; the report's
// exact loss equal to the acknowledged records a read-back misses (and
// the transaction's marker). It returns the records lost in all.
func offlineReadBack(t *testing.T, ctx context.Context, l *lab.Lab, rep string, led *lab.OfflineLedger, v ports.BrokerView) int {
	t.Helper()
	topic := led.Topic
	a, b := led.Assign[0][0], led.Assign[0][1] // brokers 1 and 2
	var total int
	for p, reps := range led.Assign {
		pv := v.Topics[topic].Partitions[int32(p)]
		if pv.Leader != b {
			t.Errorf("%s-%d: leader %d, want broker %d, the longest live log (ends %v)", topic, p, pv.Leader, b, led.Ends)
		}
		if first := firstLive(reps, led.Dead); p != 1 && first != a {
			t.Errorf("%s-%d: the lab should make Kafka's pick (broker %d) differ from the longest live log", topic, p, first)
		}
		got, err := kafka.ReadPartition(ctx, l.State.Config.Bootstrap(), topic, int32(p), l.KafkaOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for val := range led.Acked[int32(p)] {
			if !slices.Contains(got, val) {
				missing++
			}
		}
		lost := missing
		if int32(p) == led.Txn.Partition {
			lost++ // the transaction's commit marker, a record broker 2 never got
		}
		total += lost
		want := fmt.Sprintf("%s-%d: elected broker %d (log end %d): %d records lost (offsets %d to %d): ", topic, p, b, led.Ends[b][int32(p)], lost, led.Ends[b][int32(p)], led.Ends[led.Dead][int32(p)]-1)
		if missing == 0 || !strings.Contains(rep, want) {
			t.Errorf("read-back of %s-%d misses %d acknowledged records; the report should say %q:\n%s", topic, p, missing, want, rep)
		}
	}
	return total
}

// offlineWaitFor: with the dead leader's host answering, diagnose reads
// its log end from disk and says to start it; the run refuses to elect,
// naming lost_brokers, and every partition stays without a leader.
func offlineWaitFor(t *testing.T, l *lab.Lab, led *lab.OfflineLedger, runbook string) {
	t.Helper()
	d, code := diagnosis(t, l, "")
	var f *diagnose.Finding
	for i := range d.Findings {
		if d.Findings[i].Kind == diagnose.FindOfflineLogEnds {
			f = &d.Findings[i]
		}
	}
	if code != 1 || f == nil || !strings.Contains(f.Fix, fmt.Sprintf("start broker(s) [%d]: nothing is lost", led.Dead)) {
		t.Fatalf("diagnose with broker %d's host answering: exit %d, %+v", led.Dead, code, f)
	}
	ev := strings.Join(f.Evidence, "\n")
	for p := range led.Assign {
		for _, want := range []string{fmt.Sprintf("%s-%d broker %d: log end %d", led.Topic, p, led.Dead, led.Ends[led.Dead][int32(p)]),
			fmt.Sprintf("%s-%d: dead broker %d holds the longest log (%d): start it and nothing is lost", led.Topic, p, led.Dead, led.Ends[led.Dead][int32(p)])} {
			if !strings.Contains(ev, want) {
				t.Errorf("diagnose evidence lacks %q:\n%s", want, ev)
			}
		}
	}
	r := kremedy(t, "run", runbook, "--inventory", l.InventoryPath(), "--run-dir", filepath.Join(t.TempDir(), "wait"), "--headless", "--yes", "--confirm", l.Inventory().Name)
	for _, want := range []string{fmt.Sprintf("wait for broker %d (its log, to %d, is the", led.Dead, led.Ends[led.Dead][0]), "nothing is lost — RECOMMENDED",
		fmt.Sprintf("dead broker(s) [%d] hold their longest logs and their hosts answer: start them — nothing is lost. The run stops here; nothing was changed", led.Dead),
		"of writes, after ", // what electing without it loses, in time
		fmt.Sprintf("--set lost_brokers=%d", led.Dead)} {
		if !strings.Contains(r.out, want) {
			t.Errorf("the run with broker %d's host answering does not say %q:\n%s", led.Dead, want, r.out)
		}
	}
	if r.code != exitFailed || !strings.Contains(r.out, "FAILED: step survey") {
		t.Fatalf("the run with broker %d's host answering: exit %d, want %d (a refusal)", led.Dead, r.code, exitFailed)
	}
	c := connectLab(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := c.kc.BrokerView(ctx, led.Assign[0][1], led.Topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range led.Assign {
		if pv := v.Topics[led.Topic].Partitions[int32(p)]; !pv.IsOffline() {
			t.Errorf("%s-%d has leader %d after a run that refused", led.Topic, p, pv.Leader)
		}
	}
}

// offlineTxnReported: the transaction the scenario left open on the
// elected log, its marker lost with the dead leader, is reported hanging
// (its coordinator completed it), with the last stable offset it holds
// and the abort; on a release without ListTransactions (before 3.0) it
// is reported open, not judged.
func offlineTxnReported(t *testing.T, l *lab.Lab, rep string, led *lab.OfflineLedger) {
	t.Helper()
	tx := led.Txn
	if tx.Start < 0 || tx.TxnID == "" {
		t.Fatalf("the scenario left no transaction: %+v", tx)
	}
	txt := section(rep, "Open transactions on the elected partitions")
	wants := []string{fmt.Sprintf("open since offset %d, HANGS: its coordinator has transaction %q Complete", tx.Start, tx.TxnID),
		fmt.Sprintf("last stable offset stays at %d", tx.Start),
		fmt.Sprintf("abort --topic %s --partition %d --start-offset %d", led.Topic, tx.Partition, tx.Start)}
	if v, err := kafkaver.Parse(l.State.Kafka); err != nil || v.Before(3, 0) {
		wants = []string{fmt.Sprintf("has a transaction open on %s-%d since offset %d (whether it hangs was not checked", led.Topic, tx.Partition, tx.Start),
			"do not answer ListTransactions (it came with Kafka 3.0, KIP-664)"}
	}
	for _, w := range wants {
		if !strings.Contains(txt, w) {
			t.Errorf("the report's open transactions do not say %q:\n%s", w, txt)
		}
	}
}

// section is a report's text under the heading that holds title, to the
// next heading.
func section(rep, title string) string {
	i := strings.Index(rep, title)
	if i < 0 {
		return ""
	}
	rest := rep[i+len(title):]
	if j := strings.Index(rest, "\n#"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// offlineDiagnosed: exit 1, one offline-log-ends cause naming dead broker
// and the partitions, with every live replica's end from disk.
func offlineDiagnosed(t *testing.T, d *diagnose.Diagnosis, code int, led *lab.OfflineLedger, runbook string) {
	t.Helper()
	if code != 1 {
		t.Fatalf("diagnose: exit %d, want 1", code)
	}
	var f *diagnose.Finding
	for i := range d.Findings {
		if d.Findings[i].Kind == diagnose.FindOfflineLogEnds {
			f = &d.Findings[i]
		}
	}
	if f == nil || !slices.Equal(f.Brokers, []int32{led.Dead}) || f.Cause != "" || f.Runbook != runbook {
		t.Fatalf("no %s cause naming dead broker %d with the runbook: %+v", diagnose.FindOfflineLogEnds, led.Dead, f)
	}
	for _, x := range d.Findings {
		if x.Topic == led.Topic && (x.Kind == diagnose.FindOffline || x.Kind == diagnose.FindUnderReplicated) && x.Cause != f.ID {
			t.Errorf("%s of %s: cause %q, want %s", x.Kind, x.Topic, x.Cause, f.ID)
		}
	}
	ev := strings.Join(f.Evidence, "\n")
	for p := range led.Assign {
		for _, br := range led.Assign[p] {
			if br == led.Dead {
				continue
			}
			want := fmt.Sprintf("%s-%d broker %d: log end %d", led.Topic, p, br, led.Ends[br][int32(p)])
			if !strings.Contains(ev, want) {
				t.Errorf("evidence lacks %q:\n%s", want, ev)
			}
		}
	}
}

func firstLive(reps []int32, dead int32) int32 {
	for _, r := range reps {
		if r != dead {
			return r
		}
	}
	return -1
}
