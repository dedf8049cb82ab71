package steptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

var _ kafkazk.StateReader = (*ZK)(nil)

// ReadState implements kafkazk.StateReader one znode at a time, with the
// answers the ZooKeeper adapter's pipelined scan gives (StateConformance
// holds both to them).
func (z *ZK) ReadState(ctx context.Context, topics ...string) (*kafkazk.ClusterState, error) {
	return readState(ctx, z, topics)
}

func readState(ctx context.Context, zk ports.ZooKeeper, only []string) (*kafkazk.ClusterState, error) {
	for _, t := range only {
		if err := kafkazk.ValidateTopic(t); err != nil {
			return nil, err
		}
	}
	st := &kafkazk.ClusterState{Controller: -1, Topics: map[string]*kafkazk.TopicState{}}
	list := func(p string) ([]string, error) {
		kids, err := zk.Children(ctx, p)
		st.Reads++
		if err != nil && !zk.IsNoNode(err) {
			return nil, err
		}
		return kids, nil
	}
	if err := readCluster(ctx, zk, st, list); err != nil {
		return nil, err
	}
	var lists [3][]string
	for i, p := range []string{kafkazk.TopicsPath, kafkazk.ConfigTopicsPath, kafkazk.DeleteTopicsPath} {
		var err error
		if lists[i], err = list(p); err != nil {
			return nil, err
		}
	}
	topicList, configs, deletes := lists[0], lists[1], lists[2]
	names := slices.Concat(topicList, configs, deletes)
	if len(only) > 0 {
		names = slices.Clone(only)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		ts := kafkazk.NewTopicState(n)
		st.Topics[n] = ts
		if len(only) == 0 {
			if err := kafkazk.ValidateTopic(n); err != nil {
				ts.Errs = append(ts.Errs, err)
			}
		}
		ts.PendingDelete = slices.Contains(deletes, n)
		if !slices.Contains(topicList, n) {
			ts.Errs = append(ts.Errs, fmt.Errorf("%s: %w: no topic znode", zk.Chroot()+kafkazk.TopicPath(n), kafkazk.ErrMissing))
			continue
		}
		if err := readTopic(ctx, zk, st, ts); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		ts := st.Topics[n]
		if slices.Contains(configs, n) {
			if err := readConfig(ctx, zk, st, ts); err != nil {
				return nil, err
			}
		}
		kafkazk.SortErrs(ts.Errs)
		slices.Sort(ts.MissingStates)
	}
	kafkazk.SortErrs(st.Errs)
	return st, nil
}

// readCluster reads the registered brokers and the controller.
func readCluster(ctx context.Context, zk ports.ZooKeeper, st *kafkazk.ClusterState, list func(string) ([]string, error)) error {
	ids, err := list(kafkazk.BrokerIDsPath)
	if err != nil {
		return err
	}
	for _, k := range ids {
		n, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			st.Errs = append(st.Errs, fmt.Errorf("%s/%s: %w: not a broker id", kafkazk.BrokerIDsPath, k, kafkazk.ErrCorrupt))
			st.Brokers = nil
			break
		}
		st.Brokers = append(st.Brokers, int32(n))
	}
	slices.Sort(st.Brokers)
	st.Reads++
	b, _, err := zk.Get(ctx, kafkazk.ControllerPath)
	switch {
	case err == nil:
		var c kafkazk.ControllerZNode
		if err := kafkazk.DecodeZNode(zk.Chroot()+kafkazk.ControllerPath, b, &c); err != nil {
			st.Errs = append(st.Errs, err)
		} else {
			st.Controller = c.BrokerID
		}
	case !zk.IsNoNode(err):
		return err
	}
	return nil
}

func readTopic(ctx context.Context, zk ports.ZooKeeper, st *kafkazk.ClusterState, ts *kafkazk.TopicState) error {
	p := kafkazk.TopicPath(ts.Name)
	st.Reads++
	b, zs, err := zk.Get(ctx, p)
	if zk.IsNoNode(err) {
		ts.Errs = append(ts.Errs, fmt.Errorf("%s: %w: deleted during the scan", zk.Chroot()+p, kafkazk.ErrMissing))
		return nil
	}
	if err != nil {
		return err
	}
	ts.Exists, ts.Stat = true, zs
	if err := kafkazk.DecodeZNode(zk.Chroot()+p, b, &ts.Znode); err != nil {
		ts.Znode = kafkazk.TopicZNode{}
		ts.Errs = append(ts.Errs, err)
		return nil
	}
	assign, err := ts.Znode.Assignment()
	if err != nil {
		ts.Errs = append(ts.Errs, fmt.Errorf("%s: %w", zk.Chroot()+p, err))
		return nil
	}
	for part := range assign {
		sp := kafkazk.PartitionStatePath(ts.Name, part)
		st.Reads++
		b, _, err := zk.Get(ctx, sp)
		if zk.IsNoNode(err) {
			ts.Errs = append(ts.Errs, fmt.Errorf("%s: %w: partition %d has no state znode", zk.Chroot()+sp, kafkazk.ErrMissing, part))
			ts.MissingStates = append(ts.MissingStates, part)
			continue
		}
		if err != nil {
			return err
		}
		var ps kafkazk.PartitionState
		if err := kafkazk.DecodeZNode(zk.Chroot()+sp, b, &ps); err != nil {
			ts.Errs = append(ts.Errs, err)
			continue
		}
		ts.States[part] = ps
	}
	return nil
}

func readConfig(ctx context.Context, zk ports.ZooKeeper, st *kafkazk.ClusterState, ts *kafkazk.TopicState) error {
	p := kafkazk.ConfigTopicPath(ts.Name)
	st.Reads++
	b, _, err := zk.Get(ctx, p)
	if zk.IsNoNode(err) {
		ts.Errs = append(ts.Errs, fmt.Errorf("%s: %w: deleted during the scan", zk.Chroot()+p, kafkazk.ErrMissing))
		return nil
	}
	if err != nil {
		return err
	}
	var c kafkazk.TopicConfigZNode
	if err := kafkazk.DecodeZNode(zk.Chroot()+p, b, &c); err != nil {
		ts.Errs = append(ts.Errs, err)
		return nil
	}
	if c.Config == nil {
		c.Config = map[string]string{}
	}
	ts.Config = c.Config
	return nil
}

// StateZK is what StateConformance needs: a ZooKeeper to write through and
// the reader under test, on the same (empty) chroot.
type StateZK interface {
	ports.ZooKeeper
	kafkazk.StateReader
}

// StateConformance holds a kafkazk.StateReader to the answers the step
// kinds and diagnose rely on, on a chroot holding every shape of topic state
// a damaged cluster can have (seedStates). The fake passes it, and so must
// the ZooKeeper adapter's pipelined scan against a real ZooKeeper: the unit
// tests and production read cluster state the same way. zk's chroot must be
// empty. Each case reads the seeded chroot afresh.
func StateConformance(t *testing.T, zk StateZK) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seedStates(t, ctx, zk)
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, t *testing.T, zk StateZK)
	}{
		{"the whole state", stateWhole},
		{"only the topics asked for", stateSome},
		{"a hostile topic name", stateHostile},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(ctx, t, zk) })
	}
}

// stateWhole reads every topic: the brokers, the controller, each seeded
// topic's shape (stateShapes) and the details of the healthy "ok".
func stateWhole(ctx context.Context, t *testing.T, zk StateZK) {
	st, err := zk.ReadState(ctx)
	if err != nil {
		t.Fatalf("ReadState: %v", err)
	}
	if !slices.Equal(st.Brokers, []int32{1, 2}) || st.Controller != 2 || len(st.Errs) != 0 {
		t.Errorf("brokers %v controller %d errs %v: want [1 2], 2, none", st.Brokers, st.Controller, st.Errs)
	}
	if got, want := st.Sorted(), []string{"badcfg", "badkey", "badstate", "corrupt", "nostate", "ok", "orphan", "pending"}; !slices.Equal(got, want) {
		t.Fatalf("topics %v, want %v", got, want)
	}
	stateShapes(t, st)
	if m := st.Topics["nostate"].MissingStates; !slices.Equal(m, []int32{1}) {
		t.Errorf("nostate: missing states %v, want [1]", m)
	}
	if s := st.Topics["ok"].States[0]; s.Leader != 1 || s.LeaderEpoch != 4 || !slices.Equal(s.ISR, []int32{1, 2}) {
		t.Errorf("ok-0 state %+v", s)
	}
	if v := st.Topics["ok"].Stat.Version; v != 0 {
		t.Errorf("ok stat version %d, want 0", v)
	}
}

// stateShapes holds each seeded topic of st to its shape: whether it
// exists and has its znode, its partition states, its config, whether it
// is pending deletion, its errors (each wrapping ErrCorrupt or ErrMissing)
// and its topic id.
func stateShapes(t *testing.T, st *kafkazk.ClusterState) {
	for _, tc := range []struct {
		name             string
		exists, hasZnode bool
		states           int
		config           string // "nil", "empty" or a retention.ms value
		pending          bool
		corrupt, missing int
		id               string
	}{
		{"ok", true, true, 2, "1000", false, 0, 0, "AAAAAAAAAAAAAAAAAAAAAA"},
		{"corrupt", true, false, 0, "nil", false, 1, 0, ""},
		{"badkey", true, true, 0, "nil", false, 1, 0, "BBBBBBBBBBBBBBBBBBBBBB"},
		{"nostate", true, true, 1, "nil", false, 0, 1, ""},
		{"badstate", true, true, 0, "nil", false, 1, 0, ""},
		{"pending", true, true, 1, "nil", true, 0, 0, ""},
		{"orphan", false, false, 0, "empty", true, 0, 1, ""},
		{"badcfg", false, false, 0, "nil", false, 1, 1, ""},
	} {
		ts := st.Topics[tc.name]
		c, m := stateErrs(t, ts)
		cfg := "nil"
		switch {
		case ts.Config == nil:
		case len(ts.Config) == 0:
			cfg = "empty"
		default:
			cfg = ts.Config["retention.ms"]
		}
		if ts.Exists != tc.exists || ts.HasZnode() != tc.hasZnode || len(ts.States) != tc.states || cfg != tc.config ||
			ts.PendingDelete != tc.pending || c != tc.corrupt || m != tc.missing || ts.Znode.TopicID != tc.id || ts.States == nil {
			t.Errorf("%s: exists %v znode %v states %d config %s pending %v corrupt %d missing %d id %q; want %+v (errs %v)",
				tc.name, ts.Exists, ts.HasZnode(), len(ts.States), cfg, ts.PendingDelete, c, m, ts.Znode.TopicID, tc, ts.Errs)
		}
	}
}

// stateErrs counts a topic's errors by kind; one that wraps neither
// ErrCorrupt nor ErrMissing fails the test.
func stateErrs(t *testing.T, ts *kafkazk.TopicState) (corrupt, missing int) {
	for _, e := range ts.Errs {
		switch {
		case errors.Is(e, kafkazk.ErrCorrupt):
			corrupt++
		case errors.Is(e, kafkazk.ErrMissing):
			missing++
		default:
			t.Errorf("%s: error %v wraps neither ErrCorrupt nor ErrMissing", ts.Name, e)
		}
	}
	return corrupt, missing
}

// stateSome reads only the topics asked for, an absent one included.
func stateSome(ctx context.Context, t *testing.T, zk StateZK) {
	some, err := zk.ReadState(ctx, "ok", "nope", "pending")
	if err != nil {
		t.Fatalf("ReadState(ok, nope, pending): %v", err)
	}
	if got := some.Sorted(); !slices.Equal(got, []string{"nope", "ok", "pending"}) {
		t.Fatalf("topics %v, want [nope ok pending]", got)
	}
	if n := some.Topics["nope"]; n.Exists || n.PendingDelete || len(n.Errs) != 1 || !errors.Is(n.Errs[0], kafkazk.ErrMissing) {
		t.Errorf("nope: %+v", n)
	}
	if !some.Topics["pending"].PendingDelete || len(some.Topics["ok"].States) != 2 {
		t.Errorf("pending %+v ok %+v", some.Topics["pending"], some.Topics["ok"])
	}
}

// stateHostile: a topic name that could leave the topics' znodes is
// refused (ErrInvalidTopic) before any read.
func stateHostile(ctx context.Context, t *testing.T, zk StateZK) {
	if _, err := zk.ReadState(ctx, "../../etc"); !errors.Is(err, kafkazk.ErrInvalidTopic) {
		t.Errorf("ReadState of a hostile name: %v, want ErrInvalidTopic", err)
	}
}

// seedStates writes, under zk's chroot, every shape of topic state
// StateConformance reads back.
func seedStates(t *testing.T, ctx context.Context, zk StateZK) {
	t.Helper()
	put := func(p, data string) {
		t.Helper()
		var b []byte
		if data != "" {
			b = []byte(data)
		}
		if err := zk.Create(ctx, p, b, nil); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	for _, p := range []string{"/brokers", "/brokers/ids", "/brokers/topics", "/config", "/config/topics", "/admin", "/admin/delete_topics"} {
		put(p, "")
	}
	put("/brokers/ids/2", `{"version":5,"host":"b2","port":9092}`)
	put("/brokers/ids/1", `{"version":5,"host":"b1","port":9092}`)
	put("/controller", `{"version":2,"brokerid":2,"timestamp":"1"}`)
	topic := func(name, data string, states map[int32]string) {
		put(kafkazk.TopicPath(name), data)
		if states == nil {
			return
		}
		put(kafkazk.TopicPath(name)+"/partitions", "")
		for p, s := range states {
			put(fmt.Sprintf("%s/partitions/%d", kafkazk.TopicPath(name), p), "")
			if s != "" {
				put(kafkazk.PartitionStatePath(name, p), s)
			}
		}
	}
	const state = `{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}`
	topic("ok", `{"version":3,"partitions":{"0":[1,2],"1":[2,1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}`, map[int32]string{0: state, 1: state})
	put(kafkazk.ConfigTopicPath("ok"), `{"version":1,"config":{"retention.ms":"1000"}}`)
	topic("corrupt", `{"version":3,"partitions":`, nil)
	topic("badkey", `{"version":3,"partitions":{"x":[1]},"topic_id":"BBBBBBBBBBBBBBBBBBBBBB"}`, nil)
	topic("nostate", `{"version":3,"partitions":{"0":[1],"1":[2]}}`, map[int32]string{0: state, 1: ""})
	topic("badstate", `{"version":3,"partitions":{"0":[1]}}`, map[int32]string{0: "nope"})
	topic("pending", `{"version":3,"partitions":{"0":[1]}}`, map[int32]string{0: state})
	put(kafkazk.DeleteTopicPath("pending"), "")
	put(kafkazk.ConfigTopicPath("orphan"), `{"version":1,"config":{}}`)
	put(kafkazk.DeleteTopicPath("orphan"), "")
	put(kafkazk.ConfigTopicPath("badcfg"), `{`)

}
