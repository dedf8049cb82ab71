package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// env is one scenario run: the lab, its clients and the report.
type env struct {
	ctx   context.Context
	l     *Lab
	t     string
	out   io.Writer
	zk    *zookeeper.Conn
	kc    *kafka.Client
	rep   *Report
	start time.Time
}

// newEnv opens the lab's clients: Kafka, and ZooKeeper unless the lab is
// a KRaft one (env.zk is then nil).
func newEnv(ctx context.Context, l *Lab, name, topic string, out io.Writer) (*env, error) {
	var zc *zookeeper.Conn
	if !l.State.KRaft() {
		var err error
		if zc, err = zookeeper.Dial(ctx, l.State.Config.ZKConnect(), l.ZKOptions()); err != nil {
			return nil, fmt.Errorf("lab ZooKeeper: %w (is the lab up? `kremedy lab status --dir %s`)", err, l.Dir)
		}
	}
	kc, err := l.kafkaClient()
	if err != nil {
		if zc != nil {
			zc.Close()
		}
		return nil, err
	}
	fmt.Fprintf(out, "breaking the lab: %s on topic %q\n", name, topic)
	return &env{ctx: ctx, l: l, t: topic, out: out, zk: zc, kc: kc, start: time.Now(),
		rep: &Report{Scenario: name, Topic: topic, Release: strings.TrimPrefix(ibpNote(l.State), ", "), Bystander: topic + "-v2", Messages: map[int32]int{}, Leaders: map[int32]int32{}}}, nil
}

func (e *env) close() {
	e.rep.Took = time.Since(e.start)
	if e.zk != nil {
		e.zk.Close()
	}
	e.kc.Close()
}

// runFunc is a Scenario's Run.
type runFunc = func(ctx context.Context, l *Lab, topic string, out io.Writer) (*Report, error)

// play is a scenario's body made into its Run, given its name (the
// report's and the first line's).
type play func(name string) runFunc

// withEnv is every scenario's prologue and epilogue around body: the lab's
// clients (newEnv; nil report when they fail), then the report with the
// time taken (close) and body's error.
func withEnv(body func(e *env) error) play {
	return func(name string) runFunc {
		return func(ctx context.Context, l *Lab, t string, out io.Writer) (*Report, error) {
			e, err := newEnv(ctx, l, name, t, out)
			if err != nil {
				return nil, err
			}
			defer e.close()
			return e.rep, body(e)
		}
	}
}

// onReady is withEnv with ready's precondition checked before body, which
// is given the brokers' ids.
func onReady(body func(e *env, ids []int32) error) play {
	return withEnv(func(e *env) error {
		ids, err := e.ready()
		if err != nil {
			return err
		}
		return body(e, ids)
	})
}

func (e *env) did(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	e.rep.Did = append(e.rep.Did, s)
	fmt.Fprintf(e.out, "  - %s\n", s)
}

// observe checks a symptom with a real client, retrying until it shows or
// the deadline passes (metadata, ISR and disk states have no watch).
func (e *env) observe(what string, within time.Duration, optional bool, check func() (bool, string)) bool {
	deadline := time.Now().Add(within)
	var ok bool
	var ev string
	for {
		ok, ev = check()
		if ok || time.Now().After(deadline) || e.ctx.Err() != nil {
			break
		}
		select {
		case <-e.ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	e.rep.Observed = append(e.rep.Observed, Observation{What: what, Seen: ok, Evidence: ev, Optional: optional})
	return ok
}

// verdict fails the scenario when a promised symptom was not seen.
func (e *env) verdict() error {
	if err := e.ctx.Err(); err != nil {
		return err
	}
	var missing []string
	for _, o := range e.rep.Observed {
		if !o.Seen && !o.Optional {
			if o.Evidence != "" {
				missing = append(missing, fmt.Sprintf("%s (last read: %s)", o.What, o.Evidence))
			} else {
				missing = append(missing, o.What)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", ErrNotObserved, strings.Join(missing, "; "))
	}
	return nil
}

func (e *env) record(a Applied) error {
	a.Scenario, a.Topic, a.At = e.rep.Scenario, e.t, time.Now().UTC()
	e.l.State.Scenarios = append(e.l.State.Scenarios, a)
	return e.l.Save()
}

// brokers are the registered broker ids; every lab broker must be up.
func (e *env) requireAllUp() ([]int32, error) {
	ids, err := e.zk.BrokerIDs(e.ctx)
	if err != nil {
		return nil, err
	}
	if len(ids) != e.l.State.Config.Brokers {
		return nil, fmt.Errorf("%w: only brokers %v of %d are registered; run `kremedy lab up --dir %s` first", ErrWrongLab, ids, e.l.State.Config.Brokers, e.l.Dir)
	}
	if e.l.State.Config.Brokers < 2 {
		return nil, fmt.Errorf("%w: scenarios need at least 2 brokers (this lab has 1)", ErrWrongLab)
	}
	return ids, nil
}

// ready is every scenario's precondition: every lab broker up, and the
// scenario's topic not in the lab yet. It returns the brokers' ids.
func (e *env) ready() ([]int32, error) {
	ids, err := e.requireAllUp()
	if err != nil {
		return nil, err
	}
	return ids, e.topicAbsent(e.t)
}

func (e *env) topicAbsent(t string) error {
	for _, p := range []string{kafkazk.TopicPath(t), kafkazk.DeleteTopicsPath + "/" + t} {
		if ok, _, err := e.zk.Exists(e.ctx, p); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: topic %q already exists in the lab (%s%s); pick another --topic, or start from a clean lab (`kremedy lab down --dir %s --purge`)", ErrWrongLab, t, e.zk.Chroot(), p, e.l.Dir)
		}
	}
	return nil
}

// assignment spreads partitions round-robin: partition p's preferred
// leader is ids[p % n], so each broker leads one partition and follows others.
func assignment(ids []int32) [][]int32 {
	n := len(ids)
	rf := min(3, n)
	parts := max(3, n)
	out := make([][]int32, parts)
	for p := range out {
		for i := 0; i < rf; i++ {
			out[p] = append(out[p], ids[(p+i)%n])
		}
	}
	return out
}

// createAndFill creates t with the assignment, waits until every broker
// serves it, and writes MessagesPerPartition "old" messages per partition.
func (e *env) createAndFill(t string, assign [][]int32, generation string) (string, error) {
	id, err := e.kc.CreateTopic(e.ctx, t, assign, 0, 0, nil)
	if err != nil {
		return "", err
	}
	if err := e.waitServed(t, len(assign)); err != nil {
		return "", err
	}
	p, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 20*time.Second, e.l.KafkaOpts()...)
	if err != nil {
		return "", err
	}
	defer p.Close()
	for part := range assign {
		var vals []string
		for i := 0; i < MessagesPerPartition; i++ {
			vals = append(vals, fmt.Sprintf("%s message %d of %s-%d", generation, i, t, part))
		}
		if err := p.Produce(e.ctx, t, int32(part), vals...); err != nil {
			return "", fmt.Errorf("write %s messages to %s-%d: %w", generation, t, part, err)
		}
	}
	return id, nil
}

// liveBrokers are the brokers that serve: registered in ZooKeeper, or in
// a KRaft lab registered and unfenced.
func (e *env) liveBrokers() ([]int32, error) {
	if e.zk == nil {
		st, err := kraftBrokers(e.ctx, e.kc)
		return st.Unfenced, err
	}
	return e.zk.BrokerIDs(e.ctx)
}

// waitServed waits until every live broker's metadata shows t with a
// leader for every partition.
func (e *env) waitServed(t string, parts int) error {
	ids, err := e.liveBrokers()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	return waitFor(ctx, 200*time.Millisecond, func() bool {
		for _, id := range ids {
			v, err := e.kc.BrokerView(ctx, id, t)
			if err != nil {
				return false
			}
			tv := v.Topics[t]
			if !tv.Present() || len(tv.Partitions) != parts {
				return false
			}
			for _, p := range tv.Partitions {
				if p.Leader < 0 || p.Err != ports.KafkaNone {
					return false
				}
			}
		}
		return true
	})
}

// ensureBystander creates T-v2 once: a sibling sharing T's name prefix
// whose data must survive any cleanup of T.
func (e *env) ensureBystander(ids []int32) error {
	b := e.rep.Bystander
	if ok, _, err := e.zk.Exists(e.ctx, kafkazk.TopicPath(b)); err != nil || ok {
		return err
	}
	if _, err := e.createAndFill(b, assignment(ids), "bystander"); err != nil {
		return fmt.Errorf("bystander topic %s: %w", b, err)
	}
	e.did("created bystander topic %q (shares the prefix; %d messages per partition) — a cleanup of %q must not touch it", b, MessagesPerPartition, e.t)
	return nil
}

// victim is the highest-numbered broker that is not the controller, so a
// scenario never forces a controller failover by accident.
func (e *env) victim(ids []int32) (int32, error) {
	ctrl, err := e.zk.Controller(e.ctx)
	if err != nil {
		return 0, err
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if ids[i] != ctrl {
			return ids[i], nil
		}
	}
	return 0, fmt.Errorf("%w: no broker besides the controller", ErrWrongLab)
}

func (e *env) brokerCmd(id int32, action string) error {
	return e.l.BrokerCommand(e.ctx, id, action, func(s string) { fmt.Fprintf(e.out, "      %s\n", s) })
}

// partitionDirs lists broker n's directories for topic t, parsed the way
// Kafka parses them (topic-partition, split on the last '-').
func (e *env) partitionDirs(n int32, t string) []string {
	var out []string
	for _, ld := range e.l.LogDirs(int(n)) {
		ents, _ := os.ReadDir(ld)
		for _, de := range ents {
			name := de.Name()
			if i := strings.LastIndexByte(name, '-'); de.IsDir() && i > 0 && name[:i] == t {
				if _, err := strconv.Atoi(name[i+1:]); err == nil {
					out = append(out, filepath.Join(ld, name))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// diskTopicID reads topic_id from a partition directory's partition.metadata.
func diskTopicID(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "partition.metadata"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "topic_id: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func grepFile(path, needle string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, needle) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func (e *env) controllerLogLine(needle string) string {
	return e.brokerLogLine("controller.log", needle)
}

// controllerStateChange is the first state-change.log line with needle.
func (e *env) controllerStateChange(needle string) string {
	return e.brokerLogLine("state-change.log", needle)
}

func (e *env) brokerLogLine(file, needle string) string {
	for n := 1; n <= e.l.State.Config.Brokers; n++ {
		if s := grepFile(filepath.Join(e.l.BrokerDir(n), "logs", file), needle); s != "" {
			return fmt.Sprintf("broker %d %s: %s", n, file, s)
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "none (IBP < 2.8)"
	}
	return s
}

// viewsOf asks each broker whether it knows e.t and checks want per broker.
func (e *env) viewsOf(ids []int32, want func(id int32, present bool) bool) (bool, string) {
	ok := true
	var ev []string
	for _, id := range ids {
		v, err := e.kc.BrokerView(e.ctx, id, e.t)
		if err != nil {
			ok = false
			ev = append(ev, fmt.Sprintf("broker %d: %v", id, err))
			continue
		}
		tv := v.Topics[e.t]
		present := tv.Present()
		ok = ok && want(id, present)
		if present {
			ev = append(ev, fmt.Sprintf("broker %d: lists %q (%d partitions, topic ID %s)", id, e.t, len(tv.Partitions), orNone(tv.ID)))
		} else {
			ev = append(ev, fmt.Sprintf("broker %d: %v", id, tv.Err))
		}
	}
	return ok, strings.Join(ev, "\n")
}

// rewriteAssignment rewrites topic t's znode with change applied to its
// partitions, keeping every other field (topic_id above all), at the
// version it read.
func (e *env) rewriteAssignment(t string, change func(map[string][]int32)) error {
	b, st, err := e.zk.Get(e.ctx, kafkazk.TopicPath(t))
	if err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%s: %w", kafkazk.TopicPath(t), err)
	}
	var parts map[string][]int32
	if err := json.Unmarshal(raw["partitions"], &parts); err != nil {
		return fmt.Errorf("%s partitions: %w", kafkazk.TopicPath(t), err)
	}
	change(parts)
	if raw["partitions"], err = json.Marshal(parts); err != nil {
		return err
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	_, err = e.zk.Set(e.ctx, kafkazk.TopicPath(t), data, st.Version)
	return err
}
