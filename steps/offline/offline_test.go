package offline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// kafkaFake answers what look asks: the brokers serving, one topic's
// metadata, the groups. Any other call panics (the embedded nil
// interface): look must ask nothing else.
type kafkaFake struct {
	ports.Kafka
	live   []int32
	parts  map[int32]ports.PartitionView
	groups []ports.GroupUse
	// groupsErr is what Groups returns beside groups (ErrGroupsIncomplete).
	groupsErr error
	elr       map[int32]ports.ELR // nil: the cluster does not answer (ZooKeeper mode)
	elrErr    error               // EligibleLeaders fails with it
	// a run's: each broker's log end, reorders asked, elections to fail
	ends      map[int32]int64
	reorders  int
	failElect int
	// producers: what DescribeProducers answers (open transactions);
	// txns what the coordinators say of producer ids, nil: the port
	// cannot ask; after txnReads coordinator reads, producers becomes
	// producersLater (a transaction that ended as it was read).
	producers      []ports.ProducerUse
	txns           map[int64]ports.TxnState
	txnReads       int
	txnFailAfter   int // > 0: coordinator reads after this many fail
	producersLater []ports.ProducerUse
	elections      int
	// lag: the next lag metadata reads after a reorder show the replica
	// lists from before it (a broker's cache catching up); before holds them.
	lag    int
	before map[int32]ports.PartitionView
}

func (k *kafkaFake) EligibleLeaders(context.Context, []string) (map[string]map[int32]ports.ELR, error) {
	if k.elrErr != nil {
		return nil, k.elrErr
	}
	if k.elr == nil {
		return nil, ports.ErrUnsupported
	}
	return map[string]map[int32]ports.ELR{"pay": k.elr}, nil
}

func (k *kafkaFake) DescribeCluster(context.Context) (ports.ClusterView, error) {
	var cv ports.ClusterView
	for _, id := range k.live {
		cv.Brokers = append(cv.Brokers, ports.BrokerNode{ID: id})
	}
	return cv, nil
}

func (k *kafkaFake) BrokerView(_ context.Context, id int32, _ ...string) (ports.BrokerView, error) {
	if k.before != nil && k.lag > 0 {
		k.lag--
		return ports.BrokerView{Broker: id, Topics: map[string]ports.TopicView{"pay": {Name: "pay", Partitions: k.before}}}, nil
	}
	return ports.BrokerView{Broker: id, Topics: map[string]ports.TopicView{"pay": {Name: "pay", Partitions: k.parts}}}, nil
}

func (k *kafkaFake) Groups(context.Context, string) ([]ports.GroupUse, error) {
	return k.groups, k.groupsErr
}

// shHosts runs a host's command with this machine's /bin/sh, its log dirs
// being local directories; a host in down does not answer.
type shHosts struct {
	ports.Hosts
	down []int32
}

func (h *shHosts) Run(ctx context.Context, broker int32, cmd string, out func(ports.Line)) error {
	if slices.Contains(h.down, broker) {
		return fmt.Errorf("ssh host unreachable: broker %d", broker)
	}
	b, err := exec.CommandContext(ctx, "/bin/sh", "-c", cmd).Output()
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		out(ports.Line{Text: l})
	}
	return err
}

// replica writes broker's replica of pay-p: one segment of end records,
// one record per batch, with leader epoch epoch.
func replica(t *testing.T, dir string, p int32, end int64, epoch int32) {
	t.Helper()
	pd := filepath.Join(dir, fmt.Sprintf("pay-%d", p))
	if err := os.MkdirAll(pd, 0o755); err != nil {
		t.Fatal(err)
	}
	var seg []byte
	for o := int64(0); o < end; o++ {
		b := make([]byte, 70)
		binary.BigEndian.PutUint64(b, uint64(o))
		binary.BigEndian.PutUint32(b[8:], 58)
		binary.BigEndian.PutUint32(b[12:], uint32(epoch))
		b[16] = 2
		binary.BigEndian.PutUint64(b[35:], uint64(writtenAt(o))) // maxTimestamp
		seg = append(seg, b...)
	}
	if err := os.WriteFile(filepath.Join(pd, "00000000000000000000.log"), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pd, "leader-epoch-checkpoint"), []byte(fmt.Sprintf("0\n1\n%d 0\n", epoch)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writtenAt is when the canned logs' record at offset o was written: a
// second per record from 2025-12-05 10:00:00 UTC.
func writtenAt(o int64) int64 { return 1_764_928_800_000 + o*1000 }

// cluster is brokers 1-4, broker 3 dead; pay-0 on [1 2 3] and pay-1 on
// [2 3 1], ISR [3]; logs 20 (broker 1), 35 (broker 2), 45 (broker 3).
func cluster(t *testing.T, hostDown bool) ports.Cluster {
	return clusterELR(t, hostDown, nil)
}

// clusterELR is cluster with eligible leader replicas (KRaft): pay-3,
// offline too, has a live one (broker 1) and is left to a clean election.
func clusterELR(t *testing.T, hostDown bool, elr map[int32]ports.ELR) ports.Cluster {
	root := t.TempDir()
	tgt := ports.Target{Name: "c"}
	for id := int32(1); id <= 4; id++ {
		d := filepath.Join(root, fmt.Sprint(id))
		tgt.Hosts = append(tgt.Hosts, ports.Host{ID: id, LogDirs: []string{d}})
		for p, ends := range []map[int32]int64{{1: 20, 2: 35, 3: 45}, {1: 20, 2: 35, 3: 45}} {
			if e, ok := ends[id]; ok {
				replica(t, d, int32(p), e, id)
			}
		}
	}
	h := &shHosts{}
	if hostDown {
		h.down = []int32{3}
	}
	k := &kafkaFake{live: []int32{1, 2, 4}, parts: map[int32]ports.PartitionView{
		0: {Partition: 0, Leader: -1, Replicas: []int32{1, 2, 3}, ISR: []int32{3}},
		1: {Partition: 1, Leader: -1, Replicas: []int32{2, 3, 1}, ISR: []int32{3}},
		2: {Partition: 2, Leader: 4, Replicas: []int32{4, 1, 2}, ISR: []int32{4}}, // online: not looked at
	}, groups: []ports.GroupUse{{Group: "readers", Offsets: map[int32]int64{0: 45, 1: 40}}}}
	if elr != nil {
		k.elr = elr
		k.parts[3] = ports.PartitionView{Partition: 3, Leader: -1, Replicas: []int32{1, 2, 3}, ISR: nil}
	}
	return ports.Cluster{Target: tgt, Kafka: k, Hosts: h}
}

// TestWaitForTheLongestDeadLog: the dead last leader's host answers and its
// log is the longest: the survey recommends starting it, ends the run, and
// offline-elect refuses.
func TestWaitForTheLongestDeadLog(t *testing.T) {
	offs, live, err := look(context.Background(), cluster(t, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := surveyPlan(offs, live, nil)
	if !p.EndsRun || !strings.Contains(p.Summary, "dead broker(s) [3] hold their longest logs") || !strings.Contains(p.Summary, "`--set lost_brokers=3`") {
		t.Fatalf("survey does not stop the run for broker 3, naming the way on if it cannot start: %+v", p)
	}
	notes := strings.Join(p.Notes, "\n")
	for _, w := range []string{"pay-0: wait for broker 3 (its log, to 45, is the longest): nothing is lost — RECOMMENDED",
		"if broker 3 cannot come back (--set lost_brokers=3): elect broker 2, the longest live log (end 35): loses 10 records (longest log read: 45): 10s of writes, after 2025-12-05 10:00:34.000 up to 10:00:44.000 UTC"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
	if _, _, err := electPlan(offs, nil); !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "--set lost_brokers=3") {
		t.Fatalf("elect with broker 3's log longest: %v", err)
	}
	// The operator says broker 3 will not come back: the survey goes on,
	// and the election of broker 2 lists the 10 records and 10 seconds of
	// writes only broker 3 held.
	if p := surveyPlan(offs, live, []int32{3}); p.EndsRun {
		t.Fatalf("survey with broker 3 given up still stops the run: %+v", p)
	}
	p, el, err := electPlan(offs, []int32{3})
	if err != nil || len(el) != 2 || el[0].Leader != 2 || el[0].Lost != 10 {
		t.Fatalf("elect with broker 3 given up: %+v %+v %v", p, el, err)
	}
	if w := "pay-0: elect broker 2 (log end 35; Kafka alone would pick broker 1): LOSES 10 records, offsets 35 to 44 (longest log read: 45): 10s of writes, after 2025-12-05 10:00:34.000 up to 10:00:44.000 UTC"; !strings.Contains(strings.Join(p.Notes, "\n"), w) {
		t.Errorf("elect notes lack %q:\n%s", w, strings.Join(p.Notes, "\n"))
	}
	if got := lossLines(el); !strings.HasSuffix(got[0], "10 records lost (offsets 35 to 44): 10s of writes, after 2025-12-05 10:00:34.000 up to 10:00:44.000 UTC (the logs' batch timestamps)") {
		t.Errorf("report line %q", got[0])
	}
}

// TestElectTheLongestLiveLog: the dead leader's host does not answer:
// broker 2 (the longest live log, second in pay-0's order) is put first
// and elected; the loss is a floor from the group's commit.
func TestElectTheLongestLiveLog(t *testing.T) {
	offs, live, err := look(context.Background(), clusterELR(t, true, map[int32]ports.ELR{0: {Eligible: []int32{3}}, 3: {Eligible: []int32{1}}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := surveyPlan(offs, live, nil); p.EndsRun || len(p.Facts) != 3 || !strings.Contains(p.Facts[1], "broker 1 (live): log end 20, last leader epoch 1; broker 2 (live): log end 35, last leader epoch 2; broker 3 (dead): not read") ||
		!strings.Contains(p.Facts[1], "Kafka's own unclean election would pick broker 1") {
		t.Fatalf("survey: %+v", p)
	}
	p, el, err := electPlan(offs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range p.Actions {
		ids = append(ids, a.ID+": "+a.Detail)
	}
	want := []string{
		"reorder-pay-0: replicas [1 2 3] → [2 1 3] (the same brokers, broker 2 first: no data moves)",
		"elect-pay: ElectLeaders UNCLEAN for exactly partitions 0→broker 2, 1→broker 2",
	}
	if !slices.Equal(ids, want) {
		t.Errorf("actions\n%s\nwant\n%s", strings.Join(ids, "\n"), strings.Join(want, "\n"))
	}
	notes := strings.Join(p.Notes, "\n")
	for _, w := range []string{"pay-0: elect broker 2 (log end 35; Kafka alone would pick broker 1): LOSES at least 10 records, offsets 35 to 44 (group readers had read up to 45",
		"pay-1: elect broker 2 (log end 35; Kafka alone would pick broker 2): LOSES at least 5 records, offsets 35 to 39 (group readers had read up to 40"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
	if p.Summary != "elect the longest live log of 2 offline partitions: at least 15 records lost in all" || len(el) != 2 || el[0].Leader != 2 || el[0].Lost != 10 {
		t.Errorf("summary %q, elected %+v", p.Summary, el)
	}
	if got := lossLines(el); got[0] != "pay-0: elected broker 2 (log end 35): at least 10 records lost (offsets 35 to 44)" || got[2] != "records lost in all: 15" {
		t.Errorf("report lines %q", got)
	}
}

// Kafka's side of a run: replica lists reordered at once, an UNCLEAN
// election that picks the first live replica in assignment order (as
// Kafka does), end offsets from the leader's log, no producers. failElect
// fails that many elections first (the run dies there; a resume goes on).
func (k *kafkaFake) Reorder(_ context.Context, _ string, r map[int32][]int32) (map[int32]error, error) {
	out := map[int32]error{}
	k.before = maps.Clone(k.parts)
	for p, reps := range r {
		pv := k.parts[p]
		pv.Replicas = reps
		k.parts[p] = pv
		out[p] = nil
	}
	k.reorders++
	return out, nil
}

func (k *kafkaFake) Reassigning(context.Context, string, []int32) (map[int32][]int32, error) {
	return nil, nil
}

func (k *kafkaFake) ElectUnclean(_ context.Context, _ string, ps []int32) (map[int32]error, error) {
	k.elections++
	if k.failElect > 0 {
		k.failElect--
		return nil, errors.New("connection reset")
	}
	out := map[int32]error{}
	for _, p := range ps {
		pv := k.parts[p]
		for _, r := range pv.Replicas {
			if slices.Contains(k.live, r) {
				pv.Leader, pv.ISR = r, []int32{r}
				break
			}
		}
		k.parts[p] = pv
		out[p] = nil
	}
	return out, nil
}

func (k *kafkaFake) EndOffsets(context.Context, string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for p, pv := range k.parts {
		if pv.Leader >= 0 {
			out[p] = k.ends[pv.Leader]
		}
	}
	return out, nil
}

func (k *kafkaFake) Producers(context.Context, string, []int32, []int32) ([]ports.ProducerUse, error) {
	return slices.Clone(k.producers), nil
}

// txnFake is kafkaFake with the coordinators' answers.
type txnFake struct{ *kafkaFake }

func (k txnFake) Transactions(_ context.Context, ids []int64) (map[int64]ports.TxnState, error) {
	if k.txnFailAfter > 0 && k.txnReads >= k.txnFailAfter {
		return nil, errors.New("describe transactions: COORDINATOR_LOAD_IN_PROGRESS")
	}
	out := map[int64]ports.TxnState{}
	for _, id := range ids {
		if st, ok := k.txns[id]; ok {
			out[id] = st
		}
	}
	k.txnReads++
	if k.producersLater != nil {
		k.producers = k.producersLater
	}
	return out, nil
}

// TestRefuseWhileALiveLogIsUnread: live broker 1's host does not answer:
// the longest live log is not known, so nothing is elected (not even
// broker 2, the longest read), the refusal naming broker 1, the error and
// the way forward.
func TestRefuseWhileALiveLogIsUnread(t *testing.T) {
	c := cluster(t, true)
	c.Hosts.(*shHosts).down = []int32{1, 3}
	offs, live, err := look(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = electPlan(offs, nil)
	if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), "live broker 1 (read log ends on broker 1: ssh host unreachable: broker 1)") || !strings.Contains(err.Error(), "Fix SSH to its host") {
		t.Fatalf("elect with live broker 1 unread: %v", err)
	}
	if notes := strings.Join(surveyPlan(offs, live, nil).Notes, "\n"); !strings.Contains(notes, "pay-0: wait for broker 3 (its host did not answer: its log end is unknown); or elect: not until live broker(s) [1] can be read") || strings.Contains(notes, "the longest live log (end") {
		t.Errorf("survey notes:\n%s", notes)
	}
}

// TestELRNotReadRefuses: on an ELR cluster a transient error reading the
// eligible leader replicas stops the run (pay-3, with a live ELR member,
// would be elected uncleanly); a release without them (UNSUPPORTED_VERSION)
// keeps every partition.
func TestELRNotReadRefuses(t *testing.T) {
	c := clusterELR(t, true, map[int32]ports.ELR{0: {Eligible: []int32{3}}, 3: {Eligible: []int32{1}}})
	c.Kafka.(*kafkaFake).elrErr = errors.New("connection reset")
	if _, _, err := look(context.Background(), c, nil); err == nil || !strings.Contains(err.Error(), "eligible leader replicas of [pay] could not be read") || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("look with ELR unreadable: %v", err)
	}
	c.Kafka.(*kafkaFake).elrErr = fmt.Errorf("describe topic partitions: %w", kerr.UnsupportedVersion)
	offs, _, err := look(context.Background(), c, nil)
	if err != nil || len(offs) != 3 {
		t.Fatalf("look on a release without ELR: %d partitions, %v; want all 3 kept", len(offs), err)
	}
}

// TestHangs: what makes an open transaction hang, by its coordinator's
// state of the producer.
func TestHangs(t *testing.T) {
	pu := ports.ProducerUse{Partition: 1, ProducerID: 8, Epoch: 2, TxnStart: 40}
	in := map[string][]int32{"pay": {1}}
	for _, c := range []struct {
		name  string
		st    ports.TxnState
		found bool
		want  string // "" not hanging
	}{
		{"ongoing on the partition", ports.TxnState{TxnID: "t", State: "Ongoing", ProducerEpoch: 2, Partitions: in}, true, ""},
		{"committing, marker to come", ports.TxnState{TxnID: "t", State: "PrepareCommit", ProducerEpoch: 2, Partitions: in}, true, ""},
		{"no transactional id", ports.TxnState{}, false, "no transactional id uses producer 8 any more"},
		{"ongoing elsewhere", ports.TxnState{TxnID: "t", State: "Ongoing", ProducerEpoch: 2, Partitions: map[string][]int32{"pay": {0}}}, true, `transaction "t" (Ongoing) does not include pay-1`},
		{"committing at the next epoch (transaction version 2)", ports.TxnState{TxnID: "t", State: "PrepareCommit", ProducerEpoch: 3, Partitions: in}, true, ""},
		{"aborting at its timeout, epoch bumped", ports.TxnState{TxnID: "t", State: "PrepareAbort", ProducerEpoch: 3, Partitions: in}, true, ""},
		{"completed", ports.TxnState{TxnID: "t", State: "CompleteAbort", ProducerEpoch: 2}, true, `has transaction "t" CompleteAbort`},
		{"empty", ports.TxnState{TxnID: "t", State: "Empty", ProducerEpoch: 3}, true, `has transaction "t" Empty`},
	} {
		got := hangs("pay", pu, c.st, c.found)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
