package steptest

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps/ports"
)

// ReassignerSubject is what ReassignerConformance runs on: a Kafka port
// with the reassigner's ability, a running broker and a way to create a
// topic.
type ReassignerSubject struct {
	R      ports.Reassigner
	Broker int32
	Create func(ctx context.Context, topic string) error
}

// ReassignerConformance holds the franz-go adapter (on kfake) and
// Reassigning to the same answers: no move in flight on a new cluster;
// cancelling a partition that is not moving is an error; a topic's and a
// broker's dynamic overrides are listed once set, by resource and name,
// with nothing but the keys asked, and gone once deleted (a delete of a
// key not set is no error). It does not cover a move in flight (kfake
// completes a reassignment at once; the lab tests hold the real Kafka to
// it) nor a cluster-wide default.
func ReassignerConformance(t *testing.T, subject func(t *testing.T) ReassignerSubject) {
	const topic, rate = "conformance-moves", "4096"
	s := subject(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ms, err := s.R.Reassignments(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("a new cluster's reassignments: %v %v, want none", ms, err)
	}
	if err := s.Create(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if err := s.R.Reassign(ctx, topic, 0, nil); err == nil {
		t.Errorf("cancelling %s-0, which is not moving, was no error", topic)
	}
	b := strconv.Itoa(int(s.Broker))
	keys := []string{"leader.replication.throttled.rate", "follower.replication.throttled.replicas"}
	for _, e := range []ports.ConfigEntry{{Resource: ports.ResourceBroker, Name: b, Key: keys[0], Value: rate},
		{Resource: ports.ResourceTopic, Name: topic, Key: keys[1], Value: "0:" + b}} {
		if err := s.R.SetConfig(ctx, e.Resource, e.Name, e.Key, &e.Value); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.R.Overrides(ctx, append(slices.Clone(keys), "retention.ms"), []int32{s.Broker}, []string{topic})
	want := []ports.ConfigEntry{{Resource: ports.ResourceBroker, Name: b, Key: keys[0], Value: rate},
		{Resource: ports.ResourceTopic, Name: topic, Key: keys[1], Value: "0:" + b}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("overrides %+v %v, want %+v", got, err, want)
	}
	for _, e := range want {
		for range 2 { // the second delete: a key not set
			if err := s.R.SetConfig(ctx, e.Resource, e.Name, e.Key, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, err := s.R.Overrides(ctx, keys, []int32{s.Broker}, []string{topic}); err != nil || len(got) != 0 {
		t.Fatalf("overrides after the deletes: %+v %v, want none", got, err)
	}
}
