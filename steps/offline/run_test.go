package offline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/offline"
	"github.com/kremedy/kremedy/steps/ports"
)

type approveAll struct{}

func (approveAll) Approve(_ context.Context, _ steps.Info, p *steps.Plan) (steps.Approval, error) {
	return steps.Approval{Decision: steps.Approve, Typed: "c", By: "test", Digest: p.Digest()}, nil
}

// TestRunElectsTheLongestLiveLogAndResumes runs the real offline-partitions
// runbook: the first election fails (the run stops), the resume elects
// broker 2 on pay-0 — Kafka's own pick would be broker 1 — without
// reordering again; the report states the records lost and the group
// committed past the new end.
func TestRunElectsTheLongestLiveLogAndResumes(t *testing.T) {
	c := offline.FakeCluster(t, true)
	k := c.Kafka.(*offline.KafkaFake)
	k.SetRun(map[int32]int64{1: 20, 2: 35, 4: 0}, 1)
	k.LagViews(3) // the metadata catches up with the reorder a moment later
	s, dir := offlineSession(t, "off1")
	if out := s.Run(context.Background(), c, approveAll{}, nil); out.Err == nil {
		t.Fatal("the run went on past a failed election")
	}
	// The group committed past the elected end is a failed check of the
	// last step: the run says a reset is needed (kremedy resets nothing).
	if out := s.Run(context.Background(), c, approveAll{}, nil); out.Failed != "after" || !errors.Is(out.Err, steps.ErrCheckFailed) {
		t.Fatalf("resume: %+v, want the after step's check to fail on group readers", out)
	}
	for p := int32(0); p < 2; p++ {
		if pv := k.Partition(p); pv.Leader != 2 {
			t.Errorf("pay-%d: leader %d, want broker 2 (replicas %v)", p, pv.Leader, pv.Replicas)
		}
	}
	if k.Reorders() != 1 {
		t.Errorf("%d reorders, want 1 (the resume found pay-0 reordered already)", k.Reorders())
	}
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"pay-0: elected broker 2 (log end 35): at least 10 records lost (offsets 35 to 44)", "records lost in all: 15",
		"group readers is committed at 45 on pay-0, past its new end 35: it needs a reset to 35"} {
		if !strings.Contains(string(rep), w) {
			t.Errorf("report lacks %q:\n%s", w, rep)
		}
	}
}

// approveElectAfter approves every plan; right after approving the first
// plan of the elect step it runs then (the cluster changes between the
// confirmation and the election). It keeps the elect plans it saw.
type approveElectAfter struct {
	then  func()
	plans []*steps.Plan
}

func (a *approveElectAfter) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	if info.ID == "elect" {
		a.plans = append(a.plans, p)
		if len(a.plans) == 1 {
			a.then()
		}
	}
	return steps.Approval{Decision: steps.Approve, Typed: "c", By: "test", Digest: p.Digest()}, nil
}

// TestElectReplansWhenTheChosenLeaderDiesAfterTheConfirmation: broker 2,
// the longest live log, dies (host too) after the confirmation: Kafka
// would elect broker 1 (the next live replica, a shorter log) and lose
// more than the plan listed. The election is not asked; the step plans
// again, and the new plan (broker 1, its larger loss) is confirmed before
// it runs.
func TestElectReplansWhenTheChosenLeaderDiesAfterTheConfirmation(t *testing.T) {
	c := offline.FakeCluster(t, true)
	k := c.Kafka.(*offline.KafkaFake)
	k.SetRun(map[int32]int64{1: 20, 2: 35, 4: 0}, 0)
	a := &approveElectAfter{then: func() { offline.Kill(c, 2) }}
	rb, err := runbooks.Get("offline-partitions")
	if err != nil {
		t.Fatal(err)
	}
	bound, err := rb.Bind(nil, "c")
	if err != nil {
		t.Fatal(err)
	}
	s, err := steps.Create(t.TempDir(), bound, steps.Meta{ID: "off2", Runbook: rb.Name, Params: bound.Params, Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out := s.Run(context.Background(), c, a, nil); out.Failed == "elect" {
		t.Fatalf("elect failed: %v", out.Err)
	}
	if len(a.plans) != 2 {
		t.Fatalf("%d elect plans confirmed, want 2 (the second after broker 2 died)", len(a.plans))
	}
	if k.Elections() != 1 {
		t.Errorf("%d elections asked, want 1 (none on the stale plan)", k.Elections())
	}
	if w := "pay-0: elect broker 1 (log end 20; Kafka alone would pick broker 1): LOSES at least 25 records"; !strings.Contains(strings.Join(a.plans[1].Notes, "\n"), w) {
		t.Errorf("the second plan lacks %q:\n%s", w, strings.Join(a.plans[1].Notes, "\n"))
	}
	for p := int32(0); p < 2; p++ {
		if pv := k.Partition(p); pv.Leader != 1 {
			t.Errorf("pay-%d: leader %d, want broker 1 (replicas %v)", p, pv.Leader, pv.Replicas)
		}
	}
}

// TestAfterComparesGroupsWithTheElectedEnd: producers wrote on after the
// election (the log ends at 50, past the group's commit at 45): the group
// is still past the elected end, 35, and its consumers would silently skip
// offsets 35 to 44; the step fails its check and names the reset to 35.
func TestAfterComparesGroupsWithTheElectedEnd(t *testing.T) {
	c := offline.FakeCluster(t, true)
	k := c.Kafka.(*offline.KafkaFake)
	k.SetRun(map[int32]int64{1: 20, 2: 50, 4: 0}, 0)
	s, dir := offlineSession(t, "off3")
	out := s.Run(context.Background(), c, approveAll{}, nil)
	if out.Failed != "after" || !errors.Is(out.Err, steps.ErrCheckFailed) {
		t.Fatalf("outcome %+v, want the after step's check to fail on group readers", out)
	}
	for _, w := range []string{"group readers is committed at 45 on pay-0, past its new end 35: it needs a reset to 35 (the log has grown past 45 since the election (it ends at 50), so its consumers go on from there and silently skip offsets 35 to 44",
		"--topic pay:0 --reset-offsets --to-offset 35 --execute"} {
		if !strings.Contains(out.Err.Error(), w) {
			t.Errorf("the failed check lacks %q:\n%v", w, out.Err)
		}
	}
	// The plan says what a secured cluster's CLI needs beside the command.
	if j, err := os.ReadFile(filepath.Join(dir, "journal.jsonl")); err != nil || !strings.Contains(string(j), "add --command-config with your own client properties file") {
		t.Errorf("the after step's plan does not say --command-config (%v)", err)
	}
}

// TestAfterReportsTheGroupsNotRead: a group whose coordinator is loading
// cannot be read (Groups answers ErrGroupsIncomplete beside the groups
// it read): offline-after still names the group read past the elected end
// (its check fails, as it must), and the report says which group was not
// read instead of staying silent.
func TestAfterReportsTheGroupsNotRead(t *testing.T) {
	c := offline.FakeCluster(t, true)
	k := c.Kafka.(*offline.KafkaFake)
	k.SetRun(map[int32]int64{1: 20, 2: 35, 4: 0}, 0)
	k.SetGroupsErr(fmt.Errorf("%w: group billing: OffsetFetch COORDINATOR_LOAD_IN_PROGRESS", ports.ErrGroupsIncomplete))
	s, dir := offlineSession(t, "off4")
	if out := s.Run(context.Background(), c, approveAll{}, nil); out.Failed != "after" || !errors.Is(out.Err, steps.ErrCheckFailed) {
		t.Fatalf("outcome %+v, want the after step's check to fail on group readers", out)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"group readers is committed at 45 on pay-0", "not every group read", "group billing: OffsetFetch COORDINATOR_LOAD_IN_PROGRESS"} {
		if !strings.Contains(string(rep), w) {
			t.Errorf("report lacks %q:\n%s", w, rep)
		}
	}
}

// TestAfterReportsOpenTransactionsApart: an open transaction on an
// elected partition is reported with its abort command under its own
// heading, never counted as a consumer group past the end.
func TestAfterReportsOpenTransactionsApart(t *testing.T) {
	c := offline.FakeCluster(t, true)
	k := c.Kafka.(*offline.KafkaFake)
	k.SetRun(map[int32]int64{1: 20, 2: 50, 4: 0}, 0)
	k.SetProducers([]ports.ProducerUse{{Topic: "pay", Partition: 0, ProducerID: 7, TxnStart: 30}})
	s, dir := offlineSession(t, "off-txn")
	s.Run(context.Background(), c, approveAll{}, nil)
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := string(rep)
	groups, txns := section(r, "Consumer groups past the new log end"), section(r, "Open transactions on the elected partitions")
	if !strings.Contains(txns, "1 found") || !strings.Contains(txns, "producer 7 has a transaction open on pay-0 since offset 30 (whether it hangs was not checked") || !strings.Contains(txns, "abort --topic pay --partition 0 --start-offset 30") {
		t.Errorf("the report's transactions:\n%s", txns)
	}
	if strings.Contains(groups, "producer 7") || groups == "" {
		t.Errorf("the report's groups past the end:\n%s", groups)
	}
}

// TestAfterJudgesTransactionsByTheirCoordinator: of three transactions
// open on elected partitions, the one its coordinator has ongoing on the
// partition is not hanging; the one whose coordinator completed it (the
// unclean election lost its marker) hangs: the after step's check fails,
// naming the abort and the last stable offset held; one that a second
// read no longer finds open (its marker came) is not called hanging.
func TestAfterJudgesTransactionsByTheirCoordinator(t *testing.T) {
	// The 2 s re-read runs on the bubble's clock.
	synctest.Test(t, func(t *testing.T) {
		open := []ports.ProducerUse{
			{Topic: "pay", Partition: 0, ProducerID: 7, Epoch: 3, TxnStart: 30},
			{Topic: "pay", Partition: 1, ProducerID: 8, Epoch: 1, TxnStart: 12},
			{Topic: "pay", Partition: 2, ProducerID: 9, Epoch: 0, TxnStart: 5},
		}
		txns := map[int64]ports.TxnState{
			7: {TxnID: "orders-tx", State: "Ongoing", ProducerEpoch: 3, Partitions: map[string][]int32{"pay": {0}}},
			8: {TxnID: "billing-tx", State: "CompleteCommit", ProducerEpoch: 1},
			9: {TxnID: "late-tx", State: "CompleteAbort", ProducerEpoch: 0},
		}
		// The second read: 9's marker has come, 8's has not.
		later := []ports.ProducerUse{open[0], open[1], {Topic: "pay", Partition: 2, ProducerID: 9, Epoch: 0, TxnStart: -1}}
		c := offline.FakeCluster(t, true)
		k := c.Kafka.(*offline.KafkaFake)
		k.SetRun(map[int32]int64{1: 20, 2: 50, 4: 0}, 0)
		k.SetProducers(open)
		c = offline.WithTxns(c, txns, later)
		s, dir := offlineSession(t, "off-hang")
		if out := s.Run(context.Background(), c, approveAll{}, nil); out.Err == nil || out.Failed != "after" || !strings.Contains(out.Err.Error(), "no hanging transaction of producer 8 on pay-1") || strings.Contains(out.Err.Error(), "pay-0 (kremedy") {
			t.Fatalf("want the after step failing on pay-1's hanging transaction (only): %+v", out)
		}
		rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		txt := section(string(rep), "Open transactions on the elected partitions")
		for _, want := range []string{
			"producer 7 has a transaction open on pay-0 since offset 30; its coordinator has it in progress: not hanging",
			`producer 8's transaction on pay-1, open since offset 12, HANGS: its coordinator has transaction "billing-tx" CompleteCommit (producer epoch 1), so it writes no marker to pay-1`,
			"last stable offset stays at 12",
			"abort --topic pay --partition 1 --start-offset 12",
		} {
			if !strings.Contains(txt, want) {
				t.Errorf("the report does not say %q:\n%s", want, txt)
			}
		}
		if strings.Contains(txt, "producer 9's transaction") && strings.Contains(txt, "HANGS: its coordinator has transaction \"late-tx\"") {
			t.Errorf("a transaction whose marker came on the second read is called hanging:\n%s", txt)
		}
	})
}

// TestAfterDoesNotJudgeWhenTheRereadFails: a transaction seen hanging
// once, whose re-read fails, is reported not judged, with find-hanging and
// the abort; it fails no check (a state seen once does not count).
func TestAfterDoesNotJudgeWhenTheRereadFails(t *testing.T) {
	// The 2 s re-read runs on the bubble's clock.
	synctest.Test(t, func(t *testing.T) {
		c := offline.FakeCluster(t, true)
		k := c.Kafka.(*offline.KafkaFake)
		k.SetRun(map[int32]int64{1: 20, 2: 50, 4: 0}, 0)
		k.SetProducers([]ports.ProducerUse{{Topic: "pay", Partition: 1, ProducerID: 8, Epoch: 1, TxnStart: 12}})
		k.FailTxnsAfter(1)
		c = offline.WithTxns(c, map[int64]ports.TxnState{8: {TxnID: "billing-tx", State: "CompleteCommit", ProducerEpoch: 1}}, nil)
		s, dir := offlineSession(t, "off-unsure")
		if out := s.Run(context.Background(), c, approveAll{}, nil); out.Err != nil && strings.Contains(out.Err.Error(), "hanging transaction") {
			t.Fatalf("a transaction seen hanging once failed a check: %v", out.Err)
		}
		rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		txt := section(string(rep), "Open transactions on the elected partitions")
		for _, want := range []string{"was seen hanging once", "re-read 2s later failed (describe transactions: COORDINATOR_LOAD_IN_PROGRESS)", "find-hanging --broker-id N", "abort --topic pay --partition 1 --start-offset 12"} {
			if !strings.Contains(txt, want) {
				t.Errorf("the report does not say %q:\n%s", want, txt)
			}
		}
	})
}

// TestRunWaitsForTheDeadBrokerWhoseHostAnswers: the dead last leader's
// host answers and its log is the longest: the run shows the survey (every
// replica's end, what electing without it loses) and fails there, exit 1,
// naming the start and lost_brokers; nothing is reordered or elected.
// Before, it ended as if it had nothing to do (exit 0) with every
// partition still offline.
func TestRunWaitsForTheDeadBrokerWhoseHostAnswers(t *testing.T) {
	c := offline.FakeCluster(t, false)
	k := c.Kafka.(*offline.KafkaFake)
	s, _ := offlineSession(t, "off-wait")
	out := s.Run(context.Background(), c, approveAll{}, nil)
	if out.Failed != "survey" || !errors.Is(out.Err, steps.ErrCheckFailed) || !strings.Contains(out.Err.Error(), "start them — nothing is lost") || !strings.Contains(out.Err.Error(), "--set lost_brokers=3") {
		t.Fatalf("want the survey failing, naming the start and lost_brokers: %+v", out)
	}
	if k.Reorders() != 0 || k.Elections() != 0 {
		t.Fatalf("%d reorders and %d elections while waiting for broker 3", k.Reorders(), k.Elections())
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

// offlineSession is a new run of offline-partitions in a temporary dir,
// closed at the test's end.
func offlineSession(t *testing.T, id string) (*steps.Session, string) {
	t.Helper()
	rb, err := runbooks.Get("offline-partitions")
	if err != nil {
		t.Fatal(err)
	}
	bound, err := rb.Bind(nil, "c")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := steps.Create(dir, bound, steps.Meta{ID: id, Runbook: rb.Name, Params: bound.Params, Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}
