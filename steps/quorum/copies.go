// Package quorum is the quorum-recovery runbook's kind pack: every node's
// copy of the KRaft metadata log read over SSH, the seed picked among
// them, and the ledger of what the copies hold beyond the seed.
package quorum

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// MetadataLog is the KRaft metadata log's partition directory under a
// node's metadata log dir.
const MetadataLog = "__cluster_metadata-0"

// Copy is one node's copy of __cluster_metadata-0 as its disk holds it.
type Copy struct {
	Node       int32 `json:"node"`
	Controller bool  `json:"controller"`
	// MetaDir is the node's metadata log dir (metadata.log.dir, else the
	// first of log.dirs); Dir the copy's directory in it.
	MetaDir string `json:"meta_dir,omitempty"`
	Dir     string `json:"dir,omitempty"`
	// End is the offset the next record would get; Epoch the last
	// batch's (or leader-epoch-checkpoint's) epoch.
	End     int64  `json:"end"`
	Epoch   int32  `json:"epoch"`
	Segment string `json:"segment,omitempty"`
	// Err says why the copy could not be read ("": it was).
	Err string `json:"error,omitempty"`
}

// Known reports whether the copy was read.
func (c Copy) Known() bool { return c.Err == "" }

// Role names the node: "controller 3001" or "broker 2".
func (c Copy) Role() string {
	if c.Controller {
		return fmt.Sprintf("controller %d", c.Node)
	}
	return fmt.Sprintf("broker %d", c.Node)
}

// String is the copy in one line, as plans and reports show it.
func (c Copy) String() string {
	if !c.Known() {
		return fmt.Sprintf("%s: not read (%s)", c.Role(), c.Err)
	}
	return fmt.Sprintf("%s: %s ends at offset %d, epoch %d", c.Role(), c.Dir, c.End, c.Epoch)
}

// MetadataDir is where a node keeps the metadata log: metadata.log.dir,
// else the first of log.dirs (or log.dir), as Kafka's KafkaConfig does
// (metadataLogDir).
func MetadataDir(p javaprops.Properties) string {
	if d, ok := p.Get("metadata.log.dir"); ok && strings.TrimSpace(d) != "" {
		return path.Clean(strings.TrimSpace(d))
	}
	for _, k := range []string{"log.dirs", "log.dir"} {
		if d, ok := p.Get(k); ok && strings.TrimSpace(d) != "" {
			first, _, _ := strings.Cut(d, ",")
			return path.Clean(strings.TrimSpace(first))
		}
	}
	return ""
}

// ReadCopies reads every controller's and every broker's copy over SSH,
// concurrently; a combined node is read once, as a controller. A copy
// that cannot be read has its Err; nothing else is an error.
func ReadCopies(ctx context.Context, t ports.Target, h ports.Hosts) []Copy {
	var nodes []ports.Host
	ctrl := map[int32]bool{}
	for _, c := range t.Controllers {
		nodes = append(nodes, c)
		ctrl[c.ID] = true
	}
	for _, b := range t.Hosts {
		if !ctrl[b.ID] {
			nodes = append(nodes, b)
		}
	}
	idx := make([]int32, len(nodes))
	for i := range nodes {
		idx[i] = int32(i)
	}
	return par.Each(idx, func(i int32) Copy { return ReadCopy(ctx, h, nodes[i], ctrl[nodes[i].ID]) })
}

// ReadCopy reads one node's copy: its config for the metadata log dir,
// then the log's last epoch and end (brokers.ReadLogEnds: the last
// segment's batch headers walked on the host).
func ReadCopy(ctx context.Context, h ports.Hosts, n ports.Host, controller bool) Copy {
	c := Copy{Node: n.ID, Controller: controller, Epoch: -1, End: -1}
	if n.Config == "" {
		c.Err = fmt.Sprintf("the inventory names no config file for %s", c.Role())
		return c
	}
	b, err := brokers.ReadFile(ctx, h, n.ID, n.Config)
	if err != nil {
		c.Err = err.Error()
		return c
	}
	p, err := javaprops.Parse(b)
	if err != nil {
		c.Err = fmt.Sprintf("%s: %v", n.Config, err)
		return c
	}
	if c.MetaDir = MetadataDir(p); c.MetaDir == "" {
		c.Err = fmt.Sprintf("%s names neither metadata.log.dir nor log.dirs", n.Config)
		return c
	}
	c.Dir = path.Join(c.MetaDir, MetadataLog)
	ends, err := brokers.ReadLogEnds(ctx, h, n.ID, []string{c.MetaDir}, []string{MetadataLog})
	if err != nil {
		c.Err = err.Error()
		return c
	}
	le, ok := ends[MetadataLog]
	switch {
	case !ok:
		c.Err = "the host's answer named no " + MetadataLog
	case !le.Known():
		c.Err = le.Err
	default:
		c.End, c.Epoch, c.Segment = le.End, le.Epoch, le.Segment
	}
	return c
}

// Seed picks the copy the quorum restarts from: the largest last epoch,
// then the largest end offset among the copies of that epoch — never the
// longest log alone, as a longer log of a lower epoch can be a stale
// branch missing committed records (Confluent CFK 3.3 manual recovery;
// Raft's log up-to-date rule, KafkaRaftClient's lastEpoch then end
// offset comparison in handleVoteRequest). A controller wins a tie with a
// broker (its copy is where the quorum restarts without copying files).
// ok is false when no copy was read.
func Seed(copies []Copy) (seed Copy, ok bool) {
	for _, c := range copies {
		if !c.Known() {
			continue
		}
		if !ok || ahead(c, seed) {
			seed, ok = c, true
		}
	}
	return seed, ok
}

// ahead reports whether a is a better seed than b.
func ahead(a, b Copy) bool {
	if a.Epoch != b.Epoch {
		return a.Epoch > b.Epoch
	}
	if a.End != b.End {
		return a.End > b.End
	}
	return a.Controller && !b.Controller
}

// Beyond are the copies that diverge from the seed: records past its end
// (a longer log of a lower epoch when the seed is the newest; any longer
// one when the operator chose the seed), or a later epoch than its last.
// What the recovery discards, and the copies it must move aside (the
// ledger reads them from the seed's end on).
func Beyond(copies []Copy, seed Copy) []Copy {
	var out []Copy
	for _, c := range copies {
		if c.Known() && c.Node != seed.Node && (c.End > seed.End || c.Epoch > seed.Epoch) {
			out = append(out, c)
		}
	}
	return out
}
