package zookeeper_test

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

var updateFrames = flag.Bool("update-frames", false, "rewrite testdata/zk38-session.bin from the real ZooKeeper")

const cannedSession = "testdata/zk38-session.bin"

// TestCannedFramesAreZooKeepers holds the canned frames the unit tests and
// the fuzz target answer the bulk reader with to the real thing: a bulk
// session's script on the lab's ZooKeeper (3.8) reads frames of the same
// sizes, reply headers and results as testdata/zk38-session.bin (zxids,
// times and the session id aside). -update-frames rewrites the file.
func TestCannedFramesAreZooKeepers(t *testing.T) {
	addr := startZK(t)
	ctx := ctxT(t, time.Minute)
	c := dial(t, addr)
	mustDo(t, c.Create(ctx, zookeeper.CannedChroot, nil, nil))
	mustDo(t, c.Create(ctx, zookeeper.CannedChroot+"/a", []byte("alpha"), nil))
	mustDo(t, c.Create(ctx, zookeeper.CannedChroot+"/b", nil, nil))
	_, err := c.Set(ctx, zookeeper.CannedChroot+"/a", []byte("alpha, twice"), -1)
	mustDo(t, err)
	live, err := zookeeper.CaptureReaderSession(ctx, addr)
	mustDo(t, err)
	if *updateFrames {
		mustDo(t, os.WriteFile(filepath.FromSlash(cannedSession), live, 0o644))
	}
	canned, err := os.ReadFile(filepath.FromSlash(cannedSession))
	mustDo(t, err)
	lf, err := zookeeper.SplitFrames(live)
	mustDo(t, err)
	cf, err := zookeeper.SplitFrames(canned)
	mustDo(t, err)
	var ls, cs []string
	for _, f := range lf[1:] {
		ls = append(ls, zookeeper.DescribeReply(f))
	}
	for _, f := range cf[1:] {
		cs = append(cs, zookeeper.DescribeReply(f))
	}
	if len(lf) != 7 || len(lf) != len(cf) || len(lf[0]) != len(cf[0]) || !reflect.DeepEqual(ls, cs) {
		t.Fatalf("ZooKeeper sent %d frames:\n%q\nthe canned session has %d:\n%q", len(lf), ls, len(cf), cs)
	}
	t.Logf("%d frames: %q", len(lf), ls)
}

// TestIdleBulkSessionPings: a Conn's bulk sessions, idle for longer than
// their session timeout (4 s, on a server ticking every 2 s), ping and are
// not expired: the next scan reads on the same sessions, none re-dialled.
func TestIdleBulkSessionPings(t *testing.T) {
	zk := startZKProcTick(t, "", 2000)
	connect := zk.Addr + "/idle"
	ctx := ctxT(t, time.Minute)
	mustDo(t, lab.Seed(ctx, connect, zookeeper.ScanSpreadMin, 1, io.Discard))
	c, err := zookeeper.Dial(ctx, connect, zookeeper.Options{SessionTimeout: 4 * time.Second})
	mustDo(t, err)
	t.Cleanup(c.Close)
	want, err := c.Scan(ctx, 0)
	mustDo(t, err)
	ids, timeouts := c.ReaderSessions()
	if len(ids) == 0 {
		t.Fatal("a scan of ScanSpreadMin topics opened no bulk session")
	}
	for _, to := range timeouts {
		if to != 4*time.Second {
			t.Fatalf("bulk sessions granted %v, want 4s", timeouts)
		}
	}
	// ZooKeeper expires a silent session between its timeout and a tick
	// later (its expiry queue runs each tick): 6 s here.
	time.Sleep(7 * time.Second)
	if now, _ := c.ReaderSessions(); !slices.Equal(now, ids) {
		t.Fatalf("after 7 s idle the bulk sessions are %x, were %x: the idle ones expired", now, ids)
	}
	got, err := c.Scan(ctx, 0)
	mustDo(t, err)
	if now, _ := c.ReaderSessions(); !slices.Equal(now, ids) || !reflect.DeepEqual(got, want) {
		t.Fatalf("the scan after 7 s idle read on sessions %x (were %x); same state: %v", now, ids, reflect.DeepEqual(got, want))
	}
}
