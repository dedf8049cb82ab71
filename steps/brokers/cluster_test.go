package brokers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/steptest"
)

// TestCheckClusterAfterAMigration: /migration tells three stories, and the
// refusal names the right one — migrating (a KRaft controller holds
// /controller while brokers still register), migrated (no broker registers
// any more: use the KRaft inventory), or a leftover of a reverted attempt
// (a ZooKeeper broker is controller).
func TestCheckClusterAfterAMigration(t *testing.T) {
	const mig = `{"version":0,"kraft_metadata_offset":42,"kraft_metadata_epoch":1,"kraft_controller_id":3001,"kraft_controller_epoch":7}`
	for name, tc := range map[string]struct {
		controller string
		noBrokers  bool
		want       string
	}{
		"migrating": {`{"version":2,"brokerid":3001,"kraftControllerEpoch":7}`, false, "the cluster is migrating from ZooKeeper to KRaft"},
		"migrated":  {`{"version":2,"brokerid":3001,"kraftControllerEpoch":7}`, true, "this cluster runs in KRaft mode since its migration"},
		"leftover":  {`{"version":2,"brokerid":3,"kraftControllerEpoch":-1}`, false, "left from an earlier, reverted migration attempt"},
	} {
		t.Run(name, func(t *testing.T) {
			g := steptest.Ghost(t)
			g.ZK.Put("/migration", mig).Put("/controller", tc.controller)
			if tc.noBrokers {
				for _, id := range []string{"1", "2", "3"} {
					g.ZK.Remove("/brokers/ids/" + id)
				}
			}
			_, passed, err := brokers.CheckCluster(context.Background(), g.ZK, "zk:2181/kafka", "inv.yaml", "", "nothing may change")
			if !errors.Is(err, ports.ErrRefused) || passed != "" || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Nothing was changed") {
				t.Fatalf("%v (passed %q), want a refusal saying %q", err, passed, tc.want)
			}
			if name == "migrated" && !strings.Contains(err.Error(), "inventory-kraft.yaml") {
				t.Errorf("the migrated refusal does not say where the KRaft inventory comes from: %v", err)
			}
		})
	}
}
