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
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kremedy/kremedy/steps/cleanup"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/steptest"
)

const curID = steptest.CurID

type fixture struct {
	zk      *steptest.ZK
	hosts   *steptest.Hosts
	kafka   *steptest.Kafka
	cluster ports.Cluster
	rb      *steps.Runbook
	s       *steps.Session
	dir     string
	asked   []string
}

// newFixture is the ghost-topic state (steptest.Ghost) and a run of the
// real topic-cleanup runbook on it, bound to params.
func newFixture(t *testing.T, params map[string]string) *fixture {
	t.Helper()
	return fixtureOn(t, steptest.Ghost(t), params)
}

// fixtureOn is a run of the real topic-cleanup runbook on cluster g, bound
// to params (topic=orders unless they set topics).
func fixtureOn(t *testing.T, g *steptest.Cluster, params map[string]string) *fixture {
	t.Helper()
	zk, hosts, kafka, target := g.ZK, g.Hosts, g.Kafka, g.Ports.Target
	rb, err := runbooks.Get("topic-cleanup")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{"topic": "orders", "health_checks": "1", "health_timeout": "5s"}
	if _, ok := params["topics"]; ok {
		delete(set, "topic")
	}
	for k, v := range params {
		set[k] = v
	}
	bound, err := rb.Bind(set, target.Name)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := steps.Create(dir, bound, steps.Meta{ID: "run1", Runbook: rb.Name, Params: bound.Params, Inventory: "inv.yaml", Cluster: target.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{zk: zk, hosts: hosts, kafka: kafka, rb: bound, s: s, dir: dir, cluster: g.Ports}
}

// artifact is the path of one of the run's artifacts.
func (f *fixture) artifact(id string) string {
	for _, a := range f.rb.Artifacts {
		if a.ID == id {
			return filepath.Join(f.dir, a.Path)
		}
	}
	panic("no artifact " + id)
}

func (f *fixture) journal() string { return filepath.Join(f.dir, steps.JournalFile) }

// approver answers with the digest of the plan it was shown.
type approver func(info steps.Info, p *steps.Plan) steps.Approval

func (a approver) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	ap := a(info, p)
	ap.Digest = p.Digest()
	return ap, nil
}

// typing approves every step, typing typed for destructive ones.
func (f *fixture) typing(typed string) steps.Approver {
	return approver(func(info steps.Info, p *steps.Plan) steps.Approval {
		f.asked = append(f.asked, info.ID)
		return steps.Approval{Decision: steps.Approve, Typed: typed, By: "test"}
	})
}

// run walks the run (continuing from its journal) and returns how it ended.
func (f *fixture) run(ctx context.Context, a steps.Approver) (steps.Outcome, error) {
	out := f.s.Run(ctx, f.cluster, a, nil)
	return out, out.Err
}

func TestCleanupRepairsGhostTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, map[string]string{"recreate": "true"})
		out, err := f.run(context.Background(), f.typing("orders"))
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
		for _, p := range []string{"/cluster/id", "/controller_epoch", kafkazk.TopicPath("orders-v2"), kafkazk.ConfigTopicPath("orders-v2")} {
			if !f.zk.Has(p) {
				t.Fatalf("%s was touched", p)
			}
		}
		// The backup holds every deleted node, parents first, before any delete.
		var bk cleanup.Backup
		b, err := os.ReadFile(f.artifact("backup"))
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
	})
}

func TestTypedConfirmationMustMatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, typed := range []string{"", "order", "orders-v2", "ORDERS", " orders"} {
			f := newFixture(t, nil)
			_, err := f.run(context.Background(), f.typing(typed))
			if !errors.Is(err, steps.ErrNotApproved) {
				t.Fatalf("typed %q: %v", typed, err)
			}
			if d := f.zk.Deleted(); len(d) != 0 {
				t.Fatalf("typed %q deleted %v", typed, d)
			}
		}
	})
}

func TestSkipNeedsAReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		a := approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
			return steps.Approval{Decision: steps.Skip}
		})
		if _, err := f.run(context.Background(), a); !errors.Is(err, steps.ErrNotApproved) {
			t.Fatalf("skip without reason: %v", err)
		}
		recs, _ := journal.Read(f.journal())
		for _, r := range recs {
			if r.Type == journal.StepSkipped {
				t.Fatal("a skip without a reason was journaled as a skip")
			}
		}
	})
}

func TestStalePlanIsPlannedAgainNeverBlindlyDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		bumped := false
		f.zk.Hook = func(op, p string) error {
			if op == "delete" && p == kafkazk.ConfigTopicPath("orders") && !bumped {
				bumped = true
				f.zk.Bump(p) // someone changed the topic's config after the plan
			}
			return nil
		}
		var plans int
		a := approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
			if info.ID == "delete-znodes" {
				plans++
			}
			return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
		})
		if _, err := f.run(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		if plans != 2 {
			t.Fatalf("delete-znodes confirmed %d times; a stale plan must be planned and confirmed again", plans)
		}
		if f.zk.Has(kafkazk.ConfigTopicPath("orders")) {
			t.Fatal("config znode left behind")
		}
	})
}

// TestStalePlanFoundByTheBackupDeletesNothing: a znode changed between the
// plan and the apply is caught when the backup reads it again, before the
// first delete, not half-way through the controller's order.
func TestStalePlanFoundByTheBackupDeletesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		var plans int
		a := approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
			if info.ID == "delete-znodes" {
				plans++
				switch plans {
				case 1:
					f.zk.Bump(kafkazk.ConfigTopicPath("orders")) // changed while the operator read the plan
				case 2:
					if !f.zk.Has(kafkazk.PartitionStatePath("orders", 2)) || len(f.zk.Deleted()) != 0 {
						t.Errorf("the stale attempt deleted %v before noticing", f.zk.Deleted())
					}
				}
			}
			return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
		})
		if _, err := f.run(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		if plans != 2 || f.zk.Has(kafkazk.TopicPath("orders")) {
			t.Fatalf("planned %d times; topic znode left: %v", plans, f.zk.Has(kafkazk.TopicPath("orders")))
		}
	})
}

func TestBrokerThatWillNotStopBlocksTheWipe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		f.hosts.StopFails[2] = 1
		out, err := f.run(context.Background(), f.typing("orders"))
		if err == nil || out.Failed != "stop-brokers" || !strings.Contains(err.Error(), "no segment was wiped") {
			t.Fatalf("err %v outcome %+v", err, out)
		}
		for _, c := range f.hosts.Commands {
			if strings.Contains(c, "kremedy_move") {
				t.Fatalf("a move ran after a failed stop: %s", c)
			}
		}
	})
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
		"znodes ACL'd to the brokers' SASL identity": {func(f *fixture) {
			f.zk.Hook = func(op, path string) error {
				if op == "delete" && strings.HasSuffix(path, "/kremedy-acl-probe-never-exists") && strings.HasPrefix(path, "/brokers/topics/orders") {
					return errors.New("zk: not authenticated")
				}
				return nil
			}
		}, "may not delete under /kafka/brokers/topics/orders"},
		"log dir the login may not write": {func(f *fixture) {
			for dir := range f.hosts.FS[3] {
				f.hosts.Unwritable = map[int32]map[string]string{3: {dir: "parent"}}
			}
		}, "broker 3: cannot write the parent of"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil)
				tc.mod(f)
				_, err := f.run(context.Background(), f.typing("orders"))
				if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err %v, want refusal with %q", err, tc.want)
				}
				if len(f.zk.Ops) != 0 || len(f.asked) != 0 {
					t.Fatalf("refused preflight still acted: ops %v asked %v", f.zk.Ops, f.asked)
				}
			})
		})
	}
}

func TestResumeRechecksCompletedSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		a := approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
			if info.ID == "stop-brokers" {
				cancel() // Ctrl-C at the confirmation of the stop step
			}
			return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
		})
		out, err := f.run(ctx, a)
		if err == nil || out.Interrupted == "" {
			t.Fatalf("want an interrupted run, got %v %+v", err, out)
		}
		if p := f.s.Progress(); !slices.Contains(p.Done, "delete-znodes") {
			t.Fatalf("completed %v", p.Done)
		}
		opsBefore := len(f.zk.Ops)
		f.asked = nil
		out, err = f.run(context.Background(), f.typing("orders"))
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
	})
}

func TestHealthyTopicIsNeverTouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, map[string]string{"recreate": "true"})
		// A consistent cluster: no marker, no stale directory.
		f.zk.Remove(kafkazk.DeleteTopicPath("orders"))
		f.hosts.FS[1]["/data/k2"] = map[string]steptest.Entry{"orders-v2-0": {IsDir: true, TopicID: "CCCCCCCCCCCCCCCCCCCCCC"}}
		for p := 0; p < 3; p++ {
			f.hosts.AddDir(2, "/data/k1", fmt.Sprintf("orders-%d", p), curID)
		}
		out, err := f.run(context.Background(), f.typing("orders"))
		if err != nil {
			t.Fatal(err)
		}
		// The run ends after preflight: nothing to clean up, and the rest of
		// the runbook is not needed (not run as no-ops only to fail at verify).
		if len(f.zk.Ops) != 0 || len(f.asked) != 0 || !slices.Equal(out.Done, []string{"preflight"}) || len(out.NotNeeded) != len(f.rb.Steps)-1 || len(out.NotDone) != 0 {
			t.Fatalf("a healthy topic was acted on: ops %v asked %v outcome %+v", f.zk.Ops, f.asked, out)
		}
		b, _ := os.ReadFile(f.journal())
		if !bytes.Contains(b, []byte("nothing to clean up")) || !bytes.Contains(b, []byte(`"type":"run-end","data":{"ok":true}`)) {
			t.Fatalf("the journal does not say the run ended with nothing to clean up:\n%s", b)
		}
	})
}

// TestBrokerDownIsNoReasonToCleanUp: a consistent topic with one broker
// down (its replicas out of the ISR) is still consistent: nothing is
// planned. A topic that exists nowhere (a typo) is refused, exit 1, with the
// nearest existing names.
func TestBrokerDownIsNoReasonToCleanUp(t *testing.T) {
	t.Run("a healthy topic, one broker down", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			f.zk.Remove(kafkazk.DeleteTopicPath("orders"))
			f.hosts.FS[1]["/data/k2"] = map[string]steptest.Entry{"orders-v2-0": {IsDir: true, TopicID: "CCCCCCCCCCCCCCCCCCCCCC"}}
			for p := 0; p < 3; p++ {
				f.hosts.AddDir(2, "/data/k1", fmt.Sprintf("orders-%d", p), curID)
			}
			f.hosts.Running[3] = false
			f.zk.Remove("/brokers/ids/3")
			for p := 0; p < 3; p++ {
				f.zk.Put(kafkazk.PartitionStatePath("orders", int32(p)), `{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":2,"isr":[1,2]}`)
			}
			out, err := f.run(context.Background(), f.typing("orders"))
			if err != nil || len(f.zk.Ops) != 0 || len(f.asked) != 0 || len(out.NotNeeded) != len(f.rb.Steps)-1 {
				t.Fatalf("a broker being down made a healthy topic a cleanup: err %v ops %v asked %v outcome %+v", err, f.zk.Ops, f.asked, out)
			}
		})
	})
	t.Run("an assignment to a broker gone for good is the topic's own", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			f.zk.Remove(kafkazk.DeleteTopicPath("orders"))
			f.hosts.FS[1]["/data/k2"] = map[string]steptest.Entry{"orders-v2-0": {IsDir: true, TopicID: "CCCCCCCCCCCCCCCCCCCCCC"}}
			for p := 0; p < 3; p++ {
				f.hosts.AddDir(2, "/data/k1", fmt.Sprintf("orders-%d", p), curID)
			}
			// Broker 4 is in no inventory and not registered (decommissioned).
			f.zk.Put(kafkazk.TopicPath("orders"), `{"version":3,"partitions":{"0":[1,4],"1":[2,3,1],"2":[3,1,2]},"topic_id":"`+curID+`"}`)
			f.zk.Put(kafkazk.PartitionStatePath("orders", 0), `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}`)
			out, _ := f.run(context.Background(), f.typing("orders"))
			if len(out.NotNeeded) != 0 || !slices.Contains(f.asked, "delete-znodes") {
				t.Fatalf("a topic assigned to a broker gone for good was found consistent: asked %v outcome %+v", f.asked, out)
			}
		})
	})
	t.Run("a topic that exists nowhere", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, map[string]string{"topic": "ordrs"})
			f.hosts.Running[3] = false
			f.zk.Remove("/brokers/ids/3")
			_, err := f.run(context.Background(), f.typing("ordrs"))
			if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "no topic of that name exists on this cluster") || !strings.Contains(err.Error(), `Closest existing names: "orders"`) {
				t.Fatalf("a topic found nowhere: %v", err)
			}
			if len(f.zk.Ops) != 0 || len(f.asked) != 0 {
				t.Fatalf("touched: ops %v asked %v", f.zk.Ops, f.asked)
			}
		})
	})
}

func TestRestoreRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		before, _, _ := f.zk.Get(context.Background(), kafkazk.TopicPath("orders"))
		if _, err := f.run(context.Background(), f.typing("orders")); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		// Segments go back only while the brokers are stopped.
		if err := cleanup.RestoreSegments(context.Background(), f.cluster, f.artifact("manifest"), &out); !errors.Is(err, steps.ErrRefused) {
			t.Fatalf("restore onto running brokers: %v", err)
		}
		for id := int32(1); id <= 3; id++ {
			f.hosts.Running[id] = false
			f.zk.Remove(fmt.Sprintf("/brokers/ids/%d", id))
		}
		if err := cleanup.RestoreSegments(context.Background(), f.cluster, f.artifact("manifest"), &out); err != nil {
			t.Fatalf("restore segments: %v\n%s", err, out.String())
		}
		for id := int32(1); id <= 3; id++ {
			names := f.hosts.Names(id, "/data/k1")
			if !slices.Contains(names, "orders-0") || !slices.Contains(names, "orders-2") {
				t.Fatalf("broker %d /data/k1 after restore: %v", id, names)
			}
		}
		if err := cleanup.RestoreZnodes(context.Background(), f.zk, f.artifact("backup"), false, &out); err != nil {
			t.Fatalf("restore znodes: %v\n%s", err, out.String())
		}
		after, _, err := f.zk.Get(context.Background(), kafkazk.TopicPath("orders"))
		if err != nil || string(after) != string(before) {
			t.Fatalf("restored topic znode %q (%v), want %q", after, err, before)
		}
		for _, p := range []string{kafkazk.PartitionStatePath("orders", 2), kafkazk.ConfigTopicPath("orders"), kafkazk.DeleteTopicPath("orders")} {
			if !f.zk.Has(p) {
				t.Fatalf("%s not restored", p)
			}
		}
		if err := cleanup.RestoreZnodes(context.Background(), f.zk, f.artifact("backup"), false, &out); !errors.Is(err, steps.ErrRefused) {
			t.Fatalf("a second restore must refuse to overwrite: %v", err)
		}
		if err := cleanup.RestoreZnodes(context.Background(), f.zk, f.artifact("backup"), true, &out); err != nil {
			t.Fatalf("--force with everything present: %v", err)
		}
		// The same chroot on another cluster (another inventory): refused by
		// /cluster/id, nothing created (review L7).
		id, st, err := f.zk.Get(context.Background(), kafkazk.ClusterIDPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.zk.Set(context.Background(), kafkazk.ClusterIDPath, []byte(`{"version":"1","id":"another-cluster"}`), st.Version); err != nil {
			t.Fatal(err)
		}
		defer f.zk.Set(context.Background(), kafkazk.ClusterIDPath, id, st.Version+1)
		if err := cleanup.RestoreZnodes(context.Background(), f.zk, f.artifact("backup"), true, &out); !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), `this inventory's ZooKeeper holds cluster id "another-cluster"`) {
			t.Fatalf("a restore onto another cluster with the same chroot: %v", err)
		}
	})
}

// TestRunDirIsPrivateAndHoldsNoSecret: after a full run every file of the
// run directory is 0600 and every directory 0700, and a registered secret
// (a SASL password) that reached kremedy's log appears in none of them.
func TestRunDirIsPrivateAndHoldsNoSecret(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const secret = "s3cret-Pa55phrase"
		f := newFixture(t, map[string]string{"recreate": "true"})
		f.s.Redact(secret)
		f.s.Notef("test", "client properties loaded (sasl.jaas.config password=%s)", secret)
		if _, err := f.run(context.Background(), f.typing("orders")); err != nil {
			t.Fatal(err)
		}
		var files []string
		err := filepath.WalkDir(f.dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || p == f.dir {
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
	})
}

// TestTopicRecreatedBehindTheRunIsNotAdopted: the topic reappears during
// the restart (a client with auto-create): verify stops with a refusal
// instead of checking or recreating someone else's topic.
func TestTopicRecreatedBehindTheRunIsNotAdopted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, map[string]string{"recreate": "true"})
		// A client recreates it as soon as a broker is back.
		f.hosts.OnStart = func(b int32) {
			f.zk.Put(kafkazk.TopicPath("orders"), `{"version":3,"partitions":{"0":[1,2,3]},"topic_id":"ZZZZZZZZZZZZZZZZZZZZZZ"}`)
		}
		out, err := f.run(context.Background(), f.typing("orders"))
		if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "exists again") || out.Failed != "verify" {
			t.Fatalf("want verify refused, got %v (%+v)", err, out)
		}
		if len(f.kafka.Created) != 0 || f.kafka.Canaries != 0 {
			t.Fatalf("verify acted on a topic it did not make: created %v canaries %d", f.kafka.Created, f.kafka.Canaries)
		}
	})
}

// TestResumeRefusesAnotherCluster: between two attempts the inventory came
// to point at another cluster (/cluster/id differs): resume refuses before
// anything else.
func TestResumeRefusesAnotherCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		a := approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
			if info.ID == "stop-brokers" {
				cancel()
			}
			return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
		})
		if _, err := f.run(ctx, a); err == nil {
			t.Fatal("first attempt was not interrupted")
		}
		f.zk.Put("/cluster/id", `{"version":"1","id":"another-cluster"}`)
		opsBefore := len(f.zk.Ops)
		_, err := f.run(context.Background(), f.typing("orders"))
		if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "another cluster") {
			t.Fatalf("resume on another cluster: %v, want a refusal", err)
		}
		for _, op := range f.zk.Ops[opsBefore:] {
			if !strings.HasPrefix(op, "get") && !strings.HasPrefix(op, "exists") && !strings.HasPrefix(op, "children") {
				t.Fatalf("refused resume still changed ZooKeeper: %s", op)
			}
		}
	})
}

// TestProducersNotAskedAreSaid: a partition no broker hosts cannot take a
// write and does not block the gate, but the check says it was not asked; a
// partition whose broker did not answer blocks it (a producer may be
// writing there) and nothing is deleted.
func TestProducersNotAskedAreSaid(t *testing.T) {
	t.Run("no broker hosts it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			f.kafka.ProducersErr = fmt.Errorf("orders-2: %w (broker 1: NOT_LEADER_OR_FOLLOWER; broker 2: NOT_LEADER_OR_FOLLOWER; broker 3: NOT_LEADER_OR_FOLLOWER)", ports.ErrUnhosted)
			// A gate that wrongly held would wait for the step's timeout: fail fast instead.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := f.run(ctx, f.typing("orders")); err != nil {
				t.Fatalf("run: %v", err)
			}
			b, _ := os.ReadFile(f.journal())
			if !bytes.Contains(b, []byte(`not asked: orders-2: no broker hosts it`)) {
				t.Fatalf("the producer check does not say which partitions were not asked:\n%s", b)
			}
		})
	})
	t.Run("a broker did not answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			f.kafka.ProducersErr = errors.New("orders-2: no answer (broker 2: i/o timeout)")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := f.run(ctx, f.typing("orders"))
			if err == nil || !strings.Contains(err.Error(), "clients still attached") {
				t.Fatalf("the gate should hold while a broker does not answer: %v", err)
			}
			if d := f.zk.Deleted(); len(d) != 0 {
				t.Fatalf("deleted %v while a producer may be writing", d)
			}
			b, _ := os.ReadFile(f.journal())
			if !bytes.Contains(b, []byte("counted as an active producer until they answer")) {
				t.Fatalf("the journal does not say why the gate holds:\n%s", b)
			}
		})
	})
}

// TestUnhealthyBeforeTheRunIsNotBlamedOnIt: another topic's partition that
// is under-replicated before anything is done is said up front and does not
// fail the health gate after the restart; one that became so after the
// restart does.
func TestUnhealthyBeforeTheRunIsNotBlamedOnIt(t *testing.T) {
	const urp = `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}` // replicas [2,3,1]
	t.Run("already so: said up front, not counted after the grace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, map[string]string{"health_grace": "1s"})
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), urp)
			if _, err := f.run(context.Background(), f.typing("orders")); err != nil {
				t.Fatalf("run: %v", err)
			}
			b, _ := os.ReadFile(f.journal())
			for _, want := range []string{"already offline or under-replicated, before anything is done: orders-v2-1", "no longer counted after the grace, already so before the run and no worse now: orders-v2-1"} {
				if !bytes.Contains(b, []byte(want)) {
					t.Fatalf("journal lacks %q:\n%s", want, b)
				}
			}
		})
	})
	t.Run("short only of a broker that is down: the restart must heal it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, map[string]string{"health_timeout": "1s"})
			f.hosts.Running[3] = false
			f.zk.Remove("/brokers/ids/3")
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), urp) // replica 3 out of the ISR: broker 3 is down
			_, err := f.run(context.Background(), f.typing("orders"))
			if !errors.Is(err, steps.ErrCheckFailed) || !strings.Contains(err.Error(), "no under-replicated partition (orders-v2-1") {
				t.Fatalf("a partition the restart should heal and did not must fail the gate: %v", err)
			}
		})
	})
	t.Run("counted during the grace: it may be only catching up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, map[string]string{"health_grace": "1h", "health_timeout": "1s"})
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), urp)
			if _, err := f.run(context.Background(), f.typing("orders")); !errors.Is(err, steps.ErrCheckFailed) {
				t.Fatalf("within the grace a pre-existing partition still counts: %v", err)
			}
		})
	})
	t.Run("worse after the restart: the gate fails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, map[string]string{"health_grace": "0s", "health_timeout": "1s"})
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), urp)
			f.hosts.OnStart = func(b int32) {
				if b == 3 { // under-replicated before, leaderless after
					f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":1,"isr":[1]}`)
				}
			}
			_, err := f.run(context.Background(), f.typing("orders"))
			if !errors.Is(err, steps.ErrCheckFailed) || !strings.Contains(err.Error(), "no offline partition (orders-v2-1") {
				t.Fatalf("a partition worse than before the run must fail the gate: %v", err)
			}
		})
	})
	t.Run("after the restart: the gate fails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, map[string]string{"health_timeout": "1s"})
			f.hosts.OnStart = func(b int32) {
				if b == 3 {
					f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), urp)
				}
			}
			_, err := f.run(context.Background(), f.typing("orders"))
			if !errors.Is(err, steps.ErrCheckFailed) || !strings.Contains(err.Error(), "no under-replicated partition (orders-v2-1") {
				t.Fatalf("a partition under-replicated after the restart must fail the gate: %v", err)
			}
		})
	})
}

// TestResumeKeepsTheFirstBaseline: a resume reads the cluster after the
// restart; what it finds unhealthy then is not "already so before the
// run" — the first attempt's list is.
func TestResumeKeepsTheFirstBaseline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const urp = `{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}`
		for _, tc := range []struct {
			before bool // orders-v2-1 already under-replicated at the first attempt's preflight
			fails  bool
		}{{false, true}, {true, false}} {
			f := newFixture(t, map[string]string{"health_timeout": "2s", "health_grace": "0s"})
			if tc.before {
				f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), urp)
			}
			// The first attempt stops at its first confirmation, right after
			// its preflight recorded the baseline.
			ctx, cancel := context.WithCancel(context.Background())
			if _, err := f.run(ctx, approver(func(steps.Info, *steps.Plan) steps.Approval {
				cancel()
				return steps.Approval{Decision: steps.Abort, By: "test"}
			})); err == nil {
				t.Fatal("the first attempt was not stopped")
			}
			f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), urp)
			_, err := f.run(context.Background(), f.typing("orders"))
			if failed := errors.Is(err, steps.ErrCheckFailed); failed != tc.fails {
				t.Fatalf("first attempt saw orders-v2-1 unhealthy=%v: gate failed=%v (%v), want %v", tc.before, failed, err, tc.fails)
			}
		}
	})
}

// TestProducersWatchedWithoutDescribeProducers: on brokers without
// DescribeProducers (Kafka < 2.8) the detach gate watches the partitions'
// log end offsets: while one moves it holds and names the partition; once
// none moved for producer_idle it lets the run go on.
func TestProducersWatchedWithoutDescribeProducers(t *testing.T) {
	old := ports.BrokerRelease{Guess: "v2.7", IBP: "2.7-IV2"}
	t.Run("a producer that keeps writing holds the gate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, map[string]string{"producer_idle": "1s"})
			f.kafka.Release = old
			n := int64(0)
			f.kafka.EndsFn = func() map[int32]int64 { n++; return map[int32]int64{0: 10, 1: n, 2: 7} }
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			defer cancel()
			_, err := f.run(ctx, f.typing("orders"))
			if err == nil || !strings.Contains(err.Error(), "clients still attached") {
				t.Fatalf("the gate should hold while an end offset moves: %v", err)
			}
			if d := f.zk.Deleted(); len(d) != 0 {
				t.Fatalf("deleted %v while a producer was writing", d)
			}
			b, _ := os.ReadFile(f.journal())
			for _, want := range []string{"1 active producers (no DescribeProducers (Kafka \\u003c 2.8): log end offsets moved on partitions [1]", "method: producers: no DescribeProducers"} {
				if !bytes.Contains(b, []byte(want)) {
					t.Errorf("journal lacks %q:\n%s", want, b)
				}
			}
		})
	})
	t.Run("the run goes on once the producer stops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, map[string]string{"producer_idle": "1s"})
			f.kafka.Release = old
			n := int64(0)
			f.kafka.EndsFn = func() map[int32]int64 { n = min(n+1, 3); return map[int32]int64{0: 10, 1: n, 2: 7} }
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := f.run(ctx, f.typing("orders")); err != nil {
				t.Fatalf("run: %v", err)
			}
			b, _ := os.ReadFile(f.journal())
			for _, want := range []string{"log end offsets moved on partitions [1]", "(no DescribeProducers (Kafka \\u003c 2.8): log end offsets unchanged for"} {
				if !bytes.Contains(b, []byte(want)) {
					t.Errorf("journal lacks %q:\n%s", want, b)
				}
			}
			rep, _ := os.ReadFile(filepath.Join(f.dir, "report.md"))
			for _, want := range []string{"- kremedy: ", "## Findings after the run (diagnose, read-only)", "## Outage window", "## Time per step", "## The cluster as `preflight` found it", "- releases: broker [1 2 3]: Kafka v2.7, inter.broker.protocol.version 2.7-IV2", "- method: producers: no DescribeProducers"} {
				if !bytes.Contains(rep, []byte(want)) {
					t.Errorf("report lacks %q:\n%s", want, rep)
				}
			}
		})
	})
}

// TestHealthGateSaysWhatItWaitsFor: while the health gate waits, the run
// reports (every few seconds) which checks still fail and why.
func TestHealthGateSaysWhatItWaitsFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, map[string]string{"health_timeout": "7s"})
		f.kafka.Stale[1] = map[string]ports.TopicView{"orders-v2": {Name: "orders-v2", ID: steptest.V2ID, Partitions: map[int32]ports.PartitionView{0: {Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}}}}
		var mu sync.Mutex
		var progress []string
		out := f.s.Run(context.Background(), f.cluster, f.typing("orders"), steps.ReporterFunc(func(e steps.Event) {
			if e.Kind == steps.EvProgress {
				mu.Lock()
				progress = append(progress, e.Step+": "+e.Text)
				mu.Unlock()
			}
		}))
		if out.Failed != "start-brokers" {
			t.Fatalf("the gate should fail on a broker whose metadata never agrees: %+v", out)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, p := range progress {
			if strings.HasPrefix(p, "start-brokers: health gate, ") && strings.Contains(p, "waiting for: every broker's metadata agrees (") && strings.Contains(p, "broker 1") {
				return
			}
		}
		t.Fatalf("no progress line named what the gate waits for: %q", progress)
	})
}

// TestClientsAreStartedAgain: the clients the detach step stopped are
// started again after verify (with recreate), and stay stopped without it.
func TestClientsAreStartedAgain(t *testing.T) {
	for _, recreate := range []string{"true", "false"} {
		t.Run("recreate="+recreate, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, map[string]string{"recreate": recreate})
				c := ports.Client{Name: "orders-consumer", Host: "app1", Stop: "systemctl stop orders-consumer", Start: "systemctl start orders-consumer"}
				f.hosts.AddClient(c)
				f.cluster.Target.Clients = append(f.cluster.Target.Clients, c)
				out, err := f.run(context.Background(), f.typing("orders"))
				if err != nil {
					t.Fatalf("run: %v (%+v)", err, out)
				}
				want := []string{"orders-consumer: systemctl stop orders-consumer"}
				if recreate == "true" {
					want = append(want, "orders-consumer: systemctl start orders-consumer")
				}
				if !slices.Equal(f.hosts.ClientRuns, want) {
					t.Fatalf("client commands %q, want %q", f.hosts.ClientRuns, want)
				}
				if !slices.Contains(out.Done, "reattach-clients") {
					t.Fatalf("reattach-clients not done: %+v", out)
				}
			})
		})
	}
}

// TestOutageWindowIsConfirmedBeforeTheFirstStop: stop, wipe and start are
// planned and confirmed before any broker stops, then run back to back;
// a wipe whose plan changed after the stop (a directory appeared) is asked
// again instead of wiping what was not confirmed.
func TestOutageWindowIsConfirmedBeforeTheFirstStop(t *testing.T) {
	stops := func(f *fixture) int {
		n := 0
		for _, c := range f.hosts.Commands {
			if strings.Contains(c, "systemctl stop") {
				n++
			}
		}
		return n
	}
	t.Run("unchanged plans run without asking again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			asked := map[string]int{} // step -> stop commands run when it was asked
			a := approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
				asked[info.ID] = stops(f)
				f.asked = append(f.asked, info.ID)
				return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
			})
			if _, err := f.run(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"stop-brokers", "wipe-segments", "start-brokers"} {
				if n, ok := asked[id]; !ok || n != 0 {
					t.Fatalf("%s asked after %d stop commands (asked: %v)", id, n, f.asked)
				}
			}
			if c := strings.Count(strings.Join(f.asked, ","), "wipe-segments"); c != 1 {
				t.Fatalf("wipe-segments asked %d times: %v", c, f.asked)
			}
			b, _ := os.ReadFile(f.journal())
			if !bytes.Contains(b, []byte("confirmed before the window opened")) || !bytes.Contains(b, []byte(`"ahead":true`)) {
				t.Fatalf("the journal does not show the ahead confirmations:\n%s", b)
			}
		})
	})
	t.Run("a plan that changed after the stop is asked again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			f.hosts.OnStop = func(b int32) {
				if b == 3 { // a directory appears while the brokers stop (the hook runs under the fake's lock)
					f.hosts.FS[1]["/data/k2"]["orders-2.0123456789abcdef0123456789abcdef-delete"] = steptest.Entry{IsDir: true, TopicID: steptest.OldID}
				}
			}
			if _, err := f.run(context.Background(), f.typing("orders")); err != nil {
				t.Fatal(err)
			}
			if c := strings.Count(strings.Join(f.asked, ","), "wipe-segments"); c != 2 {
				t.Fatalf("wipe-segments asked %d times, want 2 (ahead, then again): %v", c, f.asked)
			}
			b, _ := os.ReadFile(f.journal())
			if !bytes.Contains(b, []byte("changed since it was confirmed before the window opened")) {
				t.Fatalf("the journal does not say why it asked again:\n%s", b)
			}
		})
	})
	t.Run("an abort ahead stops nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture(t, nil)
			a := approver(func(info steps.Info, _ *steps.Plan) steps.Approval {
				if info.ID == "wipe-segments" {
					return steps.Approval{Decision: steps.Abort, By: "test"}
				}
				return steps.Approval{Decision: steps.Approve, Typed: "orders", By: "test"}
			})
			_, err := f.run(context.Background(), a)
			if !errors.Is(err, steps.ErrAborted) || stops(f) != 0 {
				t.Fatalf("abort of the wipe ahead: %v, %d stop commands", err, stops(f))
			}
		})
	})
}

// TestStartParallelIsInThePlan: with start_parallel below the number of
// brokers, the start step's plan says how many start at a time, and the
// run still starts every broker.
func TestStartParallelIsInThePlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, map[string]string{"start_parallel": "2"})
		if _, err := f.run(context.Background(), f.typing("orders")); err != nil {
			t.Fatal(err)
		}
		if j := journalText(t, f); !strings.Contains(j, "the 3 start commands run 2 at a time (start_parallel)") {
			t.Fatalf("the start step's plan does not state the bound:\n%s", j)
		}
		for id := int32(1); id <= 3; id++ {
			if !f.hosts.Runs(id) {
				t.Fatalf("broker %d was not started", id)
			}
		}
	})
}
