package zookeeper_test

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

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
