package zookeeper_test

// These tests start a real ZooKeeper (the one Kafka 3.9 ships, from the lab's
// Kafka home) on a free loopback port. They fail, never skip, when Java or
// the jars are missing — except under -short.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/steptest"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

func startZK(tb testing.TB) string {
	tb.Helper()
	return startZKProc(tb).Addr
}

// startZKProc is startZK for tests that also signal the server.
func startZKProc(tb testing.TB) *zkProcess { return startZKProcOf(tb, "") }

// startZKProcOf is startZKProc with the ZooKeeper of a Kafka release ("":
// the lab's default).
func startZKProcOf(tb testing.TB, kafkaVersion string) *zkProcess {
	tb.Helper()
	return startZKProcTick(tb, kafkaVersion, 0)
}

// startZKProcTick is startZKProcOf with the server's tickTime in
// milliseconds (0: ZooKeeper's default, 3000); sessions are granted
// timeouts of 2 to 20 ticks.
func startZKProcTick(tb testing.TB, kafkaVersion string, tickMs int) *zkProcess {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a real ZooKeeper; runs without -short")
	}
	dir := tb.TempDir()
	zk, err := startZKProcessOf(dir, "128m", kafkaVersion, tickMs)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		zk.Stop()
		if tb.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "zookeeper.out")); err == nil {
				tb.Logf("ZooKeeper's output (last 3000 bytes):\n%s", b[max(0, len(b)-3000):])
			}
		}
	})
	return zk
}

// zkProcess is a standalone ZooKeeper server; Stop kills it and waits for it.
type zkProcess struct {
	Addr string
	Pid  int
	Stop func()
}

// startZKProcess starts a standalone ZooKeeper with its data in dir and
// waits until it serves. A free port found by listening can be taken by
// another process before ZooKeeper binds it (tests of other packages run
// JVMs alongside), so a server that exits early is started again on
// another port, and readiness is ZooKeeper's own answer to srvr, not an
// open port (a connection to a port nobody listens on can connect to
// itself).
func startZKProcess(dir, heap string) (*zkProcess, error) { return startZKProcessOf(dir, heap, "", 0) }

func startZKProcessOf(dir, heap, kafkaVersion string, tickMs int) (*zkProcess, error) {
	home, _, err := lab.ResolveKafkaHome("", kafkaVersion)
	if err != nil {
		return nil, fmt.Errorf("%v (run `make lab-install`)", err)
	}
	java, err := lab.FindJava()
	if err != nil {
		return nil, err
	}
	var errs []error
	for range 3 {
		zk, err := startZKOnce(java, home, dir, heap, tickMs)
		if err == nil {
			return zk, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func startZKOnce(java, home, dir, heap string, tickMs int) (*zkProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args := []string{"-Xmx" + heap, "-XX:+UseSerialGC", "-Dzookeeper.admin.enableServer=false",
		"-Dlog4j.configuration=file:/dev/null", "-cp", filepath.Join(home, "libs", "*"),
		"org.apache.zookeeper.server.ZooKeeperServerMain", fmt.Sprint(port), dir}
	if tickMs > 0 {
		args = append(args, fmt.Sprint(tickMs))
	}
	cmd := exec.Command(java, args...)
	logf, err := os.Create(filepath.Join(dir, "zookeeper.out"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() { _ = cmd.Process.Kill(); <-exited; logf.Close() }
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-exited:
			logf.Close()
			return nil, fmt.Errorf("ZooKeeper on %s exited at start (%v); see %s", addr, cmd.ProcessState, logf.Name())
		default:
		}
		if serving(addr) {
			return &zkProcess{Addr: addr, Pid: cmd.Process.Pid, Stop: stop}, nil
		}
	}
	stop()
	return nil, fmt.Errorf("ZooKeeper did not serve on %s within 30s; see %s", addr, logf.Name())
}

// serving asks ZooKeeper at addr whether it serves requests.
func serving(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return bytes.Contains(b, []byte("Zookeeper version:")) && bytes.Contains(b, []byte("Mode: standalone"))
}

func dial(tb testing.TB, connect string) *zookeeper.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := zookeeper.Dial(ctx, connect, zookeeper.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// TestAdapterConformance runs the Coordinator contract against a real
// ZooKeeper, through a chroot.
func TestAdapterConformance(t *testing.T) {
	addr := startZK(t)
	root := dial(t, addr)
	ctx := context.Background()
	if err := root.Create(ctx, "/kafka", nil, nil); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr+"/kafka")
	if err := c.Create(ctx, "/suite", nil, nil); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := root.Exists(ctx, "/kafka/suite"); !ok {
		t.Fatal("chroot not applied: /kafka/suite missing")
	}
	steptest.CoordinatorConformance(t, c, "/suite")
	// An ephemeral node is the creating session's, under the chroot, and
	// goes with it: another kremedy's session creates one and ends.
	other := dial(t, addr+"/kafka")
	if err := other.CreateEphemeral(ctx, "/suite/lease", []byte("held"), nil); err != nil {
		t.Fatal(err)
	}
	_, st, err := root.Get(ctx, "/kafka/suite/lease")
	if err != nil || st.EphemeralOwner == 0 {
		t.Fatalf("/kafka/suite/lease: %+v %v, want an ephemeral node under the chroot", st, err)
	}
	if err := c.CreateEphemeral(ctx, "/suite/lease", []byte("mine"), nil); err == nil || !errors.Is(err, zookeeper.ErrNodeExists) {
		t.Fatalf("create of another session's ephemeral: %v, want node-exists", err)
	}
	other.Close()
	if ok, _, err := c.Exists(ctx, "/suite/lease"); ok || err != nil {
		t.Fatalf("after its session closed the ephemeral node exists=%v (%v)", ok, err)
	}
	// DeleteRecursive and Walk, as the lab's scenarios use them.
	for _, p := range []string{"/brokers", "/brokers/topics", "/brokers/topics/orders", "/brokers/topics/orders/partitions", "/brokers/topics/orders-v2"} {
		if err := c.Create(ctx, p, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteRecursive(ctx, "/brokers/topics/orders"); err != nil {
		t.Fatal(err)
	}
	kids, _ := c.Children(ctx, "/brokers/topics")
	if !slices.Equal(kids, []string{"orders-v2"}) {
		t.Fatalf("after DeleteRecursive: %v", kids)
	}
}

// TestDialUnreachable: no server means a bounded error, not a hang.
// TestDialUnreachable: when every server refuses the connection, Dial says
// so, naming them, well before its deadline (go-zookeeper alone retries in
// silence until the deadline).
func TestDialUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	_, err := zookeeper.Dial(ctx, "127.0.0.1:1,127.0.0.1:2/kafka", zookeeper.Options{})
	took := time.Since(start)
	// The deadline's error would be "context deadline exceeded".
	if err == nil || !strings.Contains(err.Error(), "connection refused by every server (127.0.0.1:1, 127.0.0.1:2)") {
		t.Fatalf("dial to nothing: %v after %s", err, took)
	}
	t.Logf("refused after %s: %v", took, err)
}

// BenchmarkWatchNotice measures how long after a broker-like znode appears
// or vanishes a WaitChildren waiter in another session returns, measured
// from the moment the change was requested (an upper bound: it includes the
// writer's own round trip).
func BenchmarkWatchNotice(b *testing.B) {
	addr := startZK(b)
	w, r := dial(b, addr), dial(b, addr)
	ctx := context.Background()
	_ = w.Create(ctx, "/ids", nil, nil)
	var appear, vanish time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, create := range []bool{true, false} {
			ready := make(chan struct{})
			got := make(chan time.Time, 1)
			go func() {
				first := true
				_, _ = r.WaitChildren(ctx, "/ids", func(k []string) bool {
					if first {
						first = false
						close(ready)
					}
					return slices.Contains(k, "1") == create
				})
				got <- time.Now()
			}()
			<-ready
			start := time.Now()
			var err error
			if create {
				err = w.Create(ctx, "/ids/1", nil, nil)
			} else {
				err = w.Delete(ctx, "/ids/1", -1)
			}
			if err != nil {
				b.Fatal(err)
			}
			d := (<-got).Sub(start)
			if create {
				appear += d
			} else {
				vanish += d
			}
		}
	}
	b.ReportMetric(float64(appear.Microseconds())/float64(b.N)/1000, "ms-appear")
	b.ReportMetric(float64(vanish.Microseconds())/float64(b.N)/1000, "ms-vanish")
}

// TestStateConformance holds the pipelined scan (ReadState) to the answers
// the fake gives, on a real ZooKeeper through a chroot.
func TestStateConformance(t *testing.T) {
	addr := startZK(t)
	root := dial(t, addr)
	if err := root.Create(context.Background(), "/state", nil, nil); err != nil {
		t.Fatal(err)
	}
	steptest.StateConformance(t, dial(t, addr+"/state"))
}
