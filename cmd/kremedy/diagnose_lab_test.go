package main

// Lab tests of diagnose's comparison of ZooKeeper with every broker: each
// finding made by hand on a real cluster (znodes written the way zkCli or an
// old admin tool writes them, brokers really stopped), checked through the
// real binary's JSON.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// diagnosis runs `kremedy diagnose --json` (disks included) and decodes it.
func diagnosis(t *testing.T, l *lab.Lab, topic string) (*diagnose.Diagnosis, int) {
	t.Helper()
	args := []string{"diagnose", "--inventory", l.InventoryPath(), "--json"}
	if topic != "" {
		args = append(args, "--topic", topic)
	}
	r := kremedy(t, args...)
	i := strings.Index(r.out, "{")
	var d diagnose.Diagnosis
	if i < 0 || json.NewDecoder(strings.NewReader(r.out[i:])).Decode(&d) != nil {
		t.Fatalf("diagnose output is not JSON (exit %d):\n%s", r.code, r.out)
	}
	for _, f := range d.Findings {
		t.Logf("  %s %q brokers %v partitions %v: %s", f.Kind, f.Topic, f.Brokers, f.Partitions, strings.Join(f.Evidence, "; "))
	}
	return &d, r.code
}

// only checks that d has exactly the finding kinds want, and returns them
// by kind.
func only(t *testing.T, d *diagnose.Diagnosis, want ...string) map[string]diagnose.Finding {
	t.Helper()
	got := map[string]diagnose.Finding{}
	var kinds []string
	for _, f := range d.Findings {
		got[f.Kind] = f
		kinds = append(kinds, f.Kind)
	}
	slices.Sort(kinds)
	slices.Sort(want)
	if !slices.Equal(kinds, want) {
		t.Fatalf("findings %v, want %v", kinds, want)
	}
	return got
}

func names(t *testing.T, f diagnose.Finding, brokers, partitions []int32) {
	t.Helper()
	if !slices.Equal(f.Brokers, brokers) || !slices.Equal(f.Partitions, partitions) {
		t.Errorf("%s names brokers %v partitions %v, want brokers %v partitions %v", f.Kind, f.Brokers, f.Partitions, brokers, partitions)
	}
}

// rewrite rewrites topic's znode the way a hand edit does, keeping every
// field change does not touch.
func rewrite(t *testing.T, c *clients, topic string, change func(map[string]json.RawMessage)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, st, err := c.zk.Get(ctx, kafkazk.TopicPath(topic))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	change(raw)
	data, _ := json.Marshal(raw)
	if _, err := c.zk.Set(ctx, kafkazk.TopicPath(topic), data, st.Version); err != nil {
		t.Fatal(err)
	}
}

// TestDiagnoseZooKeeperLab makes each disagreement between ZooKeeper and
// the brokers by hand on a real cluster and checks that diagnose names it,
// with the right brokers and partitions.
func TestDiagnoseZooKeeperLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net = 15
	l := startLab(t, cfg)
	c := connectLab(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, topic := range []string{"calm", "nostate", "noid", "shrunk"} {
		if _, err := c.kc.CreateTopic(ctx, topic, nil, 3, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // every broker has the new topics

	t.Run("healthy lab: no findings", func(t *testing.T) {
		if d, code := diagnosis(t, l, ""); code != 0 || len(d.Findings) != 0 {
			t.Fatalf("healthy lab: exit %d, %d findings", code, len(d.Findings))
		}
	})

	// On the healthy lab: the conformance suite's ISR case stops a broker
	// and waits for it back in every ISR; its topics are gone after it.
	t.Run("KafkaConformance on real Kafka", func(t *testing.T) {
		limits := maps.Clone(labNoAuthorizer)
		limits["eligible leaders"] = "Kafka 3.9 in ZooKeeper mode has no DescribeTopicPartitions (KIP-966's eligible leaders are KRaft's): the adapter answers ErrUnsupported"
		labConformance(t, l, labConformanceConfigs(l.State.Kafka, false), limits)
	})

	t.Run("one broker down under 100 topics: one cause on the first screen, nothing sent to a cleanup", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		var names []string
		for i := range 100 {
			names = append(names, fmt.Sprintf("many-%03d", i))
		}
		resp, err := c.kc.Admin().CreateTopics(cctx, 3, 3, nil, names...)
		if err != nil || resp.Error() != nil {
			t.Fatalf("create 100 topics: %v %v", err, resp.Error())
		}
		waitHealthy(t, l)
		if err := l.BrokerCommand(ctx, 1, "stop", func(string) {}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := l.BrokerCommand(ctx, 1, "start", func(string) {}); err != nil {
				t.Fatal(err)
			}
			waitHealthy(t, l)
		}()
		d, code := diagnosis(t, l, "")
		causes := d.Causes()
		if code != 1 || len(causes) != 1 || causes[0].Kind != diagnose.FindBrokerDown || !slices.Equal(causes[0].Brokers, []int32{1}) {
			t.Fatalf("causes %+v: want broker 1 down, alone", causes)
		}
		folded := 0
		for _, f := range d.Findings {
			if !strings.HasPrefix(f.Topic, "many-") {
				continue
			}
			if f.Cause != causes[0].ID || f.Runbook != "" {
				t.Fatalf("%s is not folded under broker-down/1 (cause %q, runbook %q)", f.ID, f.Cause, f.Runbook)
			}
			folded++
		}
		if folded < 200 {
			t.Fatalf("broker-down explains %d findings of the 100 topics, want their under-replicated and unregistered-replica ones", folded)
		}
		r := kremedy(t, "diagnose", "--inventory", l.InventoryPath())
		lines := strings.Count(r.out, "\n")
		if !strings.Contains(r.out, "SUMMARY: 1 cause (1 critical), explaining ") || !strings.Contains(r.out, "1. [CRITICAL] broker 1 is down") || lines > 40 {
			t.Fatalf("text output (%d lines):\n%s", lines, r.out)
		}
		t.Logf("FIGURE whole-cluster diagnose, one broker down under %d topics: %d findings, %d lines of text (took %s)", d.Topics, len(d.Findings), lines, d.Took)
	})

	t.Run("partition-increase: a partition no broker serves, until a rolling restart", func(t *testing.T) {
		breakIt(t, l, "partition-increase", "grow")
		d, _ := diagnosis(t, l, "grow")
		names(t, only(t, d, diagnose.FindUnknownToBrokers)[diagnose.FindUnknownToBrokers], nil, []int32{2})
		if r := kremedy(t, "run", "rolling-restart", "--inventory", l.InventoryPath(), "--headless", "--yes", "--confirm", l.Inventory().Name); r.code != 0 {
			t.Fatalf("rolling-restart: exit %d\n%s", r.code, r.out)
		}
		if d, code := diagnosis(t, l, "grow"); code != 0 {
			t.Fatalf("after the rolling restart: exit %d, findings %d", code, len(d.Findings))
		}
	})

	t.Run("a partition without its state znode", func(t *testing.T) {
		if err := c.zk.Delete(ctx, kafkazk.PartitionStatePath("nostate", 1), -1); err != nil {
			t.Fatal(err)
		}
		d, _ := diagnosis(t, l, "nostate")
		names(t, only(t, d, diagnose.FindMissingPartitionState)[diagnose.FindMissingPartitionState], nil, []int32{1})
	})

	t.Run("a topic znode rewritten without its topic_id", func(t *testing.T) {
		rewrite(t, c, "noid", func(raw map[string]json.RawMessage) { delete(raw, "topic_id") })
		d, _ := diagnosis(t, l, "noid")
		f := only(t, d, diagnose.FindMissingTopicID)[diagnose.FindMissingTopicID]
		if len(f.Evidence) != 4 || !strings.Contains(f.Evidence[0], "3.9") || !strings.Contains(f.Evidence[1], "broker 1 serves it with topic id") {
			t.Errorf("evidence: %v", f.Evidence)
		}
	})

	t.Run("a partition the brokers serve and ZooKeeper no longer assigns", func(t *testing.T) {
		rewrite(t, c, "shrunk", func(raw map[string]json.RawMessage) {
			var parts map[string][]int32
			_ = json.Unmarshal(raw["partitions"], &parts)
			delete(parts, "2")
			raw["partitions"], _ = json.Marshal(parts)
		})
		d, _ := diagnosis(t, l, "shrunk")
		names(t, only(t, d, diagnose.FindUnknownToZooKeeper)[diagnose.FindUnknownToZooKeeper], []int32{1, 2, 3}, []int32{2})
	})

	t.Run("ghost-assignment: a replica on a broker that does not exist", func(t *testing.T) {
		rep := breakIt(t, l, "ghost-assignment", "doomed")
		d, _ := diagnosis(t, l, "doomed")
		got := only(t, d, diagnose.FindUnregisteredReplica, diagnose.FindDisagreement, diagnose.FindStateNotInAssignment)
		names(t, got[diagnose.FindUnregisteredReplica], []int32{rep.Victim}, []int32{0})
		if f := got[diagnose.FindUnregisteredReplica]; f.Severity != diagnose.Critical || !strings.Contains(f.Summary, "neither registered nor in the inventory") || !strings.Contains(f.Fix, "kafka-reassign-partitions") {
			t.Errorf("unregistered replica: %+v", f)
		}
		names(t, got[diagnose.FindDisagreement], []int32{1, 2, 3}, []int32{0})
		if f := got[diagnose.FindDisagreement]; !slices.Contains(f.Evidence, fmt.Sprintf("doomed-0 replicas: ZooKeeper [1 %d]; brokers [1 2 3] [1 2]", rep.Victim)) {
			t.Errorf("disagreement evidence: %v", f.Evidence)
		}
		names(t, got[diagnose.FindStateNotInAssignment], []int32{2}, []int32{0})
	})

	t.Run("an inventory broker that is down holds replicas", func(t *testing.T) {
		if err := l.BrokerCommand(ctx, 3, "stop", func(string) {}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := l.BrokerCommand(ctx, 3, "start", func(string) {}); err != nil {
				t.Fatal(err)
			}
		}()
		d, _ := diagnosis(t, l, "calm")
		var found bool
		for _, f := range d.Findings {
			if f.Kind == diagnose.FindUnregisteredReplica {
				found = true
				names(t, f, []int32{3}, []int32{0, 1, 2})
				if f.Severity != diagnose.Warning || !strings.Contains(f.Summary, "in the inventory, but it is down") {
					t.Errorf("down broker: %+v", f)
				}
			}
		}
		if !found {
			t.Fatal("no unregistered-replica finding for the stopped broker")
		}
	})

	t.Run("50 topics created at once: diagnose during their creation is never critical", func(t *testing.T) { settlingLab(t, l, c) })

	t.Run("hundreds of topics with fewer replicas than min.insync.replicas: one cause, a bounded summary", func(t *testing.T) {
		waitServing(t, c, "calm")
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		var names []string
		for i := range 300 {
			names = append(names, fmt.Sprintf("single-%03d", i))
		}
		resp, err := c.kc.Admin().CreateTopics(cctx, 2, 1, nil, names...) // replication factor 1 under the lab's min.insync.replicas=2
		if err != nil || resp.Error() != nil {
			t.Fatalf("create 300 topics: %v %v", err, resp.Error())
		}
		defer func() {
			if _, err := c.kc.Admin().DeleteTopics(context.Background(), names...); err != nil {
				t.Errorf("delete the 300 topics: %v", err)
			}
		}()
		time.Sleep(diagnose.DefaultSettle + time.Second) // past the settle window: not settling any more
		// The earlier subtests left their own findings (doomed, shrunk…):
		// the 300 topics must add exactly one cause.
		d, code := diagnosis(t, l, "")
		var fewer []diagnose.Finding
		for _, f := range d.Findings {
			switch {
			case f.Kind == diagnose.FindFewerReplicas:
				fewer = append(fewer, f)
			case strings.HasPrefix(f.Topic, "single-"):
				t.Errorf("a finding of its own for %s: %s (%s)", f.Topic, f.Summary, f.Kind)
			}
		}
		if code != 1 || len(fewer) != 1 || fewer[0].Cause != "" || !strings.Contains(fewer[0].Summary, "300 topics (600 partitions) have fewer replicas than the min.insync.replicas=2") {
			t.Fatalf("fewer-replicas causes %+v", fewer)
		}
		r := kremedy(t, "diagnose", "--inventory", l.InventoryPath())
		lines := strings.Count(r.out, "\n")
		if r.code != exitFailed || !strings.Contains(r.out, "300 topics (600 partitions) have fewer replicas") || lines > 150 || len(r.out) > 32<<10 {
			t.Fatalf("text output (%d lines, %d bytes):\n%s", lines, len(r.out), r.out)
		}
		t.Logf("FIGURE diagnose of 300 topics of replication factor 1 under min.insync.replicas=2: %d findings, %d lines / %d bytes of text (took %s)", len(d.Findings), lines, len(r.out), d.Took)
	})
}

// settlingLab creates 50 topics at once in batches and runs diagnose
// while they are created: never a critical finding, never a runbook; it
// measures how long until every broker serves every new topic (the settle
// window's size).
func settlingLab(t *testing.T, l *lab.Lab, c *clients) {
	waitServing(t, c, "calm")
	var took []time.Duration
	for batch := range 3 {
		var names []string
		for i := range 50 {
			names = append(names, fmt.Sprintf("burst%d-%02d", batch, i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		created := make(chan time.Time, 1)
		go func() {
			resp, err := c.kc.Admin().CreateTopics(ctx, 3, 3, nil, names...)
			if err != nil || resp.Error() != nil {
				t.Errorf("create 50 topics: %v %v", err, resp.Error())
			}
			created <- time.Now()
		}()
		// diagnose at once, while the controller creates them, and again
		d, code := diagnosis(t, l, "")
		judge(t, d, code)
		at := <-created
		served := time.Duration(-1)
		for end := at.Add(time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if allServe(ctx, c, names) {
				served = time.Since(at)
				break
			}
		}
		d, code = diagnosis(t, l, "")
		judge(t, d, code)
		cancel()
		if served < 0 {
			t.Fatalf("batch %d: the brokers did not all serve the 50 new topics within a minute", batch)
		}
		took = append(took, served)
	}
	t.Logf("FIGURE 50 topics created at once (3 batches): every broker served all of them %s after CreateTopics returned; diagnose's settle window is %s", fmt.Sprint(took), diagnose.DefaultSettle)
}

// judge fails a diagnosis made while topics are created if it says
// anything of them but that they settle: the earlier subtests left findings
// of their own on the lab, which are not judged here.
func judge(t *testing.T, d *diagnose.Diagnosis, _ int) {
	t.Helper()
	for _, f := range d.Findings {
		if strings.HasPrefix(f.Topic, "burst") && (f.Severity == diagnose.Critical || f.Runbook != "" || f.Kind != diagnose.FindSettling) {
			t.Errorf("during topic creation: [%s] %s (%s, runbook %q)", f.Severity, f.Summary, f.Kind, f.Runbook)
		}
	}
}

// waitServing waits until all three brokers serve topic with its whole ISR
// (a broker an earlier subtest restarted is back).
func waitServing(t *testing.T, c *clients, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for !allServe(ctx, c, []string{topic}) {
		select {
		case <-ctx.Done():
			t.Fatalf("the brokers do not all serve %s with its whole ISR within 2 minutes", topic)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// allServe reports whether every broker serves every topic of names with a
// leader for each of its 3 partitions and their whole ISR.
func allServe(ctx context.Context, c *clients, names []string) bool {
	return allServeParts(ctx, c.kc, names, 3)
}

// TestDiagnoseScaleLab diagnoses a lab of 10,000 real partitions (lab
// fill: 1,000 topics × 10, replication factor 3, on 3 brokers sized for it)
// and one ghost among them: healthy is healthy, the ghost is named with
// its fix, and the text stays a screen or two. Its time is logged
// (FIGURE), never asserted: the side-by-side measurement against Kafka's
// CLI is scripts/measure-diagnose-cli.sh's (docs/diagnose.md).
func TestDiagnoseScaleLab(t *testing.T) {
	needLab(t)
	heavyLab(t, "the 10,000-partition scale lab (about 4–6 minutes, most of it the fill)")
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers, cfg.ZKHeap, cfg.BrokerHeap = 28, 1, "512m", "2g"
	l := startLab(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	if err := lab.Fill(ctx, l, 1000, 10, 3, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE lab fill of 1,000 topics × 10 partitions (replication factor 3) took %.1fs", time.Since(start).Seconds())

	r := kremedy(t, "diagnose", "--inventory", l.InventoryPath())
	if r.code != 0 || !strings.Contains(r.out, "1000 topics") || !strings.Contains(r.out, "disks checked: true") {
		t.Fatalf("diagnose of 10,000 healthy partitions: exit %d\n%s", r.code, r.out)
	}
	t.Logf("FIGURE diagnose of 10,000 partitions (replication factor 3, disks over SSH) took %s in one process, %d lines of text", r.took.Round(time.Millisecond), strings.Count(r.out, "\n"))

	breakIt(t, l, "ghost-topic", "orders")
	// The scenario stops a broker and starts it again: it is back in the
	// ISR of the 10,000 fill partitions only once it has caught up (minutes
	// on a loaded 2-core machine), and until then "under-replicated" is
	// true, not a false finding. The claim is about a settled cluster.
	c := connectLab(t, l)
	var fills []string
	for i := range 1000 {
		fills = append(fills, lab.FillTopicName(i))
	}
	settle := time.Now()
	for !allServeParts(ctx, c.kc, fills, 10) {
		if ctx.Err() != nil {
			t.Fatal("the fill topics' ISR did not heal after the ghost-topic scenario's restart")
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("the restarted broker was back in every fill partition's ISR after %s", time.Since(settle).Round(time.Second))
	r = kremedy(t, "diagnose", "--inventory", l.InventoryPath())
	lines := strings.Count(r.out, "\n")
	if r.code != exitFailed || !strings.Contains(r.out, "orders") || !strings.Contains(r.out, "topic-cleanup") || lines > 120 {
		t.Fatalf("diagnose of a ghost among 10,000 partitions: exit %d, %d lines\n%s", r.code, lines, r.out)
	}
	d, _ := diagnosis(t, l, "")
	for _, f := range d.Findings {
		if f.Topic != "orders" && f.Topic != "" && !strings.HasPrefix(f.Topic, "__") {
			t.Errorf("a finding about %s, which the ghost-topic scenario did not touch: %s", f.Topic, f.Summary)
		}
	}
}
