package tui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/journal"
	"github.com/kremedy/kremedy/steps/ports"
)

// fakeKind is a strict fake step kind: Apply is an error unless the test
// said an approval will let it run, and a wanted Apply that never came
// fails the test at cleanup.
type fakeKind struct {
	t         *testing.T
	id        string
	plan      steps.Plan
	wantApply bool
	apply     func(ctx context.Context, env *steps.Env, call int) error
	checks    []steps.Check

	mu      sync.Mutex
	planned int
	applied int
}

func (k *fakeKind) Plan(context.Context, *steps.Env) (*steps.Plan, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.planned++
	p := k.plan
	return &p, nil
}

func (k *fakeKind) Apply(ctx context.Context, env *steps.Env, _ *steps.Plan) error {
	k.mu.Lock()
	k.applied++
	call := k.applied
	want := k.wantApply
	k.mu.Unlock()
	if !want {
		k.t.Errorf("strict fake: %s was applied, but no confirmation should have let it", k.id)
		return errors.New("unexpected apply")
	}
	if k.apply != nil {
		return k.apply(ctx, env, call)
	}
	return nil
}

func (k *fakeKind) Verify(context.Context, *steps.Env) ([]steps.Check, error) { return k.checks, nil }

func (k *fakeKind) counts() (planned, applied int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.planned, k.applied
}

// recorder sits between the engine and the TUI's approver and records
// every answer the engine got.
type recorder struct {
	mu    sync.Mutex
	inner steps.Approver
	got   []steps.Approval
}

func (r *recorder) Approve(ctx context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	r.mu.Lock()
	inner := r.inner
	r.mu.Unlock()
	ap, err := inner.Approve(ctx, info, p)
	if err == nil {
		r.mu.Lock()
		r.got = append(r.got, ap)
		r.mu.Unlock()
	}
	return ap, err
}

func (r *recorder) answers() []steps.Approval {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]steps.Approval(nil), r.got...)
}

// fixture is the real engine in a real run session, and strict fake kinds.
type fixture struct {
	t      *testing.T
	dir    string
	s      *steps.Session
	kinds  map[string]*fakeKind
	steps  []steps.Step
	rec    *recorder
	starts atomic.Int32
}

const topic = "orders"

func testInfos() []steps.Info {
	return []steps.Info{
		{ID: "preflight", Kind: "preflight", Title: "What kremedy sees before anything happens", Risk: steps.ReadOnly,
			Why: "kremedy reads ZooKeeper, every broker's cache and every disk before anything changes."},
		{ID: "detach-clients", Kind: "detach-clients", Title: "Detach producers and consumers", Risk: steps.Low, Confirm: steps.ConfirmYes,
			Why:      "A client left attached recreates the topic between two steps of this cleanup.",
			Rollback: "Nothing was deleted. Start again the clients you stopped. The groups' committed offsets are saved in {{.offsets}}."},
		{ID: "delete-znodes", Kind: "delete-znodes", Title: "Delete the topic's znodes (after a backup)", Risk: steps.Destructive, Confirm: steps.ConfirmTyped,
			Why:      "Deletion is two-phase and stalls with a replica's broker down; kremedy deletes what the controller would have deleted.",
			Rollback: "Recreate the znodes exactly as they were (data and ACLs):\n  kremedy znodes restore {{.backup}} --inventory {{.inventory}}"},
	}
}

func v(n int32) *int32 { return &n }

// testRunbook is how the tests' runbook describes itself: topic-cleanup's
// confirmation word and artifacts.
func testRunbook() *steps.Runbook {
	return &steps.Runbook{Name: "topic-cleanup", Confirm: steps.Confirmation{Word: topic, Noun: "topic"}, Params: map[string]string{"topic": topic},
		Artifacts: []steps.Artifact{{ID: "backup", What: "znode backup (data, ACLs, versions)", Path: "backup/znodes.json"},
			{ID: "offsets", What: "consumer group offsets", Path: "offsets.json"}}}
}

func testPlans() map[string]steps.Plan {
	return map[string]steps.Plan{
		"preflight": {Summary: `read-only look at "orders" on cluster lab`, NoOp: true, Facts: []string{
			"controller: broker 3; registered brokers: [1 2 3]",
			"/brokers/topics/orders: topic ID BBBBBBBBBBBBBBBBBBBBBB, 3 partitions",
			"/admin/delete_topics/orders exists: a deletion is pending",
			"broker 2: /data/k1 holds orders-0, orders-1, orders-2 with the OLD topic ID AAAAAAAAAAAAAAAAAAAAAA",
		}},
		"detach-clients": {Summary: `detach every client from "orders"`,
			Facts: []string{"group billing (Stable): 2 members on the topic, committed offsets on 3 partitions"},
			Actions: []steps.Action{
				{ID: "offsets", Op: steps.OpSave, Target: "offsets.json", Detail: "committed offsets of 1 groups on orders"},
				{ID: "stop-billing", Op: steps.OpSSH, Target: "app-1", Detail: "systemctl stop billing (stop client billing)"},
				{ID: "gate", Op: steps.OpWait, Target: "orders", Detail: "re-check every 2s until no group has members on it"},
			}},
		"delete-znodes": {Summary: `delete 6 znodes of "orders", after backing them up`,
			Actions: []steps.Action{
				{ID: "backup", Op: steps.OpSave, Target: "backup/znodes.json", Detail: "data, ACLs and versions of 6 znodes"},
				{ID: "delete-1", Op: steps.OpZKDelete, Target: "/brokers/topics/orders/partitions/0/state", Version: v(1)},
				{ID: "delete-2", Op: steps.OpZKDelete, Target: "/brokers/topics/orders/partitions/0", Version: v(0)},
				{ID: "delete-3", Op: steps.OpZKDelete, Target: "/brokers/topics/orders/partitions", Version: v(0)},
				{ID: "delete-4", Op: steps.OpZKDelete, Target: "/brokers/topics/orders", Version: v(3)},
				{ID: "delete-5", Op: steps.OpZKDelete, Target: "/config/topics/orders", Version: v(1)},
				{ID: "delete-6", Op: steps.OpZKDelete, Target: "/admin/delete_topics/orders", Version: v(0)},
			}},
	}
}

func testChecks() map[string][]steps.Check {
	return map[string][]steps.Check{
		"preflight": {
			{Name: "chroot /kafka holds /brokers/ids and /cluster/id", OK: true},
			{Name: "no KRaft migration in progress", OK: true},
			{Name: "SSH to every broker with a verified host key", OK: true, Detail: "3 of 3"},
		},
		"detach-clients": {{Name: "no consumer group has members on the topic", OK: true}},
		"delete-znodes":  {{Name: "no znode of the topic is left", OK: true}},
	}
}

// newFixture builds the three-step runbook; ids lists the steps to keep
// (all by default).
func newFixture(t *testing.T, ids ...string) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), kinds: map[string]*fakeKind{}, rec: &recorder{}}
	plans, checks := testPlans(), testChecks()
	for _, info := range testInfos() {
		if len(ids) > 0 && !contains(ids, info.ID) {
			continue
		}
		k := &fakeKind{t: t, id: info.ID, plan: plans[info.ID], checks: checks[info.ID]}
		f.kinds[info.ID] = k
		f.steps = append(f.steps, steps.Step{Info: info, Kind: k})
	}
	rb := testRunbook()
	rb.Steps = f.steps
	s, err := steps.Create(f.dir, rb, steps.Meta{ID: "test-run", Runbook: rb.Name, Cluster: "lab", Lab: true, Inventory: "lab/inventory.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f.s = s
	t.Cleanup(func() {
		for _, k := range f.kinds {
			if _, applied := k.counts(); k.wantApply && applied == 0 {
				t.Errorf("strict fake: %s was never applied, but the test confirmed it", k.id)
			}
		}
	})
	return f
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// start is the StartFunc cmd would give: a fresh Run on the same journal,
// continuing from it (so retries resume).
func (f *fixture) start(ctx context.Context, a steps.Approver, rep steps.Reporter) (steps.Outcome, error) {
	f.starts.Add(1)
	f.rec.mu.Lock()
	f.rec.inner = a
	f.rec.mu.Unlock()
	out := f.s.Run(ctx, ports.Cluster{}, f.rec, rep)
	return out, out.Err
}

func (f *fixture) options() Options {
	return Options{Steps: f.s.Runbook().Infos(), Start: f.start, Runbook: "topic-cleanup", Cluster: "lab", Confirm: testRunbook().Confirm, Mode: Lab, Next: goldenNext,
		RunDir: f.dir, ReportPath: filepath.Join(f.dir, "report.md"), By: "tui (test)"}
}

// records returns the journal's record types, in order, with their step.
func (f *fixture) records() []string {
	f.t.Helper()
	recs, err := journal.Read(f.s.JournalPath())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		s := r.Type
		if r.Step != "" {
			s += " " + r.Step
		}
		out = append(out, s)
	}
	return out
}

func (f *fixture) recordData(typ, step string) map[string]any {
	f.t.Helper()
	recs, err := journal.Read(f.s.JournalPath())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range recs {
		if r.Type == typ && r.Step == step {
			d, _ := journal.Decode[map[string]any](r)
			return d
		}
	}
	f.t.Fatalf("no %s record for %s in %v", typ, step, f.records())
	return nil
}

// harness drives the root model the way bubbletea does: it runs every
// returned Cmd in its own goroutine and feeds the messages back into
// Update, on the test goroutine. Keys go straight into Update.
type harness struct {
	t    *testing.T
	m    *Model
	msgs chan tea.Msg
	quit bool
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	return newHarnessCtx(t, context.Background(), o)
}

func newHarnessCtx(t *testing.T, ctx context.Context, o Options) *harness {
	t.Helper()
	m := newModel(ctx, o, NewStyles(true, true))
	h := &harness{t: t, m: m, msgs: make(chan tea.Msg, 4096)}
	// Wide enough that assertions never meet a truncated line; the
	// goldens cover 80×24 and 120×40.
	h.handle(tea.WindowSizeMsg{Width: 220, Height: 60})
	h.exec(m.Init())
	t.Cleanup(func() {
		if m.engineRunning {
			m.cancel()
			<-m.finished
		}
		m.b.close()
	})
	return h
}

func (h *harness) exec(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() {
		msg := cmd()
		select {
		case h.msgs <- msg:
		case <-h.m.b.stop:
		}
	}()
}

func (h *harness) handle(msg tea.Msg) {
	switch msg := msg.(type) {
	case nil:
		return
	case tea.BatchMsg:
		for _, c := range msg {
			h.exec(c)
		}
		return
	case tea.QuitMsg:
		h.quit = true
		return
	}
	_, cmd := h.m.Update(msg)
	h.exec(cmd)
}

// until pumps messages until cond holds.
func (h *harness) until(what string, cond func(m *Model) bool) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond(h.m) {
		select {
		case msg := <-h.msgs:
			h.handle(msg)
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s; screen:\n%s", what, h.screen())
		}
	}
}

// settle pumps whatever is pending for a moment (to show that something
// did not happen).
func (h *harness) settle(d time.Duration) {
	end := time.After(d)
	for {
		select {
		case msg := <-h.msgs:
			h.handle(msg)
		case <-end:
			return
		}
	}
}

func keyMsg(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "pgup":
		return tea.KeyPressMsg{Code: tea.KeyPgUp}
	case "pgdown":
		return tea.KeyPressMsg{Code: tea.KeyPgDown}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(s)
	if len(r) != 1 {
		panic("keyMsg: one key at a time: " + s)
	}
	return tea.KeyPressMsg{Code: r[0], Text: s}
}

func (h *harness) press(keys ...string) {
	h.t.Helper()
	for _, k := range keys {
		h.handle(keyMsg(k))
	}
}

func (h *harness) typeText(s string) {
	for _, r := range s {
		h.handle(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

func (h *harness) screen() string { return ansi.Strip(h.m.render()) }

func (h *harness) wantScreen(subs ...string) {
	h.t.Helper()
	s := h.screen()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			h.t.Fatalf("screen lacks %q:\n%s", sub, s)
		}
	}
}

func (h *harness) asked(id string) func(*Model) bool {
	return func(m *Model) bool { return m.ask != nil && m.ask.info.ID == id }
}

func finished(m *Model) bool { return m.phase == phaseFinished }

func decisions(aps []steps.Approval) string {
	var out []string
	for _, a := range aps {
		s := [...]string{"approve", "skip", "abort"}[a.Decision]
		if a.Typed != "" {
			s += fmt.Sprintf(" typed=%q", a.Typed)
		}
		if a.Reason != "" {
			s += fmt.Sprintf(" reason=%q", a.Reason)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}
