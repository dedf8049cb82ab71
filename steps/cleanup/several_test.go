package cleanup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/cleanup"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/steptest"
)

const (
	payID    = "DDDDDDDDDDDDDDDDDDDDDD"
	payOldID = "EEEEEEEEEEEEEEEEEEEEEE"
	audID    = "FFFFFFFFFFFFFFFFFFFFFF"
	audOldID = "GGGGGGGGGGGGGGGGGGGGGG"
)

// threeGhosts is the ghost-topic state with two more ghosts of the same
// outage, payments and audit, and a run of topic-cleanup on all three.
func threeGhosts(t *testing.T, params map[string]string) *fixture {
	t.Helper()
	g := steptest.Ghost(t)
	g.AddGhost("payments", payID, payOldID)
	g.AddGhost("audit", audID, audOldID)
	set := map[string]string{"topics": "orders,payments,audit"}
	for k, v := range params {
		set[k] = v
	}
	return fixtureOn(t, g, set)
}

func (f *fixture) brokerCommands(what string) []string {
	var out []string
	for _, c := range f.hosts.Commands {
		if strings.Contains(c, "systemctl "+what) {
			out = append(out, c)
		}
	}
	return out
}

// TestSeveralGhostsInOneOutage: three ghosts repaired by one run: every
// topic's znodes deleted (one backup of all), every broker stopped once
// and started once, every topic's directories quarantined, each recreated
// and proven; the confirmation is the cluster's name.
func TestSeveralGhostsInOneOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := threeGhosts(t, map[string]string{"recreate": "true"})
		if f.rb.Confirm.Word != "test" || f.rb.Confirm.Noun != "cluster" {
			t.Fatalf("confirmation %+v, want the cluster's name", f.rb.Confirm)
		}
		var summaries []string
		out := f.s.Run(context.Background(), f.cluster, approver(func(info steps.Info, p *steps.Plan) steps.Approval {
			summaries = append(summaries, info.ID+": "+p.Summary)
			return steps.Approval{Decision: steps.Approve, Typed: "test", By: "test"}
		}), nil)
		if out.Err != nil {
			t.Fatalf("run: %v (%+v)", out.Err, out)
		}
		jr, err := os.ReadFile(f.journal())
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(summaries, "\n") + string(jr)
		for _, w := range []string{`are inconsistent across ZooKeeper, broker caches and disks: the cleanup applies to all 3, with one stop and one start of every broker`,
			`back up, then delete 30 znodes of "orders", "payments" and "audit"`, `move every partition directory of "orders", "payments" and "audit" out of every log dir`,
			`recreate "orders", "payments" and "audit" and prove each is new and healthy everywhere`} {
			if !strings.Contains(all, w) {
				t.Errorf("the plans lack %q:\n%s", w, all)
			}
		}
		if s, st := f.brokerCommands("stop"), f.brokerCommands("start"); len(s) != 3 || len(st) != 3 {
			t.Fatalf("stops %v starts %v: want each broker stopped and started once", s, st)
		}
		for _, topic := range []string{"orders", "payments", "audit"} {
			if f.zk.Has(kafkazk.DeleteTopicPath(topic)) || !slices.Contains(f.zk.Deleted(), kafkazk.ConfigTopicPath(topic)) {
				t.Errorf("the znodes of %s were not deleted: %v", topic, f.zk.Deleted())
			}
			for id := int32(1); id <= 3; id++ {
				q := f.hosts.Names(id, "/data/kremedy-quarantine/run1/k1")
				if !slices.Contains(q, topic+"-0") || !slices.Contains(q, topic+"-2") {
					t.Errorf("broker %d: %s not quarantined: %v", id, topic, q)
				}
			}
		}
		if !f.zk.Has(kafkazk.TopicPath("orders-v2")) || len(f.hosts.Names(1, "/data/k2")) != 4 {
			t.Fatal("the bystander orders-v2 was touched")
		}
		var bk cleanup.Backup
		if b, err := os.ReadFile(f.artifact("backup")); err != nil || json.Unmarshal(b, &bk) != nil {
			t.Fatalf("backup: %v", err)
		}
		if !slices.Equal(bk.Topics, []string{"orders", "payments", "audit"}) || len(bk.Nodes) != 30 {
			t.Fatalf("backup topics %v, %d nodes", bk.Topics, len(bk.Nodes))
		}
		if len(f.kafka.Created) != 3 || f.kafka.Canaries != 3 {
			t.Fatalf("recreate: created %v canaries %d", f.kafka.Created, f.kafka.Canaries)
		}
		// Undo: both restores bring all three back.
		for id := int32(1); id <= 3; id++ {
			f.hosts.Running[id] = false
			f.zk.Remove(fmt.Sprintf("/brokers/ids/%d", id))
		}
		for _, tp := range []string{"orders", "payments", "audit"} { // the recreated ones
			f.zk.Remove(kafkazk.TopicPath(tp))
			f.zk.Remove(kafkazk.ConfigTopicPath(tp))
		}
		var log strings.Builder
		if err := cleanup.RestoreZnodes(context.Background(), f.zk, f.artifact("backup"), false, &log); err != nil {
			t.Fatalf("restore znodes: %v\n%s", err, log.String())
		}
		if !strings.Contains(log.String(), `restored 30 znodes of "orders", "payments" and "audit"`) {
			t.Errorf("restore said:\n%s", log.String())
		}
		for _, tp := range []string{"orders", "payments", "audit"} {
			if !f.zk.Has(kafkazk.DeleteTopicPath(tp)) || !f.zk.Has(kafkazk.PartitionStatePath(tp, 2)) {
				t.Errorf("%s not restored", tp)
			}
		}
	})
}

// TestSeveralTopicsConfirmedByTheClusterName: the topic's own name is not
// the word of a several-topic run.
func TestSeveralTopicsConfirmedByTheClusterName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := threeGhosts(t, nil)
		if _, err := f.run(context.Background(), f.typing("orders")); !errors.Is(err, steps.ErrNotApproved) {
			t.Fatalf("typing a topic's name: %v", err)
		}
		if f.zk.Deleted() != nil {
			t.Fatalf("deleted %v", f.zk.Deleted())
		}
	})
}

// TestSeveralTopicsRefuseAHealthyOrUnknownOne: preflight refuses the whole
// run before anything changes, naming each topic that is healthy or does
// not exist and the run without them.
func TestSeveralTopicsRefuseAHealthyOrUnknownOne(t *testing.T) {
	for name, tc := range map[string]struct {
		topics string
		want   []string
	}{
		"a healthy one":  {"orders,orders-v2", []string{`"orders-v2" is healthy`, "kremedy does not touch a healthy topic", "run again with the ones that need it: --set topics=orders"}},
		"an unknown one": {"ordrs,orders", []string{`no topic "ordrs" exists on this cluster`, `Closest existing names: "orders"`, "--set topics=orders"}},
		"none needs it":  {"orders-v2,nope", []string{`"orders-v2" is healthy`, `no topic "nope"`, "none of them needs a cleanup"}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, map[string]string{"topics": tc.topics})
				out, err := f.run(context.Background(), f.typing("test"))
				if !errors.Is(err, steps.ErrRefused) || out.Failed != "preflight" {
					t.Fatalf("want preflight refused, got %+v %v", out, err)
				}
				for _, w := range append(tc.want, "Nothing was touched: a run that names several topics cleans up every one or none") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("refusal lacks %q:\n%v", w, err)
					}
				}
				if f.zk.Deleted() != nil || len(f.brokerCommands("stop")) > 0 {
					t.Fatalf("something changed: deleted %v, commands %v", f.zk.Deleted(), f.hosts.Commands)
				}
			})
		})
	}
}

// TestTopicOptionsAreChecked: topic or topics, never both or neither, and
// never * or an internal topic.
func TestTopicOptionsAreChecked(t *testing.T) {
	rb, err := runbooks.Get("topic-cleanup")
	if err != nil {
		t.Fatal(err)
	}
	for set, want := range map[string]string{
		"":                                 "no topic to clean up: set --set topic=NAME, or several at once with --set topics=a,b,c",
		"topic=a,topics=b,c":               "topic=a and topics=b,c are both set: set one",
		"topics=*":                         "topics=*: name each topic to clean up",
		"topics=orders,__consumer_offsets": "is internal to Kafka",
	} {
		vals := map[string]string{}
		if set != "" {
			k1, rest, _ := strings.Cut(set, ",topics=")
			k, v, _ := strings.Cut(k1, "=")
			vals[k] = v
			if rest != "" {
				vals["topics"] = rest
			}
		}
		if _, err := rb.Bind(vals, "test"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Bind(%v) = %v, want %q", vals, err, want)
		}
	}
}

// TestSeveralGhostsRolling: rolling mode repairs the three in one roll:
// each broker restarted once, every topic's directories moved while it is
// stopped.
func TestSeveralGhostsRolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := threeGhosts(t, map[string]string{"mode": "rolling"})
		f.kafka.Configs = map[string]string{"min.insync.replicas": "1"}
		if _, err := f.run(context.Background(), f.typing("test")); err != nil {
			t.Fatalf("run: %v\n%s", err, strings.Join(f.hosts.Commands, "\n"))
		}
		if s, st := f.brokerCommands("stop"), f.brokerCommands("start"); len(s) != 3 || len(st) != 3 {
			t.Fatalf("stops %v starts %v: want each broker restarted once", s, st)
		}
		for id := int32(1); id <= 3; id++ {
			for _, n := range f.hosts.Names(id, "/data/k1") {
				if strings.HasPrefix(n, "orders-") || strings.HasPrefix(n, "payments-") || strings.HasPrefix(n, "audit-") {
					t.Errorf("broker %d kept %s", id, n)
				}
			}
		}
	})
}
