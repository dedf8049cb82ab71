package migrate

import (
	"strings"
	"testing"
)

const zkBroker = `# broker 1
broker.id=1
listeners=PLAINTEXT://10.0.0.1:9092
log.dirs=/data/kafka
zookeeper.connect=zk1:2181/kafka
zookeeper.session.timeout.ms=18000
inter.broker.protocol.version=3.9
authorizer.class.name=kafka.security.authorizer.AclAuthorizer
`

var quorum = Quorum{Voters: "3001@c1:9093,3002@c2:9093", Listener: "CONTROLLER", Protocol: "SSL"}

func mustProps(t *testing.T, text string) *Props {
	t.Helper()
	p, err := ParseProps(text)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func edit(t *testing.T, text string, e func(*Props) (Edit, error)) (string, Diff) {
	t.Helper()
	p := mustProps(t, text)
	ed, err := e(p)
	if err != nil {
		t.Fatal(err)
	}
	out, d, err := p.Apply(ed)
	if err != nil {
		t.Fatal(err)
	}
	return out, d
}

// The forward edits, as the Kafka 3.9 docs' migration section writes the
// configs, and the modes each file is then read as.
func TestEditsOfTheMigration(t *testing.T) {
	p := mustProps(t, zkBroker)
	if p.BrokerMode() != ModeZK {
		t.Fatalf("mode %s", p.BrokerMode())
	}
	mig, d := edit(t, zkBroker, func(p *Props) (Edit, error) { return MigrationEdit(p, quorum) })
	if !strings.HasPrefix(mig, zkBroker) {
		t.Fatalf("migration mode must only add lines to this file:\n%s", mig)
	}
	for _, want := range []string{"zookeeper.metadata.migration.enable=true", "controller.quorum.voters=3001@c1:9093,3002@c2:9093",
		"controller.listener.names=CONTROLLER", "listener.security.protocol.map=" + defaultProtoMap + ",CONTROLLER:SSL"} {
		if !strings.Contains(mig, "\n"+want+"\n") {
			t.Errorf("migration mode lacks %s:\n%s", want, mig)
		}
	}
	if len(d.Added) != 4 || len(d.Removed) != 0 {
		t.Errorf("diff %+v", d)
	}
	if m := mustProps(t, mig).BrokerMode(); m != ModeMigration {
		t.Fatalf("after the edit: %s", m)
	}
	// Idempotent: the same edit again changes nothing.
	if again, d := edit(t, mig, func(p *Props) (Edit, error) { return MigrationEdit(p, quorum) }); again != mig || len(d.Added)+len(d.Removed) != 0 {
		t.Fatalf("a second edit changed the file: %+v", d)
	}

	kr, d := edit(t, mig, KRaftEdit)
	kp := mustProps(t, kr)
	if kp.BrokerMode() != ModeKRaft {
		t.Fatalf("KRaft edit: mode %s\n%s", kp.BrokerMode(), kr)
	}
	for _, gone := range []string{"broker.id", "zookeeper.connect", "zookeeper.session.timeout.ms", keyMigration, keyIBP} {
		if _, ok := kp.Get(gone); ok {
			t.Errorf("KRaft config still has %s", gone)
		}
	}
	for k, v := range map[string]string{keyNodeID: "1", keyRoles: "broker", keyAuthorizer: kraftAuthorize, keyVoters: quorum.Voters, keyCtrlNames: "CONTROLLER"} {
		if got, _ := kp.Get(k); got != v {
			t.Errorf("KRaft config: %s=%q, want %q", k, got, v)
		}
	}
	if !strings.Contains(kr, "# broker 1\n") || !strings.Contains(kr, "log.dirs=/data/kafka\n") {
		t.Errorf("untouched lines changed:\n%s", kr)
	}
	t.Logf("KRaft diff: %s", d)

	// The revert's fallback: migration settings removed again.
	back, _ := edit(t, mig, func(*Props) (Edit, error) { return OutOfMigration(), nil })
	if m := mustProps(t, back).BrokerMode(); m != ModeZK {
		t.Fatalf("out of migration: %s\n%s", m, back)
	}

	ctrl := "process.roles=controller\nnode.id=3001\nzookeeper.metadata.migration.enable=true\nzookeeper.connect=zk1:2181/kafka\n"
	if m := mustProps(t, ctrl).ControllerMode(); m != ModeMigration {
		t.Fatalf("controller: %s", m)
	}
	fin, _ := edit(t, ctrl, func(*Props) (Edit, error) { return FinalizeController(), nil })
	if m := mustProps(t, fin).ControllerMode(); m != ModeController || strings.Contains(fin, "zookeeper") {
		t.Fatalf("finalized controller: %s\n%s", m, fin)
	}
}

// What the edits refuse: no fixed broker.id, the wrong mode, and a key
// they must touch written over several lines.
func TestEditsRefuse(t *testing.T) {
	for name, text := range map[string]string{
		"no broker.id":        "zookeeper.connect=zk:2181\n",
		"generated broker.id": "broker.id=-1\nzookeeper.connect=zk:2181\n",
	} {
		if _, err := MigrationEdit(mustProps(t, text), quorum); err == nil || !strings.Contains(err.Error(), "broker.id") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := KRaftEdit(mustProps(t, zkBroker)); err == nil || !strings.Contains(err.Error(), "not in migration mode") {
		t.Errorf("KRaft edit of a ZooKeeper broker: %v", err)
	}
	cont := "broker.id=1\nzookeeper.connect=zk1:2181,\\\n  zk2:2181/kafka\nzookeeper.metadata.migration.enable=true\n"
	p := mustProps(t, cont)
	if got, _ := p.Get("zookeeper.connect"); got != "zk1:2181,zk2:2181/kafka" {
		t.Fatalf("continuation read as %q", got)
	}
	e, err := KRaftEdit(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Apply(e); err == nil || !strings.Contains(err.Error(), "several lines") {
		t.Fatalf("a continued line was rewritten: %v", err)
	}
	// A continuation of a key the edit does not touch is kept as it is.
	other := "broker.id=1\nlisteners=PLAINTEXT://a:9092,\\\n  SSL://a:9093\nzookeeper.connect=zk:2181\n"
	out, _, err := mustProps(t, other).Apply(Edit{Set: [][2]string{{keyMigration, "true"}}})
	if err != nil || !strings.Contains(out, "listeners=PLAINTEXT://a:9092,\\\n  SSL://a:9093\n") {
		t.Fatalf("untouched continuation: %v\n%s", err, out)
	}
}

// The phase follows from the nodes' modes, /migration and /controller.
func TestPhase(t *testing.T) {
	mig := &MigrationZnode{MetadataOffset: 97}
	cases := []struct {
		name    string
		brokers []Mode
		ctrls   []Mode
		running bool
		znode   *MigrationZnode
		kraft   bool
		want    Phase
	}{
		{"nothing started", []Mode{ModeZK, ModeZK}, []Mode{ModeMigration}, false, nil, false, PhaseZooKeeper},
		{"controllers up", []Mode{ModeZK, ModeZK}, []Mode{ModeMigration}, true, nil, false, PhaseControllers},
		{"half in migration mode", []Mode{ModeMigration, ModeZK}, []Mode{ModeMigration}, true, nil, false, PhaseEntering},
		{"all in, not migrated", []Mode{ModeMigration, ModeMigration}, []Mode{ModeMigration}, true, &MigrationZnode{MetadataOffset: -1}, false, PhaseMigration},
		{"migrated", []Mode{ModeMigration, ModeMigration}, []Mode{ModeMigration}, true, mig, true, PhaseMigrated},
		{"null /migration", []Mode{ModeMigration, ModeMigration}, []Mode{ModeMigration}, true, &MigrationZnode{Null: true, MetadataOffset: -1}, true, PhaseMigration},
		{"half KRaft", []Mode{ModeKRaft, ModeMigration}, []Mode{ModeMigration}, true, mig, true, PhaseToKRaft},
		{"dual-write", []Mode{ModeKRaft, ModeKRaft}, []Mode{ModeMigration, ModeMigration}, true, mig, true, PhaseDualWrite},
		{"finalizing", []Mode{ModeKRaft, ModeKRaft}, []Mode{ModeController, ModeMigration}, true, mig, true, PhaseFinalizing},
		{"finalized", []Mode{ModeKRaft, ModeKRaft}, []Mode{ModeController, ModeController}, true, mig, true, PhaseFinalized},
		{"unknown broker", []Mode{ModeUnknown, ModeZK}, []Mode{ModeMigration}, false, nil, false, PhaseUnknown},
	}
	for _, c := range cases {
		s := &State{Brokers: map[int32]Mode{}, Controllers: map[int32]Mode{}, Migration: c.znode, KRaftController: c.kraft, ZKController: 3001}
		for i, m := range c.brokers {
			s.Brokers[int32(i+1)] = m
		}
		for i, m := range c.ctrls {
			s.Controllers[int32(3001+i)] = m
		}
		if c.running {
			s.Running = []int32{3001}
		}
		got, why := s.phase()
		if got != c.want {
			t.Errorf("%s: phase %s (%s), want %s", c.name, got, why, c.want)
		}
		ok, _ := got.Revertible()
		if want := got != PhaseFinalizing && got != PhaseFinalized && got != PhaseUnknown; ok != want {
			t.Errorf("%s: revertible %v", c.name, ok)
		}
	}
}
