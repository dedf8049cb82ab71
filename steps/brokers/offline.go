package brokers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/steps/ports"
)

// Offline is one partition without a leader, with its replicas' log ends
// as their disks hold them and what each way out loses.
type Offline struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	// Dead are the replicas whose brokers do not serve.
	Dead []int32 `json:"dead"`
	// Ends are the log ends read, by broker (a dead broker's when its host
	// answered); a replica absent from it could not be read (Unread says
	// why).
	Ends   map[int32]LogEnd `json:"ends"`
	Unread map[int32]string `json:"unread,omitempty"`
	// Committed is the highest offset a consumer group committed on the
	// partition (-1: none): the dead leader's log reached at least there.
	Committed int64  `json:"committed"`
	Group     string `json:"group,omitempty"` // the group that committed it
	// ELR are its eligible leader replicas (KRaft, KIP-966; nil when the
	// cluster does not say): all dead, or it would not be listed.
	ELR []int32 `json:"elr,omitempty"`
}

// Name is topic-partition.
func (o Offline) Name() string { return fmt.Sprintf("%s-%d", o.Topic, o.Partition) }

// Choice is what to do about one offline partition and what it loses.
type Choice struct {
	// Wait is the dead broker to bring back, when its host answered and its
	// log is the longest: nothing is lost (0: none).
	Wait int32 `json:"wait,omitempty"`
	// Elect is the live replica with the longest log, and ElectEnd its end.
	Elect    int32 `json:"elect,omitempty"`
	ElectEnd int64 `json:"elect_end"`
	// FirstLive is the replica Kafka's unclean election would pick: the
	// first live one in assignment order (PartitionChangeBuilder.
	// electAnyLeader, 3.9).
	FirstLive int32 `json:"first_live,omitempty"`
	// Longest is the longest end known (a log read, or a group's commit),
	// Lost the records electing Elect loses against it; Exact is false
	// when a dead replica's log could not be read (Lost is then a floor).
	Longest int64 `json:"longest"`
	Lost    int64 `json:"lost"`
	Exact   bool  `json:"exact"`
	// Why says, for an operator, how Lost was found.
	Why string `json:"why"`
	// LostFrom and LostTo bound, in Unix ms, when the lost records were
	// written: the elected log's last write and the longest log's (their
	// last batches' maxTimestamp); 0 when a log read does not say (the
	// longest end is a group's commit, or a log holds no batch).
	LostFrom int64 `json:"lost_from_ms,omitempty"`
	LostTo   int64 `json:"lost_to_ms,omitempty"`
}

// Window says when the records an election loses were written, or "" when
// the logs do not say: the loss in time.
func (c Choice) Window() string {
	if c.Lost <= 0 || c.LostFrom <= 0 || c.LostTo < c.LostFrom {
		return ""
	}
	from, to := time.UnixMilli(c.LostFrom).UTC(), time.UnixMilli(c.LostTo).UTC()
	return fmt.Sprintf("%v of writes, after %s up to %s UTC (the logs' batch timestamps)", to.Sub(from).Round(time.Millisecond), from.Format("2006-01-02 15:04:05.000"), to.Format("15:04:05.000"))
}

// Choose decides from the log ends read: wait for a dead broker whose log
// is the newest, or elect the newest live log.
func (o Offline) Choose() Choice { return o.ChooseWithout(nil) }

// newer orders logs as Kafka's truncation does: by last leader epoch, then
// by end. A follower whose last epoch is older truncates to where its
// epoch ends on the leader (OffsetsForLeaderEpoch, KIP-101/KIP-279), so a
// log that is longer at an older epoch has a divergent tail, not more
// records.
func newer(a, b LogEnd) bool {
	return a.Epoch > b.Epoch || a.Epoch == b.Epoch && a.End > b.End
}

// ChooseWithout is Choose when the dead brokers gone will not come back
// (the operator says so: their host answers, the broker does not start):
// their logs still count for what an election loses — the records only
// they hold, and when those were written — but nobody waits for them.
//
// The elected live log and the one waited for are the newest by (last
// leader epoch, end offset): a dead log as new as the elected one (a tie)
// is not waited for, electing loses nothing against it. A dead log longer
// than the elected one but at an older last epoch is not counted in the
// loss: its tail is divergent (written by a leader a later epoch already
// replaced), and it would be truncated when it comes back either way.
func (o Offline) ChooseWithout(gone []int32) Choice {
	c := Choice{Longest: -1, ElectEnd: -1, Exact: len(o.Unread) == 0}
	var elect LogEnd
	for _, r := range o.Replicas {
		e, ok := o.Ends[r]
		if !ok || !e.Known() || slices.Contains(o.Dead, r) {
			continue
		}
		if c.FirstLive == 0 {
			c.FirstLive = r
		}
		if c.Elect == 0 || newer(e, elect) {
			c.Elect, c.ElectEnd, elect = r, e.End, e
			c.LostFrom = e.LastWrite
		}
	}
	var longestWrite int64
	var older []string
	if c.Elect != 0 {
		c.Longest, longestWrite = elect.End, elect.LastWrite
	}
	var best LogEnd
	for _, r := range o.Replicas {
		e, ok := o.Ends[r]
		if !ok || !e.Known() {
			continue
		}
		if c.Elect != 0 && !newer(e, elect) {
			if e.End > c.ElectEnd {
				older = append(older, fmt.Sprintf("broker %d's log ends at %d but at leader epoch %d, older than the elected log's %d: its tail past that epoch is divergent and not counted", r, e.End, e.Epoch, elect.Epoch))
			}
			continue
		}
		if e.End > c.Longest {
			c.Longest, longestWrite = e.End, e.LastWrite
		}
		if slices.Contains(o.Dead, r) && !slices.Contains(gone, r) && (c.Wait == 0 || newer(e, best)) {
			c.Wait, best = r, e
		}
	}
	c.Why = fmt.Sprintf("longest log read: %d", max(c.Longest, -1))
	if len(older) > 0 {
		c.Why += "; " + strings.Join(older, "; ")
	}
	if o.Committed > c.Longest {
		c.Longest = o.Committed
		c.Wait = 0
		c.Why = fmt.Sprintf("group %s had read up to %d", o.Group, o.Committed)
		longestWrite = 0
	}
	if c.Elect != 0 && c.Wait == 0 {
		c.Lost = max(c.Longest-c.ElectEnd, 0)
	}
	if c.Lost > 0 && longestWrite > 0 {
		c.LostTo = longestWrite
	} else {
		c.LostFrom = 0
	}
	if !c.Exact {
		var un []string
		keys := mapsKeys(o.Unread)
		slices.Sort(keys)
		for _, b := range keys {
			un = append(un, fmt.Sprintf("broker %d", b))
		}
		c.Why += "; " + strings.Join(un, ", ") + " could not be read, so at least this many"
	}
	return c
}

// LiveUnread are the replicas on brokers that serve whose log end could
// not be read (Unread says why): while there is one, the longest live log
// is not known.
func (o Offline) LiveUnread() []int32 {
	var out []int32
	for _, r := range o.Replicas {
		if _, un := o.Unread[r]; un && !slices.Contains(o.Dead, r) {
			out = append(out, r)
		}
	}
	return out
}

func mapsKeys(m map[int32]string) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	return out
}

// FindOffline lists the partitions without a leader in broker's metadata
// (topics, or every topic) whose in-sync replicas are all on dead brokers,
// the brokers that serve (live) being alive.
func FindOffline(ctx context.Context, k ports.Kafka, broker int32, live []int32, topics ...string) ([]Offline, error) {
	v, err := k.BrokerView(ctx, broker, topics...)
	if err != nil {
		return nil, err
	}
	var out []Offline
	for name, tv := range v.Topics {
		for p, pv := range tv.Partitions {
			if !pv.IsOffline() {
				continue
			}
			o := Offline{Topic: name, Partition: p, Replicas: pv.Replicas, ISR: pv.ISR, Committed: -1}
			for _, r := range pv.Replicas {
				if !slices.Contains(live, r) {
					o.Dead = append(o.Dead, r)
				}
			}
			// Only a partition whose in-sync replicas are all dead needs an
			// unclean election; one with a live in-sync replica waits for a
			// controller (no-controller), not for a choice of logs.
			if len(o.Dead) > 0 && !slices.ContainsFunc(o.ISR, func(r int32) bool { return slices.Contains(live, r) }) {
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(a, b Offline) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

// ReadEnds reads, over SSH, every replica's log end of the offline
// partitions (one command per host), and the consumer groups' highest
// commit on each. Log dirs come from the inventory, else from the broker
// (DescribeLogDirs, a live one only). A host that does not answer leaves
// its replicas in Unread.
func ReadEnds(ctx context.Context, c ports.Cluster, offs []Offline) {
	byBroker := map[int32][]string{}
	for _, o := range offs {
		for _, r := range o.Replicas {
			byBroker[r] = append(byBroker[r], o.Name())
		}
	}
	var ids []int32
	for id := range byBroker {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	type answer struct {
		ends map[string]LogEnd
		err  error
	}
	got := par.Each(ids, func(id int32) answer {
		dirs, err := logDirsOf(ctx, c, id)
		if err != nil {
			return answer{err: err}
		}
		e, err := ReadLogEnds(ctx, c.Hosts, id, dirs, byBroker[id])
		return answer{e, err}
	})
	for i := range offs {
		o := &offs[i]
		o.Ends, o.Unread = map[int32]LogEnd{}, map[int32]string{}
		for _, r := range o.Replicas {
			a := got[slices.Index(ids, r)]
			switch e, ok := a.ends[o.Name()]; {
			case a.err != nil:
				o.Unread[r] = hostOf(c.Target, r) + a.err.Error()
			case !ok || !e.Known():
				o.Unread[r] = e.Err
			default:
				o.Ends[r] = e
			}
		}
	}
	committed(ctx, c.Kafka, offs)
}

// committed sets each partition's highest committed offset.
func committed(ctx context.Context, k ports.Kafka, offs []Offline) {
	groups := map[string][]ports.GroupUse{}
	for i := range offs {
		o := &offs[i]
		gs, seen := groups[o.Topic]
		if !seen {
			gs, _ = k.Groups(ctx, o.Topic) // best effort: a floor, never a figure on its own
			groups[o.Topic] = gs
		}
		for _, g := range gs {
			if at, ok := g.Offsets[o.Partition]; ok && at > o.Committed {
				o.Committed, o.Group = at, g.Group
			}
		}
	}
}

// hostOf is "host H: " for broker id's inventory host, or "".
func hostOf(t ports.Target, id int32) string {
	if h, ok := t.Host(id); ok && h.Host != "" {
		return "host " + h.Host + ": "
	}
	return ""
}

func logDirsOf(ctx context.Context, c ports.Cluster, id int32) ([]string, error) {
	if h, ok := c.Target.Host(id); ok && len(h.LogDirs) > 0 {
		return h.LogDirs, nil
	}
	dirs, err := c.Kafka.LogDirs(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("broker %d's log dirs: the inventory names none and the broker did not say (%w); name them in the inventory's log_dirs", id, err)
	}
	return dirs, nil
}

// DeadSet names an offline partition's dead brokers, the key that groups
// partitions sharing one cause ("1,3").
func (o Offline) DeadSet() string {
	d := slices.Clone(o.Dead)
	slices.Sort(d)
	return strings.Trim(strings.ReplaceAll(fmt.Sprint(d), " ", ","), "[]")
}

// DropElectable removes the partitions a clean election can still bring
// back: those with a live eligible leader replica (KRaft with ELR,
// KIP-966: DescribeTopicPartitions). A cluster that does not support it
// (ports.ErrUnsupported or UNSUPPORTED_VERSION: ZooKeeper mode, Kafka
// before 3.8) keeps every partition; the others get their ELR. Any other
// error is the error: on an ELR cluster a transient one would leave a
// partition with a live ELR member in the unclean plan.
func DropElectable(ctx context.Context, k ports.Kafka, offs []Offline, live []int32) ([]Offline, error) {
	if len(offs) == 0 {
		return offs, nil
	}
	var topics []string
	for _, o := range offs {
		if !slices.Contains(topics, o.Topic) {
			topics = append(topics, o.Topic)
		}
	}
	elr, err := k.EligibleLeaders(ctx, topics)
	switch {
	case errors.Is(err, ports.ErrUnsupported) || errors.Is(err, kerr.UnsupportedVersion):
		return offs, nil
	case err != nil:
		return nil, fmt.Errorf("the eligible leader replicas of %v could not be read (DescribeTopicPartitions: %w): without them a partition a clean election can still bring back (a live ELR member, KIP-966) would be elected uncleanly, losing records. Nothing was changed; run again (a transient error), or check that every broker answers DescribeTopicPartitions", topics, err)
	}
	var out []Offline
	for _, o := range offs {
		e := elr[o.Topic][o.Partition]
		if !slices.ContainsFunc(e.Eligible, func(r int32) bool { return slices.Contains(live, r) }) {
			o.ELR = e.Eligible
			out = append(out, o)
		}
	}
	return out, nil
}
