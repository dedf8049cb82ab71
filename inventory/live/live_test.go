package live_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/inventory/live"
	"github.com/kremedy/kremedy/steps/steptest"
)

// fakeBroker runs a process whose command line is a broker's (`… kafka.Kafka
// PROPS`), with broker.id=id in PROPS, in a Kafka-like home.
func fakeBroker(t *testing.T, home string, id string, extra ...string) string {
	t.Helper()
	props := filepath.Join(home, "config", "server-"+id+".properties")
	os.MkdirAll(filepath.Dir(props), 0o755)
	os.WriteFile(props, []byte("# a broker\nbroker.id="+id+"\nlog.dirs=/var/lib/kafka\n"+strings.Join(extra, "\n")+"\n"), 0o644)
	// sh -c SCRIPT ARGS…: the arguments stay in sh's command line (the
	// script's second command keeps sh from exec'ing sleep).
	cmd := exec.Command("/bin/sh", "-c", "sleep 60; :", "-cp", filepath.Join(home, "libs", "*"), "kafka.Kafka", props)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Start returns once sh is exec'd; the guess reads /proc/PID/cmdline:
	// wait until it shows the broker's command line.
	cmdline := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cmdline")
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(cmdline); strings.Contains(string(b), props) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%s does not show %s within 10s", cmdline, props)
		}
	}
	return props
}

// TestGuess runs the guess script in a real shell against real processes:
// Kafka's own scripts beside the broker's config, the lab's unit-like
// scripts, and nothing found (commands that fail and say what to set).
func TestGuess(t *testing.T) {
	ctx := context.Background()
	sh := steptest.LocalShell{Shell: "/bin/sh"}

	tarball := t.TempDir()
	os.MkdirAll(filepath.Join(tarball, "bin"), 0o755)
	for _, s := range []string{"kafka-server-stop.sh", "kafka-server-start.sh"} {
		os.WriteFile(filepath.Join(tarball, "bin", s), []byte("#!/bin/sh\n"), 0o755)
	}
	props := fakeBroker(t, tarball, "7001")
	u, err := live.Guess(ctx, sh, 7001, nil)
	if err != nil || !strings.HasSuffix(u.Stop, "/bin/kafka-server-stop.sh") || !strings.Contains(u.Start, "kafka-server-start.sh -daemon "+props) {
		t.Fatalf("Kafka's scripts: %+v %v", u, err)
	}

	unitLike := t.TempDir()
	p2 := fakeBroker(t, unitLike, "7002")
	for _, s := range []string{"kafka-stop", "kafka-start"} {
		os.WriteFile(filepath.Join(filepath.Dir(p2), s), []byte("#!/bin/sh\n"), 0o755)
	}
	u, err = live.Guess(ctx, sh, 7002, []string{"PLAINTEXT://b7002:9092"})
	if err != nil || !strings.HasSuffix(u.Stop, "/config/kafka-stop") || !strings.HasSuffix(u.Start, "/config/kafka-start") {
		t.Fatalf("unit-like scripts: %+v %v", u, err)
	}

	// Two clusters' brokers with the same broker.id on one host (two labs
	// on one machine): the one whose config names the broker's registered
	// endpoint is this one; when none or both do, no guess.
	mine := fakeBroker(t, t.TempDir(), "7003", "listeners=SASL_SSL://10.1.1.3:9092")
	fakeBroker(t, t.TempDir(), "7003", "listeners=PLAINTEXT://10.9.1.3:9092")
	for _, a := range []string{"kafka-stop", "kafka-start"} {
		os.WriteFile(filepath.Join(filepath.Dir(mine), a), []byte("#!/bin/sh\n"), 0o755)
	}
	u, err = live.Guess(ctx, sh, 7003, []string{"SASL_SSL://10.1.1.3:9092"})
	if err != nil || !strings.HasPrefix(u.Stop, filepath.Dir(mine)) && !strings.HasPrefix(u.Stop, "'"+filepath.Dir(mine)) {
		t.Fatalf("two brokers 7003, this one named by its endpoint: %+v %v (want the scripts beside %s)", u, err, mine)
	}
	u, err = live.Guess(ctx, sh, 7003, []string{"PLAINTEXT://10.5.5.5:9092"})
	if err != nil || !strings.Contains(u.How, "several Kafka JVMs with broker.id=7003") {
		t.Fatalf("two brokers 7003, neither named: %+v %v", u, err)
	}

	u, err = live.Guess(ctx, sh, 7999, nil) // no such broker here
	if err != nil || !strings.Contains(u.How, "no Kafka JVM with broker.id=7999") {
		t.Fatalf("nothing found: %+v %v", u, err)
	}
	// The placeholder fails, and says what to set.
	out, err := exec.Command("/bin/sh", "-c", u.Stop).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "set the stop and start commands of broker 7999") {
		t.Fatalf("placeholder ran: %v %s", err, out)
	}
}

func TestBootstrapPicksTheClientsProtocol(t *testing.T) {
	regs := []live.Registration{
		{ID: 1, Host: "b1", Endpoints: []string{"INTERNAL://b1:9091", "EXTERNAL://b1.example:9093"}, Protocols: map[string]string{"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"}},
		{ID: 2, Host: "b2", Endpoints: []string{"INTERNAL://b2:9091", "EXTERNAL://b2.example:9093"}, Protocols: map[string]string{"INTERNAL": "PLAINTEXT", "EXTERNAL": "SASL_SSL"}},
	}
	if got, err := live.Bootstrap(regs, "SASL_SSL"); err != nil || strings.Join(got, ",") != "b1.example:9093,b2.example:9093" {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := live.Bootstrap(regs, ""); err != nil || strings.Join(got, ",") != "b1:9091,b2:9091" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := live.Bootstrap(regs, "SSL"); err == nil || !strings.Contains(err.Error(), "no broker has a SSL listener") {
		t.Fatalf("%v", err)
	}
}

// TestParseVoters: controller.quorum.voters as Kafka writes it, IPv6
// included; anything else is refused, not guessed.
func TestParseVoters(t *testing.T) {
	v, err := live.ParseVoters("3001@c1:9093, 3002@10.0.0.2:9093,3003@[::1]:9093")
	if err != nil || len(v) != 3 || v[0] != (live.Voter{3001, "c1", "c1:9093"}) || v[2].Host != "::1" || v[2].Addr != "[::1]:9093" {
		t.Fatalf("%+v %v", v, err)
	}
	for _, bad := range []string{"", "c1:9093", "x@c1:9093", "3001@c1", "3001@:9093"} {
		if _, err := live.ParseVoters(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
