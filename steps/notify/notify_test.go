package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/notify"
	"github.com/kremedy/kremedy/steps/ports"
)

// receiver is a webhook on loopback that keeps what it was sent, in
// order; status decides each answer (the n-th request, from 1).
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	status func(n int) int
	// retryAfter, when set, is the n-th answer's Retry-After ("": none).
	retryAfter func(n int) string

	mu    sync.Mutex
	n     int
	got   [][]byte
	at    []time.Time // every request's arrival, answered or not
	heads []http.Header
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	r := &receiver{t: t, status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.n++
	n := r.n
	r.at = append(r.at, time.Now())
	r.mu.Unlock()
	code := http.StatusOK
	if r.status != nil {
		code = r.status(n)
	}
	if r.retryAfter != nil {
		if v := r.retryAfter(n); v != "" {
			w.Header().Set("Retry-After", v)
		}
	}
	if code == http.StatusOK {
		r.mu.Lock()
		r.got = append(r.got, b)
		r.heads = append(r.heads, req.Header.Clone())
		r.mu.Unlock()
	}
	w.WriteHeader(code)
}

func (r *receiver) bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *receiver) events() []string {
	var out []string
	for _, b := range r.bodies() {
		var m notify.Message
		if err := json.Unmarshal(b, &m); err != nil {
			r.t.Fatalf("not a JSON message: %v\n%s", err, b)
		}
		out = append(out, m.Event)
	}
	return out
}

// requests is how many requests reached r, answered or not.
func (r *receiver) requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.at)
}

// waitUntil polls cond until it holds, failing the test after 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within 10s: %s", what)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// quick are options for tests: short pauses and bounds.
func quick(problems *problems) notify.Options {
	return notify.Options{Timeout: 300 * time.Millisecond, Retry: 2 * time.Second, Backoff: 20 * time.Millisecond,
		Late: time.Minute, Flush: 300 * time.Millisecond, MaxFlush: 3 * time.Second, Problem: problems.add}
}

type problems struct {
	mu    sync.Mutex
	lines []string
}

func (p *problems) add(s string) { p.mu.Lock(); p.lines = append(p.lines, s); p.mu.Unlock() }
func (p *problems) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

var testRun = notify.Run{ID: "20261201T064700Z-rolling-restart-prod", Runbook: "rolling-restart", Cluster: "prod <eu1> & co", Operator: "alice@bastion",
	Version: "v1.2.3", Dir: "/runs/r", Resume: "kremedy resume /runs/r",
	Steps: []steps.Info{{ID: "preflight", Title: "Check the cluster"}, {ID: "roll", Title: "Restart every broker", Risk: steps.Destructive, Confirm: steps.ConfirmTyped}}}

var t0 = time.Date(2026, 12, 1, 6, 47, 0, 0, time.UTC)

// walk is the events of a run that rolls with an outage window, as the
// engine reports them (logs, progress and checks among them: not sent).
func walk(n *notify.Notifier) {
	plan := &steps.Plan{Step: "roll", Summary: "restart 3 brokers, one at a time", Actions: []steps.Action{{ID: "stop-1", Op: steps.OpSSH, Target: "b1"}}}
	ap := steps.Approval{Decision: steps.Approve, By: "tui (alice)", Digest: plan.Digest(),
		Signoffs: []steps.Signoff{{By: "bob@example.com", Key: "SHA256:abc", Digest: plan.Digest(), At: t0}}}
	open := steps.Outage{Start: t0.Add(3 * time.Second), Open: true, MaxDown: 1, Total: 3}
	closed := steps.Outage{Start: open.Start, End: t0.Add(65 * time.Second), MaxDown: 1, Total: 3}
	n.RunStart(false)
	for _, e := range []steps.Event{
		{Step: "preflight", Kind: steps.EvState, State: steps.Planning},
		{Step: "preflight", Kind: steps.EvPlan, Plan: &steps.Plan{Step: "preflight", NoOp: true}},
		{Step: "preflight", Kind: steps.EvCheck, Check: &steps.Check{Name: "c", OK: true}},
		{Step: "preflight", Kind: steps.EvState, State: steps.Done, Text: "nothing to do"},
		{Step: "roll", Kind: steps.EvPlan, Plan: plan},
		{Step: "roll", Kind: steps.EvWaiting, Plan: plan, Text: "waiting for a second approval of roll"},
		{Step: "roll", Kind: steps.EvProgress, Text: "still waiting"},
		{Step: "roll", Kind: steps.EvApproval, Approval: &ap},
		{Step: "roll", Kind: steps.EvState, State: steps.Running},
		{Step: "roll", Kind: steps.EvLog, Text: "a line"},
		{Step: "roll", Kind: steps.EvOutage, Outage: &open, Text: "outage window opened: 1 of 3 brokers down"},
		{Step: "roll", Kind: steps.EvBrokers, Down: 1, Total: 3},
		{Step: "roll", Kind: steps.EvOutage, Outage: &closed, Text: "outage window closed after 1m2s"},
		{Step: "roll", Kind: steps.EvState, State: steps.Done, Text: "done in 1m5s"},
	} {
		n.Report(e)
	}
	n.RunEnd(notify.End{Ending: steps.Finished, Done: []string{"preflight", "roll"}, Report: "/runs/r/report.md"})
}

var walkEvents = []string{"run-start", "step-end", "plan", "approval-wanted", "approval", "step-start", "outage-open", "outage-close", "step-end", "run-end"}

// TestEventsInOrderWithTheirFields: one JSON object per event that matters,
// in the order they happened, each with the run's identity and its own
// fields.
func TestEventsInOrderWithTheirFields(t *testing.T) {
	r := newReceiver(t, nil)
	var p problems
	n := notify.New(testRun, []notify.Target{{URL: r.srv.URL + "/hook", Token: "t0ken"}}, quick(&p))
	walk(n)
	if u := n.Close(); len(u) != 0 || len(p.all()) != 0 {
		t.Fatalf("undelivered %v, problems %v", u, p.all())
	}
	if got := r.events(); !slices.Equal(got, walkEvents) {
		t.Fatalf("events %v\nwant   %v", got, walkEvents)
	}
	var ms []map[string]any
	for i, b := range r.bodies() {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m["seq"] != float64(i+1) || m["run"] != testRun.ID || m["cluster"] != testRun.Cluster || m["runbook"] != "rolling-restart" || m["text"] == "" || m["id"] == "" {
			t.Errorf("message %d lacks the run's identity: %s", i, b)
		}
		if h := r.heads[i]; h.Get("Authorization") != "Bearer t0ken" || h.Get("Content-Type") != "application/json" || !strings.HasPrefix(h.Get("User-Agent"), "kremedy/") {
			t.Errorf("message %d headers %v", i, h)
		}
		ms = append(ms, m)
	}
	for _, tc := range []struct {
		i    int
		want map[string]any
	}{
		{0, map[string]any{"event": "run-start", "operator": "alice@bastion", "kremedy": "v1.2.3", "dir": "/runs/r"}},
		{2, map[string]any{"event": "plan", "step": "roll", "summary": "restart 3 brokers, one at a time", "actions": float64(1), "risk": "destructive"}},
		{4, map[string]any{"event": "approval", "decision": "approve", "by": "tui (alice)"}},
		{6, map[string]any{"event": "outage-open", "brokers_down": float64(1), "brokers": float64(3), "since": "2026-12-01T06:47:03Z"}},
		{7, map[string]any{"event": "outage-close", "length_ms": float64(62000), "length": "1m2s", "until": "2026-12-01T06:48:05Z"}},
		{9, map[string]any{"event": "run-end", "ending": "finished", "report": "/runs/r/report.md"}},
	} {
		for k, v := range tc.want {
			if ms[tc.i][k] != v {
				t.Errorf("message %d (%s): %s = %v, want %v", tc.i, ms[tc.i]["event"], k, ms[tc.i][k], v)
			}
		}
	}
	if so, _ := ms[4]["signoffs"].([]any); len(so) != 1 || so[0].(map[string]any)["by"] != "bob@example.com" {
		t.Errorf("the approval does not say who signed off: %v", ms[4])
	}
	if ms[2]["digest"] != ms[4]["digest"] || ms[2]["digest"] == nil {
		t.Errorf("plan and approval digests: %v, %v", ms[2]["digest"], ms[4]["digest"])
	}
}

// TestFailureCarriesTheResumeCommand: a failed step and a run that did not
// finish say how to resume it.
func TestFailureCarriesTheResumeCommand(t *testing.T) {
	r := newReceiver(t, nil)
	var p problems
	n := notify.New(testRun, []notify.Target{{URL: r.srv.URL}}, quick(&p))
	n.Report(steps.Event{Step: "roll", Kind: steps.EvState, State: steps.Failed, Err: errors.New("step roll: broker 2 did not come back")})
	n.RunEnd(notify.End{Ending: steps.Stopped, Done: []string{"preflight"}, NotDone: []string{"roll"}, Err: errors.New("step roll: broker 2 did not come back\n  more")})
	n.Close()
	for i, b := range r.bodies() {
		var m notify.Message
		_ = json.Unmarshal(b, &m)
		if m.Resume != testRun.Resume || !strings.Contains(m.Text, testRun.Resume) || !strings.Contains(m.Error, "broker 2 did not come back") {
			t.Errorf("message %d: %s", i, b)
		}
		if m.Event == notify.EvRunEnd && (m.Ending != "stopped" || !slices.Equal(m.NotDone, []string{"roll"})) {
			t.Errorf("run-end: %s", b)
		}
	}
	if got := r.events(); !slices.Equal(got, []string{"step-failed", "run-end"}) {
		t.Errorf("events %v", got)
	}
}

// TestSlackBody: a Slack incoming webhook gets text and blocks (a mrkdwn
// section, a context line) and nothing else, with Slack's control
// characters escaped in the blocks.
func TestSlackBody(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://hooks.slack.com/services/T000/B000/XXXX", true},
		{"https://HOOKS.slack.com/services/T000/B000/XXXX", true},
		{"https://hooks.slack.com/workflows/T000/A000", false},
		{"https://hooks.slack.com.evil.example/services/T000", false},
		{"https://example.com/services/T000", false},
	} {
		if got := notify.IsSlack(tc.url); got != tc.want {
			t.Errorf("IsSlack(%s) = %v", tc.url, got)
		}
	}
	r := newReceiver(t, nil)
	var p problems
	n := notify.New(testRun, []notify.Target{{URL: r.srv.URL, Format: notify.Slack}}, quick(&p))
	walk(n)
	n.Close()
	bodies := r.bodies()
	if len(bodies) != len(walkEvents) {
		t.Fatalf("%d bodies, want %d", len(bodies), len(walkEvents))
	}
	for i, b := range bodies {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatal(err)
		}
		if len(top) != 2 || top["text"] == nil || top["blocks"] == nil {
			t.Fatalf("body %d has keys other than text and blocks: %s", i, b)
		}
		var s struct {
			Text   string `json:"text"`
			Blocks []struct {
				Type     string `json:"type"`
				Text     *struct{ Type, Text string }
				Elements []struct{ Type, Text string }
			} `json:"blocks"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.Text, "[prod <eu1> & co] ") || len(s.Blocks) != 2 || s.Blocks[0].Type != "section" || s.Blocks[0].Text == nil ||
			s.Blocks[0].Text.Type != "mrkdwn" || s.Blocks[0].Text.Text == "" || s.Blocks[1].Type != "context" || len(s.Blocks[1].Elements) != 1 ||
			s.Blocks[1].Elements[0].Type != "mrkdwn" {
			t.Fatalf("body %d is not text plus a section and a context: %s", i, b)
		}
		for _, md := range []string{s.Blocks[0].Text.Text, s.Blocks[1].Elements[0].Text} {
			if strings.ContainsAny(md, "<>") || strings.Contains(md, "& ") {
				t.Errorf("body %d: mrkdwn not escaped: %q", i, md)
			}
		}
		if !strings.Contains(s.Blocks[1].Elements[0].Text, testRun.ID) || !strings.Contains(s.Blocks[1].Elements[0].Text, "prod &lt;eu1&gt; &amp; co") {
			t.Errorf("body %d: context %q does not name the run", i, s.Blocks[1].Elements[0].Text)
		}
	}
	var close struct {
		Blocks []struct{ Text *struct{ Text string } }
	}
	_ = json.Unmarshal(bodies[7], &close)
	if !strings.Contains(close.Blocks[0].Text.Text, "outage window closed* after *1m2s*") {
		t.Errorf("outage-close in Slack: %s", bodies[7])
	}
}

// TestRetriesWithBackoff: a webhook that fails (503, then a 429 with
// Retry-After: 1) gets the event again after longer and longer pauses,
// once it answers, and the next events after it, in order; nothing is
// reported.
func TestRetriesWithBackoff(t *testing.T) {
	r := newReceiver(t, func(n int) int {
		switch {
		case n <= 3:
			return http.StatusServiceUnavailable
		case n == 4:
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	r.retryAfter = func(n int) string {
		if n == 4 { // the 429 asks for a second
			return "1"
		}
		return ""
	}
	var p problems
	o := quick(&p)
	o.Backoff = 50 * time.Millisecond
	n := notify.New(testRun, []notify.Target{{URL: r.srv.URL}}, o)
	n.RunStart(false)
	n.RunEnd(notify.End{Ending: steps.Finished})
	waitUntil(t, "6 requests (4 refused, 2 delivered)", func() bool { return r.requests() >= 6 })
	n.Close()
	if got := r.events(); !slices.Equal(got, []string{"run-start", "run-end"}) {
		t.Fatalf("events %v", got)
	}
	if len(p.all()) != 0 {
		t.Errorf("problems reported for a webhook that recovered: %v", p.all())
	}
	r.mu.Lock()
	at := slices.Clone(r.at)
	r.mu.Unlock()
	if len(at) != 6 {
		t.Fatalf("%d requests, want 6 (4 refused, 2 delivered)", len(at))
	}
	gaps := []time.Duration{at[1].Sub(at[0]), at[2].Sub(at[1]), at[3].Sub(at[2]), at[4].Sub(at[3])}
	for i, min := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, time.Second} {
		if gaps[i] < min {
			t.Errorf("pause %d was %s, want at least %s (backoff doubles; Retry-After honoured)", i+1, gaps[i], min)
		}
	}
}

// TestReceiverRestart: a webhook that goes away and comes back on the same
// address gets every event, in order, once it is back.
func TestReceiverRestart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	r := &receiver{t: t}
	srv := &http.Server{Handler: http.HandlerFunc(r.serve)}
	go srv.Serve(ln)
	var p problems
	// Retries and the final flush get room enough for a loaded machine
	// (the race detector beside lab tests): a passing run ends as soon as
	// the receiver is back.
	o := quick(&p)
	o.Retry, o.MaxFlush = 15*time.Second, 15*time.Second
	var failed atomic.Int32 // tries that found no webhook
	o.Client = &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			failed.Add(1)
		}
		return res, err
	})}
	n := notify.New(testRun, []notify.Target{{URL: "http://" + addr + "/hook"}}, o)
	n.RunStart(false)
	waitUntil(t, "run-start delivered", func() bool { return len(r.bodies()) == 1 })
	srv.Close() // gone
	for i := range 3 {
		n.Report(steps.Event{Step: "roll", Kind: steps.EvState, State: steps.Done, Text: "step " + string(rune('a'+i))})
	}
	waitUntil(t, "a try and a retry while the webhook is gone", func() bool { return failed.Load() >= 2 })
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := &http.Server{Handler: http.HandlerFunc(r.serve)}
	go srv2.Serve(ln2)
	defer srv2.Close()
	n.RunEnd(notify.End{Ending: steps.Finished})
	if u := n.Close(); len(u) != 0 {
		t.Fatalf("undelivered: %v", u)
	}
	if got, want := r.events(), []string{"run-start", "step-end", "step-end", "step-end", "run-end"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var texts []string
	for _, b := range r.bodies()[1:4] {
		var m notify.Message
		_ = json.Unmarshal(b, &m)
		texts = append(texts, m.Text)
	}
	if !slices.Equal(texts, []string{"roll done: step a", "roll done: step b", "roll done: step c"}) {
		t.Errorf("out of order: %v", texts)
	}
	if len(p.all()) != 0 {
		t.Errorf("problems: %v", p.all())
	}
}

// TestDeadWebhookNeverBlocks: a webhook that never answers, or refuses
// connections, does not hold Report up and Close returns after
// Options.Flush, long before a request would time out; it is reported
// once; what it did not get is said. (No speed is asserted: a Report that
// waited for the webhook would take at least its minute-long timeout, so
// the 20 s bound only catches blocking; BenchmarkReport measures speed.)
func TestDeadWebhookNeverBlocks(t *testing.T) {
	hang := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); silent.Close() })
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()
	for _, tc := range []struct{ name, url string }{{"never answers", silent.URL}, {"refuses connections", refusedURL}} {
		t.Run(tc.name, func(t *testing.T) {
			var p problems
			o := quick(&p)
			o.Timeout, o.Retry, o.Flush = time.Minute, 200*time.Millisecond, 500*time.Millisecond
			n := notify.New(testRun, []notify.Target{{URL: tc.url + "/secret-path?token=x"}}, o)
			walked := make(chan struct{})
			go func() {
				defer close(walked)
				for range 50 {
					walk(n)
				}
			}()
			select {
			case <-walked:
			case <-time.After(20 * time.Second):
				t.Fatal("Report blocks on a webhook that never answers")
			}
			closed := make(chan []notify.Undelivered, 1)
			go func() { closed <- n.Close() }()
			var u []notify.Undelivered
			select {
			case u = <-closed:
			case <-time.After(20 * time.Second):
				t.Fatalf("Close waits for a webhook that never answers (Flush is %s)", o.Flush)
			}
			if len(u) != 1 || !strings.Contains(u[0].Line, "events not delivered") {
				t.Fatalf("undelivered %v", u)
			}
			lines := p.all()
			if tc.name == "refuses connections" && (len(lines) != 1 || !u[0].Reported) {
				t.Errorf("want the trouble reported once, got %q", lines)
			}
			if len(lines) > 1 {
				t.Errorf("reported %d times: %q", len(lines), lines)
			}
			for _, l := range append(lines, u[0].Line) {
				if strings.Contains(l, "secret-path") || strings.Contains(l, "token=x") {
					t.Errorf("a message shows the webhook's path: %s", l)
				}
			}
		})
	}
}

// TestRefusalIsNotRetried: a 4xx other than 408/429 is not retried; the
// webhook is reported once and each later event tried once, until one
// gets through.
func TestRefusalIsNotRetried(t *testing.T) {
	r := newReceiver(t, func(n int) int {
		if n <= 3 {
			return http.StatusNotFound
		}
		return http.StatusOK
	})
	var p problems
	n := notify.New(testRun, []notify.Target{{URL: r.srv.URL}}, quick(&p))
	for range 4 {
		n.RunStart(false)
	}
	u := n.Close()
	r.mu.Lock()
	requests := r.n
	r.mu.Unlock()
	if requests != 4 || len(r.bodies()) != 1 {
		t.Errorf("%d requests, %d delivered; want 4 and 1", requests, len(r.bodies()))
	}
	if lines := p.all(); len(lines) != 1 || !strings.Contains(lines[0], "HTTP 404") {
		t.Errorf("problems %q", lines)
	}
	if len(u) != 1 || !strings.Contains(u[0].Line, "3 events not delivered") || !u[0].Reported {
		t.Errorf("undelivered %v", u)
	}
}

// TestSlowWebhookIsReportedOnce: events delivered later than Options.Late
// after they happened are reported once.
func TestSlowWebhookIsReportedOnce(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { time.Sleep(60 * time.Millisecond) }))
	t.Cleanup(slow.Close)
	var p problems
	o := quick(&p)
	o.Late = 100 * time.Millisecond
	n := notify.New(testRun, []notify.Target{{URL: slow.URL}}, o)
	for range 5 {
		n.RunStart(false)
	}
	if u := n.Close(); len(u) != 0 {
		t.Errorf("undelivered %v", u)
	}
	if lines := p.all(); len(lines) != 1 || !strings.Contains(lines[0], "arrive late") {
		t.Errorf("problems %q", lines)
	}
}

// TestFullQueue: a queue that fills loses the events that do not fit, and
// says so; Report still returns at once.
func TestFullQueue(t *testing.T) {
	hang := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); silent.Close() })
	var p problems
	o := quick(&p)
	o.Queue, o.Timeout = 2, 10*time.Second
	n := notify.New(testRun, []notify.Target{{URL: silent.URL}}, o)
	for range 10 {
		n.RunStart(false)
	}
	u := n.Close()
	if lines := p.all(); len(lines) != 1 || !strings.Contains(lines[0], "queue of 2 events is full") {
		t.Errorf("problems %q", lines)
	}
	if len(u) != 1 || !strings.Contains(u[0].Line, "10 events not delivered") {
		t.Errorf("undelivered %v", u)
	}
}

func TestTargetCheck(t *testing.T) {
	for _, tc := range []struct {
		t    notify.Target
		want string // "" for no error
	}{
		{notify.Target{URL: "https://hooks.slack.com/services/T/B/X"}, ""},
		{notify.Target{URL: "http://127.0.0.1:8080/hook", Token: "x"}, ""},
		{notify.Target{URL: "http://[::1]:8080/hook", Token: "x"}, ""},
		{notify.Target{URL: "http://localhost/hook", Token: "x"}, ""},
		{notify.Target{URL: "https://ops.example.com/hook", Token: "x"}, ""},
		{notify.Target{URL: "http://ops.example.com/hook", Token: "x"}, "a token is sent over https only"},
		{notify.Target{URL: "https://user:pw@ops.example.com/hook"}, "user or password"},
		{notify.Target{URL: "ftp://ops.example.com/hook"}, "http:// or https://"},
		{notify.Target{URL: "ops.example.com/hook"}, "http:// or https://"},
		{notify.Target{URL: "https://"}, "http:// or https://"},
	} {
		err := tc.t.Check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.t.URL, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, notify.ErrTarget)):
			t.Errorf("%s: %v, want %q", tc.t.URL, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "pw@"):
			t.Errorf("%s: the error shows the password: %v", tc.t.URL, err)
		}
	}
	if n := notify.Name("https://hooks.slack.com/services/T/B/X?x=1"); n != "https://hooks.slack.com/…" {
		t.Errorf("Name = %q", n)
	}
}

// sleepKind is a step that takes d to apply and reports a broker down
// and back, so that a run has an outage window.
type sleepKind struct{ d time.Duration }

func (k sleepKind) Plan(context.Context, *steps.Env) (*steps.Plan, error) {
	return &steps.Plan{Summary: "sleep", Actions: []steps.Action{{ID: "a", Op: steps.OpSSH, Target: "b1"}}}, nil
}

func (k sleepKind) Apply(ctx context.Context, env *steps.Env, _ *steps.Plan) error {
	env.BrokersDown(1, 3)
	_ = env.Sleep(ctx, k.d)
	env.BrokersDown(0, 3)
	return nil
}

func (k sleepKind) Verify(context.Context, *steps.Env) ([]steps.Check, error) {
	return []steps.Check{{Name: "ok", OK: true}}, nil
}

type yes struct{}

func (yes) Approve(_ context.Context, _ steps.Info, p *steps.Plan) (steps.Approval, error) {
	return steps.Approval{Decision: steps.Approve, Typed: "word", By: "test", Digest: p.Digest()}, nil
}

// TestARunWithADeadWebhookTakesItsTimeAndASecond: a real session, its
// events reported to a webhook that never answers, ends (Close included)
// within the time the same run takes without notifications plus a second;
// the engine's outage window reaches the webhook in order.
func TestARunWithADeadWebhookTakesItsTimeAndASecond(t *testing.T) {
	hang := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); silent.Close() })
	live := newReceiver(t, nil)
	run := func(targets ...notify.Target) (time.Duration, []notify.Undelivered) {
		rb := &steps.Runbook{Name: "test", Confirm: steps.Confirmation{Word: "word", Noun: "thing"}, Steps: []steps.Step{
			{Info: steps.Info{ID: "one", Kind: "sleep", Title: "one", Risk: steps.Destructive, Confirm: steps.ConfirmTyped}, Kind: sleepKind{300 * time.Millisecond}},
			{Info: steps.Info{ID: "two", Kind: "sleep", Title: "two", Risk: steps.Low}, Kind: sleepKind{200 * time.Millisecond}},
		}}
		s, err := steps.Create(t.TempDir(), rb, steps.Meta{ID: "r", Runbook: "test"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		start := time.Now()
		var p problems
		o := notify.Options{Problem: p.add} // the defaults: 5s timeout, 30s retry, 750ms flush
		n := notify.New(notify.Run{ID: "r", Runbook: "test", Steps: rb.Infos()}, targets, o)
		n.RunStart(false)
		out := s.Run(context.Background(), ports.Cluster{}, yes{}, n)
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		n.RunEnd(notify.End{Ending: out.Ending(context.Background()), Done: out.Done})
		u := n.Close()
		return time.Since(start), u
	}
	base, _ := run()
	took, u := run(notify.Target{URL: silent.URL}, notify.Target{URL: live.srv.URL})
	t.Logf("without notifications %s; with a webhook that never answers %s", base.Round(time.Millisecond), took.Round(time.Millisecond))
	if took > base+time.Second {
		t.Errorf("the run took %s, more than its %s and a second", took, base)
	}
	if len(u) != 1 || !strings.Contains(u[0].Line, "127.0.0.1") {
		t.Errorf("undelivered %v", u)
	}
	got := live.events()
	idx := func(ev string) int { return slices.Index(got, ev) }
	if !(idx("run-start") == 0 && idx("run-start") < idx("outage-open") && idx("outage-open") < idx("outage-close") && idx("outage-close") < idx("run-end")) {
		t.Errorf("events out of order: %v", got)
	}
}

// BenchmarkReportDeadWebhook measures what one Report costs the run while
// its webhook never answers: `go test -run xxx -bench ReportDeadWebhook
// ./steps/notify/`.
func BenchmarkReportDeadWebhook(b *testing.B) {
	hang := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer func() { close(hang); silent.Close() }()
	var p problems
	o := quick(&p)
	o.Timeout, o.Retry, o.Flush = time.Minute, 200*time.Millisecond, 100*time.Millisecond
	n := notify.New(testRun, []notify.Target{{URL: silent.URL}}, o)
	defer n.Close()
	for b.Loop() {
		walk(n)
	}
}
