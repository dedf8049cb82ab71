package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/kremedy/kremedy/steps"
)

// Goldens are View().Content of the root model driven to a screen with
// hand-made engine messages (no engine goroutine), a pinned clock and
// pinned styles. Refresh with: go test ./tui/ -run TUIGolden -update

var base = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

const goldenDir = "/home/oncall/.local/state/kremedy/runs/20260314T092653Z-topic-cleanup-orders"

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

type scene struct {
	t    testing.TB
	m    *Model
	c    *clock
	data map[string]string // the rollback notes' values
	plan map[string]steps.Plan
}

func newScene(t testing.TB, w, h int, noColor bool, resume *Resume) *scene {
	c := &clock{t: base}
	o := Options{Steps: testInfos(), Runbook: "topic-cleanup", Cluster: "prod-eu-1", Confirm: testRunbook().Confirm, Mode: Live, Next: goldenNext,
		RunDir: goldenDir, ReportPath: goldenDir + "/report.md", Now: c.now, Resume: resume, By: "tui (golden)",
		Start: func(context.Context, steps.Approver, steps.Reporter) (steps.Outcome, error) {
			t.Fatal("a golden scene never starts the engine")
			return steps.Outcome{}, nil
		}}
	m := newModel(context.Background(), o, NewStyles(noColor, true))
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	if resume == nil || !resume.Ask {
		m.engineRunning = true // as if Init had started it
	}
	s := &scene{t: t, m: m, c: c, plan: testPlans(),
		data: testRunbook().TemplateData(goldenDir, "/etc/kremedy/prod-eu-1.yaml", "prod-eu-1")}
	return s
}

// goldenNext is what the scenes' runbook says to do after a success.
var goldenNext = []string{
	"Reattach producers and consumers of orders: start the clients you stopped.",
	"Delete consumer groups' stale committed offsets on orders (they were saved before the cleanup) so consumers do not resume at old positions.",
	"Remove the quarantine directories once you no longer need them (their paths are in the quarantine manifest).",
}

// at moves the clock to base+d.
func (s *scene) at(d time.Duration) *scene { s.c.t = base.Add(d); return s }

func (s *scene) send(events ...steps.Event) *scene {
	s.m.Update(engineMsg{events: events})
	return s
}

func (s *scene) ev(step string, kind steps.EventKind, f func(*steps.Event)) steps.Event {
	e := steps.Event{Time: s.c.t, Step: step, Kind: kind}
	if f != nil {
		f(&e)
	}
	return e
}

func (s *scene) state(step string, st steps.State, text string) steps.Event {
	return s.ev(step, steps.EvState, func(e *steps.Event) { e.State, e.Text = st, text })
}

func (s *scene) planned(step string) *steps.Plan {
	p := s.plan[step]
	p.Step = step
	for _, info := range testInfos() {
		if info.ID == step {
			r, err := steps.Render(info.Rollback, s.data)
			if err != nil {
				s.t.Fatal(err)
			}
			p.Rollback = r
		}
	}
	return &p
}

func (s *scene) planEv(step string) steps.Event {
	p := s.planned(step)
	return s.ev(step, steps.EvPlan, func(e *steps.Event) { e.Plan = p })
}

func (s *scene) checks(step string) []steps.Event {
	var out []steps.Event
	for _, c := range testChecks()[step] {
		c := c
		out = append(out, s.ev(step, steps.EvCheck, func(e *steps.Event) { e.Check = &c }))
	}
	return out
}

func (s *scene) output(step, host string, n int, format string) *scene {
	var evs []steps.Event
	for i := range n {
		evs = append(evs, s.ev(step, steps.EvOutput, func(e *steps.Event) { e.Host, e.Text = host, fmt.Sprintf(format, i) }))
	}
	return s.send(evs...)
}

func (s *scene) log(step, text string) *scene {
	return s.send(s.ev(step, steps.EvLog, func(e *steps.Event) { e.Text = text }))
}

// act reports that action a of step starts (what Env.Begin reports).
func (s *scene) act(step string, a steps.Action) *scene {
	return s.send(s.ev(step, steps.EvAction, func(e *steps.Event) { e.Text, e.Action = a.String(), &a }))
}

func (s *scene) ask(step string) *scene {
	var info steps.Info
	for _, i := range testInfos() {
		if i.ID == step {
			info = i
		}
	}
	s.send(s.state(step, steps.Confirming, ""))
	s.m.Update(engineMsg{ask: &ask{info: info, plan: s.planned(step), reply: make(chan steps.Approval, 1)}})
	return s
}

func (s *scene) keys(keys ...string) *scene {
	for _, k := range keys {
		s.m.Update(keyMsg(k))
	}
	return s
}

func (s *scene) typeText(text string) *scene {
	for _, r := range text {
		s.m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	return s
}

func (s *scene) finish(res *engineResult) *scene {
	s.m.engineRunning = false
	s.m.Update(engineMsg{done: res})
	return s
}

// The screens, in the order an operator meets them.

func (s *scene) diagnosis() *scene {
	s.at(200 * time.Millisecond).send(s.state("preflight", steps.Planning, ""))
	s.at(1400 * time.Millisecond).send(s.planEv("preflight"))
	s.send(s.checks("preflight")...)
	s.send(s.state("preflight", steps.Done, "nothing to do"))
	s.at(1500 * time.Millisecond).send(s.state("detach-clients", steps.Planning, ""))
	s.at(2100 * time.Millisecond).send(s.planEv("detach-clients"))
	return s.ask("detach-clients").at(9 * time.Second)
}

func (s *scene) confirmYes() *scene { return s.diagnosis().keys("space") }

func (s *scene) detachRunning() *scene {
	s.confirmYes().keys("y")
	s.at(12 * time.Second).send(s.state("detach-clients", steps.Running, ""))
	s.act("detach-clients", steps.Action{ID: "save-offsets", Op: steps.OpSave, Target: "offsets.json", Detail: "committed offsets of 1 groups on orders"})
	s.act("detach-clients", steps.Action{ID: "stop-billing", Op: steps.OpSSH, Target: "app-1", Detail: "systemctl stop billing"})
	s.output("detach-clients", "app-1 (10.0.4.21)", 300, "billing[4121]: draining partition orders-%d, committed offset 18231")
	s.log("detach-clients", "still attached to \"orders\": [group billing: 2 members], 0 active producers; waiting")
	return s.at(47 * time.Second)
}

func (s *scene) typedAsk() *scene {
	s.detachRunning()
	s.send(s.checks("detach-clients")...)
	s.at(51 * time.Second).send(s.state("detach-clients", steps.Done, "done in 39s"))
	s.send(s.state("delete-znodes", steps.Planning, ""))
	s.at(52 * time.Second).send(s.planEv("delete-znodes"))
	return s.ask("delete-znodes").at(58 * time.Second)
}

func (s *scene) interrupted() *scene {
	s.detachRunning().keys("q").at(48 * time.Second)
	err := fmt.Errorf("step detach-clients: %w", context.Canceled)
	s.send(s.ev("detach-clients", steps.EvState, func(e *steps.Event) { e.State, e.Err = steps.Failed, err }))
	return s.finish(&engineResult{
		out: steps.Outcome{Done: []string{"preflight"}, NoOp: []string{"preflight"}, Interrupted: "detach-clients", Err: err},
		err: err, artifacts: []Artifact{{"journal", goldenDir + "/journal.jsonl"}, {"consumer group offsets", goldenDir + "/offsets.json"}},
	})
}

func (s *scene) gateFailed() *scene {
	s.detachRunning().at(5*time.Minute + 12*time.Second)
	err := fmt.Errorf("step detach-clients: %w: clients still attached to \"orders\": [group billing: 2 members], 0 active producers. Nothing was deleted. Stop them and re-check", steps.ErrCheckFailed)
	s.send(s.ev("detach-clients", steps.EvState, func(e *steps.Event) { e.State, e.Err = steps.Failed, err }))
	return s.finish(&engineResult{out: steps.Outcome{Done: []string{"preflight"}, Failed: "detach-clients", Err: err}, err: err,
		artifacts: []Artifact{{"journal", goldenDir + "/journal.jsonl"}, {"consumer group offsets", goldenDir + "/offsets.json"}}})
}

func (s *scene) success() *scene {
	s.typedAsk().typeText(topic).keys("enter")
	s.at(60 * time.Second).send(s.state("delete-znodes", steps.Running, ""))
	for _, a := range s.plan["delete-znodes"].Actions {
		s.act("delete-znodes", a)
	}
	s.send(s.checks("delete-znodes")...)
	s.at(62 * time.Second).send(s.state("delete-znodes", steps.Done, "done in 2s"))
	return s.finish(&engineResult{
		out: steps.Outcome{Done: []string{"preflight", "detach-clients", "delete-znodes"}, NoOp: []string{"preflight"}},
		artifacts: []Artifact{
			{"journal", goldenDir + "/journal.jsonl"},
			{"znode backup (data, ACLs, versions)", goldenDir + "/backup/znodes.json"},
			{"consumer group offsets", goldenDir + "/offsets.json"},
		},
	}).at(63 * time.Second)
}

var goldenScenes = []struct {
	name  string
	color bool
	build func(*scene)
}{
	{"connecting", false, func(s *scene) { s.at(80 * time.Millisecond) }},
	{"diagnosis", false, func(s *scene) { s.diagnosis() }},
	{"confirm-yes", false, func(s *scene) { s.confirmYes() }},
	{"confirm-yes-enter", false, func(s *scene) { s.confirmYes().keys("enter") }},
	{"skip-reason", false, func(s *scene) { s.confirmYes().keys("s").typeText("clients stopped by hand at 09:20") }},
	{"running-output", false, func(s *scene) { s.detachRunning() }},
	{"confirm-typed-wrong", false, func(s *scene) { s.typedAsk().typeText("order").keys("enter") }},
	{"confirm-typed-colour", true, func(s *scene) { s.typedAsk().typeText("ord") }},
	{"stopping", false, func(s *scene) { s.detachRunning().keys("q") }},
	{"final-interrupted", false, func(s *scene) { s.interrupted() }},
	{"final-gate-failed-steps", false, func(s *scene) { s.gateFailed().keys("tab") }},
	{"final-success", false, func(s *scene) { s.success() }},
	{"help", false, func(s *scene) { s.confirmYes().keys("?") }},
	{"resume-offer", false, func(s *scene) {}},
}

func sceneFor(t testing.TB, name string, color bool, w, h int) *scene {
	var resume *Resume
	if name == "resume-offer" {
		resume = &Resume{Ask: true, ID: "20260314T092653Z-topic-cleanup-orders", Started: base.Add(-40 * time.Minute),
			Done: []string{"preflight", "detach-clients"}, Stopped: "delete-znodes", Records: 57}
	}
	return newScene(t, w, h, !color, resume)
}

func TestTUIGolden(t *testing.T) {
	for _, sc := range goldenScenes {
		for _, size := range [][2]int{{80, 24}, {120, 40}} {
			t.Run(fmt.Sprintf("%s/%dx%d", sc.name, size[0], size[1]), func(t *testing.T) {
				s := sceneFor(t, sc.name, sc.color, size[0], size[1])
				sc.build(s)
				v := s.m.View()
				if !v.AltScreen {
					t.Error("the TUI must use the alternate screen")
				}
				golden.RequireEqual(t, v.Content)
			})
		}
	}
}

// Every screen fits every size: no line wider than the terminal (it would
// wrap and scroll the screen, in tmux too), exactly as many lines as rows.
func TestTUIFrameFits(t *testing.T) {
	for _, sc := range goldenScenes {
		for _, w := range []int{40, 60, 79, 80, 100, 120, 200} {
			for _, h := range []int{10, 16, 23, 24, 40, 60} {
				s := sceneFor(t, sc.name, sc.color, w, h)
				sc.build(s)
				lines := strings.Split(s.m.View().Content, "\n")
				if len(lines) != h {
					t.Errorf("%s at %dx%d: %d lines", sc.name, w, h, len(lines))
				}
				for i, l := range lines {
					if n := ansi.StringWidth(l); n > w {
						t.Errorf("%s at %dx%d: line %d is %d wide: %q", sc.name, w, h, i, n, ansi.Strip(l))
					}
				}
			}
		}
	}
}

// A terminal too small to show the plan cannot confirm it.
func TestTUITooSmallCannotConfirm(t *testing.T) {
	s := newScene(t, 80, 24, true, nil)
	s.confirmYes()
	s.m.Update(tea.WindowSizeMsg{Width: 50, Height: 12})
	s.keys("y")
	if s.m.ask == nil {
		t.Fatal("confirmed on a terminal too small to show the plan")
	}
	if c := ansi.Strip(s.m.View().Content); !strings.Contains(c, "kremedy needs at least") {
		t.Fatalf("no size notice:\n%s", c)
	}
	s.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	s.keys("y")
	if s.m.ask != nil {
		t.Fatal("y did not confirm once the plan fits")
	}
}

// Nor can it take the typed topic name.
func TestTUITooSmallCannotConfirmTyped(t *testing.T) {
	s := newScene(t, 80, 24, true, nil)
	s.typedAsk()
	s.m.Update(tea.WindowSizeMsg{Width: 50, Height: 12})
	s.typeText(topic).keys("enter")
	if s.m.ask == nil {
		t.Fatal("the typed name confirmed on a terminal too small to show the plan")
	}
	s.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	s.keys("enter")
	if s.m.ask != nil {
		t.Fatal("the typed name did not confirm once the plan fits")
	}
}

// A question closes the help screen: the plan must be on screen.
func TestTUIQuestionClosesHelp(t *testing.T) {
	s := newScene(t, 80, 24, true, nil)
	s.detachRunning().keys("?")
	s.send(s.state("detach-clients", steps.Done, ""))
	s.send(s.state("delete-znodes", steps.Planning, ""))
	s.ask("delete-znodes")
	if s.m.showHelp || s.m.confirm.mode != inputTyped {
		t.Fatalf("help %v, mode %d", s.m.showHelp, s.m.confirm.mode)
	}
	if c := ansi.Strip(s.m.View().Content); !strings.Contains(c, "Type the topic name orders") {
		t.Fatalf("no question on screen:\n%s", c)
	}
}

func TestTUIModeBadge(t *testing.T) {
	for mode, want := range map[Mode]string{Live: " LIVE CLUSTER ", Lab: " LAB ", DryRun: " DRY-RUN "} {
		s := newScene(t, 80, 24, true, nil)
		s.m.o.Mode = mode
		if c := ansi.Strip(s.m.View().Content); !strings.HasPrefix(c, want) {
			t.Errorf("%v: header starts %q", mode, strings.SplitN(c, "\n", 2)[0])
		}
	}
}

// Runbook text is hard-wrapped YAML: paragraphs are joined, commands
// (indented) keep their lines.
func TestTUIReflow(t *testing.T) {
	got := reflow("Recreate them:\n  kremedy znodes restore B --inventory I\nDo it while the brokers\nare stopped.\n\nThen resume.")
	want := []string{"Recreate them:", "  kremedy znodes restore B --inventory I", "Do it while the brokers are stopped.", "", "Then resume."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("reflow = %q", got)
	}
}

// A step re-checked from the journal (on retry or resume) keeps the time
// it took, not the time since it first started.
func TestTUIRecheckedStepKeepsItsTime(t *testing.T) {
	s := newScene(t, 80, 24, true, nil)
	s.diagnosis()
	s.at(30 * time.Second).send(s.state("preflight", steps.Done, "done earlier, re-checked"))
	if d := s.m.duration(s.m.steps[0]); d != "1.2s" {
		t.Fatalf("duration %q, want 1.2s", d)
	}
}

// TestHeaderSaysBrokersAreDown: whenever brokers are stopped the header
// says how many, for how long, even on an 80-column screen.
func TestHeaderSaysBrokersAreDown(t *testing.T) {
	s := newScene(t, 80, 24, true, nil)
	s.send(s.state("delete-znodes", steps.Running, ""))
	if strings.Contains(s.screen(), "DOWN") {
		t.Fatal("brokers down before any stopped")
	}
	s.send(s.ev("stop-brokers", steps.EvBrokers, func(e *steps.Event) { e.Down, e.Total = 1, 3 }))
	s.at(5 * time.Second)
	if !strings.Contains(s.screen(), "1 of 3 brokers down 00:05") {
		t.Fatalf("one broker down:\n%s", s.screen())
	}
	s.send(s.ev("stop-brokers", steps.EvBrokers, func(e *steps.Event) { e.Down, e.Total = 3, 3 }))
	s.at(47 * time.Second)
	if !strings.Contains(s.screen(), "ALL BROKERS DOWN 00:47") {
		t.Fatalf("all down:\n%s", s.screen())
	}
	s.send(s.ev("start-brokers", steps.EvBrokers, func(e *steps.Event) { e.Down, e.Total = 0, 3 }))
	if strings.Contains(s.screen(), "DOWN") || strings.Contains(s.screen(), "brokers down") {
		t.Fatalf("brokers back, the header still says down:\n%s", s.screen())
	}
}

func (s *scene) screen() string { return ansi.Strip(s.m.View().Content) }

// TestProgressInTheStepPane: what a running step waits for is in its pane.
func TestProgressInTheStepPane(t *testing.T) {
	s := newScene(t, 100, 30, true, nil)
	s.send(s.state("delete-znodes", steps.Running, ""))
	s.m.selectStep(2)
	s.send(s.ev("delete-znodes", steps.EvProgress, func(e *steps.Event) {
		e.Text = "health gate, 12s of 3m0s: waiting for: no under-replicated partition (orders-v2-1)"
	}))
	if !strings.Contains(s.screen(), "Waiting: health gate, 12s of 3m0s") {
		t.Fatalf("no progress line in the step pane:\n%s", s.screen())
	}
	s.send(s.state("delete-znodes", steps.Done, ""))
	if strings.Contains(s.screen(), "Waiting: health gate") {
		t.Fatalf("progress kept after the step ended:\n%s", s.screen())
	}
}

// TestWaitingForASecondApproval: once the operator confirmed, a policy's
// wait for another person is the activity line and the step pane's
// waiting line, until the step runs.
func TestWaitingForASecondApproval(t *testing.T) {
	s := newScene(t, 160, 30, true, nil)
	p := s.plan["delete-znodes"]
	s.send(s.ev("delete-znodes", steps.EvState, func(e *steps.Event) { e.State, e.Plan = steps.Confirming, &p }))
	s.m.selectStep(2)
	const wait = "waiting for a second approval of delete-znodes, digest 9f2c4e1a7b3d (confirmed by alice@example.com)"
	s.send(s.ev("delete-znodes", steps.EvWaiting, func(e *steps.Event) { e.Text, e.Plan = wait, &p }))
	if sc := s.screen(); !strings.Contains(sc, "Waiting: waiting for a second approval of delete-znodes") || !strings.Contains(sc, "⠋ "+wait) ||
		!strings.Contains(sc, "waiting for an approval") || strings.Contains(sc, "waiting for you") {
		t.Fatalf("no waiting line:\n%s", sc)
	}
	s.send(s.state("delete-znodes", steps.Running, ""))
	if strings.Contains(s.screen(), "second approval") {
		t.Fatalf("the waiting line stayed once the step ran:\n%s", s.screen())
	}
}
