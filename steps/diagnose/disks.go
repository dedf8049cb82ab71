package diagnose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/segments"
)

// diskListing is every host's log dirs as listed over SSH.
type diskListing struct {
	dirs map[int32][]string
	brokers.Listing
}

// listDisks finds each broker's log dirs (the inventory's, else the
// broker's own answer) and lists them on every host at once. One host that
// cannot be reached is recorded, not the end of the diagnosis: the other
// hosts' disks are still worth reading at 3 a.m.
func listDisks(ctx context.Context, c ports.Cluster, registered []int32) diskListing {
	dirs := map[int32][]string{}
	var ask []int32
	for _, h := range c.Target.Hosts {
		dirs[h.ID] = h.LogDirs
		if len(h.LogDirs) == 0 && slices.Contains(registered, h.ID) {
			ask = append(ask, h.ID)
		}
	}
	for i, d := range par.Each(ask, func(id int32) []string { d, _ := c.Kafka.LogDirs(ctx, id); return d }) {
		dirs[ask[i]] = d
	}
	return diskListing{dirs: dirs, Listing: brokers.List(ctx, c.Hosts, c.Target, dirs)}
}

// pendingDisks is a listing of the disks under way: listDisks runs while
// the diagnoser reads the rest of the cluster.
type pendingDisks struct {
	l    diskListing
	done chan struct{}
}

// startDisks starts listing the brokers' disks with o.Disk (and hosts to
// list them on); nil otherwise.
func startDisks(ctx context.Context, c ports.Cluster, o Options, ids []int32) *pendingDisks {
	if !o.Disk || c.Hosts == nil {
		return nil
	}
	p := &pendingDisks{done: make(chan struct{})}
	go func() { defer close(p.done); p.l = listDisks(ctx, c, ids) }()
	return p
}

// wait returns the listing once every host has answered or failed; nil
// when no listing was started.
func (p *pendingDisks) wait() *diskListing {
	if p == nil {
		return nil
	}
	<-p.done
	return &p.l
}

// unlistedFinding is a broker whose disk was not examined: SSH failed, or
// the host answered with what kremedy refuses to act on (a name Kafka
// cannot make, a log dir path a script could misread, a dir it cannot
// enter) — then the evidence, not SSH, says what to fix.
func unlistedFinding(id int32, err error, more string) Finding {
	f := Finding{Kind: FindDiskUnlisted, Severity: Critical, Brokers: []int32{id},
		Summary:  fmt.Sprintf("broker %d's log dirs could not be listed over SSH: its disk was not examined", id),
		Evidence: []string{err.Error()},
		Fix:      "fix SSH to the host (reachability, user, key, known_hosts) and diagnose again" + more}
	if errors.Is(err, ports.ErrRefused) {
		f.Summary = fmt.Sprintf("broker %d's host answered, but kremedy refused what its log dirs hold: its disk was not examined", id)
		f.Fix = "do what the evidence says (move a name Kafka cannot make out of the log dir, give a log dir a plain path, or let kremedy's commands run through sudo), then diagnose again" + more
	}
	return f
}

func diagnoseDisks(add func(Finding), t ports.Target, st *kafkazk.ClusterState, l diskListing, only string, refuses bool) {
	all, errs := l.Entries, l.Errs
	for _, h := range t.Hosts {
		if err := errs[h.ID]; err != nil {
			add(unlistedFinding(h.ID, err, "; a cleanup refuses to start until every host answers"))
		}
	}
	type key struct{ kind, topic string }
	groups := map[key]*Finding{}
	for _, h := range t.Hosts {
		for _, dir := range l.dirs[h.ID] {
			for _, e := range all[h.ID][dir] {
				if !e.IsDir || segments.IsLogDirFile(e.Name) {
					continue
				}
				pd, err := segments.ParseDir(e.Name)
				if err != nil {
					if errors.Is(err, segments.ErrBlocksStartup) && (only == "" || strings.HasPrefix(e.Name, only)) {
						add(Finding{Kind: FindStrayDirectory, Severity: Critical, Brokers: []int32{h.ID},
							Summary:  fmt.Sprintf("broker %d's log dir holds %s, which Kafka cannot parse: the broker will refuse to start", h.ID, e.Name),
							Evidence: []string{fmt.Sprintf("%s/%s: %v", dir, e.Name, err)},
							Fix:      "move it out of every log dir (not just rename it inside one) before the broker restarts"})
					}
					continue
				}
				if only != "" && pd.Topic != only {
					continue
				}
				ts := st.Topics[pd.Topic]
				var k key
				var ev string
				switch {
				case ts == nil || !ts.HasZnode():
					if ts != nil && ts.PendingDelete || pd.Kind == segments.Delete {
						// covered by stuck-deletion, or Kafka's own asynchronous
						// delete (gone after file.delete.delay.ms)
						continue
					}
					k, ev = key{FindOrphanedSegments, pd.Topic}, fmt.Sprintf("broker %d %s/%s (%s)", h.ID, dir, e.Name, pd.Kind)
				case ts.Znode.TopicID != "" && e.TopicID != "" && e.TopicID != ts.Znode.TopicID && pd.Kind == segments.Live:
					k, ev = key{FindForeignSegments, pd.Topic}, fmt.Sprintf("broker %d %s/%s: partition.metadata topic_id %s, znode topic_id %s", h.ID, dir, e.Name, e.TopicID, ts.Znode.TopicID)
				default:
					continue
				}
				f, ok := groups[k]
				if !ok {
					f = &Finding{Kind: k.kind, Topic: k.topic, Runbook: "topic-cleanup"}
					groups[k] = f
				}
				f.Brokers = append(f.Brokers, h.ID)
				f.Partitions = append(f.Partitions, pd.Partition)
				f.Evidence = append(f.Evidence, ev)
			}
		}
	}
	for k, f := range groups {
		sort.Strings(f.Evidence)
		switch k.kind {
		case FindOrphanedSegments:
			f.Severity = Warning
			f.Summary = fmt.Sprintf("partition directories of %q remain on disk but ZooKeeper has no such topic", k.topic)
			f.Fix = fmt.Sprintf(cleanupFix, k.topic) + " — the segments are quarantined while every broker is stopped"
			f.DoNot = "do not recreate the topic under this name first: the brokers would adopt these segments (or reject it with INCONSISTENT_TOPIC_ID)"
		case FindForeignSegments:
			f.Severity = Critical
			f.Summary = fmt.Sprintf("directories of %q carry another topic ID than its znode (INCONSISTENT_TOPIC_ID): those brokers never serve or replicate it", k.topic)
			if !refuses {
				// Kafka 2.8 compares IDs only with a log already attached
				// to the partition: after a restart it adopts the directory.
				f.Summary = fmt.Sprintf("directories of %q carry another topic ID than its znode: on this release (topic IDs without the 3.0 check) the broker adopted them and serves the old segments as the new topic's", k.topic)
			}
			f.Fix = fmt.Sprintf(cleanupFixRecreate, k.topic)
			f.DoNot = "do not delete the directories while the broker runs, and do not rewrite the znode's topic_id"
		}
		add(*f)
	}
}
