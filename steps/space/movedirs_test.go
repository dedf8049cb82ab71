package space_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

// TestMoveDirsGoesFirst: broker 1 runs with /data/k1 full; what its other
// dir /data/k2 is decides what move-dirs plans, and free-records deletes
// only when a dir is still full after it.
func TestMoveDirsGoesFirst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		k2        []string
		offline   bool
		moves     []string // AlterReplicaLogDirs sent
		deleted   []string // DeleteRecords sent
		fact      string   // a fact of move-dirs' plan
		rollbacks bool     // the plan says the move back
	}{
		{name: "room on another filesystem: the largest replica moves, nothing is deleted",
			k2:    []string{"df /dev/sdc 1048576 10240 1038336 1% /data/k2"},
			moves: []string{"1:orders-0>/data/k2"}, rollbacks: true},
		{name: "a target keeps its headroom: no replica fits, records are deleted instead",
			k2:      []string{"df /dev/sdc 8192 5192 3000 64% /data/k2"},
			deleted: []string{"orders-0<30", "orders-1<10"}, fact: "no other online dir of broker 1 on another filesystem has room"},
		{name: "the same filesystem frees nothing: no move",
			k2:      []string{"df /dev/sdb 8192 8190 2 100% /data/k1"},
			deleted: []string{"orders-0<30", "orders-1<10"}, fact: "no other online dir"},
		{name: "an offline dir's replicas cannot be moved: said, nothing moved",
			k2: []string{"df /dev/sdc 1048576 10240 1038336 1% /data/k2"}, offline: true,
			deleted: []string{"orders-0<30", "orders-1<10"}, fact: "is offline (KAFKA_STORAGE_ERROR): AlterReplicaLogDirs cannot move its replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := fullBroker1(t)
			g.Hosts.Space[1]["/data/k2"] = tc.k2
			if tc.offline {
				g.Kafka.OfflineDirs = map[int32]map[string]bool{1: {"/data/k1": true}}
			}
			_, plans := runDiskFull(t, g, map[string]string{"broker": "1", "health_timeout": "1s", "start_timeout": "1s"})
			if !slices.Equal(g.Kafka.DirMoves, tc.moves) {
				t.Errorf("AlterReplicaLogDirs %v, want %v", g.Kafka.DirMoves, tc.moves)
			}
			if got := slices.Sorted(slices.Values(g.Kafka.DeletedRecords)); !slices.Equal(got, tc.deleted) {
				t.Errorf("DeleteRecords %v, want %v", got, tc.deleted)
			}
			p := plans["move-dirs"]
			if p == nil {
				t.Fatal("move-dirs planned nothing")
			}
			if tc.fact != "" && !strings.Contains(strings.Join(p.Facts, "\n"), tc.fact) {
				t.Errorf("move-dirs' facts do not say %q: %v", tc.fact, p.Facts)
			}
			if back := p.Rollback; tc.rollbacks && (!strings.Contains(back, "kafka-reassign-partitions.sh") || !strings.Contains(back, `"log_dirs":["/data/k1"`)) {
				t.Errorf("move-dirs' rollback does not give the move back to /data/k1: %q", back)
			}
			for _, c := range g.Hosts.Commands {
				if strings.Contains(c, "rm ") || strings.Contains(c, "mv ") {
					t.Errorf("a command removed or moved a file: %s", c)
				}
			}
		})
	}
}

// TestMoveDirsSecondRunDoesNothing: once the largest replica moved, the
// dir has its headroom: a second run moves and deletes nothing.
func TestMoveDirsSecondRunDoesNothing(t *testing.T) {
	g := fullBroker1(t)
	g.Hosts.Space[1]["/data/k2"] = []string{"df /dev/sdc 1048576 10240 1038336 1% /data/k2"}
	set := map[string]string{"broker": "1", "health_timeout": "1s"}
	if out, _ := runDiskFull(t, g, set); out.Err != nil || out.Failed != "" || len(g.Kafka.DirMoves) != 1 {
		t.Fatalf("first run: %+v, moves %v", out, g.Kafka.DirMoves)
	}
	out, _ := runDiskFull(t, g, set)
	if out.Err != nil || len(out.NoOp) != 6 || len(g.Kafka.DirMoves) != 1 || len(g.Kafka.DeletedRecords) != 0 {
		t.Fatalf("second run: %+v, moves %v, deleted %v", out, g.Kafka.DirMoves, g.Kafka.DeletedRecords)
	}
}

// TestOfflineFullDirStopsTheBrokerFirst: broker 1 runs with /data/k1
// full and offline (a JBOD broker whose dir hit ENOSPC) and /data/k2
// roomy. move-dirs cannot move the offline dir's replicas; free-records
// deletes to the groups' commits (the leader's log start moved, though
// the request times out waiting for broker 1's replica); the quarantine stops the broker (a
// restart on the full dir crashes it, as the lab shows) before it moves
// a replicated partition directory aside; the start brings it back.
func TestOfflineFullDirStopsTheBrokerFirst(t *testing.T) {
	g := fullBroker1(t)
	g.Kafka.Configs = map[string]string{"min.insync.replicas": "1"} // the stop-safety rule reads it
	g.Hosts.Space[1]["/data/k2"] = []string{"df /dev/sdc 1048576 10240 1038336 1% /data/k2"}
	g.Hosts.Space[1]["/q"] = []string{"df /dev/sdd 100000000 0 100000000 0% /q"}
	g.Kafka.OfflineDirs = map[int32]map[string]bool{1: {"/data/k1": true}}
	// The leader moves its log start, then waits in vain for broker 1's
	// replica (alive, its dir offline): REQUEST_TIMED_OUT.
	g.Kafka.DeleteRecordsTimeout = true
	// Kafka moved leadership off the offline dir's replicas.
	for p := range int32(3) {
		g.ZK.Put(kafkazk.PartitionStatePath("orders", p), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":1,"isr":[2,3]}`)
	}
	g.Hosts.OnStart = func(int32) { // a start brings the dir back, the replicas in sync
		g.Kafka.OfflineDirs = nil
		for p := range int32(3) {
			g.ZK.Put(kafkazk.PartitionStatePath("orders", p), `{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":2,"isr":[2,3,1]}`)
		}
	}
	out, plans := runDiskFull(t, g, map[string]string{"broker": "1", "quarantine": "/q", "health_timeout": "2s"})
	if out.Err != nil || out.Failed != "" {
		t.Fatalf("run: %+v", out)
	}
	if len(g.Kafka.DirMoves) != 0 {
		t.Errorf("AlterReplicaLogDirs sent for an offline dir: %v", g.Kafka.DirMoves)
	}
	stop, mv := -1, -1
	for i, c := range g.Hosts.Commands {
		if strings.HasSuffix(c, "systemctl stop kafka-1") && stop < 0 {
			stop = i
		}
		if strings.Contains(c, "kremedy_quarantine ") && strings.Contains(c, "/data/k1/orders-0") && mv < 0 {
			mv = i
		}
	}
	if stop < 0 || mv < 0 || stop > mv {
		t.Fatalf("want broker 1 stopped before orders-0 is moved aside: stop at %d, move at %d\n%v", stop, mv, g.Hosts.Commands)
	}
	if q := plans["quarantine"]; q == nil || !strings.Contains(q.Summary, "stop broker 1") {
		t.Errorf("the quarantine's plan does not say it stops the broker: %+v", q)
	}
	if !g.Hosts.Runs(1) {
		t.Error("broker 1 was not started again")
	}
}
