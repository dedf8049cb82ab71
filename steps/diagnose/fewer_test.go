package diagnose_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// TestFewerReplicasIsOneCause: hundreds of topics created with fewer
// replicas than the cluster's min.insync.replicas are one cause, naming
// how many and the config, with the fix that applies — never one "restore
// the missing replicas" per topic, since none is missing. A partition that
// really lost an in-sync replica is still its own finding.
func TestFewerReplicasIsOneCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.zk.Remove(kafkazk.DeleteTopicPath("orders"))
		f.kafka.Configs = map[string]string{"min.insync.replicas": "2"}
		const n = 300
		for i := range n {
			name := fmt.Sprintf("w%d", i)
			b := i%3 + 1
			f.zk.Put(kafkazk.TopicPath(name), fmt.Sprintf(`{"version":3,"partitions":{"0":[%d],"1":[%d]},"topic_id":"%022d"}`, b, b, i))
			for p := range 2 {
				f.zk.Put(kafkazk.PartitionStatePath(name, int32(p)), fmt.Sprintf(`{"controller_epoch":7,"leader":%d,"version":1,"leader_epoch":0,"isr":[%d]}`, b, b))
			}
		}
		// One real loss: orders-v2-1 keeps one in-sync replica of three.
		f.zk.Put(kafkazk.PartitionStatePath("orders-v2", 1), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":1,"isr":[2]}`)
		d, err := diagnose.Run(context.Background(), f.Ports, diagnose.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var fewer []diagnose.Finding
		underMin := map[string]bool{}
		for _, x := range d.Findings {
			switch x.Kind {
			case diagnose.FindFewerReplicas:
				fewer = append(fewer, x)
			case diagnose.FindUnderMinISR:
				underMin[x.Topic] = true
			}
		}
		if len(fewer) != 1 {
			t.Fatalf("%d fewer-replicas findings, want one cause: %v", len(fewer), kinds(d))
		}
		c := fewer[0]
		for _, w := range []string{"300 topics (600 partitions) have fewer replicas than the min.insync.replicas=2, the brokers' default", "no replica is missing"} {
			if !strings.Contains(c.Summary, w) {
				t.Errorf("summary %q lacks %q", c.Summary, w)
			}
		}
		if !strings.Contains(c.Fix, "--add-config min.insync.replicas=") || !strings.Contains(c.Fix, "kafka-reassign-partitions") || strings.Contains(c.Fix, "restore the missing replicas") || c.Runbook != "" {
			t.Errorf("fix %q (runbook %q)", c.Fix, c.Runbook)
		}
		if len(c.Evidence) != n || !strings.Contains(c.Evidence[0], "w0: 2 partitions of replication factor 1 < min.insync.replicas 2 (the brokers' default)") {
			t.Errorf("evidence: %d lines, first %q", len(c.Evidence), c.Evidence[0])
		}
		if len(underMin) != 1 || !underMin["orders-v2"] {
			t.Errorf("under-min-isr findings on %v, want orders-v2's only", underMin)
		}
		if causes := d.Causes(); len(causes) > 5 {
			t.Errorf("%d causes: %v", len(causes), kinds(d))
		}
	})
}
