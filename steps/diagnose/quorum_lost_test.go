package diagnose

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestQuorumLostVoterByVoter: a static quorum of three with two voters
// stopped — one whose metadata log is whole on disk, one whose log
// directory is gone — is a lost quorum that comes back without loss by
// starting the first: the finding says so voter by voter, from each
// controller's config and its metadata log read over the hosts (a real
// shell on temporary files). With the whole one's log gone too, a majority
// cannot come back as it was, and the fix says it is a recovery.
func TestQuorumLostVoterByVoter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gone    []int // controllers (1..3) whose metadata log directory is gone
		fix     string
		brokers string
	}{
		{"one log gone", []int{3}, "start controllers [3002] with their metadata logs as they are", "[3002 3003]"},
		{"two logs gone", []int{2, 3}, "a majority cannot come back as it was", "[3002 3003]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := steptest.KRaft(t)
			root := t.TempDir()
			voters := "3001@c1:9093,3002@c2:9093,3003@c3:9093"
			for i := range c.Ports.Target.Controllers {
				h := &c.Ports.Target.Controllers[i]
				dir := filepath.Join(root, fmt.Sprint(h.ID))
				meta := filepath.Join(dir, MetadataLogDir)
				must(t, os.MkdirAll(meta, 0o755))
				h.Config = filepath.Join(dir, "controller.properties")
				must(t, os.WriteFile(h.Config, []byte("process.roles=controller\nnode.id="+fmt.Sprint(h.ID)+"\ncontroller.quorum.voters="+voters+"\nmetadata.log.dir="+dir+"\n"), 0o644))
				must(t, os.WriteFile(filepath.Join(meta, "00000000000000000000.log"), []byte("x"), 0o644))
				must(t, os.WriteFile(filepath.Join(meta, "quorum-state"), []byte(`{"leaderId":3001,"leaderEpoch":7,"votedId":-1,"appliedOffset":0,"data_version":1}`), 0o644))
				for _, k := range tc.gone {
					if h.ID == int32(3000+k) {
						must(t, os.RemoveAll(meta))
					}
				}
			}
			c.Hosts.Local = func(_ int32, cmd string) bool { return strings.Contains(cmd, root) }
			c.Hosts.Running[3002], c.Hosts.Running[3003] = false, false
			c.Kafka.SetQuorum(&ports.Quorum{Leader: -1, Epoch: 8})
			d, err := Run(context.Background(), c.Ports, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var f *Finding
			for i := range d.Findings {
				if d.Findings[i].Kind == FindQuorumLost {
					f = &d.Findings[i]
				}
			}
			if f == nil || fmt.Sprint(f.Brokers) != tc.brokers || f.Severity != Critical || d.Healthy {
				t.Fatalf("want a critical %s naming %s, got %+v", FindQuorumLost, tc.brokers, d.Findings)
			}
			all := f.Summary + "\n" + strings.Join(f.Evidence, "\n") + "\n" + f.Fix
			want := []string{tc.fix, "a static quorum: controller.quorum.voters on controller 3001 names [3001 3002 3003]",
				"controller 3001 (c1): its listener c1:9093 accepts connections",
				"quorum-state: leader 3001, epoch 7", "is GONE (no directory)", "counted: the voters of controller.quorum.voters"}
			for _, w := range want {
				if !strings.Contains(all, w) {
					t.Errorf("the finding does not say %q:\n%s", w, all)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestQuorumLostExplains: with the quorum lost, the brokers' metadata
// disagreeing and a fenced broker are its consequences, not causes of
// their own (their fixes — restart the broker that lags — would leave a
// broker that cannot register); an offline partition is not folded.
func TestQuorumLostExplains(t *testing.T) {
	fs := linkCauses([]Finding{
		{Kind: FindDisagreement, Brokers: []int32{1, 2, 3}},
		{Kind: FindBrokerFenced, Brokers: []int32{2}},
		{Kind: FindOffline, Topic: "pay", Brokers: []int32{3}, Partitions: []int32{0}},
		{Kind: FindQuorumLost, Brokers: []int32{3001, 3003}},
	})
	for _, f := range fs {
		want := ""
		if f.Kind == FindDisagreement || f.Kind == FindBrokerFenced {
			want = "quorum-lost/3001,3003"
		}
		if f.Cause != want {
			t.Errorf("%s: cause %q, want %q", f.Kind, f.Cause, want)
		}
	}
}
