package diagnose

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// spaceRead is one broker's log dirs as df and its own DescribeLogDirs
// see them.
type spaceRead struct {
	space  []brokers.Space
	err    error
	states []ports.LogDirState
	// enospc: the last lines of the broker's server log saying No
	// space left on device (read only for a broker whose dir is full
	// or offline: its finding shows them; nil when not read); logPath and
	// logErr say where and what went wrong reading it.
	enospc  []string
	logPath string
	logErr  error
}

// logDirsFull reads, with Disk, every inventory broker's log dirs'
// filesystems over SSH and, from the registered ones (KRaft: unfenced),
// DescribeLogDirs;
// a dir full or offline is a log-dir-full finding. A host SSH cannot
// reach is disk-unlisted's finding, not this one's.
func (g *diagnoser) logDirsFull(ctx context.Context, registered []int32) {
	c := g.c
	if !g.o.Disk || c.Hosts == nil {
		return
	}
	var ids []int32
	for _, h := range c.Target.Hosts {
		if len(h.LogDirs) > 0 {
			ids = append(ids, h.ID)
		}
	}
	rec, _ := c.Kafka.(ports.Records)
	got := par.Each(ids, func(id int32) spaceRead {
		h, _ := c.Target.Host(id)
		var r spaceRead
		r.space, r.err = brokers.ReadSpace(ctx, c.Hosts, h.ID, h.LogDirs)
		up := slices.Contains(registered, h.ID)
		if rec != nil && up {
			r.states, _ = rec.DescribeLogDirs(ctx, h.ID)
		}
		if h.ServerLog != "" && r.err == nil && r.trouble() {
			r.logPath = h.ServerLog
			r.enospc, r.logErr = brokers.LogLines(ctx, c.Hosts, h.ID, h.ServerLog, brokers.ENOSPC, 2)
		}
		return r
	})
	runbook := "disk-full"
	if g.d.Mode == "kraft" {
		runbook = "kraft-disk-full"
	}
	tiers := readTiers(ctx, c.Kafka, got)
	for i, id := range ids {
		if f, ok := logDirFinding(id, slices.Contains(registered, id), got[i], runbook, tiers); ok {
			g.add(f)
		}
	}
}

// tierRead is what tiered storage holds of the partitions in full or
// offline dirs: each tiered topic's partitions' highest uploaded offset.
type tierRead struct {
	latest map[string]map[int32]int64
	err    error
}

// readTiers asks, when the Kafka port can, which topics of the partitions
// in troubled dirs are tiered and how far each is uploaded.
func readTiers(ctx context.Context, k ports.Kafka, got []spaceRead) tierRead {
	tk, ok := k.(ports.Tiered)
	if !ok {
		return tierRead{}
	}
	var topics []string
	for _, r := range got {
		if !r.trouble() {
			continue
		}
		for _, s := range r.space {
			for _, p := range s.Partitions {
				// __cluster_metadata-0 is KRaft's metadata log, no topic.
				if !slices.Contains(topics, p.Topic) && p.Topic != "" && p.Topic != "__cluster_metadata" {
					topics = append(topics, p.Topic)
				}
			}
		}
	}
	if len(topics) == 0 {
		return tierRead{}
	}
	slices.Sort(topics)
	latest, err := tk.Tiered(ctx, topics)
	return tierRead{latest: latest, err: err}
}

// note says, for a partition of a tiered topic, how much of its local
// bytes the remote store also holds (whole segments up to the highest
// uploaded offset: a lower local.retention frees them, losing nothing)
// and how much only this disk holds; "" for a topic without tiered storage.
func (t tierRead) note(p brokers.PartitionSpace) (string, int64) {
	up, ok := t.latest[p.Topic][p.Partition]
	switch {
	case !ok:
		return "", 0
	case up < 0:
		return "; tiered storage on, nothing uploaded as far as its leader knows (a leader that just took over says so too until its first upload check): treat every byte here as held only locally", 0
	}
	copies, _ := p.FreedBelow(up + 1) // whole segments up to up: the active one never
	return fmt.Sprintf("; tiered storage on, the remote store holds offsets up to %d: %s of these segments are local copies of uploaded ones (a lower local.retention.bytes or local.retention.ms frees them, nothing lost), %s is held only here",
		up, brokers.Bytes(copies), brokers.Bytes(max(0, p.Bytes-copies))), copies
}

// trouble: a dir full, or offline in the broker's own answer.
func (r spaceRead) trouble() bool {
	for _, s := range r.states {
		if s.Err != "" {
			return true
		}
	}
	for _, s := range r.space {
		if s.Full() {
			return true
		}
	}
	return false
}

// logEvidence is what the broker's server log said, when it was read.
func (r spaceRead) logEvidence(id int32) []string {
	switch {
	case r.logPath == "":
		return nil
	case r.logErr != nil:
		return []string{fmt.Sprintf("broker %d's server log %s not read: %v. Check server_log in the inventory (Kafka's scripts write $LOG_DIR/server.log, by default the Kafka home's logs/), or read it on the host: tail -c 8M %s | grep -B1 %q", id, r.logPath, r.logErr, shell.Quote(r.logPath), brokers.ENOSPC)}
	case len(r.enospc) == 0:
		return []string{fmt.Sprintf("broker %d's server log %s: no %q in its last %s", id, r.logPath, brokers.ENOSPC, brokers.Bytes(brokers.ServerLogTail))}
	}
	var out []string
	for _, l := range r.enospc {
		out = append(out, fmt.Sprintf("broker %d's server log %s: %s", id, r.logPath, l))
	}
	return out
}

// logDirFinding judges one broker's dirs.
func logDirFinding(id int32, up bool, r spaceRead, runbook string, tiers tierRead) (Finding, bool) {
	offline := map[string]string{}
	for _, s := range r.states {
		if s.Err != "" {
			offline[s.Dir] = s.Err
		}
	}
	var bad []string
	var ev []string
	var tops []brokers.PartitionSpace
	for _, s := range r.space {
		e, off := offline[s.Dir]
		if !s.Full() && !off {
			continue
		}
		bad = append(bad, s.Dir)
		ev = append(ev, fmt.Sprintf("df -P %s on broker %d's host: %d%% used, %s free of %s (filesystem %s)", s.Dir, id, s.UsedPercent(), brokers.Bytes(s.Avail), brokers.Bytes(s.Size), s.Mount))
		if off {
			ev = append(ev, fmt.Sprintf("DescribeLogDirs on broker %d: %s is offline (%s)", id, s.Dir, e))
		}
		tops = append(tops, s.Partitions...)
	}
	if len(bad) == 0 {
		return Finding{}, false
	}
	ev = append(ev, r.logEvidence(id)...)
	slices.SortFunc(tops, func(a, b brokers.PartitionSpace) int { return int(b.Bytes - a.Bytes) })
	tieredCopies := false
	for _, p := range tops[:min(5, len(tops))] {
		n, copies := tiers.note(p)
		tieredCopies = tieredCopies || copies > 0
		ev = append(ev, fmt.Sprintf("%s: %s in %d segments, the oldest from offset %d%s", p.Name, brokers.Bytes(p.Bytes), len(p.Segments), p.Oldest(), n))
	}
	if tiers.err != nil {
		ev = append(ev, "tiered storage not read: "+tiers.err.Error())
	}
	sum := fmt.Sprintf("broker %d's log dir %s is full", id, strings.Join(bad, ", "))
	if len(r.enospc) > 0 {
		sum += fmt.Sprintf(" (its server log says %s)", brokers.ENOSPC)
	}
	if !up {
		sum += fmt.Sprintf(" and broker %d is down: Kafka takes a dir offline on ENOSPC and stops a broker whose every log dir failed; it cannot start again until space is freed on that filesystem", id)
	}
	f := Finding{Kind: FindLogDirFull, Severity: Critical, Brokers: []int32{id},
		Summary:  sum,
		Evidence: ev,
		Fix: fmt.Sprintf("run the %s runbook: `kremedy run %s --inventory %s --set broker=%d --set quarantine=DIR` (DIR a directory on another filesystem of broker %d's host): it deletes only records every consumer group has committed past (DeleteRecords), moves whole replicated partition directories aside only while the broker is down, starts it and verifies. Or grow the filesystem",
			runbook, runbook, InventoryMark, id, id),
		DoNot:   "do not rm segment files by hand: Kafka's checkpoints and indexes still name them, and a consumer may not have read them yet",
		Runbook: runbook}
	if tieredCopies {
		when := "frees them"
		if !up {
			when = fmt.Sprintf("frees them once broker %d runs again (a stopped broker deletes nothing)", id)
		}
		f.Fix += fmt.Sprintf(". A tiered topic above holds local copies of uploaded segments: lowering its local.retention.bytes (or .ms) %s and loses nothing, consumers read them from the remote store; the runbook's first step does this on a running broker and its last sets the old value back", when)
	}
	return f, true
}
