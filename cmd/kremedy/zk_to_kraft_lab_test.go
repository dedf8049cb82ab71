package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/migrate"
)

// What the migration must keep: every topic with its id, partition count
// and config overrides, and every committed offset.
type kept struct {
	ids        map[string]string
	partitions map[string]int
	configs    map[string]string // topic → sorted "k=v,…" of its overrides
	offsets    map[string]int64  // "topic-p" → committed offset of the group
}

const (
	migGroup  = "billing"
	migTopicA = "payments" // 6 partitions, min.insync.replicas=2, retention override
	migTopicB = "events"   // 3 partitions, compacted
)

func snapshot(t *testing.T, adm *kadm.Client) kept {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k := kept{ids: map[string]string{}, partitions: map[string]int{}, configs: map[string]string{}, offsets: map[string]int64{}}
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range td {
		k.ids[name] = kafka.TopicIDString(d.ID)
		k.partitions[name] = len(d.Partitions)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, td.Names()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		var kv []string
		for _, c := range rc.Configs {
			if c.Source == 1 { // DYNAMIC_TOPIC_CONFIG: an override
				kv = append(kv, c.Key+"="+c.MaybeValue())
			}
		}
		sort.Strings(kv)
		k.configs[rc.Name] = strings.Join(kv, ",")
	}
	os, err := adm.FetchOffsets(ctx, migGroup)
	if err != nil {
		t.Fatal(err)
	}
	os.Each(func(o kadm.OffsetResponse) { k.offsets[fmt.Sprintf("%s-%d", o.Topic, o.Partition)] = o.At })
	return k
}

func (a kept) diff(b kept) []string {
	var out []string
	for name, id := range a.ids {
		switch {
		case b.ids[name] != id:
			out = append(out, fmt.Sprintf("%s: id %s, was %s", name, b.ids[name], id))
		case b.partitions[name] != a.partitions[name]:
			out = append(out, fmt.Sprintf("%s: %d partitions, was %d", name, b.partitions[name], a.partitions[name]))
		case b.configs[name] != a.configs[name]:
			out = append(out, fmt.Sprintf("%s: configs %q, were %q", name, b.configs[name], a.configs[name]))
		}
	}
	for tp, o := range a.offsets {
		if b.offsets[tp] != o {
			out = append(out, fmt.Sprintf("group %s on %s: offset %d, was %d", migGroup, tp, b.offsets[tp], o))
		}
	}
	sort.Strings(out)
	return out
}

// seedMigration creates the topics, writes records and commits the
// group's offsets.
func seedMigration(t *testing.T, l *lab.Lab, c *clients) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics := map[string]struct {
		parts int32
		cfg   map[string]string
	}{
		migTopicA: {6, map[string]string{"min.insync.replicas": "2", "retention.ms": "604800001"}},
		migTopicB: {3, map[string]string{"cleanup.policy": "compact"}},
		ledger:    {3, map[string]string{"min.insync.replicas": "2"}},
	}
	pr, err := kafka.NewProducer(l.State.Config.Bootstrap(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	want := map[string]int{}
	for name, s := range topics {
		if _, err := c.kc.CreateTopic(ctx, name, nil, s.parts, 3, s.cfg); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		if name == ledger {
			continue
		}
		for i := 0; i < 60; i++ {
			r := &kgo.Record{Topic: name, Partition: int32(i) % s.parts, Key: fmt.Appendf(nil, "k%03d", i), Value: fmt.Appendf(nil, "%s-%03d", name, i)}
			if err := pr.Kgo().ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("seed %s: %v", name, err)
			}
		}
		want[name] = 60
	}
	offs := kadm.Offsets{}
	for p := int32(0); p < 6; p++ {
		offs.Add(kadm.Offset{Topic: migTopicA, Partition: p, At: int64(3 + p), LeaderEpoch: -1})
	}
	for {
		_, err := c.kc.Admin().CommitOffsets(ctx, migGroup, offs)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("commit %s's offsets: %v", migGroup, err)
		}
		time.Sleep(200 * time.Millisecond) // COORDINATOR_NOT_AVAILABLE while __consumer_offsets is created
	}
	return want
}

// migrateWithKill runs a zk-to-kraft or revert run headless, killing
// kremedy with SIGKILL at each fault point in turn (each resume carries
// the next one), then resumes it to the end (or up to stopBefore), and
// checks no node's roll was repeated.
func migrateWithKill(t *testing.T, l *lab.Lab, runbook, run, stopBefore string, faults ...string) result {
	t.Helper()
	args := []string{"run", runbook, "--inventory", l.InventoryPath(), "--run-dir", run, "--headless", "--yes", "--confirm", l.Inventory().Name}
	resume := []string{"resume", run, "--headless", "--yes", "--confirm", l.Inventory().Name}
	if stopBefore != "" {
		args, resume = append(args, "--stop-before", stopBefore), append(resume, "--stop-before", stopBefore)
	}
	for _, fault := range faults {
		r := runWithFault(t, fault, args...)
		if r.code == 0 || !strings.Contains(r.out, "KREMEDY_FAULT") {
			t.Fatalf("%s with %s: exit %d, want a crash\n%s", runbook, fault, r.code, r.out)
		}
		t.Logf("%s: killed -9 at %s", runbook, fault)
		args = resume
	}
	r := kremedy(t, args...)
	if stopBefore == "" && r.code != 0 || stopBefore != "" && !strings.Contains(r.out, "stopping before "+stopBefore) {
		t.Fatalf("%s (after %d kills): exit %d\n%s", runbook, len(faults), r.code, r.out)
	}
	noRollTwice(t, run)
	phaseTimes(t, runbook, run)
	return r
}

// noRollTwice: in every step of the run, each node was stopped at most
// once (a resume after kill -9 never restarts a node it already rolled).
func noRollTwice(t *testing.T, run string) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range records(t, run) {
		if r.Type != journal.ActionStart {
			continue
		}
		a, err := journal.Decode[struct {
			ID string `json:"id"`
		}](r)
		if err == nil && strings.HasPrefix(a.ID, "stop-") {
			seen[r.Step+"/"+a.ID]++
		}
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%s: %s started %d times: a node's roll was repeated", run, k, n)
		}
	}
}

// phaseTimes logs each step's wall time from the journal.
func phaseTimes(t *testing.T, runbook, run string) {
	t.Helper()
	start := map[string]time.Time{}
	var lines []string
	for _, r := range records(t, run) {
		switch r.Type {
		case journal.StepStart:
			if _, ok := start[r.Step]; !ok {
				start[r.Step] = r.Time
			}
		case journal.StepDone:
			lines = append(lines, fmt.Sprintf("%s %.1fs", r.Step, r.Time.Sub(start[r.Step]).Seconds()))
		}
	}
	t.Logf("FIGURE %s wall time per phase (first start to done, resumes included): %s", runbook, strings.Join(lines, ", "))
}

func phaseOf(t *testing.T, l *lab.Lab) string {
	t.Helper()
	args := []string{"plan", "zk-to-kraft", "--inventory", l.InventoryPath()}
	if l.State.Config.Secure {
		// A secured lab's brokers need their login at the controllers.
		args = append(args, "--set", "controller_settings="+l.BrokerControllerSettings())
	}
	r := kremedy(t, args...)
	i := strings.Index(r.out, "phase: ")
	if i < 0 {
		t.Fatalf("plan shows no phase:\n%s", r.out)
	}
	return strings.Fields(r.out[i+len("phase: "):])[0]
}

// brokerConfigs reads the brokers' server.properties.
func brokerConfigs(t *testing.T, l *lab.Lab) map[int]string {
	t.Helper()
	out := map[int]string{}
	for n := 1; n <= l.State.Config.Brokers; n++ {
		b, err := os.ReadFile(filepath.Join(l.BrokerDir(n), "server.properties"))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

// reformat wipes the controllers' metadata logs and formats them again
// (`lab up` formats a controller without meta.properties): a new attempt
// after a revert starts from an empty quorum.
func reformat(t *testing.T, l *lab.Lab) {
	t.Helper()
	for k := 1; k <= l.State.Config.KRaftControllers; k++ {
		if l.ControllerPID(k) != 0 {
			t.Fatalf("controller %d still runs after the revert", k)
		}
		if err := os.RemoveAll(filepath.Join(l.ControllerDir(k), "metadata")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lab.Up(context.Background(), l.Dir, l.State.Config, nil, io.Discard); err != nil {
		t.Fatal(err)
	}
}

// backInZooKeeper: every broker registered in ZooKeeper under a ZooKeeper
// controller, no KRaft controller, no /migration, configs as before the
// migration.
func backInZooKeeper(t *testing.T, l *lab.Lab, c *clients, before map[int]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := c.zk.BrokerIDs(ctx)
	if err != nil || len(ids) != l.State.Config.Brokers {
		t.Fatalf("after the revert: /brokers/ids %v (%v)", ids, err)
	}
	if ok, _, _ := c.zk.Exists(ctx, kafkazk.MigrationPath); ok {
		t.Fatal("after the revert /migration still exists")
	}
	for k := 1; k <= l.State.Config.KRaftControllers; k++ {
		if l.ControllerPID(k) != 0 {
			t.Fatalf("controller %d runs after the revert", k)
		}
	}
	if got := brokerConfigs(t, l); !equalMaps(got, before) {
		t.Fatalf("after the revert the brokers' configs differ from before the migration:\n%v\nwant\n%v", got, before)
	}
	if p := phaseOf(t, l); p != string(migrate.PhaseZooKeeper) {
		t.Fatalf("after the revert the phase is %s", p)
	}
}

func equalMaps(a, b map[int]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestZKToKRaftLab migrates a real 3.9.2 cluster (3 brokers under a
// chroot, 3 KRaft controllers on their own sshd hosts) while an acks=all
// idempotent producer writes, and tests the way back from each revertible
// phase: readiness refuses a ghost topic before anything changes; a run
// killed -9 inside each phase resumes without rolling a node twice; revert
// from migration mode and from KRaft mode bring the cluster back to
// ZooKeeper with every message; the full migration keeps every topic, id,
// partition count, config and committed offset, the brokers run without
// ZooKeeper settings and the cluster serves through the KRaft quorum; a
// revert after finalize is refused.
func TestZKToKRaftLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers, cfg.KRaftControllers = 19, 1, 3
	l := startLab(t, cfg)
	c := connectLab(t, l)
	inv := l.Inventory().Name
	original := brokerConfigs(t, l)
	runs := t.TempDir()

	// A ghost topic as the incident made it: refused before anything
	// changes, naming the topic and the fix.
	breakIt(t, l, "ghost-topic", "orders")
	r := kremedy(t, "run", "zk-to-kraft", "--inventory", l.InventoryPath(), "--run-dir", filepath.Join(runs, "ghost"), "--headless", "--yes", "--confirm", inv)
	if r.code != exitFailed || !strings.Contains(r.out, "not ready") || !strings.Contains(r.out, "orders") || !strings.Contains(r.out, "topic-cleanup") {
		t.Fatalf("zk-to-kraft on a ghost topic: exit %d, want a refusal naming orders and topic-cleanup\n%s", r.code, r.out)
	}
	assertNoActions(t, filepath.Join(runs, "ghost"))
	for k := 1; k <= cfg.KRaftControllers; k++ {
		if l.ControllerPID(k) != 0 {
			t.Fatalf("controller %d was started by a refused run", k)
		}
	}
	if !equalMaps(brokerConfigs(t, l), original) {
		t.Fatal("a refused run changed a broker's config")
	}
	runCleanup(t, l, "orders", filepath.Join(runs, "cleanup"))
	unavailableBeforeMigration(t, l, c, runs, original)

	seeded := seedMigration(t, l, c)
	before := snapshot(t, c.kc.Admin())
	stop := make(chan struct{})
	ledgerBefore := 0
	done := produceDuring(t, l, ledger, stop)
	producing := true
	defer func() {
		if producing {
			close(stop)
			done()
		}
	}()

	// 1. Into migration mode (killed inside the roll), then back.
	migrateWithKill(t, l, "zk-to-kraft", filepath.Join(runs, "m1"), "brokers-to-kraft", "sigkill@action-end:enter-migration:9")
	if p := phaseOf(t, l); p != string(migrate.PhaseMigrated) {
		t.Fatalf("after the roll into migration mode the phase is %s", p)
	}
	// The rollback note names this run's backups, and they hold the
	// configs from before.
	backup := filepath.Join(l.BrokerDir(1), "server.properties.kremedy-before-migration")
	if n := count(records(t, filepath.Join(runs, "m1")), journal.Plan, "enter-migration", backup); n == 0 {
		t.Fatalf("no plan of enter-migration names the backup %s in its rollback note", backup)
	}
	if b, err := os.ReadFile(backup); err != nil || string(b) != original[1] {
		t.Fatalf("backup %s: %v, or not the config from before", backup, err)
	}
	migrateWithKill(t, l, "zk-to-kraft-revert", filepath.Join(runs, "r1"), "", "sigkill@action-end:stop-controllers:1", "sigkill@action-end:brokers-back-to-zookeeper:9")
	backInZooKeeper(t, l, c, original)
	// A second attempt with the controllers as the first one left them
	// would skip the initial metadata load: refused before they start.
	r = kremedy(t, "run", "zk-to-kraft", "--inventory", l.InventoryPath(), "--run-dir", filepath.Join(runs, "again"), "--headless", "--yes", "--confirm", inv)
	if r.code != exitFailed || !strings.Contains(r.out, "ran before") || !strings.Contains(r.out, "format it again") {
		t.Fatalf("a second attempt on used controllers: exit %d, want a refusal\n%s", r.code, r.out)
	}
	for k := 1; k <= cfg.KRaftControllers; k++ {
		if l.ControllerPID(k) != 0 {
			t.Fatalf("controller %d was started by a refused attempt", k)
		}
	}
	reformat(t, l)

	// 2. To KRaft brokers (killed while starting the controllers and inside
	// the KRaft roll), dual-write, then back.
	migrateWithKill(t, l, "zk-to-kraft", filepath.Join(runs, "m2"), "finalize", "sigkill@action-end:start-controllers:1", "sigkill@action-end:brokers-to-kraft:11")
	if p := phaseOf(t, l); p != string(migrate.PhaseDualWrite) {
		t.Fatalf("after the roll to KRaft the phase is %s", p)
	}
	for n, cf := range brokerConfigs(t, l) {
		if strings.Contains(cf, "\nzookeeper.") || !strings.Contains(cf, "process.roles=broker") {
			t.Fatalf("broker %d in dual-write still has ZooKeeper settings or no process.roles:\n%s", n, cf)
		}
	}
	screen := tuiAtFinalize(t, filepath.Join(runs, "m2"))
	for _, want := range []string{"ZooKeeper → KRaft: dual-write · revertible with zk-to-kraft-revert", "FINALIZE", "point of no return"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("the TUI at finalize does not show %q:\n%s", want, screen)
		}
	}
	if p := phaseOf(t, l); p != string(migrate.PhaseDualWrite) {
		t.Fatalf("after declining finalize in the TUI the phase is %s", p)
	}
	migrateWithKill(t, l, "zk-to-kraft-revert", filepath.Join(runs, "r2"), "", "sigkill@action-end:brokers-back-to-migration:9", "sigkill@action-end:reset-znodes:2")
	backInZooKeeper(t, l, c, original)
	reformat(t, l)

	// 3. All the way, finalize included (killed inside finalize).
	migrateWithKill(t, l, "zk-to-kraft", filepath.Join(runs, "m3"), "", "sigkill@action-end:enter-migration:2", "sigkill@action-end:finalize:8")
	close(stop)
	s := done()
	producing = false
	t.Logf("FIGURE producer during two migrations, two reverts and the final migration: %d acknowledged, %d failed, longest send %s", s.acked, s.failed, s.longest)
	if s.failed != 0 {
		t.Fatalf("the producer failed %d sends: %v", s.failed, s.errs)
	}
	if p := phaseOf(t, l); p != string(migrate.PhaseFinalized) {
		t.Fatalf("after finalize the phase is %s", p)
	}
	after := snapshot(t, c.kc.Admin())
	if d := before.diff(after); len(d) > 0 {
		t.Fatalf("the migration changed topics or offsets: %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for topic, n := range seeded {
		if got := countAll(ctx, t, l, topic, after.partitions[topic]); got != n {
			t.Fatalf("%s: read %d records back, %d were written", topic, got, n)
		}
	}
	if got := countRecords(ctx, t, l, ledger); int64(got-ledgerBefore) != s.acked {
		t.Fatalf("%s: read %d records back, %d were acknowledged", ledger, got, s.acked)
	}
	for n, cf := range brokerConfigs(t, l) {
		if strings.Contains(cf, "\nzookeeper.") || strings.Contains(cf, "broker.id=") || !strings.Contains(cf, "process.roles=broker") {
			t.Fatalf("broker %d after the migration:\n%s", n, cf)
		}
	}
	if ids, _ := c.zk.BrokerIDs(ctx); len(ids) != 0 {
		t.Fatalf("brokers %v still register in ZooKeeper", ids)
	}
	var addrs []string
	for k := 1; k <= cfg.KRaftControllers; k++ {
		addrs = append(addrs, fmt.Sprintf("%s:%d", cfg.ControllerHost(k), lab.ControllerPort))
	}
	q, err := c.kc.Quorum(ctx, addrs)
	if err != nil || q.Leader < lab.ControllerID(1) || len(q.Voters) != cfg.KRaftControllers {
		t.Fatalf("the KRaft quorum: %+v %v", q, err)
	}
	// The KRaft controllers serve admin requests: a topic created now is
	// written to and read back.
	if _, err := c.kc.CreateTopic(ctx, "after-kraft", nil, 3, 3, nil); err != nil {
		t.Fatalf("create a topic through the KRaft controllers: %v", err)
	}
	// Every broker learns the topic from the controller's metadata log; a
	// producer asking one that has not yet gets UNKNOWN_TOPIC_OR_PARTITION.
	for ids := []int32{1, 2, 3}; len(ids) > 0; time.Sleep(200 * time.Millisecond) {
		if ctx.Err() != nil {
			t.Fatalf("brokers %v never served the new topic", ids)
		}
		ids = slices.DeleteFunc(ids, func(id int32) bool {
			v, err := c.kc.BrokerView(ctx, id, "after-kraft")
			tv, ok := v.Topics["after-kraft"]
			if err != nil || !ok || !tv.Present() || len(tv.Partitions) != 3 {
				return false
			}
			for _, p := range tv.Partitions {
				if p.Leader < 0 {
					return false
				}
			}
			return true
		})
	}
	stop2 := make(chan struct{})
	done2 := produceDuring(t, l, "after-kraft", stop2)
	time.Sleep(2 * time.Second)
	close(stop2)
	if s2 := done2(); s2.failed != 0 || s2.acked == 0 || countRecords(ctx, t, l, "after-kraft") != int(s2.acked) {
		t.Fatalf("a topic created through KRaft: %+v", s2)
	}

	// No way back after finalize.
	r = kremedy(t, "run", "zk-to-kraft-revert", "--inventory", l.InventoryPath(), "--run-dir", filepath.Join(runs, "late"), "--headless", "--yes", "--confirm", inv)
	if r.code != exitFailed || !strings.Contains(r.out, "no revert") {
		t.Fatalf("a revert after finalize: exit %d, want a refusal\n%s", r.code, r.out)
	}
	assertNoActions(t, filepath.Join(runs, "late"))

	// The cluster's KRaft inventory, written at finalize, reaches every
	// part and diagnoses clean (disks and configs included); the
	// ZooKeeper-mode inventory gets the one "migrated" finding — no broker
	// down, nothing about the metadata log on the disks.
	kinv := filepath.Join(runs, "m3", "inventory-kraft.yaml")
	if r := kremedy(t, "inventory", "check", "--inventory", kinv); r.code != 0 {
		t.Fatalf("inventory check of the KRaft inventory: exit %d\n%s", r.code, r.out)
	}
	if r := kremedy(t, "diagnose", "--inventory", kinv); r.code != 0 {
		t.Fatalf("diagnose with the KRaft inventory: exit %d\n%s", r.code, r.out)
	}
	r = kremedy(t, "diagnose", "--inventory", l.InventoryPath(), "--json")
	var d diagnose.Diagnosis
	if err := json.Unmarshal([]byte(r.out[strings.Index(r.out, "{"):strings.LastIndex(r.out, "}")+1]), &d); err != nil || r.code != exitFailed {
		t.Fatalf("diagnose with the ZooKeeper-mode inventory: exit %d, %v\n%s", r.code, err, r.out)
	}
	if len(d.Findings) != 1 || d.Findings[0].Kind != diagnose.FindMigratedToKRaft || strings.Contains(r.out, "__cluster_metadata") {
		t.Fatalf("the ZooKeeper-mode inventory of the migrated cluster: %+v", d.Findings)
	}
	r = kremedy(t, "plan", "rolling-restart", "--inventory", l.InventoryPath())
	if !strings.Contains(r.out, "runs in KRaft mode since its migration") {
		t.Fatalf("plan rolling-restart with the ZooKeeper-mode inventory: exit %d\n%s", r.code, r.out)
	}
}

// unavailableBeforeMigration: a topic of replication factor 2 at
// min.insync.replicas=2 keeps no broker of it restartable without acks=all
// writes failing. Readiness says so with the ways out, accepts it with
// --accept-unavailable, and zk-to-kraft refuses before its first change: no
// controller started, every server.properties byte-identical, no
// /migration. The topic is deleted again for the migration that follows.
func unavailableBeforeMigration(t *testing.T, l *lab.Lab, c *clients, runs string, original map[int]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.kc.CreateTopic(ctx, "pair", [][]int32{{1, 2}}, 0, 0, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(diagnose.DefaultSettle + time.Second)
	r := kremedy(t, "diagnose", "--inventory", l.InventoryPath(), "--migration")
	if r.code != exitFailed || !strings.Contains(r.out, "the migration's rolls cannot keep 1 topic available: stopping brokers [1 2]") || !strings.Contains(r.out, "pair-0") {
		t.Fatalf("readiness with a replication-factor-2/min-ISR-2 topic: exit %d\n%s", r.code, r.out)
	}
	if r = kremedy(t, "diagnose", "--inventory", l.InventoryPath(), "--migration", "--accept-unavailable", "pair"); strings.Contains(r.out, "cannot keep") || !strings.Contains(r.out, "accepted (accept_unavailable)") {
		t.Fatalf("readiness accepting pair: exit %d\n%s", r.code, r.out)
	}
	run := filepath.Join(runs, "unavailable")
	r = kremedy(t, "run", "zk-to-kraft", "--inventory", l.InventoryPath(), "--run-dir", run, "--headless", "--yes", "--confirm", l.Inventory().Name)
	if r.code != exitFailed || !strings.Contains(r.out, "--set accept_unavailable=pair") || !strings.Contains(r.out, "Nothing was changed") {
		t.Fatalf("zk-to-kraft with pair: exit %d, want a refusal with the ways out\n%s", r.code, r.out)
	}
	assertNoActions(t, run)
	for k := 1; k <= l.State.Config.KRaftControllers; k++ {
		if l.ControllerPID(k) != 0 {
			t.Fatalf("controller %d was started by a refused run", k)
		}
	}
	if !equalMaps(brokerConfigs(t, l), original) {
		t.Fatal("a refused run changed a broker's config")
	}
	if ok, _, _ := c.zk.Exists(ctx, kafkazk.MigrationPath); ok {
		t.Fatal("a refused run left /migration")
	}
	if err := c.kc.DeleteTopic(ctx, "pair"); err != nil {
		t.Fatal(err)
	}
	for {
		if ok, _, err := c.zk.Exists(ctx, kafkazk.TopicPath("pair")); err == nil && !ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("topic pair was not deleted within 3 minutes")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// countAll counts the records of every partition of a topic.
func countAll(ctx context.Context, t *testing.T, l *lab.Lab, topic string, parts int) int {
	t.Helper()
	n := 0
	for p := int32(0); p < int32(parts); p++ {
		msgs, err := kafka.ReadPartition(ctx, l.State.Config.Bootstrap(), topic, p)
		if err != nil {
			t.Fatalf("read %s-%d: %v", topic, p, err)
		}
		n += len(msgs)
	}
	return n
}

// tuiAtFinalize resumes a run stopped before finalize in the terminal UI
// (tmux, 120×40), returns the screen once finalize asks for the typed
// confirmation, and declines it (esc, then n).
func tuiAtFinalize(t *testing.T, run string) string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing: install it (make deps)")
	}
	session := fmt.Sprintf("kremedy-kraft-%d", os.Getpid())
	exitFile := filepath.Join(t.TempDir(), "exit")
	shell := fmt.Sprintf("%s resume %s; echo $? > %s; sleep 600", bin, run, exitFile)
	if out, err := exec.Command("tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", shell).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", session).Run() })
	capture := func() string {
		out, _ := exec.Command("tmux", "capture-pane", "-p", "-t", session).Output()
		return string(out)
	}
	send := func(k string) { _ = exec.Command("tmux", "send-keys", "-t", session, k).Run() }
	asking := func(s string) bool {
		return strings.Contains(s, "FINALIZE") && strings.Contains(s, "dual-write") && strings.Contains(s, "Type the cluster name")
	}
	var screen string
	deadline := time.Now().Add(3 * time.Minute)
	for ; time.Now().Before(deadline) && !asking(screen); time.Sleep(300 * time.Millisecond) {
		screen = capture()
		if strings.Contains(screen, "NOTHING HAS CHANGED") {
			send("Space")
		}
	}
	if !asking(screen) {
		t.Fatalf("the TUI never asked for finalize; screen:\n%s", screen)
	}
	send("Escape")
	for i := 0; time.Now().Before(deadline); i++ {
		if b, err := os.ReadFile(exitFile); err == nil {
			t.Logf("the TUI declined finalize and ended with exit %s", strings.TrimSpace(string(b)))
			return screen
		}
		switch now := capture(); {
		case strings.Contains(now, "STOPPED AT finalize") && strings.Contains(now, "nothing of it was done"):
			send("q")
		case i == 10:
			send("n")
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("the TUI did not end after esc and n; screen:\n%s", capture())
	return ""
}
