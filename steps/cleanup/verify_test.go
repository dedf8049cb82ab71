package cleanup_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// TestNotAllowedToDescribeIsNotDeleted: a broker that answers
// TOPIC_AUTHORIZATION_FAILED for the topic says nothing about whether it
// still knows it (Kafka answers so whether the topic exists or not). Verify
// must not count that as "the broker does not know it", and preflight must
// not plan a cleanup on it: both say which ACL kremedy's principal lacks.
func TestNotAllowedToDescribeIsNotDeleted(t *testing.T) {
	denied := ports.TopicView{Name: "orders", Err: ports.KafkaTopicAuthorizationFailed}
	for _, tc := range []struct {
		name string
		deny func(f *fixture)
	}{
		{"every broker (an ACL)", func(f *fixture) { f.kafka.Deny("orders") }},
		{"one broker", func(f *fixture) { f.kafka.Cache(2, denied) }},
	} {
		t.Run("verify: "+tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil)
				started := 0
				f.hosts.OnStart = func(int32) {
					if started++; started == 3 { // after the cleanup, before verify
						tc.deny(f)
					}
				}
				out, err := f.run(context.Background(), f.typing("orders"))
				if !errors.Is(err, steps.ErrCheckFailed) || out.Failed != "verify" {
					t.Fatalf("verify passed or failed elsewhere: %v (%+v)", err, out)
				}
				for _, want := range []string{`does not know "orders" (TOPIC_AUTHORIZATION_FAILED`, "may not Describe topic \"orders\"", "--operation Describe --topic orders"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("the failure does not say %q: %v", want, err)
					}
				}
				b, _ := os.ReadFile(f.journal())
				if !bytes.Contains(b, []byte(`"name":"broker 2 does not know \"orders\"","ok":false`)) {
					t.Fatalf("the journal does not have broker 2's check failed:\n%s", b)
				}
			})
		})
		t.Run("preflight: "+tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, nil)
				tc.deny(f)
				_, err := f.run(context.Background(), f.typing("orders"))
				if !errors.Is(err, steps.ErrRefused) || !strings.Contains(err.Error(), ": TOPIC_AUTHORIZATION_FAILED: kremedy may not Describe topic \"orders\"") || !strings.Contains(err.Error(), "--operation Describe") {
					t.Fatalf("err %v, want a refusal naming the ACL", err)
				}
				if len(f.zk.Ops) != 0 || len(f.asked) != 0 {
					t.Fatalf("refused preflight still acted: ops %v asked %v", f.zk.Ops, f.asked)
				}
			})
		})
	}
}
