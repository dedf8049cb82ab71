package cleanup

import (
	"context"
	"fmt"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
)

// Artifacts the kinds write in the run directory; the runbook declares
// them (ids and paths) and the kinds reach them with env.Artifact.
const (
	artBackup   = "backup"   // the znode backup
	artManifest = "manifest" // the quarantine manifest
	artOffsets  = "offsets"  // consumer groups' committed offsets
)

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

// topicOpts: the topic every topic-cleanup kind works on.
type topicOpts struct {
	Topic string `opt:"topic" type:"topic"`
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
	Addrs      map[int32]string  `json:"addrs,omitempty"`
	TopicID    string            `json:"topic_id,omitempty"`
	OldIDs     []string          `json:"old_topic_ids,omitempty"` // ids seen on disk or in metadata
	Partitions map[int32][]int32 `json:"assignment,omitempty"`
	Configs    map[string]string `json:"configs,omitempty"`
	AutoCreate map[int32]bool    `json:"auto_create,omitempty"`
	Clean      bool              `json:"clean"` // the topic is already consistent everywhere
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
// consistent everywhere: kremedy never deletes a healthy topic.
func cleanNoOp(topic, step string) *steps.Plan {
	return &steps.Plan{Summary: fmt.Sprintf("%q is consistent on ZooKeeper, every broker and every disk: nothing to %s. kremedy does not touch a healthy topic.", topic, step), NoOp: true}
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
