package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// ErrWrongLab means a scenario does not apply to this lab's settings.
var ErrWrongLab = errors.New("scenario does not fit this lab")

// ErrNotObserved means a scenario ran but its symptom did not show within
// its deadline: the lab is not in the state the scenario promises.
var ErrNotObserved = errors.New("expected symptom not observed")

// MessagesPerPartition is how many "old" messages a scenario writes.
const MessagesPerPartition = 20

// Scenario breaks the lab the way one part of the incident report did.
type Scenario struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, l *Lab, topic string, out io.Writer) (*Report, error)
}

// ScenarioOrder lists the scenarios in the order the report tells them.
var ScenarioOrder = []string{"stuck-delete", "ghost-topic", "reused-segments", "stale-metadata", "partition-increase", "ghost-assignment", "broker-crash"}

// Scenarios by name.
var Scenarios = map[string]Scenario{
	"stuck-delete": {Name: "stuck-delete", Run: runStuckDelete,
		Summary: "T (replicated, with messages) is deleted while one replica's broker is down: T vanishes from listings, its znodes stay pending deletion, creating T again is refused"},
	"ghost-topic": {Name: "ghost-topic", Run: runGhostTopic,
		Summary: "after stuck-delete: T's znodes deleted by hand, the down broker returns with its old segments, T recreated: on 3.x INCONSISTENT_TOPIC_ID, NotLeaderOrFollower, under-replicated partitions; on 2.7–2.8 silent adoption; on 2.4–2.6 no leaders at all"},
	"reused-segments": {Name: "reused-segments", Run: runReusedSegments,
		Summary: "(a lab whose brokers adopt a stale directory: Kafka < 3.0, or --ibp 2.7) the same sequence: the recreated T silently adopts the old segments and consumers read old messages"},
	"stale-metadata": {Name: "stale-metadata", Run: runStaleMetadata,
		Summary: "T's znodes deleted by hand while brokers run: brokers still list T; after one broker restarts, brokers disagree about T"},
	"partition-increase": {Name: "partition-increase", Run: runPartitionIncrease,
		Summary: "T (2 partitions) raised to 3 by hand in ZooKeeper over a leftover state znode: ZooKeeper lists partition 2, no broker serves it (report 000, problem 4)"},
	"broker-crash": {Name: "broker-crash", Run: runBrokerCrash,
		Summary: "(report 001) T with 10 partitions replicated on every broker (up to 4), then broker 1 killed with SIGKILL: new leaders, broker 1 out of every ISR, messages still flow; the cause is one broker down, nothing to clean up"},
	"ghost-assignment": {Name: "ghost-assignment", Run: runGhostAssignment,
		Summary: "T's assignment rewritten by hand to name a broker that does not exist: ZooKeeper and every broker disagree about T's replicas"},
}

// Observation is one symptom a scenario checked with a real client.
type Observation struct {
	What     string
	Seen     bool
	Evidence string
	Optional bool // evidence that helps but is not the promised symptom
}

// Report says what a scenario did and what an operator now observes.
type Report struct {
	Scenario string
	Topic    string
	// Release is the lab's Kafka, IBP and what they do with a stale
	// directory: the symptoms observed are this version's.
	Release  string
	Did      []string
	Observed []Observation
	Took     time.Duration
	Next     string
	// Facts the tests and later scenarios use.
	Victim    int32            // the broker the scenario stopped or restarted
	OldID     string           // T's topic ID before the deletion ("" on IBP < 2.8)
	NewID     string           // T's topic ID after recreation
	Leaders   map[int32]int32  // partition -> preferred leader of the assignment
	Assign    [][]int32        // the assignment used for T
	Messages  map[int32]int    // partition -> messages written before the break
	Bystander string           // the sibling topic that shares T's prefix
	extra     map[string]int64 // internal
}

// Print writes the report for an operator.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n== %s on topic %q (%.1fs)\n", r.Scenario, r.Topic, r.Took.Seconds())
	if r.Release != "" {
		fmt.Fprintf(w, "On %s: the symptoms below are this version's.\n", r.Release)
	}
	fmt.Fprintln(w, "What was done:")
	for i, d := range r.Did {
		fmt.Fprintf(w, "  %2d. %s\n", i+1, d)
	}
	fmt.Fprintln(w, "What an operator now observes:")
	for _, o := range r.Observed {
		mark := "SEEN    "
		if !o.Seen {
			mark = "NOT SEEN"
			if o.Optional {
				mark = "(absent)"
			}
		}
		fmt.Fprintf(w, "  [%s] %s\n", mark, o.What)
		if o.Evidence != "" {
			fmt.Fprintf(w, "             %s\n", strings.ReplaceAll(o.Evidence, "\n", "\n             "))
		}
	}
	if r.Next != "" {
		fmt.Fprintf(w, "Next: %s\n", r.Next)
	}
}

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

func newEnv(ctx context.Context, l *Lab, name, topic string, out io.Writer) (*env, error) {
	zc, err := zookeeper.Dial(ctx, l.State.Config.ZKConnect(), l.ZKOptions())
	if err != nil {
		return nil, fmt.Errorf("lab ZooKeeper: %w (is the lab up? `kremedy lab status --dir %s`)", err, l.Dir)
	}
	kc, err := kafka.New(l.State.Config.Bootstrap(), l.KafkaOpts()...)
	if err != nil {
		zc.Close()
		return nil, err
	}
	fmt.Fprintf(out, "breaking the lab: %s on topic %q\n", name, topic)
	return &env{ctx: ctx, l: l, t: topic, out: out, zk: zc, kc: kc, start: time.Now(),
		rep: &Report{Scenario: name, Topic: topic, Release: strings.TrimPrefix(ibpNote(l.State), ", "), Bystander: topic + "-v2", Messages: map[int32]int{}, Leaders: map[int32]int32{}}}, nil
}

func (e *env) close() {
	e.rep.Took = time.Since(e.start)
	e.zk.Close()
	e.kc.Close()
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
			missing = append(missing, o.What)
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

// waitServed waits until every registered broker's metadata shows t with a
// leader for every partition.
func (e *env) waitServed(t string, parts int) error {
	ids, err := e.zk.BrokerIDs(e.ctx)
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

// ---- stuck-delete -------------------------------------------------------

func runStuckDelete(ctx context.Context, l *Lab, t string, out io.Writer) (*Report, error) {
	e, err := newEnv(ctx, l, "stuck-delete", t, out)
	if err != nil {
		return nil, err
	}
	defer e.close()
	return e.rep, e.stuckDelete()
}

func (e *env) stuckDelete() error {
	ids, err := e.ready()
	if err != nil {
		return err
	}
	if err := e.ensureBystander(ids); err != nil {
		return err
	}
	e.rep.Assign = assignment(ids)
	for p, reps := range e.rep.Assign {
		e.rep.Leaders[int32(p)] = reps[0]
		e.rep.Messages[int32(p)] = MessagesPerPartition
	}
	if e.rep.OldID, err = e.createAndFill(e.t, e.rep.Assign, "old"); err != nil {
		return err
	}
	e.did("created %q (%d partitions, replicas %v, topic ID %s) and wrote %d messages per partition with acks=all",
		e.t, len(e.rep.Assign), e.rep.Assign, orNone(e.rep.OldID), MessagesPerPartition)
	v, err := e.victim(ids)
	if err != nil {
		return err
	}
	e.rep.Victim = v
	if err := e.brokerCmd(v, "stop"); err != nil {
		return err
	}
	e.did("stopped broker %d over SSH (it holds a replica of every partition of %q)", v, e.t)
	if err := e.kc.DeleteTopic(e.ctx, e.t); err != nil {
		return err
	}
	e.did("deleted %q with the Admin API (what `kafka-topics --delete` does); the call reported success", e.t)
	if err := e.record(Applied{DownBroker: v}); err != nil {
		return err
	}

	e.observe(fmt.Sprintf("%q is gone from `kafka-topics --list` (brokers dropped it from their caches)", e.t), 15*time.Second, false, func() (bool, string) {
		names, err := e.kc.ListTopics(e.ctx)
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(names, e.t), fmt.Sprintf("topics listed: %v", names)
	})
	// Give the controller time to finish, were it able to: it is not.
	time.Sleep(3 * time.Second)
	e.observe(fmt.Sprintf("its znodes stay: %s and %s are still in ZooKeeper", kafkazk.DeleteTopicsPath+"/"+e.t, kafkazk.TopicPath(e.t)), 0, false, func() (bool, string) {
		a, _, err1 := e.zk.Exists(e.ctx, kafkazk.DeleteTopicsPath+"/"+e.t)
		b, st, err2 := e.zk.Exists(e.ctx, kafkazk.TopicPath(e.t))
		if err := errors.Join(err1, err2); err != nil {
			return false, err.Error()
		}
		return a && b, fmt.Sprintf("%s%s/%s exists=%v; %s%s exists=%v (version %d)", e.zk.Chroot(), kafkazk.DeleteTopicsPath, e.t, a, e.zk.Chroot(), kafkazk.TopicPath(e.t), b, st.Version)
	})
	e.observe(fmt.Sprintf("creating %q again is refused", e.t), 0, false, func() (bool, string) {
		_, err := e.kc.CreateTopic(e.ctx, e.t, e.rep.Assign, 0, 0, nil)
		var ce *kafka.CreateError
		if errors.As(err, &ce) {
			return errors.Is(err, kerr.TopicAlreadyExists), err.Error()
		}
		if err == nil {
			return false, "the create succeeded"
		}
		return false, err.Error()
	})
	e.observe(fmt.Sprintf("broker %d still holds %q's segments on disk", v, e.t), 0, false, func() (bool, string) {
		dirs := e.partitionDirs(v, e.t)
		return len(dirs) > 0, strings.Join(dirs, "\n")
	})
	e.observe("the controller halted the deletion because a replica is offline", 10*time.Second, true, func() (bool, string) {
		s := e.controllerLogLine("Halted deletion of topics " + e.t)
		return s != "", s
	})
	e.rep.Next = fmt.Sprintf("broker %d stays stopped (starting it would let the deletion finish). Continue the story with `kremedy lab break ghost-topic --topic %s`, or diagnose/repair it with kremedy.", v, e.t)
	return e.verdict()
}

func orNone(s string) string {
	if s == "" {
		return "none (IBP < 2.8)"
	}
	return s
}

// ---- ghost-topic / reused-segments ---------------------------------------

func runGhostTopic(ctx context.Context, l *Lab, t string, out io.Writer) (*Report, error) {
	return runRecreate(ctx, l, "ghost-topic", t, out)
}

func runReusedSegments(ctx context.Context, l *Lab, t string, out io.Writer) (*Report, error) {
	if l.State.RefusesStaleLog() {
		return nil, fmt.Errorf("%w: reused-segments needs a lab whose brokers adopt a stale directory (Kafka before 3.0, or IBP < 2.8): start one with `kremedy lab up --dir OTHER --ibp 2.7` or `--kafka-version 2.8.2`; on this lab (%s) the same sequence is `kremedy lab break ghost-topic`", ErrWrongLab, l.State.behaviour())
	}
	return runRecreate(ctx, l, "reused-segments", t, out)
}

// recreate creates the topic again under the same name and assignment. The
// create must reach a controller whose cache no longer has it; an attempt
// whose answer was an error (a timeout waiting for the metadata to
// propagate, on 2.4) may still have written the znode: a later
// TOPIC_ALREADY_EXISTS is then our own create, taken once the znode holds
// our assignment.
func (e *env) recreate(ctx context.Context) (string, error) {
	t := e.t
	var newID string
	var createErr error
	tried := false
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := waitFor(cctx, 500*time.Millisecond, func() bool {
		actx, acancel := context.WithTimeout(cctx, 10*time.Second)
		newID, createErr = e.kc.CreateTopic(actx, t, e.rep.Assign, 0, 0, nil)
		acancel()
		if errors.Is(createErr, kerr.TopicAlreadyExists) && tried {
			z, _, zerr := e.zk.Topic(cctx, t)
			if as, aerr := z.Assignment(); zerr == nil && aerr == nil && len(as) == len(e.rep.Assign) {
				newID, createErr = z.TopicID, nil
			}
		}
		tried = true
		return createErr == nil
	})
	if err != nil {
		return "", fmt.Errorf("recreate %q: %w (last answer: %v)", t, err, createErr)
	}
	return newID, nil
}

// runRecreate is the engineer's fix from report 000: stuck deletion, znodes
// deleted by hand while brokers run, the down broker back with its old
// segments, the topic recreated under the same name.
func runRecreate(ctx context.Context, l *Lab, name, t string, out io.Writer) (*Report, error) {
	e, err := newEnv(ctx, l, name, t, out)
	if err != nil {
		return nil, err
	}
	defer e.close()
	pending, _, err := e.zk.Exists(ctx, kafkazk.DeleteTopicsPath+"/"+t)
	if err != nil {
		return e.rep, err
	}
	if pending {
		return e.rep, fmt.Errorf("%w: %q is already pending deletion from an earlier run; start from a clean topic name", ErrWrongLab, t)
	}
	fmt.Fprintf(out, "  first, the stuck deletion (stuck-delete):\n")
	if err := e.stuckDelete(); err != nil {
		return e.rep, fmt.Errorf("stuck-delete stage: %w", err)
	}
	e.rep.Observed = nil // stuck-delete's symptoms are now history
	v := e.rep.Victim

	for _, p := range []string{kafkazk.TopicPath(t), kafkazk.ConfigTopicsPath + "/" + t, kafkazk.DeleteTopicsPath + "/" + t} {
		if err := e.zk.DeleteRecursive(ctx, p); err != nil {
			return e.rep, err
		}
	}
	e.did("deleted %s%s (with its partition states), %s%s/%s and %s%s/%s by hand while brokers ran — the engineer's fix in the report",
		e.zk.Chroot(), kafkazk.TopicPath(t), e.zk.Chroot(), kafkazk.ConfigTopicsPath, t, e.zk.Chroot(), kafkazk.DeleteTopicsPath, t)
	if err := e.brokerCmd(v, "start"); err != nil {
		return e.rep, err
	}
	e.did("started broker %d over SSH; it came back with %d old partition directories of %q", v, len(e.partitionDirs(v, t)), t)
	e.l.State.Scenarios[len(e.l.State.Scenarios)-1].DownBroker = 0
	if err := e.l.Save(); err != nil {
		return e.rep, err
	}
	newID, err := e.recreate(ctx)
	if err != nil {
		return e.rep, err
	}
	e.rep.NewID = newID
	e.did("recreated %q under the same name and assignment %v (new topic ID %s); creation consulted ZooKeeper only, never broker %d's disk", t, e.rep.Assign, orNone(newID), v)
	if err := e.record(Applied{}); err != nil {
		return e.rep, err
	}

	// Partitions the returning broker leads, and those it follows.
	var led, followed []int32
	for p, reps := range e.rep.Assign {
		if reps[0] == v {
			led = append(led, int32(p))
		} else if slices.Contains(reps, v) {
			followed = append(followed, int32(p))
		}
	}
	if l.State.StuckRecreate() {
		e.stuckSymptoms(led)
		e.rep.Next = fmt.Sprintf("run kremedy's topic-cleanup runbook on %s: the full restart gives the controller a fresh state, and the wipe removes the old segments broker %d brought back", e.l.InventoryPath(), v)
	} else if l.State.RefusesStaleLog() {
		e.ghostSymptoms(v, led, followed)
		e.rep.Next = fmt.Sprintf("run kremedy's topic-cleanup runbook on %s: detach clients, delete %q's znodes, stop every broker, wipe %q's segments, restart, verify", e.l.InventoryPath(), t, t)
	} else {
		e.reuseSymptoms(v, led)
		e.rep.Next = fmt.Sprintf("the new %q serves the old topic's data. Repair with kremedy's topic-cleanup runbook (wipe the segments while every broker is stopped)", t)
	}
	return e.rep, e.verdict()
}

func (e *env) ghostSymptoms(v int32, led, followed []int32) {
	t := e.t
	e.observe(fmt.Sprintf("broker %d's directories of %q carry the OLD topic ID, ZooKeeper the new one (INCONSISTENT_TOPIC_ID)", v, t), 10*time.Second, false, func() (bool, string) {
		z, _, err := e.zk.Topic(e.ctx, t)
		if err != nil {
			return false, err.Error()
		}
		var ev []string
		ok := len(e.partitionDirs(v, t)) > 0
		for _, d := range e.partitionDirs(v, t) {
			id := diskTopicID(d)
			ev = append(ev, fmt.Sprintf("%s/partition.metadata topic_id=%s", d, id))
			ok = ok && id != "" && id != z.TopicID
		}
		ev = append(ev, fmt.Sprintf("%s%s topic_id=%s", e.zk.Chroot(), kafkazk.TopicPath(t), z.TopicID))
		return ok, strings.Join(ev, "\n")
	})
	for _, p := range led {
		e.observe(fmt.Sprintf("broker %d is leader of %s-%d in ZooKeeper yet answers NOT_LEADER_OR_FOLLOWER", v, t, p), 20*time.Second, false, func() (bool, string) {
			st, _, err := e.zk.PartitionStateOf(e.ctx, t, p)
			if err != nil {
				return false, err.Error()
			}
			_, lerr := e.kc.ListOffsetsAt(e.ctx, v, t, p, -1)
			ev := fmt.Sprintf("state znode leader=%d isr=%v; ListOffsets on broker %d: %v", st.Leader, st.ISR, v, lerr)
			return st.Leader == v && errors.Is(lerr, kerr.NotLeaderForPartition), ev
		})
		e.observe(fmt.Sprintf("producing to %s-%d fails", t, p), 0, false, func() (bool, string) {
			pr, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 6*time.Second, e.l.KafkaOpts()...)
			if err != nil {
				return false, err.Error()
			}
			defer pr.Close()
			perr := pr.Produce(e.ctx, t, p, "new message")
			return perr != nil, fmt.Sprintf("acks=all produce: %v", perr)
		})
	}
	for _, p := range followed {
		e.observe(fmt.Sprintf("%s-%d is under-replicated: broker %d never fetches and left the ISR", t, p, v), 45*time.Second, false, func() (bool, string) {
			st, _, err := e.zk.PartitionStateOf(e.ctx, t, p)
			if err != nil {
				return false, err.Error()
			}
			view, err := e.kc.BrokerView(e.ctx, st.Leader, t)
			if err != nil {
				return false, err.Error()
			}
			pv := view.Topics[t].Partitions[p]
			return !slices.Contains(pv.ISR, v) && len(pv.ISR) < len(pv.Replicas),
				fmt.Sprintf("leader %d reports replicas=%v isr=%v", st.Leader, pv.Replicas, pv.ISR)
		})
	}
	e.observe(fmt.Sprintf("broker %d's state-change.log names the topic ID mismatch", v), 5*time.Second, true, func() (bool, string) {
		s := grepFile(filepath.Join(e.l.BrokerDir(int(v)), "logs", "state-change.log"), "Topic ID in memory")
		return s != "", s
	})
}

// stuckSymptoms: before 2.7 the controller still queues the topic for
// deletion, so the recreated topic's replicas never become NewReplica and
// no broker serves it.
func (e *env) stuckSymptoms(led []int32) {
	t := e.t
	ids, _ := e.zk.BrokerIDs(e.ctx)
	e.observe(fmt.Sprintf("ZooKeeper has the recreated %q, yet no broker serves it (UNKNOWN_TOPIC_OR_PARTITION): the controller still queues the old topic for deletion (Kafka < 2.7)", t), 20*time.Second, false, func() (bool, string) {
		ok, ev := e.viewsOf(ids, func(_ int32, present bool) bool { return !present })
		exists, _, err := e.zk.Exists(e.ctx, kafkazk.TopicPath(t))
		return ok && exists && err == nil, fmt.Sprintf("%s%s exists=%v; %s", e.zk.Chroot(), kafkazk.TopicPath(t), exists, ev)
	})
	e.observe(fmt.Sprintf("producing to %s-0 fails", t), 0, false, func() (bool, string) {
		pr, err := kafka.NewProducer(e.l.State.Config.Bootstrap(), 6*time.Second, e.l.KafkaOpts()...)
		if err != nil {
			return false, err.Error()
		}
		defer pr.Close()
		perr := pr.Produce(e.ctx, t, 0, "new message")
		return perr != nil, fmt.Sprintf("acks=all produce: %v", perr)
	})
	e.observe("the controller's state-change.log refuses the new replicas", 5*time.Second, true, func() (bool, string) {
		s := e.controllerStateChange("to NewReplica failed")
		return s != "", s
	})
}

func (e *env) reuseSymptoms(v int32, led []int32) {
	t := e.t
	z, zst, _ := e.zk.Topic(e.ctx, t)
	for _, p := range led {
		e.observe(fmt.Sprintf("a consumer of the NEW %q reads the OLD messages from %s-%d (led by broker %d)", t, t, p, v), 30*time.Second, false, func() (bool, string) {
			rctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
			defer cancel()
			vals, err := kafka.ReadPartition(rctx, e.l.State.Config.Bootstrap(), t, p, e.l.KafkaOpts()...)
			if err != nil {
				return false, err.Error()
			}
			old := 0
			for _, s := range vals {
				if strings.HasPrefix(s, "old message") {
					old++
				}
			}
			ev := fmt.Sprintf("read %d records, %d of them written to the deleted topic", len(vals), old)
			if len(vals) > 0 {
				ev += fmt.Sprintf("; first: %q", vals[0])
			}
			return old == MessagesPerPartition, ev
		})
		e.observe(fmt.Sprintf("the brand-new %s-%d does not start at offset 0", t, p), 10*time.Second, false, func() (bool, string) {
			end, err := e.kc.ListOffsetsAt(e.ctx, v, t, p, -1)
			if err != nil {
				return false, err.Error()
			}
			return end > 0, fmt.Sprintf("latest offset %d on broker %d, though nothing was written to the new topic", end, v)
		})
		e.observe(fmt.Sprintf("the segment files under broker %d predate the new topic's znode (file dates prove adoption)", v), 0, false, func() (bool, string) {
			for _, d := range e.partitionDirs(v, t) {
				if !strings.HasSuffix(d, "-"+strconv.Itoa(int(p))) {
					continue
				}
				fi, err := os.Stat(filepath.Join(d, "00000000000000000000.log"))
				if err != nil {
					return false, err.Error()
				}
				return fi.ModTime().Before(zst.Ctime), fmt.Sprintf("%s modified %s; %s%s created %s",
					filepath.Join(d, "00000000000000000000.log"), fi.ModTime().Format(time.RFC3339Nano), e.zk.Chroot(), kafkazk.TopicPath(t), zst.Ctime.Format(time.RFC3339Nano))
			}
			return false, "no directory"
		})
	}
	if e.l.State.TopicIDs() {
		// 2.8: topic IDs exist, but the restarted broker attached its old
		// log to the new partition without comparing them.
		e.observe(fmt.Sprintf("broker %d's adopted directories still name the OLD topic ID in partition.metadata, ZooKeeper the new one (Kafka 2.8 does not compare them after a restart)", v), 10*time.Second, false, func() (bool, string) {
			var ev []string
			ok := len(led) > 0
			for _, d := range e.partitionDirs(v, t) {
				if !slices.ContainsFunc(led, func(p int32) bool { return strings.HasSuffix(d, fmt.Sprintf("/%s-%d", t, p)) }) {
					continue
				}
				id := diskTopicID(d)
				ev = append(ev, fmt.Sprintf("%s/partition.metadata topic_id=%s", d, brokers.OrDash(id)))
				ok = ok && id != "" && id == e.rep.OldID && id != z.TopicID
			}
			ev = append(ev, fmt.Sprintf("%s%s topic_id=%s", e.zk.Chroot(), kafkazk.TopicPath(t), z.TopicID))
			return ok, strings.Join(ev, "\n")
		})
	}
	e.observe(fmt.Sprintf("broker %d's log shows the leader-epoch truncation that marks adoption", v), 5*time.Second, true, func() (bool, string) {
		for _, f := range []string{"server.log", "state-change.log"} {
			if s := grepFile(filepath.Join(e.l.BrokerDir(int(v)), "logs", f), "caused truncation of conflicting entries"); s != "" {
				return true, f + ": " + s
			}
		}
		return false, ""
	})
}

// ---- stale-metadata -------------------------------------------------------

func runStaleMetadata(ctx context.Context, l *Lab, t string, out io.Writer) (*Report, error) {
	e, err := newEnv(ctx, l, "stale-metadata", t, out)
	if err != nil {
		return nil, err
	}
	defer e.close()
	ids, err := e.ready()
	if err != nil {
		return e.rep, err
	}
	if err := e.ensureBystander(ids); err != nil {
		return e.rep, err
	}
	e.rep.Assign = assignment(ids)
	for p, reps := range e.rep.Assign {
		e.rep.Leaders[int32(p)] = reps[0]
		e.rep.Messages[int32(p)] = MessagesPerPartition
	}
	if e.rep.OldID, err = e.createAndFill(t, e.rep.Assign, "old"); err != nil {
		return e.rep, err
	}
	e.did("created %q (replicas %v, topic ID %s) with %d messages per partition", t, e.rep.Assign, orNone(e.rep.OldID), MessagesPerPartition)
	for _, p := range []string{kafkazk.TopicPath(t), kafkazk.ConfigTopicsPath + "/" + t} {
		if err := e.zk.DeleteRecursive(ctx, p); err != nil {
			return e.rep, err
		}
	}
	e.did("deleted %s%s and %s%s/%s by hand while every broker ran (no deletion marker, so the controller sends no StopReplica and no metadata update)",
		e.zk.Chroot(), kafkazk.TopicPath(t), e.zk.Chroot(), kafkazk.ConfigTopicsPath, t)
	if err := e.record(Applied{}); err != nil {
		return e.rep, err
	}
	e.observe(fmt.Sprintf("ZooKeeper no longer has %q", t), 0, false, func() (bool, string) {
		ok, _, err := e.zk.Exists(ctx, kafkazk.TopicPath(t))
		if err != nil {
			return false, err.Error()
		}
		return !ok, fmt.Sprintf("%s%s exists=%v", e.zk.Chroot(), kafkazk.TopicPath(t), ok)
	})
	time.Sleep(2 * time.Second)
	e.observe(fmt.Sprintf("yet every broker still lists %q from its cached metadata", t), 5*time.Second, false, func() (bool, string) {
		return e.viewsOf(ids, func(id int32, present bool) bool { return present })
	})
	r, err := e.victim(ids)
	if err != nil {
		return e.rep, err
	}
	e.rep.Victim = r
	if err := e.brokerCmd(r, "stop"); err != nil {
		return e.rep, err
	}
	if err := e.brokerCmd(r, "start"); err != nil {
		return e.rep, err
	}
	e.did("restarted broker %d over SSH (stop, then start); it loaded fresh metadata from the controller", r)
	e.observe(fmt.Sprintf("brokers now disagree: broker %d answers UNKNOWN_TOPIC_OR_PARTITION for %q, the others still list it", r, t), 30*time.Second, false, func() (bool, string) {
		return e.viewsOf(ids, func(id int32, present bool) bool { return present == (id != r) })
	})
	e.observe(fmt.Sprintf("broker %d loaded %q's old directories as orphans (on disk, unknown to ZooKeeper)", r, t), 0, false, func() (bool, string) {
		dirs := e.partitionDirs(r, t)
		return len(dirs) > 0, strings.Join(dirs, "\n")
	})
	e.rep.Next = fmt.Sprintf("only a restart of every broker clears the stale caches; kremedy's topic-cleanup runbook does it safely for %q", t)
	return e.rep, e.verdict()
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
