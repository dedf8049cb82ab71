package lab

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"default", func(*Config) {}, ""},
		{"zero brokers", func(c *Config) { c.Brokers = 0 }, "--brokers 0"},
		{"even ensemble", func(c *Config) { c.ZooKeepers = 2 }, "odd ensemble"},
		{"relative chroot", func(c *Config) { c.Chroot = "kafka" }, "--chroot"},
		{"dirty chroot", func(c *Config) { c.Chroot = "/a/../b" }, "--chroot"},
		{"root chroot", func(c *Config) { c.Chroot = "/" }, "--chroot"},
		{"no chroot", func(c *Config) { c.Chroot = "" }, ""},
		{"bad ibp", func(c *Config) { c.IBP = "two" }, "--ibp"},
		{"ibp 2.7", func(c *Config) { c.IBP = "2.7" }, ""},
		{"log dirs", func(c *Config) { c.LogDirsPerBroker = 9 }, "--log-dirs-per-broker"},
		{"zk heap", func(c *Config) { c.ZKHeap = "2g" }, ""},
		{"broker heap", func(c *Config) { c.BrokerHeap = "2g" }, ""},
		{"broker heap not a size", func(c *Config) { c.BrokerHeap = "2 GB" }, "--broker-heap \"2 GB\": a Java heap size"},
		{"zk heap not a size", func(c *Config) { c.ZKHeap = "-Xmx2g" }, "--zk-heap \"-Xmx2g\": a Java heap size"},
		{"zk heap on kraft", func(c *Config) { *c = KRaftConfig(); c.ZKHeap = "1g" }, "--zk-heap with --kraft"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestVersionBehaviour(t *testing.T) {
	for _, c := range []struct {
		kafka, ibp   string
		ids, refuses bool
	}{
		{"3.9.2", "", true, true}, {"3.9.2", "2.7", false, false}, {"3.9.2", "2.7-IV2", false, false},
		{"3.9.2", "2.8", true, true}, {"3.9.2", "0.10.2", false, false},
		{"2.8.2", "", true, false}, {"2.7.2", "", false, false}, {"2.4.1", "", false, false}, {"3.4.1", "", true, true},
	} {
		s := State{Kafka: c.kafka, Config: DefaultConfig()}
		s.Config.IBP = c.ibp
		if got := s.TopicIDs(); got != c.ids {
			t.Errorf("Kafka %s IBP %q: TopicIDs() = %v, want %v", c.kafka, c.ibp, got, c.ids)
		}
		if got := s.RefusesStaleLog(); got != c.refuses {
			t.Errorf("Kafka %s IBP %q: RefusesStaleLog() = %v, want %v", c.kafka, c.ibp, got, c.refuses)
		}
	}
}

func TestReleaseOf(t *testing.T) {
	for v, want := range map[string]string{"2.7.2": "log4j", "2.8.2": "log4j", "3.4.1": "reload4j", "3.9.2": "reload4j", "3.0.2": "log4j", "3.6.2": "reload4j", "2.5.1": "log4j"} {
		r, err := ReleaseOf(v)
		if err != nil || r.Logging[0].Name != want {
			t.Errorf("ReleaseOf(%s) = %+v, %v; want %s", v, r, err, want)
		}
	}
	for _, v := range []string{"2.3.1", "3.9", "x"} {
		if _, err := ReleaseOf(v); err == nil {
			t.Errorf("ReleaseOf(%s) accepted", v)
		}
	}
}

func TestAddresses(t *testing.T) {
	c := DefaultConfig()
	c.Net = 7
	if got := c.ZKConnect(); got != "127.7.2.1:2181,127.7.2.2:2181,127.7.2.3:2181/kafka" {
		t.Fatal(got)
	}
	if got := c.Bootstrap(); len(got) != 3 || got[2] != "127.7.1.3:9092" {
		t.Fatal(got)
	}
}

func TestOpenRefusesOtherLayouts(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir); !errors.Is(err, ErrNoLab) {
		t.Fatalf("empty dir: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "lab.json"), []byte(`{"format": 99}`), 0o600)
	_, err := Open(dir)
	if !errors.Is(err, ErrOtherVersion) || !strings.Contains(err.Error(), "--purge") {
		t.Fatalf("other layout: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "lab.json"), []byte(`{garbage`), 0o600)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt state: %v", err)
	}
}

func TestUpRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o600)
	_, err := Up(context.Background(), dir, DefaultConfig(), nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "holds no kremedy lab") {
		t.Fatalf("Up on a foreign directory: %v", err)
	}
	if err := Down(context.Background(), dir, true, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "precious.txt")); err != nil {
		t.Fatal("down --purge removed a directory that is not a lab")
	}
}

func TestMissingKafkaHome(t *testing.T) {
	_, err := CheckKafkaHome(t.TempDir())
	if !errors.Is(err, ErrMissingPart) || !strings.Contains(err.Error(), "kremedy lab install") {
		t.Fatalf("empty home: %v", err)
	}
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, "libs"), 0o755)
	for _, f := range []string{"kafka_2.13-4.1.0.jar", "zookeeper-3.8.4.jar", "reload4j-1.2.25.jar"} {
		os.WriteFile(filepath.Join(home, "libs", f), nil, 0o644)
	}
	// A Kafka 4 home needs log4j2, not ZooKeeper (its mode is checked
	// when a lab is made: kraft_test.go).
	if _, err := CheckKafkaHome(home); err == nil || !strings.Contains(err.Error(), "log4j2") {
		t.Fatalf("Kafka 4 home without log4j2: %v", err)
	}
	os.Remove(filepath.Join(home, "libs", "kafka_2.13-4.1.0.jar"))
	os.WriteFile(filepath.Join(home, "libs", "kafka_2.13-3.9.1.jar"), nil, 0o644)
	if v, err := CheckKafkaHome(home); err != nil || v != "3.9.1" {
		t.Fatalf("stock 3.9.1 layout: %q %v", v, err)
	}
	os.Remove(filepath.Join(home, "libs", "reload4j-1.2.25.jar"))
	if _, err := CheckKafkaHome(home); err == nil || !strings.Contains(err.Error(), "log4j") {
		t.Fatalf("no logging backend: %v", err)
	}
}

func TestAssignmentSpreadsLeaders(t *testing.T) {
	a := assignment([]int32{1, 2, 3})
	if len(a) != 3 || a[0][0] != 1 || a[1][0] != 2 || a[2][0] != 3 || len(a[0]) != 3 {
		t.Fatalf("assignment %v", a)
	}
	if a := assignment([]int32{1, 2}); len(a) != 3 || len(a[0]) != 2 {
		t.Fatalf("2 brokers: %v", a)
	}
}

// TestZKHeap: --zk-heap sets each ZooKeeper node's -Xmx; unset, 128m.
func TestZKHeap(t *testing.T) {
	l := &Lab{Dir: t.TempDir(), State: State{Config: DefaultConfig(), Java: "java"}}
	if argv := strings.Join(l.zkArgv(1), " "); !strings.Contains(argv, " -Xmx128m ") {
		t.Fatalf("default ZooKeeper argv: %s", argv)
	}
	l.State.Config.ZKHeap = "2g"
	if argv := strings.Join(l.zkArgv(1), " "); !strings.Contains(argv, " -Xmx2g ") || strings.Contains(argv, "-Xmx128m") {
		t.Fatalf("--zk-heap 2g ZooKeeper argv: %s", argv)
	}
}
