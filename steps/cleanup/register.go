package cleanup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// Artifacts the kinds write in the run directory; the runbook declares
// them (ids and paths) and the kinds reach them with env.Artifact.
const (
	artBackup   = "backup"   // the znode backup
	artManifest = "manifest" // the quarantine manifest
	artOffsets  = "offsets"  // consumer groups' committed offsets
)

// TypeTopic is a Kafka topic name (kafkazk.ValidateTopic): the parameter
// type of the runbooks that repair one topic, registered with the engine
// (runbooks imports this package, so every runbook reader knows it). Its
// values are strings, so it may fill a string option too.
var TypeTopic = steps.RegisterType("topic", func(v string) (string, error) { return v, kafkazk.ValidateTopic(v) })

// Register adds topic-cleanup's kinds to r.
func Register(r *steps.Registry) {
	steps.Register(r, "preflight", nil, func(o preflightOpts) steps.Kind { return &preflight{o: o} })
	steps.Register(r, "detach-clients", []string{artOffsets}, func(o detachOpts) steps.Kind { return &detach{o: o} })
	steps.Register(r, "delete-znodes", []string{artBackup}, func(o topicOpts) steps.Kind { return &deleteZnodes{o: o} })
	steps.Register(r, "rolling-wipe", []string{artManifest, artBackup}, func(o rollingOpts) steps.Kind { return newRollingWipe(o) })
	steps.Register(r, "stop-brokers", nil, func(o stopOpts) steps.Kind { return &stopBrokers{o: o} })
	steps.Register(r, "wipe-segments", []string{artManifest, artBackup}, func(o wipeOpts) steps.Kind { return &wipeSegments{o: o} })
	steps.Register(r, "start-brokers", nil, func(o startOpts) steps.Kind { return &startBrokers{o: o} })
	steps.Register(r, "verify-topic", []string{artBackup, artOffsets}, func(o verifyOpts) steps.Kind { return &verifyTopic{o: o} })
	steps.Register(r, "reattach-clients", nil, func(o reattachOpts) steps.Kind { return &reattach{o: o} })
	steps.Register(r, "stray-find", nil, func(o strayOpts) steps.Kind { return &strayFind{o: o} })
	steps.Register(r, "stray-quarantine", []string{artManifest}, func(o strayOpts) steps.Kind { return &strayQuarantine{o: o} })
	steps.Register(r, "stray-roll", []string{artManifest}, func(o strayRollOpts) steps.Kind { return newStrayRoll(o) })
}

// topicOpts: the topics every topic-cleanup kind works on — topic, or
// several with topics (ghosts left by one job that deleted and recreated
// many topics: one stop and one start of every broker for all of them).
type topicOpts struct {
	Topic  string   `opt:"topic" default:""`
	Topics []string `opt:"topics" type:"topics" default:""`
}

// names are the topics of the run, in the order given.
func (o topicOpts) names() []string {
	if len(o.Topics) > 0 {
		return o.Topics
	}
	return []string{o.Topic}
}

// what is "the topic" or "the topics", for check names that stay the same
// whatever the topics are.
func (o topicOpts) what() string {
	if o.several() {
		return "the topics"
	}
	return "the topic"
}

// several reports whether the run cleans up more than one topic.
func (o topicOpts) several() bool { return len(o.names()) > 1 }

// quoted names the topics for messages: "orders", or "a", "b" and "c".
func (o topicOpts) quoted() string { return quoteAll(o.names()) }

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// Validate: exactly one of topic and topics, every name a topic kremedy may
// repair.
func (o topicOpts) Validate() error {
	switch {
	case o.Topic == "" && len(o.Topics) == 0:
		return fmt.Errorf("no topic to clean up: set --set topic=NAME, or several at once with --set topics=a,b,c")
	case o.Topic != "" && len(o.Topics) > 0:
		return fmt.Errorf("topic=%s and topics=%s are both set: set one (topics=%s,%s cleans up all of them in one run)", o.Topic, strings.Join(o.Topics, ","), o.Topic, strings.Join(o.Topics, ","))
	}
	for _, t := range o.names() {
		if t == kafkazk.AllTopics {
			return fmt.Errorf("topics=*: name each topic to clean up; kremedy never repairs every topic of a cluster at once")
		}
		if err := kafkazk.ValidateTopic(t); err != nil {
			return err
		}
		if kafkazk.IsInternalTopic(t) {
			return fmt.Errorf("topic %q is internal to Kafka (its name starts with __); kremedy refuses to repair it by a generic runbook", t)
		}
	}
	return nil
}

// factsKey is where preflight saves the run's Facts.
const factsKey = "topic-cleanup/facts"

// Facts are what preflight learned and later steps use.
type Facts struct {
	// ClusterID is /cluster/id's id: a resumed run refuses another cluster.
	ClusterID  string             `json:"cluster_id,omitempty"`
	Controller int32              `json:"controller"`
	Registered []int32            `json:"registered"`
	LogDirs    map[int32][]string `json:"log_dirs"`
	// Addrs are the brokers' Kafka listeners, read from their registrations
	// while they ran: the wipe proves each port closed before moving.
	Addrs map[int32]string `json:"addrs,omitempty"`
	// Topics are each topic's facts, by name.
	Topics map[string]TopicFacts `json:"topics,omitempty"`
	// TopicFacts of the one topic of a run begun by a kremedy before
	// several-topic runs (read on resume only: Of).
	TopicFacts
	AutoCreate map[int32]bool `json:"auto_create,omitempty"`
	Clean      bool           `json:"clean"` // the topic is already consistent everywhere (a one-topic run only)
	// Releases is the capability probe's answer: what each broker runs.
	Releases brokers.Releases `json:"releases,omitempty"`
	// UnhealthyBefore are other topics' partitions ("topic-p") that were
	// already offline or under-replicated, in every broker's view, when the
	// run's first preflight looked (Baseline says it looked). After the
	// grace, the health gate names them and does not fail on them as long
	// as they are no worse: the restart did not cause them. A resume keeps
	// the first attempt's list, never one read after the restart.
	UnhealthyBefore map[string]Unhealthy `json:"unhealthy_before"`
	Baseline        bool                 `json:"baseline"`
}

// TopicFacts are what preflight learned of one topic.
type TopicFacts struct {
	TopicID    string            `json:"topic_id,omitempty"`
	OldIDs     []string          `json:"old_topic_ids,omitempty"` // ids seen on disk or in metadata
	Partitions map[int32][]int32 `json:"assignment,omitempty"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// IDs are every topic id the topic has had: the old ones and the current.
func (t TopicFacts) IDs() []string {
	ids := slices.Clone(t.OldIDs)
	if t.TopicID != "" {
		ids = append(ids, t.TopicID)
	}
	return ids
}

// Of is topic t's facts (an older run's one topic: the flat fields).
func (f *Facts) Of(t string) TopicFacts {
	if tf, ok := f.Topics[t]; ok || f.Topics != nil {
		return tf
	}
	return f.TopicFacts
}

// Unhealthy is how bad a partition was: offline (no leader, or a replica
// offline) and the most in-sync replicas any broker reported.
type Unhealthy struct {
	Offline bool `json:"offline"`
	ISR     int  `json:"isr"`
}

// facts reads what this run's preflight saved. Every kind of the pack runs
// after preflight, which always runs (or is re-checked) first.
func facts(env *steps.Env) (*Facts, error) {
	var f Facts
	ok, err := env.Load(factsKey, &f)
	if err != nil {
		return nil, fmt.Errorf("this run's preflight facts: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: no preflight facts in this run: topic-cleanup's steps need its preflight step to run first", steps.ErrRefused)
	}
	return &f, nil
}

// cleanNoOp is the plan of a mutating step when preflight found the topic
// consistent everywhere: kremedy never deletes a healthy topic (a
// several-topic run refuses one in preflight).
func cleanNoOp(o topicOpts, step string) *steps.Plan {
	return &steps.Plan{Summary: fmt.Sprintf("%s is consistent on ZooKeeper, every broker and every disk: nothing to %s. kremedy does not touch a healthy topic.", o.quoted(), step), NoOp: true}
}

// later runs f in its own goroutine; wait returns its result (every call).
type later[T any] struct {
	done chan struct{}
	v    T
}

func async[T any](f func() T) *later[T] {
	l := &later[T]{done: make(chan struct{})}
	go func() { defer close(l.done); l.v = f() }()
	return l
}

func (l *later[T]) wait() T { <-l.done; return l.v }

// exists is Exists without the stat.
func exists(ctx context.Context, env *steps.Env, p string) (bool, error) {
	ok, _, err := env.ZK.Exists(ctx, p)
	return ok, err
}

// The options that embed both topicOpts and modeOpts check both (an
// embedded Validate of each would be ambiguous, and run neither).
func (o preflightOpts) Validate() error {
	return errors.Join(o.topicOpts.Validate(), o.modeOpts.Validate())
}
func (o rollingOpts) Validate() error {
	return errors.Join(o.topicOpts.Validate(), o.modeOpts.Validate())
}
func (o stopOpts) Validate() error { return errors.Join(o.topicOpts.Validate(), o.modeOpts.Validate()) }
func (o wipeOpts) Validate() error { return errors.Join(o.topicOpts.Validate(), o.modeOpts.Validate()) }
