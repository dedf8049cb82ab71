package steps_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/ports"
)

// downKind reports brokers down and back as a stop and a start would.
type downKind struct {
	fakeKind
	down []int
	fail bool
}

func (k *downKind) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, d := range k.down {
		env.BrokersDown(d, 3)
	}
	if k.fail {
		return errors.New("broker 2 did not start")
	}
	return k.fakeKind.Apply(ctx, env, p)
}

type events struct {
	mu  sync.Mutex
	all []steps.Event
}

func (e *events) Report(ev steps.Event) { e.mu.Lock(); e.all = append(e.all, ev); e.mu.Unlock() }

func (e *events) of(kind steps.EventKind) []steps.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []steps.Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// TestOutageEvents: the engine reports the outage window as the report
// computes it — opened at the first broker down, closed when the step that
// brought them back ends (not when the count reaches 0) — and a resumed
// run whose window an earlier attempt left open says so first. Every
// decision is reported, with its digest.
func TestOutageEvents(t *testing.T) {
	stop := &downKind{down: []int{1, 3}}
	start := &downKind{down: []int{2, 0}, fail: true}
	s := session(t, step("stop", steps.Destructive, steps.ConfirmTyped, stop), step("start", steps.Low, steps.ConfirmYes, start))
	var evs events
	out := s.Run(context.Background(), ports.Cluster{}, approveAll, &evs)
	if out.Err == nil {
		t.Fatal("the start was meant to fail")
	}
	if o := evs.of(steps.EvOutage); len(o) != 1 || !o[0].Outage.Open || o[0].Step != "stop" || o[0].Outage.Total != 3 {
		t.Fatalf("the window did not open once, at the first broker down (a failed start does not close it): %+v", o)
	}
	ap := evs.of(steps.EvApproval)
	if len(ap) != 2 || ap[0].Approval.Digest == "" || ap[0].Approval.Decision != steps.Approve {
		t.Fatalf("approvals reported: %+v", ap)
	}
	b, _ := json.Marshal(ap[0])
	if !strings.Contains(string(b), `"kind":"approval"`) || !strings.Contains(string(b), `"approval":{"decision":"approve","by":"test","digest":"`) || strings.Contains(string(b), "word") {
		t.Errorf("an approval as --output jsonl prints it: %s", b)
	}

	// Resume: the window is still open; the start succeeds and closes it.
	start.fail = false
	var again events
	if out := s.Run(context.Background(), ports.Cluster{}, approveAll, &again); out.Err != nil {
		t.Fatal(out.Err)
	}
	o := again.of(steps.EvOutage)
	if len(o) != 2 || !o[0].Outage.Open || !strings.Contains(o[0].Text, "by an earlier attempt is still open") || o[1].Outage.Open || o[1].Step != "start" || o[1].Outage.Length() <= 0 || o[1].Outage.MaxDown != 3 {
		t.Fatalf("resumed: %+v", o)
	}
	b, _ = json.Marshal(o[1])
	if !strings.Contains(string(b), `"kind":"outage"`) || !strings.Contains(string(b), `"outage":{"start":`) || !strings.Contains(string(b), `"open":false,"max_down":3,"brokers":3}`) {
		t.Errorf("an outage as --output jsonl prints it: %s", b)
	}
}
