package lab

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/internal/kafkaver"
	"github.com/kremedy/kremedy/inventory"
)

func TestKRaftConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"default", func(*Config) {}, ""},
		{"4.1.2", func(c *Config) { c.KafkaVersion = "4.1.2" }, ""},
		{"3.9.2", func(c *Config) { c.KafkaVersion = "3.9.2" }, ""},
		{"one controller", func(c *Config) { c.KRaftControllers = 1 }, ""},
		{"no controllers", func(c *Config) { c.KRaftControllers = 0 }, "needs a controller quorum"},
		{"even quorum", func(c *Config) { c.KRaftControllers = 2 }, "--kraft-controllers 2"},
		{"zookeepers", func(c *Config) { c.ZooKeepers = 3 }, "--kraft with --zookeepers 3: a KRaft lab runs no ZooKeeper"},
		{"chroot", func(c *Config) { c.Chroot = "/kafka" }, "--kraft with --chroot"},
		{"ibp", func(c *Config) { c.IBP = "3.9" }, "metadata.version, not inter.broker.protocol.version"},
		{"secure", func(c *Config) { c.Secure = true }, ""},
		{"secure combined", func(c *Config) { c.Secure, c.Combined, c.KRaftControllers = true, true, 0 }, ""},
		{"kerberos combined", func(c *Config) { c.Secure, c.Kerberos, c.Combined, c.KRaftControllers = true, true, true, 0 }, "--kerberos with --combined: not yet"},
		{"kerberos", func(c *Config) { c.Secure, c.Kerberos = true, true }, ""},
		{"kerberos without secure", func(c *Config) { c.Kerberos = true }, "--kerberos without --secure"},
		{"too old for KRaft", func(c *Config) { c.KafkaVersion = "3.4.1" }, "the KRaft lab runs 3.7 and later"},
		{"zero brokers", func(c *Config) { c.Brokers = 0 }, "--brokers 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := KRaftConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	// Kafka 4 without --kraft.
	c := DefaultConfig()
	c.KafkaVersion = "4.1.2"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Kafka 4.x has no ZooKeeper mode: add --kraft") {
		t.Fatalf("ZooKeeper lab of 4.1.2: %v", err)
	}
}

func TestReleaseModes(t *testing.T) {
	for v, want := range map[string]Modes{
		"2.4.1": ZooKeeperMode, "3.4.1": ZooKeeperMode, "3.6.2": ZooKeeperMode,
		"3.7.0": ZooKeeperMode | KRaftMode, "3.9.2": ZooKeeperMode | KRaftMode,
		"4.0.0": KRaftMode, "4.1.2": KRaftMode, NewestKafka: KRaftMode, "5.0.0": KRaftMode,
	} {
		r, err := ReleaseOf(v)
		if err != nil || r.Modes != want || ModesOf(kafkaver.MustParse(v)) != want {
			t.Errorf("ReleaseOf(%s) = %+v, %v; want modes %s", v, r, err, want)
		}
	}
	for _, r := range Releases {
		if r.Modes != ModesOf(kafkaver.MustParse(r.Version)) {
			t.Errorf("release %s is marked %s, its line runs %s", r.Version, r.Modes, ModesOf(kafkaver.MustParse(r.Version)))
		}
	}
	// 4.x: log4j2, the four artifacts at one version; 3.9: reload4j.
	for v, want := range map[string]string{"4.1.2": "2.25.3", NewestKafka: "2.25.5", "4.2.0": "2.25.5"} {
		r, _ := ReleaseOf(v)
		names := map[string]string{}
		for _, a := range r.Logging {
			names[a.Name] = a.Version
		}
		for _, n := range []string{"log4j-api", "log4j-core", "log4j-slf4j-impl", "log4j-1.2-api"} {
			if names[n] != want {
				t.Errorf("Kafka %s: %s %q, want %s (%v)", v, n, names[n], want, r.Logging)
			}
		}
	}
	if r, _ := ReleaseOf("3.9.2"); r.Logging[0].Name != "reload4j" {
		t.Errorf("3.9.2 logs with %v", r.Logging)
	}
}

func TestKafka4Home(t *testing.T) {
	home := t.TempDir()
	libs := filepath.Join(home, "libs")
	os.MkdirAll(libs, 0o755)
	for _, f := range []string{"kafka_2.13-4.1.2.jar", "log4j-api-2.25.3.jar", "log4j-core-2.25.3.jar"} {
		os.WriteFile(filepath.Join(libs, f), nil, 0o644)
	}
	if _, err := CheckKafkaHome(home); err == nil || !strings.Contains(err.Error(), "log4j-slf4j-impl") {
		t.Fatalf("no slf4j binding: %v", err)
	}
	// No ZooKeeper jar is needed: 4.x has none.
	os.WriteFile(filepath.Join(libs, "log4j-slf4j-impl-2.25.3.jar"), nil, 0o644)
	if v, err := CheckKafkaHome(home); err != nil || v != "4.1.2" {
		t.Fatalf("Kafka 4.1.2 home: %q %v", v, err)
	}
}

func TestLogSetups(t *testing.T) {
	s := brokerLogs("/l")
	v1 := s.log4j1()
	for _, want := range []string{"log4j.rootLogger=INFO, server", "log4j.appender.server.File=/l/server.log",
		"log4j.appender.stateChange.File=/l/state-change.log", "log4j.logger.kafka.controller=TRACE, controller", "log4j.additivity.kafka.controller=false"} {
		if !strings.Contains(v1, want) {
			t.Errorf("log4j 1 config lacks %q:\n%s", want, v1)
		}
	}
	v2 := s.log4j2()
	for _, want := range []string{"rootLogger.level = INFO", "rootLogger.appenderRef.server.ref = server", "appender.server.fileName = /l/server.log",
		"appender.stateChange.fileName = /l/state-change.log", "logger.l2.name = kafka.controller", "logger.l2.appenderRef.controller.ref = controller", "logger.l2.additivity = false"} {
		if !strings.Contains(v2, want) {
			t.Errorf("log4j2 config lacks %q:\n%s", want, v2)
		}
	}
	// Both are java.util.Properties files.
	for _, text := range []string{v1, v2} {
		if _, err := javaprops.Parse([]byte(text)); err != nil {
			t.Errorf("not a properties file: %v\n%s", err, text)
		}
	}
	l := &Lab{Dir: "/d", State: State{Kafka: "4.1.2"}}
	if got := l.logJVMArg("/d/broker/1"); got != "-Dlog4j2.configurationFile=/d/broker/1/log4j2.properties" {
		t.Errorf("4.1.2: %s", got)
	}
	l.State.Kafka = "3.9.2"
	if got := l.logJVMArg("/d/broker/1"); got != "-Dlog4j.configuration=file:/d/broker/1/log4j.properties" {
		t.Errorf("3.9.2: %s", got)
	}
}

// kraftLab is a KRaft lab's state in dir, as create makes it, without
// starting anything.
func kraftLab(t *testing.T, version string) *Lab {
	t.Helper()
	c := KRaftConfig()
	c.Net, c.KafkaHome = 37, "/opt/kafka"
	id, err := newClusterID()
	if err != nil {
		t.Fatal(err)
	}
	return &Lab{Dir: t.TempDir(), State: State{Format: FormatVersion, Config: c, User: "op", Java: "/usr/bin/java", Kafka: version, ClusterID: id}}
}

func TestKRaftInventoryLoads(t *testing.T) {
	l := kraftLab(t, "4.1.2")
	p := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := inventory.Write(p, l.Inventory()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if strings.Contains(string(b), "zookeeper:") || !strings.Contains(string(b), "mode: kraft") {
		t.Fatalf("inventory of a KRaft lab:\n%s", b)
	}
	inv, err := inventory.Load(p)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !inv.KRaft() || inv.ZooKeeper.Connect != "" || len(inv.Brokers) != 3 || len(inv.KRaftControllers) != 3 {
		t.Fatalf("loaded %+v", inv)
	}
	for i, c := range inv.KRaftControllers {
		k := i + 1
		if c.ID != ControllerID(k) || c.Host != l.State.Config.ControllerHost(k) || c.Listener != c.Host+":9093" ||
			c.Config != l.controllerProps(k) || c.Stop == "" || c.Start == "" {
			t.Errorf("controller %d: %+v", k, c)
		}
	}
	for _, br := range inv.Brokers {
		if br.Config != filepath.Join(l.BrokerDir(int(br.ID)), "server.properties") || len(br.LogDirs) != 1 {
			t.Errorf("broker %d: %+v", br.ID, br)
		}
	}
}

func TestKRaftProps(t *testing.T) {
	l := kraftLab(t, "3.9.2")
	voters := "3001@127.37.3.1:9093,3002@127.37.3.2:9093,3003@127.37.3.3:9093"
	brokerProps, err := l.kraftBrokerProps(2)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]map[string]string{
		brokerProps: {"process.roles": "broker", "node.id": "2", "controller.quorum.voters": voters,
			"controller.listener.names": "CONTROLLER", "listeners": "PLAINTEXT://127.37.1.2:9092",
			"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT", "log.dirs": l.LogDirs(2)[0], "min.insync.replicas": "2"},
		l.kraftControllerProps(1): {"process.roles": "controller", "node.id": "3001", "controller.quorum.voters": voters,
			"listeners": "CONTROLLER://127.37.3.1:9093", "log.dirs": l.controllerMetadataDir(1)},
	} {
		p, err := javaprops.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if p.Values[k] != v {
				t.Errorf("%s = %q, want %q\n%s", k, p.Values[k], v, text)
			}
		}
		for k := range p.Values {
			if strings.HasPrefix(k, "zookeeper.") || k == "broker.id" || k == "inter.broker.protocol.version" {
				t.Errorf("a KRaft node has %s", k)
			}
		}
	}
}

// TestScenarioModes: every scenario refuses a lab of the other mode before
// it opens a client (the lab here runs nothing).
func TestScenarioModes(t *testing.T) {
	kr := kraftLab(t, "4.1.2")
	zk := &Lab{Dir: t.TempDir(), State: State{Format: FormatVersion, Config: DefaultConfig(), Kafka: "3.9.2"}}
	for _, n := range ScenarioOrder {
		sc := Scenarios[n]
		other, why := kr, "runs KRaft with no ZooKeeper"
		if sc.Mode == KRaftMode {
			other, why = zk, "runs in ZooKeeper mode"
		}
		rep, err := sc.Run(context.Background(), other, "orders", io.Discard)
		if rep != nil || !errors.Is(err, ErrWrongLab) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s on the other kind of lab: %v, %v", n, rep, err)
		}
	}
	want := []string{"stray-logs", "missing-partition-metadata", "controller-down", "broker-down", "kraft-stuck-reassignment", "kraft-offline-partition", "kraft-disk-full", "quorum-loss"}
	if got := ScenariosFor(KRaftMode); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("KRaft scenarios %v, want %v", got, want)
	}
}

func TestStrayDirNames(t *testing.T) {
	for name, want := range map[string]string{
		"orders-0.f84dae444ff34a118da06626ddb8e3a2-stray":     "0",
		"orders-v2-12.f84dae444ff34a118da06626ddb8e3a2-stray": "12",
		"orders-0": "",
		"orders-0.f84dae444ff34a118da06626ddb8e3a2-delete": "",
		"orders-x.f84dae444ff34a118da06626ddb8e3a2-stray":  "",
	} {
		if got := strayPartition("/d/" + name); got != want {
			t.Errorf("strayPartition(%s) = %q, want %q", name, got, want)
		}
	}
	e := &env{l: kraftLab(t, "3.9.2")}
	ld := e.l.LogDirs(3)[0]
	for _, d := range []string{"orders-0.f84dae444ff34a118da06626ddb8e3a2-stray", "orders-v2-0.f84dae444ff34a118da06626ddb8e3a2-stray", "orders-1"} {
		os.MkdirAll(filepath.Join(ld, d), 0o755)
	}
	if got := e.strayDirs(3, "orders"); len(got) != 1 || filepath.Base(got[0]) != "orders-0.f84dae444ff34a118da06626ddb8e3a2-stray" {
		t.Errorf("strays of orders: %v (orders-v2's is not orders')", got)
	}
}

func TestControllerNumber(t *testing.T) {
	l := kraftLab(t, "3.9.2")
	for arg, want := range map[string]int{"1": 1, "3": 3, "3001": 1, "3003": 3} {
		if k, err := l.ControllerNumber(arg); err != nil || k != want {
			t.Errorf("ControllerNumber(%s) = %d, %v; want %d", arg, k, err, want)
		}
	}
	for _, bad := range []string{"0", "4", "3004", "3000", "x"} {
		if _, err := l.ControllerNumber(bad); !errors.Is(err, ErrWrongLab) {
			t.Errorf("ControllerNumber(%s): %v", bad, err)
		}
	}
}

func TestClusterID(t *testing.T) {
	for range 50 {
		id, err := newClusterID()
		if err != nil || len(id) != 22 || id[0] == '-' || strings.ContainsAny(id, "+/=") {
			t.Fatalf("cluster id %q, %v", id, err)
		}
	}
}

func TestKRaftLabLayoutPurgeable(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"broker", "sshd", "controller"} {
		os.MkdirAll(filepath.Join(dir, p), 0o755)
	}
	for _, f := range []string{"lab.json", "inventory.yaml"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o600)
	}
	if !looksLikeLab(dir) {
		t.Fatal("a KRaft lab's layout (no zk/) is not recognised: --purge would refuse it")
	}
	os.Remove(filepath.Join(dir, "controller"))
	if looksLikeLab(dir) {
		t.Fatal("a directory with neither zk/ nor controller/ passes for a lab")
	}
}

// TestSecureKRaftProps: a secured KRaft lab's nodes (lab up --kraft
// --secure) listen on SASL_SSL only, authorize with StandardAuthorizer,
// reach the controllers with PLAIN, have no ZooKeeper setting; its SCRAM
// users are made at format time; its inventory logs in as the operator
// with sudo and reaches the controllers with their client properties.
func TestSecureKRaftProps(t *testing.T) {
	l := kraftLab(t, "4.1.2")
	l.State.Config.Secure = true
	bp, err := l.kraftBrokerProps(2)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := l.securedControllerProps(1)
	if err != nil {
		t.Fatal(err)
	}
	voters := "3001@127.37.3.1:9093,3002@127.37.3.2:9093,3003@127.37.3.3:9093"
	standard := "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	for text, want := range map[string]map[string]string{
		bp: {"process.roles": "broker", "listeners": "SASL_SSL://127.37.1.2:9092", "security.inter.broker.protocol": "SASL_SSL",
			"listener.security.protocol.map": "CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL", "sasl.mechanism.controller.protocol": "PLAIN",
			"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512", "authorizer.class.name": standard, "super.users": "User:admin",
			"controller.quorum.voters": voters, "inter.broker.listener.name": ""},
		cp: {"process.roles": "controller", "listeners": "CONTROLLER://127.37.3.1:9093", "sasl.mechanism.controller.protocol": "PLAIN",
			"listener.security.protocol.map": "CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL", "authorizer.class.name": standard,
			"super.users": "User:admin;User:controller;User:kremedy", "controller.quorum.voters": voters, "inter.broker.listener.name": ""},
	} {
		p, err := javaprops.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if p.Values[k] != v {
				t.Errorf("%s = %q, want %q\n%s", k, p.Values[k], v, text)
			}
		}
		for k := range p.Values {
			if strings.HasPrefix(k, "zookeeper.") {
				t.Errorf("a secured KRaft node has %s", k)
			}
		}
	}
	if !strings.Contains(bp, "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\"") {
		t.Errorf("the broker does not log in to the controllers as admin:\n%s", bp)
	}
	scram, err := l.formatSCRAM()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(strings.Join(scram, " "), "--add-scram SCRAM-SHA-512=[name=") != 4 {
		t.Errorf("format's SCRAM users: %v, want admin, kremedy, app and intruder", scram)
	}
	inv := l.Inventory()
	if inv.ZooKeeper.Auth != nil || inv.Kafka.ControllerClientProperties != l.ControllerClientProperties() ||
		inv.Kafka.ClientProperties != l.ClientProperties() || inv.SSH.User != OperatorUser || inv.SSH.Become != inventory.BecomeSudo {
		t.Errorf("secured KRaft inventory: %+v", inv)
	}
}
