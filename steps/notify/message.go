package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
)

// Event names, the "event" field of every message.
const (
	EvRunStart       = "run-start"
	EvPlan           = "plan"
	EvApproval       = "approval"
	EvApprovalWanted = "approval-wanted"
	EvStepStart      = "step-start"
	EvStepEnd        = "step-end"
	EvStepFailed     = "step-failed"
	EvOutageOpen     = "outage-open"
	EvOutageClose    = "outage-close"
	EvRunEnd         = "run-end"
)

// Run is what every message says about the run it comes from.
type Run struct {
	ID, Runbook, Cluster string
	Lab                  bool
	// Operator is who runs kremedy (user@host).
	Operator string
	// Version is kremedy's.
	Version string
	// Dir is the run directory; Resume the command that continues the run.
	Dir, Resume string
	Steps       []steps.Info
}

// Message is one event as a webhook receives it (Format JSON); Slack gets
// Text and blocks made from it. Fields that do not belong to the event are
// left out.
type Message struct {
	Event string `json:"event"`
	// ID is unique per message (the run, this attempt's start, Seq): a
	// retried POST that did arrive can be told from a new one.
	ID      string    `json:"id"`
	Seq     int       `json:"seq"`
	Time    time.Time `json:"time"`
	Run     string    `json:"run"`
	Runbook string    `json:"runbook"`
	Cluster string    `json:"cluster"`
	Lab     bool      `json:"lab"`
	Step    string    `json:"step,omitempty"`
	// Text is the event in one sentence, for people.
	Text string `json:"text"`

	// run-start
	Operator string   `json:"operator,omitempty"`
	Kremedy  string   `json:"kremedy,omitempty"`
	Dir      string   `json:"dir,omitempty"`
	Resumed  bool     `json:"resumed,omitempty"`
	Steps    []string `json:"steps,omitempty"`

	// plan, approval, approval-wanted, step-start
	Title   string `json:"title,omitempty"`
	Risk    string `json:"risk,omitempty"`
	Summary string `json:"summary,omitempty"`
	Actions int    `json:"actions,omitempty"`
	Digest  string `json:"digest,omitempty"`
	// approval
	Decision string          `json:"decision,omitempty"`
	By       string          `json:"by,omitempty"`
	Signoffs []steps.Signoff `json:"signoffs,omitempty"`

	// step-end
	State string `json:"state,omitempty"`

	// outage-open, outage-close
	Since       *time.Time `json:"since,omitempty"`
	Until       *time.Time `json:"until,omitempty"`
	LengthMS    int64      `json:"length_ms,omitempty"`
	Length      string     `json:"length,omitempty"`
	BrokersDown int        `json:"brokers_down,omitempty"`
	Brokers     int        `json:"brokers,omitempty"`

	// step-failed, run-end
	Error  string `json:"error,omitempty"`
	Resume string `json:"resume,omitempty"`

	// run-end
	Ending  string   `json:"ending,omitempty"`
	Done    []string `json:"done,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	NotDone []string `json:"not_done,omitempty"`
	Report  string   `json:"report,omitempty"`
}

// End is how a run (this attempt) ended, for the run-end message.
type End struct {
	Ending                 steps.Ending
	Done, Skipped, NotDone []string
	Err                    error
	Report                 string
}

// message turns one engine event into what the team is told (none for
// most events: logs, output, checks and progress stay on the operator's
// screen).
func (r *Run) message(e steps.Event) (Message, bool) {
	m := Message{Step: e.Step, Time: e.Time}
	info := r.info(e.Step)
	switch e.Kind {
	case steps.EvPlan:
		if e.Plan == nil || e.Plan.NoOp {
			return m, false // "nothing to do" is said by the step's end
		}
		m.Event, m.Title, m.Risk = EvPlan, info.Title, info.Risk.String()
		m.Summary, m.Actions, m.Digest = e.Plan.Summary, len(e.Plan.Actions), e.Plan.Digest()
		m.Text = fmt.Sprintf("%s planned: %s (%d actions, digest %.12s)", e.Step, e.Plan.Summary, len(e.Plan.Actions), m.Digest)
	case steps.EvApproval:
		if e.Approval == nil {
			return m, false
		}
		a := e.Approval
		m.Event, m.Title, m.Risk = EvApproval, info.Title, info.Risk.String()
		m.Decision, m.By, m.Digest, m.Signoffs = a.Decision.String(), a.By, a.Digest, a.Signoffs
		verb := map[steps.Decision]string{steps.Approve: "approved", steps.Skip: "skipped", steps.Abort: "stopped before"}[a.Decision]
		m.Text = fmt.Sprintf("%s %s by %s (digest %.12s)", e.Step, verb, a.By, a.Digest)
		if a.Decision == steps.Skip && a.Reason != "" {
			m.Text += ": " + a.Reason
		}
		if len(a.Signoffs) > 0 {
			var who []string
			for _, s := range a.Signoffs {
				who = append(who, s.By)
			}
			m.Text += "; signed off by " + strings.Join(who, ", ")
		}
	case steps.EvWaiting:
		m.Event, m.Title, m.Risk, m.Text = EvApprovalWanted, info.Title, info.Risk.String(), e.Text
		if e.Plan != nil {
			m.Summary, m.Digest = e.Plan.Summary, e.Plan.Digest()
		}
	case steps.EvState:
		switch e.State {
		case steps.Running:
			m.Event, m.Title, m.Risk = EvStepStart, info.Title, info.Risk.String()
			m.Text = fmt.Sprintf("%s started: %s", e.Step, info.Title)
		case steps.Done, steps.Skipped:
			m.Event, m.State = EvStepEnd, e.State.String()
			m.Text = fmt.Sprintf("%s %s", e.Step, e.State)
			if e.Text != "" {
				m.Text += ": " + e.Text
			}
		case steps.Failed:
			m.Event, m.Resume = EvStepFailed, r.Resume
			if e.Err != nil {
				m.Error = e.Err.Error()
			}
			m.Text = fmt.Sprintf("%s FAILED: %s — resume: %s", e.Step, m.Error, r.Resume)
		default:
			return m, false
		}
	case steps.EvOutage:
		o := e.Outage
		if o == nil {
			return m, false
		}
		since := o.Start.UTC()
		m.Since, m.BrokersDown, m.Brokers = &since, o.MaxDown, o.Total
		if o.Open {
			m.Event = EvOutageOpen
		} else {
			until := o.End.UTC()
			m.Event, m.Until, m.LengthMS, m.Length = EvOutageClose, &until, o.Length().Milliseconds(), o.Length().Round(100*time.Millisecond).String()
		}
		m.Text = e.Text
	default:
		return m, false
	}
	return m, true
}

func (r *Run) info(id string) steps.Info {
	for _, i := range r.Steps {
		if i.ID == id {
			return i
		}
	}
	return steps.Info{ID: id, Title: id}
}

func (r *Run) start(resumed bool) Message {
	m := Message{Event: EvRunStart, Time: time.Now(), Operator: r.Operator, Kremedy: r.Version, Dir: r.Dir, Resumed: resumed}
	for _, i := range r.Steps {
		m.Steps = append(m.Steps, i.ID)
	}
	verb := "started"
	if resumed {
		verb = "resumed"
	}
	m.Text = fmt.Sprintf("%s %s %s on %s (%s), run %s", r.Operator, verb, r.Runbook, r.Cluster, mode(r.Lab), r.ID)
	return m
}

func (r *Run) end(e End) Message {
	m := Message{Event: EvRunEnd, Time: time.Now(), Ending: e.Ending.String(), Done: e.Done, Skipped: e.Skipped, NotDone: e.NotDone, Report: e.Report}
	switch {
	case e.Err == nil:
		m.Text = fmt.Sprintf("%s on %s finished: every step done, a no-op or skipped", r.Runbook, r.Cluster)
	default:
		m.Error, m.Resume = e.Err.Error(), r.Resume
		m.Text = fmt.Sprintf("%s on %s %s: %s — not done: %s; resume: %s", r.Runbook, r.Cluster, e.Ending, firstLine(m.Error), strings.Join(e.NotDone, ", "), r.Resume)
	}
	return m
}

func mode(lab bool) string {
	if lab {
		return "LAB"
	}
	return "LIVE cluster"
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// body is m as format sends it.
func body(f Format, r *Run, m Message) ([]byte, error) {
	if f == Slack {
		return json.Marshal(slackBody(r, m))
	}
	return json.Marshal(m)
}

// slack is an incoming webhook's body: text (what notifications and
// clients without blocks show) and blocks: the event as a section in
// mrkdwn, and a context line naming the run.
// https://api.slack.com/messaging/webhooks,
// https://api.slack.com/reference/block-kit/blocks
type slack struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type     string      `json:"type"`
	Text     *slackText  `json:"text,omitempty"`
	Elements []slackText `json:"elements,omitempty"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// slackMax is the longest text a section block takes.
const slackMax = 3000

func slackBody(r *Run, m Message) slack {
	plain := fmt.Sprintf("[%s] %s", r.Cluster, m.Text)
	var md string
	step := "*" + esc(m.Step) + "*"
	switch m.Event {
	case EvRunStart:
		md = fmt.Sprintf("*%s* %s `%s` on *%s* (%s)", esc(m.Operator), map[bool]string{false: "started", true: "resumed"}[m.Resumed], esc(r.Runbook), esc(r.Cluster), mode(r.Lab))
	case EvPlan:
		md = fmt.Sprintf("%s planned: %s\n%d actions · digest `%.12s` · risk %s", step, esc(m.Summary), m.Actions, m.Digest, m.Risk)
	case EvApproval:
		md = fmt.Sprintf("%s: %s", step, esc(strings.TrimPrefix(m.Text, m.Step+" ")))
	case EvApprovalWanted:
		md = fmt.Sprintf(":raising_hand: %s waits for a second approval (digest `%.12s`)\n%s", step, m.Digest, esc(m.Text))
	case EvStepStart:
		md = fmt.Sprintf("%s started: %s", step, esc(m.Title))
	case EvStepEnd:
		md = fmt.Sprintf("%s: %s", step, esc(strings.TrimPrefix(m.Text, m.Step+" ")))
	case EvStepFailed:
		md = fmt.Sprintf(":x: %s FAILED: %s\nresume: `%s`", step, esc(m.Error), esc(m.Resume))
	case EvOutageOpen:
		md = fmt.Sprintf(":warning: *outage window opened*: %d of %d brokers down (%s)", m.BrokersDown, m.Brokers, step)
	case EvOutageClose:
		md = fmt.Sprintf(":white_check_mark: *outage window closed* after *%s* (up to %d of %d brokers down)", m.Length, m.BrokersDown, m.Brokers)
	case EvRunEnd:
		if m.Error == "" {
			md = fmt.Sprintf(":checkered_flag: `%s` on *%s* *finished*", esc(r.Runbook), esc(r.Cluster))
		} else {
			md = fmt.Sprintf(":octagonal_sign: `%s` on *%s* *%s*: %s\nnot done: %s\nresume: `%s`", esc(r.Runbook), esc(r.Cluster), m.Ending, esc(firstLine(m.Error)), esc(strings.Join(m.NotDone, ", ")), esc(m.Resume))
		}
	default:
		md = esc(m.Text)
	}
	ctx := fmt.Sprintf("kremedy %s · run `%s` · %s (%s)", esc(r.Version), esc(r.ID), esc(r.Cluster), mode(r.Lab))
	return slack{Text: clip(plain), Blocks: []slackBlock{
		{Type: "section", Text: &slackText{Type: "mrkdwn", Text: clip(md)}},
		{Type: "context", Elements: []slackText{{Type: "mrkdwn", Text: clip(ctx)}}},
	}}
}

// esc escapes what Slack's mrkdwn reads as control characters.
// https://api.slack.com/reference/surfaces/formatting#escaping
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func clip(s string) string {
	if len(s) <= slackMax {
		return s
	}
	cut := slackMax - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}
