package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/steptest"
)

// oneBrokerDown is a fake cluster of 3 brokers and n topics of 3
// partitions replicated on every broker, with broker 1 down (the controller
// moved leadership and shrank every ISR): what an operator sees after one
// broker dies on a cluster with many topics.
func oneBrokerDown(t *testing.T, n int) *steptest.Cluster {
	g := steptest.Ghost(t)
	for _, p := range []string{kafkazk.TopicPath("orders"), kafkazk.ConfigTopicPath("orders"), kafkazk.DeleteTopicPath("orders"), kafkazk.TopicPath("orders-v2"), kafkazk.ConfigTopicPath("orders-v2")} {
		g.ZK.Remove(p)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("events-%03d", i)
		g.ZK.Put(kafkazk.TopicPath(name), fmt.Sprintf(`{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},"topic_id":"%022d"}`, i))
		for p := 0; p < 3; p++ {
			g.ZK.Put(kafkazk.PartitionStatePath(name, int32(p)), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":1,"isr":[2,3]}`)
		}
	}
	g.Hosts.Running[1] = false
	g.ZK.Remove("/brokers/ids/1")
	return g
}

// TestDiagnoseLeadsWithTheCause is the golden output of "one broker down on
// a cluster with many topics": one cause (broker 1 is down) on the first
// screen, every per-topic finding folded under it, no cleanup suggested.
// `go test ./cmd/kremedy -run TestDiagnoseLeadsWithTheCause -update` rewrites it.
func TestDiagnoseLeadsWithTheCause(t *testing.T) {
	g := oneBrokerDown(t, 300)
	d, err := diagnose.Run(context.Background(), g.Ports, diagnose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Took = "0.1s"
	causes := d.Causes()
	if len(causes) != 1 || causes[0].Kind != diagnose.FindBrokerDown || len(d.Findings) != 601 {
		t.Fatalf("causes %d (%v), findings %d: want broker-down alone, explaining 300 under-replicated and 300 unregistered-replica", len(causes), causes, len(d.Findings))
	}
	for _, f := range d.Findings {
		if f.Runbook != "" || strings.Contains(f.Fix, "topic-cleanup") {
			t.Fatalf("%s suggests a runbook for a broker that is simply down: %s", f.ID, f.Fix)
		}
	}
	var out bytes.Buffer
	printDiagnosis(&out, d, false)
	if lines := strings.Count(out.String(), "\n"); lines > 40 {
		t.Fatalf("the bounded output is %d lines:\n%s", lines, out.String())
	}
	golden.RequireEqual(t, out.Bytes())
}
