package offline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	rb, err := runbooks.Get("offline-partitions")
	if err != nil {
		t.Fatal(err)
	}
	bound, err := rb.Bind(nil, "c")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := steps.Create(dir, bound, steps.Meta{ID: "off1", Runbook: rb.Name, Params: bound.Params, Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out := s.Run(context.Background(), c, approveAll{}, nil); out.Err == nil {
		t.Fatal("the run went on past a failed election")
	}
	if out := s.Run(context.Background(), c, approveAll{}, nil); out.Err != nil {
		t.Fatalf("resume: %v", out.Err)
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

// TestAfterReportsTheGroupsNotRead: a group whose coordinator is loading
// cannot be read (Groups answers ErrGroupsIncomplete beside the groups
// it read): offline-after still reports the group read past the new end,
// and says which group was not read instead of failing or staying silent.
func TestAfterReportsTheGroupsNotRead(t *testing.T) {
	c := offline.FakeCluster(t, true)
	k := c.Kafka.(*offline.KafkaFake)
	k.SetRun(map[int32]int64{1: 20, 2: 35, 4: 0}, 0)
	k.SetGroupsErr(fmt.Errorf("%w: group billing: OffsetFetch COORDINATOR_LOAD_IN_PROGRESS", ports.ErrGroupsIncomplete))
	rb, err := runbooks.Get("offline-partitions")
	if err != nil {
		t.Fatal(err)
	}
	bound, err := rb.Bind(nil, "c")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := steps.Create(dir, bound, steps.Meta{ID: "off1", Runbook: rb.Name, Params: bound.Params, Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out := s.Run(context.Background(), c, approveAll{}, nil); out.Err != nil {
		t.Fatalf("run: %v", out.Err)
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
