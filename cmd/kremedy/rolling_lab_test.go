package main

// Lab tests of the rolling-restart runbook: the real binary, headless,
// against a real ZooKeeper-mode Kafka 3.9 lab, with real clients watching.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

func runRoll(t testing.TB, l *lab.Lab, runDir string, extra ...string) result {
	t.Helper()
	inv := l.Inventory()
	return kremedy(t, append([]string{"run", "rolling-restart", "--inventory", l.InventoryPath(), "--run-dir", runDir,
		"--headless", "--yes", "--confirm", inv.Name}, extra...)...)
}

func brokerPIDs(l *lab.Lab) map[int]int {
	out := map[int]int{}
	for n := 1; n <= l.State.Config.Brokers; n++ {
		out[n] = l.BrokerPID(n)
	}
	return out
}

// restartedOnce: every broker runs as a new process since before, and the
// run's journal stopped each exactly once.
func restartedOnce(t *testing.T, l *lab.Lab, run string, before map[int]int) {
	t.Helper()
	after := brokerPIDs(l)
	for n, pid := range before {
		if after[n] == pid || after[n] == 0 {
			t.Errorf("broker %d: pid %d before, %d after: not a new process", n, pid, after[n])
		}
	}
	s := stops(t, run)
	for n := range before {
		if s[int32(n)] != 1 {
			t.Errorf("stops per broker %v, want each of the %d brokers once", s, len(before))
			break
		}
	}
	if len(s) != len(before) {
		t.Errorf("stops per broker %v, want each of the %d brokers once", s, len(before))
	}
}

// stops counts, from a run's journal, the stop commands of each broker that
// ended well.
func stops(t *testing.T, runDir string) map[int32]int {
	t.Helper()
	acts, err := steptest.Ended(runDir, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int{}
	for _, a := range acts {
		if strings.HasPrefix(a.ID, "stop-") {
			out[a.Broker]++
		}
	}
	return out
}

// sent is what a producer saw: sends acknowledged and failed, the first
// errors, and the longest a single send took.
type sent struct {
	acked, failed int64
	errs          []string
	longest       time.Duration
	longestAt     time.Time // when the longest send began
}

// produceDuring writes to topic from an idempotent acks=all producer with
// retries (franz-go's defaults), one record at a time, until stop is
// closed; the function it returns waits for the last send and says what
// the producer saw.
func produceDuring(t *testing.T, l *lab.Lab, topic string, stop <-chan struct{}) func() sent {
	t.Helper()
	return produceDuringN(t, l, topic, 3, stop)
}

// produceDuringN is produceDuring to a topic of parts partitions, each
// written in turn.
func produceDuringN(t testing.TB, l *lab.Lab, topic string, parts int32, stop <-chan struct{}) func() sent {
	t.Helper()
	return produceDuringWith(t, l, topic, parts, stop)
}

// produceDuringWith is produceDuringN with a client's own options (a
// secured lab's user).
func produceDuringWith(t testing.TB, l *lab.Lab, topic string, parts int32, stop <-chan struct{}, opts ...kgo.Opt) func() sent {
	t.Helper()
	// AlwaysRetryEOF: a broker that is shutting down may accept a
	// connection and close it before answering ApiVersions. Kafka's own
	// producer retries that disconnect (NetworkException is retriable);
	// franz-go by default takes an EOF on a connection's first read for a
	// TLS/SASL misconfiguration and fails the record at once. The lab's
	// client configuration is known good, so this producer behaves as a
	// production Java client would: a send that fails here is the
	// cluster's failure, not the client's guess (CI saw 1 of 18,205 sends
	// fail this way during a migration's broker restart).
	pr, err := kafka.NewProducer(l.State.Config.Bootstrap(), 2*time.Minute, append([]kgo.Opt{kgo.AlwaysRetryEOF()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var s sent
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			rec := &kgo.Record{Topic: topic, Partition: int32(i) % parts, Value: []byte(fmt.Sprintf("m%06d", i))}
			start := time.Now()
			err := pr.Kgo().ProduceSync(ctx, rec).FirstErr()
			took := time.Since(start)
			cancel()
			mu.Lock()
			if took > s.longest {
				s.longest, s.longestAt = took, start
			}
			if err != nil {
				s.failed++
				if len(s.errs) < 5 {
					s.errs = append(s.errs, err.Error())
				}
			} else {
				s.acked++
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	})
	return func() sent {
		wg.Wait()
		pr.Close()
		mu.Lock()
		defer mu.Unlock()
		return s
	}
}

// TestRollingRestartLab rolls a real cluster under an acks=all producer,
// refuses to roll one with a broker down, and clears stale broker caches.
func TestRollingRestartLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net = 14
	l := startLab(t, cfg)
	c := connectLab(t, l)

	t.Run("under an acks=all producer: zero failed sends, every broker restarted once", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.kc.CreateTopic(ctx, ledger, nil, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
			t.Fatal(err)
		}
		before := brokerPIDs(l)
		run := filepath.Join(t.TempDir(), "run")
		var r result
		got := writing(t, l, func() { r = runRoll(t, l, run) })
		t.Logf("rolling restart took %s; %d sends acknowledged, %d failed, longest send %s", r.took.Round(time.Millisecond), got.acked, got.failed, got.longest.Round(time.Millisecond))
		if r.code != 0 {
			t.Fatalf("rolling-restart: exit %d\n%s", r.code, r.out)
		}
		if got.failed != 0 || got.acked == 0 {
			t.Fatalf("%d sends failed (%d acknowledged): %v", got.failed, got.acked, got.errs)
		}
		restartedOnce(t, l, run, before)
		if b, err := os.ReadFile(filepath.Join(run, "report.md")); err != nil || !strings.Contains(string(b), "- runbook: `rolling-restart` on cluster kremedy-lab (LAB)\n") || !strings.Contains(string(b), "outcome: **finished**") {
			t.Fatalf("report: %v\n%s", err, b)
		}
	})

	t.Run("a broker already down: refused before any broker stops", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := l.BrokerCommand(ctx, 2, "stop", func(string) {}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := l.BrokerCommand(ctx, 2, "start", func(string) {}); err != nil {
				t.Fatal(err)
			}
			waitHealthy(t, l)
		}()
		before := brokerPIDs(l)
		run := filepath.Join(t.TempDir(), "run")
		r := runRoll(t, l, run)
		if r.code != 1 || !strings.Contains(r.out, "No broker was stopped") || !strings.Contains(r.out, "broker 2 is down") {
			t.Fatalf("want exit 1 refusing before any stop, got %d:\n%s", r.code, r.out)
		}
		if !strings.Contains(r.out, "would fall below min.insync.replicas=2") {
			t.Errorf("the refusal does not name the partitions at risk:\n%s", r.out)
		}
		if after := brokerPIDs(l); after[1] != before[1] || after[3] != before[3] {
			t.Fatalf("a broker was restarted: pids %v -> %v", before, after)
		}
		if got := stops(t, run); len(got) != 0 {
			t.Fatalf("stop commands ran: %v", got)
		}
	})

	t.Run("stale-metadata: after the roll every broker's metadata agrees", func(t *testing.T) {
		breakIt(t, l, "stale-metadata", "stale")
		ks, _, _ := diagnoseJSON(t, l, "stale")
		if !slices.Contains(ks, "stale-metadata") {
			t.Fatalf("stale-metadata scenario not observed: %v", ks)
		}
		run := filepath.Join(t.TempDir(), "run")
		if r := runRoll(t, l, run); r.code != 0 {
			t.Fatalf("rolling-restart: exit %d\n%s", r.code, r.out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var first *ports.BrokerView
		for id := int32(1); id <= 3; id++ {
			v, err := c.kc.BrokerView(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := v.Topics["stale"]; ok {
				t.Errorf("broker %d still serves the topic ZooKeeper lost", id)
			}
			if first == nil {
				first = &v
			} else if d := brokers.ViewDiff(*first, v); d != "" {
				t.Errorf("brokers disagree after the roll: %s", d)
			}
		}
		ks, _, _ = diagnoseJSON(t, l, "")
		for _, k := range ks {
			if k == "stale-metadata" || k == "metadata-disagreement" {
				t.Errorf("after the roll diagnose still finds %s (findings %v)", k, ks)
			}
		}
	})

	t.Run("topics no restart can keep available: refused with the ways out, then accepted", func(t *testing.T) { unavailableTopics(t, l, c) })
}

// unavailableTopics is the subtest of TestRollingRestartLab for topics no
// restart can keep available: a replication-factor-1 topic and one of
// replication factor 2 at min.insync.replicas=2. plan names both with the
// ways out and exits 1; a typo in accept_unavailable is refused; accepted,
// the roll restarts every broker once while an acks=all producer on the
// replication-factor-3 ledger loses nothing, and the acceptance is in the
// approved plan and the report.
func unavailableTopics(t *testing.T, l *lab.Lab, c *clients) {
	waitHealthy(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.kc.CreateTopic(ctx, "scratch", [][]int32{{2}}, 0, 0, map[string]string{"min.insync.replicas": "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kc.CreateTopic(ctx, "pairs", [][]int32{{1, 3}}, 0, 0, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, tp := range []string{"scratch", "pairs"} {
			if err := c.kc.DeleteTopic(context.Background(), tp); err != nil {
				t.Errorf("delete %s: %v", tp, err)
			}
		}
	}()
	waitHealthy(t, l)
	inv := l.InventoryPath()
	r := kremedy(t, "plan", "rolling-restart", "--inventory", inv)
	for _, w := range []string{"stopping broker 2 now is not safe: scratch-0 goes offline while its broker is down (replication factor 1, min.insync.replicas 1)",
		"stopping broker 1 now is not safe: pairs-0 refuses acks=all writes while its broker is down (replication factor 2, min.insync.replicas 2)",
		"--set accept_unavailable=pairs,scratch (or *", "this plan cannot run now: step roll cannot be planned"} {
		if !strings.Contains(r.out, w) {
			t.Errorf("plan lacks %q:\n%s", w, r.out)
		}
	}
	if r.code != exitFailed {
		t.Fatalf("plan of a roll it refuses: exit %d, want %d", r.code, exitFailed)
	}
	if r = kremedy(t, "plan", "rolling-restart", "--inventory", inv, "--set", "accept_unavailable=pairs,scrach"); r.code != exitFailed || !strings.Contains(r.out, "names scrach, but the topics whose partitions no restart can keep available are pairs, scratch") {
		t.Fatalf("a typo in accept_unavailable: exit %d\n%s", r.code, r.out)
	}
	before := brokerPIDs(l)
	run := filepath.Join(t.TempDir(), "run")
	got := writing(t, l, func() { r = runRoll(t, l, run, "--set", "accept_unavailable=pairs,scratch") })
	t.Logf("accepted roll took %s; %d sends acknowledged on %s, %d failed, longest %s", r.took.Round(time.Millisecond), got.acked, ledger, got.failed, got.longest.Round(time.Millisecond))
	if r.code != 0 {
		t.Fatalf("rolling-restart with accept_unavailable: exit %d\n%s", r.code, r.out)
	}
	if got.failed != 0 || got.acked == 0 {
		t.Fatalf("%d sends to %s failed (%d acknowledged): %v", got.failed, ledger, got.acked, got.errs)
	}
	restartedOnce(t, l, run, before)
	rep, err := os.ReadFile(filepath.Join(run, "report.md"))
	if err != nil || !strings.Contains(string(rep), "`accept_unavailable=pairs,scratch`") {
		t.Errorf("report.md lacks the acceptance: %v\n%s", err, rep)
	}
	jr, err := os.ReadFile(filepath.Join(run, "journal.jsonl"))
	if err != nil || !strings.Contains(string(jr), "accepting (accept_unavailable=pairs,scratch) that the partitions of pairs, scratch no restart can keep available") {
		t.Errorf("the journal's approved plan lacks the acceptance: %v", err)
	}
}

// waitHealthy waits until diagnose finds the lab healthy again (every
// broker registered, every partition with its full ISR, the brokers'
// metadata agreeing).
func waitHealthy(t testing.TB, l *lab.Lab) {
	t.Helper()
	var last result
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		if last = kremedy(t, "diagnose", "--inventory", l.InventoryPath(), "--no-disk"); last.code == 0 {
			return
		}
	}
	t.Fatalf("the lab did not become healthy again within 2 minutes:\n%s", last.out)
}
