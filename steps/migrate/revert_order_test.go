package migrate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestNewestFirst: the revert's back-to-zookeeper roll takes the brokers
// registered last first (the lab's failed run: 1 at 04:07:34, 3 at
// 04:07:28, 2 at 04:07:21 → 1, 3, 2); a broker whose registration is
// gone or has no timestamp is left to the roll's own order.
func TestNewestFirst(t *testing.T) {
	zk := steptest.NewZK(t, "")
	reg := func(id int32, ts string) {
		zk.Put(fmt.Sprintf("%s/%d", kafkazk.BrokerIDsPath, id), fmt.Sprintf(`{"version":5,"host":"b%d","port":9092,"endpoints":["PLAINTEXT://b%d:9092"],"timestamp":"%s"}`, id, id, ts))
	}
	reg(1, "1796529254400")
	reg(2, "1796529241600")
	reg(3, "1796529248500")
	reg(4, "")
	target := ports.Target{Hosts: []ports.Host{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}, {ID: 5}}}
	env := &steps.Env{Cluster: ports.Cluster{Target: target, ZK: zk}}
	ids, why := newestFirst(context.Background(), env)
	if !slices.Equal(ids, []int32{1, 3, 2}) || !strings.Contains(why, "[1 3 2]") {
		t.Fatalf("newestFirst: %v (%s), want [1 3 2]", ids, why)
	}
	if ids, why := newestFirst(context.Background(), &steps.Env{Cluster: ports.Cluster{Target: ports.Target{Hosts: []ports.Host{{ID: 5}}}, ZK: zk}}); ids != nil || why != "" {
		t.Errorf("no registration read: %v %q", ids, why)
	}
}
