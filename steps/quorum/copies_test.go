package quorum

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/ports"
)

// shHosts runs a node's command with this machine's /bin/sh (its dirs are
// local directories); a node in down does not answer.
type shHosts struct {
	ports.Hosts
	down []int32
}

func (h *shHosts) Run(ctx context.Context, node int32, cmd string, out func(ports.Line)) error {
	if slices.Contains(h.down, node) {
		return fmt.Errorf("ssh host unreachable: node %d", node)
	}
	b, err := exec.CommandContext(ctx, "/bin/sh", "-c", cmd).Output()
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		out(ports.Line{Text: l})
	}
	return err
}

// headerBatch is a v2 batch of records base … base+n-1 in epoch: the
// header fields the log-end walk reads, filler after them.
func headerBatch(base int64, epoch int32, n int32) []byte {
	b := make([]byte, 80)
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	return b
}

// metaCopy writes a node's config (props, with DIR standing for its own
// temp dir) and, under logdir, a __cluster_metadata-0 of one segment
// whose batches are given as (epoch, records) pairs.
func metaCopy(t *testing.T, root string, node int32, props, logdir string, batches ...[2]int32) ports.Host {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(node))
	cfg := filepath.Join(dir, "node.properties")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(props, "DIR", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	if batches != nil {
		var seg []byte
		off := int64(0)
		for _, b := range batches {
			seg = append(seg, headerBatch(off, b[0], b[1])...)
			off += int64(b[1])
		}
		md := filepath.Join(dir, logdir, MetadataLog)
		if err := os.MkdirAll(md, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(md, "00000000000000000000.log"), seg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ports.Host{ID: node, Config: cfg}
}

// TestReadCopiesAndSeed reads every node's copy through a real shell and
// picks the seed: the largest epoch first (3001's longer log of epoch 4
// loses), then the largest end (broker 1 beats controller 3002); a copy
// that is absent, a host that does not answer and a config without a log
// dir are named, never guessed.
func TestReadCopiesAndSeed(t *testing.T) {
	root := t.TempDir()
	tg := ports.Target{
		Controllers: []ports.Host{
			metaCopy(t, root, 3001, "process.roles=controller\nlog.dirs=DIR/meta\n", "meta", [2]int32{3, 20}, [2]int32{4, 40}),
			metaCopy(t, root, 3002, "process.roles=controller\nlog.dirs=DIR/meta\n", "meta", [2]int32{3, 20}, [2]int32{5, 10}),
			{ID: 3003, Config: "/nowhere/controller.properties"},
		},
		Hosts: []ports.Host{
			metaCopy(t, root, 1, "log.dirs=DIR/data\nmetadata.log.dir=DIR/md\n", "md", [2]int32{3, 20}, [2]int32{5, 15}),
			metaCopy(t, root, 2, "log.dirs=DIR/a,DIR/b\n", "a"),
			metaCopy(t, root, 4, "process.roles=broker\n", ""),
		},
	}
	copies := ReadCopies(context.Background(), tg, &shHosts{down: []int32{3003}})
	byNode := map[int32]Copy{}
	for _, c := range copies {
		byNode[c.Node] = c
	}
	for node, want := range map[int32][2]int64{3001: {4, 60}, 3002: {5, 30}, 1: {5, 35}} {
		c := byNode[node]
		if !c.Known() || int64(c.Epoch) != want[0] || c.End != want[1] || c.Controller != (node > 3000) {
			t.Errorf("copy of node %d: %+v, want epoch %d end %d", node, c, want[0], want[1])
		}
	}
	if c := byNode[1]; c.Dir != filepath.Join(root, "1", "md", MetadataLog) {
		t.Errorf("broker 1's copy read from %s, not its metadata.log.dir", c.Dir)
	}
	for node, why := range map[int32]string{2: "no directory " + MetadataLog, 3003: "unreachable", 4: "names neither metadata.log.dir nor log.dirs"} {
		if c := byNode[node]; c.Known() || !strings.Contains(c.Err, why) {
			t.Errorf("copy of node %d: %+v, want an error saying %q", node, c, why)
		}
	}
	seed, ok := Seed(copies)
	if !ok || seed.Node != 1 {
		t.Fatalf("seed %+v (%v), want broker 1 (epoch 5, end 35)", seed, ok)
	}
	if b := Beyond(copies, seed); len(b) != 1 || b[0].Node != 3001 {
		t.Errorf("copies beyond the seed: %+v, want controller 3001's longer, older branch", b)
	}
}

func TestSeedTies(t *testing.T) {
	br := Copy{Node: 1, Epoch: 7, End: 100}
	ct := Copy{Node: 3002, Controller: true, Epoch: 7, End: 100}
	for _, order := range [][]Copy{{br, ct}, {ct, br}} {
		if s, _ := Seed(order); s.Node != 3002 {
			t.Errorf("tie between a broker and a controller: seed %d, want the controller", s.Node)
		}
	}
	if _, ok := Seed([]Copy{{Node: 1, Err: "unreachable"}}); ok {
		t.Error("a seed picked among copies none of which was read")
	}
}
