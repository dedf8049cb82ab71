package cleanup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/steptest"
)

const oldID = "AAAAAAAAAAAAAAAAAAAAAA"
const curID = "BBBBBBBBBBBBBBBBBBBBBB"

type fixture struct {
	zk    *steptest.ZK
	hosts *steptest.Hosts
	kafka *steptest.Kafka
	run   *steps.Run
	steps []steps.Step
	asked []string
}

// newFixture is the ghost-topic state: "orders" recreated (current ID) while
// broker 2 still holds directories with the old ID; "orders-v2" is a
// healthy bystander that shares the prefix.
func newFixture(t *testing.T, params map[string]string) *fixture {
	t.Helper()
	target := steps.Target{Name: "test", ZKConnect: "zk:2181/kafka", Bootstrap: []string{"b1:9092"}}
	for id := int32(1); id <= 3; id++ {
		target.Hosts = append(target.Hosts, steps.Host{ID: id, Host: fmt.Sprintf("b%d", id),
			Stop: fmt.Sprintf("systemctl stop kafka-%d", id), Start: fmt.Sprintf("systemctl start kafka-%d", id),
			LogDirs: []string{"/data/k1", "/data/k2"}})
	}
	zk := steptest.NewZK(t, "/kafka")
	zk.Put("/cluster/id", `{"version":"1","id":"x"}`).Put("/controller", `{"version":2,"brokerid":3}`).Put("/controller_epoch", "7")
	for _, topic := range []string{"orders", "orders-v2"} {
		id := curID
		if topic == "orders-v2" {
			id = "CCCCCCCCCCCCCCCCCCCCCC"
		}
		zk.Put(steps.TopicPath(topic), fmt.Sprintf(`{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},"topic_id":"%s"}`, id))
		for p := 0; p < 3; p++ {
			zk.Put(steps.PartitionStatePath(topic, int32(p)), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`)
		}
		zk.Put(steps.ConfigTopicPath(topic), `{"version":1,"config":{"retention.ms":"3600000"}}`)
	}
	zk.Put(steps.DeleteTopicPath("orders"), "")
	hosts := steptest.NewHosts(t, zk, target)
	for id := int32(1); id <= 3; id++ {
		for p := 0; p < 3; p++ {
			tid := curID
			if id == 2 {
				tid = oldID
			}
			hosts.AddDir(id, "/data/k1", fmt.Sprintf("orders-%d", p), tid)
			hosts.AddDir(id, "/data/k2", fmt.Sprintf("orders-v2-%d", p), "CCCCCCCCCCCCCCCCCCCCCC")
		}
	}
	hosts.AddDir(1, "/data/k2", "orders-1.0123456789abcdef0123456789abcdef-delete", oldID)
	kafka := steptest.NewKafka(t, zk, hosts)
	rb, err := runbooks.Get("topic-cleanup", steps.KindNames())
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{"topic": "orders", "health_checks": "1", "health_timeout": "5s"}
	for k, v := range params {
		set[k] = v
	}
	vals, err := rb.Bind(set)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j, err := journal.Create(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	f := &fixture{zk: zk, hosts: hosts, kafka: kafka}
	f.run = &steps.Run{Meta: steps.Meta{ID: "run1", Runbook: rb.Name, Topic: "orders", Params: steps.Params(vals), Inventory: "inv.yaml"},
		Dir: dir, Target: target, ZK: zk, Kafka: kafka, Remote: hosts, Journal: j}
	for _, s := range rb.Steps {
		risk, _ := steps.ParseRisk(s.Risk)
		conf, _ := steps.ParseConfirm(s.Confirm)
		st, err := steps.NewStep(steps.Info{ID: s.ID, Kind: s.Kind, Title: s.Title, Risk: risk, Confirm: conf, Rollback: s.Rollback})
		if err != nil {
			t.Fatal(err)
		}
		f.steps = append(f.steps, st)
	}
	return f
}

// approver types the topic for destructive steps unless told otherwise.
type approver func(info steps.Info, p *steps.Plan) steps.Approval

func (a approver) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	return a(info, p), nil
}

func (f *fixture) engine(typed string) *steps.Engine {
	return &steps.Engine{Steps: f.steps, Approver: approver(func(info steps.Info, p *steps.Plan) steps.Approval {
		f.asked = append(f.asked, info.ID)
		return steps.Approval{Decision: steps.Approve, Typed: typed, By: "test"}
	})}
}

func TestCleanupRepairsGhostTopic(t *testing.T) {
	f := newFixture(t, map[string]string{"recreate": "true"})
	out, err := f.engine("orders").Run(context.Background(), f.run, nil)
	if err != nil {
		t.Fatalf("run: %v (%+v)\n%s", err, out, strings.Join(f.hosts.Commands, "\n"))
	}
	// ZooKeeper: the controller's order, children first; nothing else touched.
	del := f.zk.Deleted()
	want := []string{"/brokers/topics/orders/partitions/2/state", "/brokers/topics/orders/partitions/2",
		"/brokers/topics/orders/partitions/1/state", "/brokers/topics/orders/partitions/1",
		"/brokers/topics/orders/partitions/0/state", "/brokers/topics/orders/partitions/0",
		"/brokers/topics/orders/partitions", "/brokers/topics/orders", "/config/topics/orders", "/admin/delete_topics/orders"}
	if !slices.Equal(del, want) {
		t.Fatalf("deleted\n%v\nwant\n%v", del, want)
	}
	for _, p := range []string{"/cluster/id", "/controller_epoch", steps.TopicPath("orders-v2"), steps.ConfigTopicPath("orders-v2")} {
		if !f.zk.Has(p) {
			t.Fatalf("%s was touched", p)
		}
	}
	// The backup holds every deleted node, parents first, before any delete.
	var bk steps.Backup
	b, err := os.ReadFile(f.run.BackupPath())
	if err != nil || json.Unmarshal(b, &bk) != nil {
		t.Fatalf("backup: %v", err)
	}
	if len(bk.Nodes) != len(want) || bk.Nodes[0].Path != "/brokers/topics/orders" || !strings.Contains(string(bk.Nodes[0].Data), curID) {
		t.Fatalf("backup nodes %d, first %+v", len(bk.Nodes), bk.Nodes[0])
	}
	// Stop order: controller (3) last; every move while brokers were down.
	var stops []string
	for _, c := range f.hosts.Commands {
		if strings.Contains(c, "systemctl stop") {
			stops = append(stops, c)
		}
	}
	if len(stops) != 3 || !strings.HasSuffix(stops[2], "kafka-3") {
		t.Fatalf("stop order %v: controller 3 must be last", stops)
	}
	// Disks: every orders directory (also the -delete one) quarantined,
	// orders-v2 untouched, quarantine outside the log dirs.
	for id := int32(1); id <= 3; id++ {
		for _, n := range f.hosts.Names(id, "/data/k1") {
			if strings.HasPrefix(n, "orders-") {
				t.Fatalf("broker %d kept %s\n%s", id, n, strings.Join(f.hosts.Commands, "\n---\n"))
			}
		}
		if got := f.hosts.Names(id, "/data/k2"); len(got) != 4 {
			t.Fatalf("broker %d /data/k2 = %v; want meta.properties and orders-v2-0..2", id, got)
		}
		q := f.hosts.Names(id, "/data/kremedy-quarantine/run1/k1")
		if len(q) != 3 {
			t.Fatalf("broker %d quarantine %v", id, q)
		}
	}
	if q := f.hosts.Names(1, "/data/kremedy-quarantine/run1/k2"); len(q) != 1 || !strings.HasSuffix(q[0], "-delete") {
		t.Fatalf("the -delete form was not quarantined: %v", q)
	}
	if len(f.kafka.Created) != 1 || f.kafka.Canaries != 1 {
		t.Fatalf("recreate: created %v canaries %d", f.kafka.Created, f.kafka.Canaries)
	}
	if !slices.Equal(f.asked, []string{"delete-znodes", "stop-brokers", "wipe-segments", "start-brokers", "verify"}) {
		t.Fatalf("asked for %v", f.asked)
	}
}

func TestTypedConfirmationMustMatch(t *testing.T) {
	for _, typed := range []string{"", "order", "orders-v2", "ORDERS", " orders"} {
		f := newFixture(t, nil)
		_, err := f.engine(typed).Run(context.Background(), f.run, nil)
		if !errors.Is(err, steps.ErrNotApproved) {
			t.Fatalf("typed %q: %v", typed, err)
		}
		if d := f.zk.Deleted(); len(d) != 0 {
			t.Fatalf("typed %q deleted %v", typed, d)
		}
	}
}

func TestSkipNeedsAReason(t *testing.T) {
	f := newFixture(t, nil)
	e := &steps.Engine{Steps: f.steps, Approver: approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
		return steps.Approval{Decision: steps.Skip}
	})}
	if _, err := e.Run(context.Background(), f.run, nil); !errors.Is(err, steps.ErrNotApproved) {
		t.Fatalf("skip without reason: %v", err)
	}
	recs, _ := journal.Read(f.run.Journal.Path())
	for _, r := range recs {
		if r.Type == journal.StepSkipped {
			t.Fatal("a skip without a reason was journaled as a skip")
		}
	}
}

func TestStalePlanIsPlannedAgainNeverBlindlyDeleted(t *testing.T) {
	f := newFixture(t, nil)
	bumped := false
	f.zk.Hook = func(op, p string) error {
		if op == "delete" && p == steps.ConfigTopicPath("orders") && !bumped {
			bumped = true
			f.zk.Bump(p) // someone changed the topic's config after the plan
		}
		return nil
	}
	var plans int
	e := &steps.Engine{Steps: f.steps, Approver: approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
		if info.ID == "delete-znodes" {
			plans++
		}
		return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
	})}
	if _, err := e.Run(context.Background(), f.run, nil); err != nil {
		t.Fatal(err)
	}
	if plans != 2 {
		t.Fatalf("delete-znodes confirmed %d times; a stale plan must be planned and confirmed again", plans)
	}
	if f.zk.Has(steps.ConfigTopicPath("orders")) {
		t.Fatal("config znode left behind")
	}
}

// TestStalePlanFoundByTheBackupDeletesNothing: a znode changed between the
// plan and the apply is caught when the backup reads it again, before the
// first delete, not half-way through the controller's order.
func TestStalePlanFoundByTheBackupDeletesNothing(t *testing.T) {
	f := newFixture(t, nil)
	var plans int
	e := &steps.Engine{Steps: f.steps, Approver: approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
		if info.ID == "delete-znodes" {
			plans++
			switch plans {
			case 1:
				f.zk.Bump(steps.ConfigTopicPath("orders")) // changed while the operator read the plan
			case 2:
				if !f.zk.Has(steps.PartitionStatePath("orders", 2)) || len(f.zk.Deleted()) != 0 {
					t.Errorf("the stale attempt deleted %v before noticing", f.zk.Deleted())
				}
			}
		}
		return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
	})}
	if _, err := e.Run(context.Background(), f.run, nil); err != nil {
		t.Fatal(err)
	}
	if plans != 2 || f.zk.Has(steps.TopicPath("orders")) {
		t.Fatalf("planned %d times; topic znode left: %v", plans, f.zk.Has(steps.TopicPath("orders")))
	}
}

func TestBrokerThatWillNotStopBlocksTheWipe(t *testing.T) {
	f := newFixture(t, nil)
	f.hosts.StopFails[2] = 1
	out, err := f.engine("orders").Run(context.Background(), f.run, nil)
	if err == nil || out.Failed != "stop-brokers" || !strings.Contains(err.Error(), "no segment was wiped") {
		t.Fatalf("err %v outcome %+v", err, out)
	}
	for _, c := range f.hosts.Commands {
		if strings.Contains(c, "kremedy_move") {
			t.Fatalf("a move ran after a failed stop: %s", c)
		}
	}
}

func TestPreflightRefusals(t *testing.T) {
	cases := map[string]struct {
		mod  func(f *fixture)
		want string
	}{
		"wrong chroot":     {func(f *fixture) { f.zk.Remove("/cluster/id") }, "not the Kafka cluster's chroot"},
		"kraft migration":  {func(f *fixture) { f.zk.Put("/migration", "{}") }, "migrating"},
		"unknown broker":   {func(f *fixture) { f.zk.Put("/brokers/ids/4", "{}") }, "broker 4 is registered"},
		"unreachable host": {func(f *fixture) { f.hosts.Unreachable[2] = errors.New("ssh: connection refused") }, "broker 2's host"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			tc.mod(f)
			_, err := f.engine("orders").Run(context.Background(), f.run, nil)
			if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want refusal with %q", err, tc.want)
			}
			if len(f.zk.Ops) != 0 || len(f.asked) != 0 {
				t.Fatalf("refused preflight still acted: ops %v asked %v", f.zk.Ops, f.asked)
			}
		})
	}
}

func TestResumeRechecksCompletedSteps(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	e := &steps.Engine{Steps: f.steps, Approver: approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
		if info.ID == "stop-brokers" {
			cancel() // Ctrl-C at the confirmation of the stop step
		}
		return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
	})}
	out, err := e.Run(ctx, f.run, nil)
	if err == nil || out.Interrupted == "" {
		t.Fatalf("want an interrupted run, got %v %+v", err, out)
	}
	recs, err := journal.Read(f.run.Journal.Path())
	if err != nil {
		t.Fatal(err)
	}
	done := steps.Completed(recs)
	if done["delete-znodes"] != "done" {
		t.Fatalf("completed %v", done)
	}
	opsBefore := len(f.zk.Ops)
	out, err = f.engine("orders").Run(context.Background(), f.run, done)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	for _, op := range f.zk.Ops[opsBefore:] {
		if strings.HasPrefix(op, "delete") {
			t.Fatalf("resume re-did a completed step: %s", op)
		}
	}
	if slices.Contains(f.asked, "delete-znodes") {
		t.Fatal("resume asked to confirm a completed step again")
	}
}

func TestHealthyTopicIsNeverTouched(t *testing.T) {
	f := newFixture(t, map[string]string{"recreate": "true"})
	// A consistent cluster: no marker, no stale directory.
	f.zk.Remove(steps.DeleteTopicPath("orders"))
	f.hosts.FS[1]["/data/k2"] = map[string]steptest.Entry{"orders-v2-0": {IsDir: true, TopicID: "CCCCCCCCCCCCCCCCCCCCCC"}}
	for p := 0; p < 3; p++ {
		f.hosts.AddDir(2, "/data/k1", fmt.Sprintf("orders-%d", p), curID)
	}
	out, err := f.engine("orders").Run(context.Background(), f.run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.zk.Ops) != 0 || len(f.asked) != 0 || len(out.NoOp) != len(f.steps) {
		t.Fatalf("a healthy topic was acted on: ops %v asked %v outcome %+v", f.zk.Ops, f.asked, out)
	}
}

func TestRestoreRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	before, _, _ := f.zk.Get(context.Background(), steps.TopicPath("orders"))
	if _, err := f.engine("orders").Run(context.Background(), f.run, nil); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	// Segments go back only while the brokers are stopped.
	if err := steps.RestoreSegments(context.Background(), f.run, f.run.ManifestPath(), &out); !errors.Is(err, steps.ErrRefused) {
		t.Fatalf("restore onto running brokers: %v", err)
	}
	for id := int32(1); id <= 3; id++ {
		f.hosts.Running[id] = false
		f.zk.Remove(fmt.Sprintf("/brokers/ids/%d", id))
	}
	if err := steps.RestoreSegments(context.Background(), f.run, f.run.ManifestPath(), &out); err != nil {
		t.Fatalf("restore segments: %v\n%s", err, out.String())
	}
	for id := int32(1); id <= 3; id++ {
		names := f.hosts.Names(id, "/data/k1")
		if !slices.Contains(names, "orders-0") || !slices.Contains(names, "orders-2") {
			t.Fatalf("broker %d /data/k1 after restore: %v", id, names)
		}
	}
	if err := steps.RestoreZnodes(context.Background(), f.zk, f.run.BackupPath(), false, &out); err != nil {
		t.Fatalf("restore znodes: %v\n%s", err, out.String())
	}
	after, _, err := f.zk.Get(context.Background(), steps.TopicPath("orders"))
	if err != nil || string(after) != string(before) {
		t.Fatalf("restored topic znode %q (%v), want %q", after, err, before)
	}
	for _, p := range []string{steps.PartitionStatePath("orders", 2), steps.ConfigTopicPath("orders"), steps.DeleteTopicPath("orders")} {
		if !f.zk.Has(p) {
			t.Fatalf("%s not restored", p)
		}
	}
	if err := steps.RestoreZnodes(context.Background(), f.zk, f.run.BackupPath(), false, &out); !errors.Is(err, steps.ErrRefused) {
		t.Fatalf("a second restore must refuse to overwrite: %v", err)
	}
	if err := steps.RestoreZnodes(context.Background(), f.zk, f.run.BackupPath(), true, &out); err != nil {
		t.Fatalf("--force with everything present: %v", err)
	}
}

// TestRunDirIsPrivateAndHoldsNoSecret: after a full run every file of the
// run directory is 0600 and every directory 0700, and a registered secret
// (a SASL password) that reached kremedy's log appears in none of them.
func TestRunDirIsPrivateAndHoldsNoSecret(t *testing.T) {
	const secret = "s3cret-Pa55phrase"
	f := newFixture(t, map[string]string{"recreate": "true"})
	f.run.Journal.Redact(secret)
	f.run.Logf("client properties loaded (sasl.jaas.config password=%s)", secret)
	out, err := f.engine("orders").Run(context.Background(), f.run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := steps.WriteReport(f.run, out); err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(f.run.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == f.run.Dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		if !d.IsDir() {
			files = append(files, filepath.Base(p))
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	for _, want := range []string{"journal.jsonl", "quarantine-manifest.json", "report.md", "znodes.json"} {
		if !slices.Contains(files, want) {
			t.Errorf("run dir lacks %s (has %v)", want, files)
		}
	}
}

// TestTopicRecreatedBehindTheRunIsNotAdopted: the topic reappears during
// the restart (a client with auto-create): verify stops with a refusal
// instead of checking or recreating someone else's topic.
func TestTopicRecreatedBehindTheRunIsNotAdopted(t *testing.T) {
	f := newFixture(t, map[string]string{"recreate": "true"})
	e := &steps.Engine{Steps: f.steps, Approver: approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
		if info.ID == "start-brokers" {
			f.zk.Put(steps.TopicPath("orders"), `{"version":3,"partitions":{"0":[1,2,3]},"topic_id":"ZZZZZZZZZZZZZZZZZZZZZZ"}`)
		}
		return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
	})}
	out, err := e.Run(context.Background(), f.run, nil)
	if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "exists again") || out.Failed != "verify" {
		t.Fatalf("want verify refused, got %v (%+v)", err, out)
	}
	if len(f.kafka.Created) != 0 || f.kafka.Canaries != 0 {
		t.Fatalf("verify acted on a topic it did not make: created %v canaries %d", f.kafka.Created, f.kafka.Canaries)
	}
}

// undoneKind is a step whose postcondition a later step undoes on purpose
// (stop-brokers, then start-brokers): its Verify fails once the later step
// has run.
type undoneKind struct{ applied *int }

func (k undoneKind) Plan(context.Context, *steps.Run) (*steps.Plan, error) {
	return &steps.Plan{Summary: "act", Actions: []steps.Action{{Kind: "test", Target: "x"}}}, nil
}
func (k undoneKind) Apply(context.Context, *steps.Run, *steps.Plan) error { *k.applied++; return nil }
func (k undoneKind) Verify(context.Context, *steps.Run) ([]steps.Check, error) {
	return []steps.Check{{Name: "postcondition", OK: *k.applied > 0}}, nil // holds only once re-done here
}

// TestResumeDoesNotRedoAStepALaterStepUndid: on resume, a destructive step
// followed by a completed step is trusted from the journal, not re-checked
// and re-done (a second stop of a restarted cluster, a znode deletion of
// the topic verify just made); the last completed step is still re-checked.
func TestResumeDoesNotRedoAStepALaterStepUndid(t *testing.T) {
	var a, b, c int
	mk := func(id string, risk steps.Risk, n *int) steps.Step {
		return steps.Step{Info: steps.Info{ID: id, Kind: id, Title: id, Risk: risk, Confirm: steps.ConfirmNone}, Kind: undoneKind{n}}
	}
	ss := []steps.Step{mk("stop", steps.Destructive, &a), mk("start", steps.Low, &b), mk("last", steps.Destructive, &c)}
	e := &steps.Engine{Steps: ss, Approver: approver(func(steps.Info, *steps.Plan) steps.Approval {
		return steps.Approval{Decision: steps.Approve, By: "test"}
	})}
	r := &steps.Run{Meta: steps.Meta{ID: "r", Topic: "orders"}, Dir: t.TempDir()}
	completed := map[string]string{"stop": "done", "start": "done", "last": "done"}
	if _, err := e.Run(context.Background(), r, completed); err != nil {
		t.Fatal(err)
	}
	if a != 0 {
		t.Errorf("stop (undone on purpose by the completed start) was re-done %d times", a)
	}
	if b != 1 || c != 1 {
		t.Errorf("start re-done %d, last re-done %d times; want each once: their failing checks are re-checked, then re-done", b, c)
	}
}

// TestResumeRefusesAnotherCluster: between two attempts the inventory came
// to point at another cluster (/cluster/id differs): resume refuses before
// anything else.
func TestResumeRefusesAnotherCluster(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	e := &steps.Engine{Steps: f.steps, Approver: approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
		if info.ID == "stop-brokers" {
			cancel()
		}
		return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
	})}
	if _, err := e.Run(ctx, f.run, nil); err == nil {
		t.Fatal("first attempt was not interrupted")
	}
	recs, err := journal.Read(f.run.Journal.Path())
	if err != nil {
		t.Fatal(err)
	}
	f.zk.Put("/cluster/id", `{"version":"1","id":"another-cluster"}`)
	opsBefore := len(f.zk.Ops)
	r2 := *f.run
	r2.Prior = nil
	_, err = f.engine("orders").Run(context.Background(), &r2, steps.Completed(recs))
	if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("resume on another cluster: %v, want a refusal", err)
	}
	for _, op := range f.zk.Ops[opsBefore:] {
		if !strings.HasPrefix(op, "get") && !strings.HasPrefix(op, "exists") && !strings.HasPrefix(op, "children") {
			t.Fatalf("refused resume still changed ZooKeeper: %s", op)
		}
	}
}

// TestProducersNotAskedAreSaid: a partition no broker hosts cannot take a
// write and does not block the gate, but the check says it was not asked; a
// partition whose broker did not answer blocks it (a producer may be
// writing there) and nothing is deleted.
func TestProducersNotAskedAreSaid(t *testing.T) {
	t.Run("no broker hosts it", func(t *testing.T) {
		f := newFixture(t, nil)
		f.kafka.ProducersErr = fmt.Errorf("orders-2: %w (broker 1: NOT_LEADER_OR_FOLLOWER; broker 2: NOT_LEADER_OR_FOLLOWER; broker 3: NOT_LEADER_OR_FOLLOWER)", steps.ErrUnhosted)
		// A gate that wrongly held would wait for the step's timeout: fail fast instead.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := f.engine("orders").Run(ctx, f.run, nil); err != nil {
			t.Fatalf("run: %v", err)
		}
		b, _ := os.ReadFile(f.run.Journal.Path())
		if !bytes.Contains(b, []byte(`not asked: orders-2: no broker hosts it`)) {
			t.Fatalf("the producer check does not say which partitions were not asked:\n%s", b)
		}
	})
	t.Run("a broker did not answer", func(t *testing.T) {
		f := newFixture(t, nil)
		f.kafka.ProducersErr = errors.New("orders-2: no answer (broker 2: i/o timeout)")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := f.engine("orders").Run(ctx, f.run, nil)
		if err == nil || !strings.Contains(err.Error(), "clients still attached") {
			t.Fatalf("the gate should hold while a broker does not answer: %v", err)
		}
		if d := f.zk.Deleted(); len(d) != 0 {
			t.Fatalf("deleted %v while a producer may be writing", d)
		}
		b, _ := os.ReadFile(f.run.Journal.Path())
		if !bytes.Contains(b, []byte("counted as an active producer until they answer")) {
			t.Fatalf("the journal does not say why the gate holds:\n%s", b)
		}
	})
}

// TestUnhealthyBeforeTheRunIsNotBlamedOnIt: another topic's partition that
// is under-replicated before anything is done is said up front and does not
// fail the health gate after the restart; one that became so after the
// restart does.
func TestUnhealthyBeforeTheRunIsNotBlamedOnIt(t *testing.T) {
	const urp = `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}` // replicas [2,3,1]
	t.Run("already so: said up front, not counted after the grace", func(t *testing.T) {
		f := newFixture(t, map[string]string{"health_grace": "1s"})
		f.zk.Put(steps.PartitionStatePath("orders-v2", 1), urp)
		if _, err := f.engine("orders").Run(context.Background(), f.run, nil); err != nil {
			t.Fatalf("run: %v", err)
		}
		b, _ := os.ReadFile(f.run.Journal.Path())
		for _, want := range []string{"already offline or under-replicated, before anything is done: orders-v2-1", "no longer counted after the grace, already so before the run and no worse now: orders-v2-1"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Fatalf("journal lacks %q:\n%s", want, b)
			}
		}
	})
	t.Run("short only of a broker that is down: the restart must heal it", func(t *testing.T) {
		f := newFixture(t, map[string]string{"health_timeout": "1s"})
		f.hosts.Running[3] = false
		f.zk.Remove("/brokers/ids/3")
		f.zk.Put(steps.PartitionStatePath("orders-v2", 1), urp) // replica 3 out of the ISR: broker 3 is down
		_, err := f.engine("orders").Run(context.Background(), f.run, nil)
		if !errors.Is(err, steps.ErrCheckFailed) || !strings.Contains(err.Error(), "no under-replicated partition (orders-v2-1") {
			t.Fatalf("a partition the restart should heal and did not must fail the gate: %v", err)
		}
	})
	t.Run("counted during the grace: it may be only catching up", func(t *testing.T) {
		f := newFixture(t, map[string]string{"health_grace": "1h", "health_timeout": "1s"})
		f.zk.Put(steps.PartitionStatePath("orders-v2", 1), urp)
		if _, err := f.engine("orders").Run(context.Background(), f.run, nil); !errors.Is(err, steps.ErrCheckFailed) {
			t.Fatalf("within the grace a pre-existing partition still counts: %v", err)
		}
	})
	t.Run("worse after the restart: the gate fails", func(t *testing.T) {
		f := newFixture(t, map[string]string{"health_grace": "0s", "health_timeout": "1s"})
		f.zk.Put(steps.PartitionStatePath("orders-v2", 1), urp)
		f.hosts.OnStart = func(b int32) {
			if b == 3 { // under-replicated before, leaderless after
				f.zk.Put(steps.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":1,"isr":[1]}`)
			}
		}
		_, err := f.engine("orders").Run(context.Background(), f.run, nil)
		if !errors.Is(err, steps.ErrCheckFailed) || !strings.Contains(err.Error(), "no offline partition (orders-v2-1") {
			t.Fatalf("a partition worse than before the run must fail the gate: %v", err)
		}
	})
	t.Run("after the restart: the gate fails", func(t *testing.T) {
		f := newFixture(t, map[string]string{"health_timeout": "1s"})
		f.hosts.OnStart = func(b int32) {
			if b == 3 {
				f.zk.Put(steps.PartitionStatePath("orders-v2", 1), urp)
			}
		}
		_, err := f.engine("orders").Run(context.Background(), f.run, nil)
		if !errors.Is(err, steps.ErrCheckFailed) || !strings.Contains(err.Error(), "no under-replicated partition (orders-v2-1") {
			t.Fatalf("a partition under-replicated after the restart must fail the gate: %v", err)
		}
	})
}

// TestResumeKeepsTheFirstBaseline: a resume reads the cluster after the
// restart; what it finds unhealthy then is not "already so before the
// run" — the first attempt's list is.
func TestResumeKeepsTheFirstBaseline(t *testing.T) {
	const urp = `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`
	for _, tc := range []struct {
		before map[string]steps.Unhealthy
		fails  bool
	}{{nil, true}, {map[string]steps.Unhealthy{"orders-v2-1": {ISR: 2}}, false}} {
		f := newFixture(t, map[string]string{"health_timeout": "2s", "health_grace": "0s"})
		f.zk.Put(steps.PartitionStatePath("orders-v2", 1), urp)
		f.run.Prior = &steps.Facts{Baseline: true, UnhealthyBefore: tc.before}
		_, err := f.engine("orders").Run(context.Background(), f.run, nil)
		if failed := errors.Is(err, steps.ErrCheckFailed); failed != tc.fails {
			t.Fatalf("first attempt saw %v unhealthy: gate failed=%v (%v), want %v", tc.before, failed, err, tc.fails)
		}
	}
}
