package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/steps"
)

// Options bound what a Notifier may cost the run; zero values are the
// defaults.
type Options struct {
	// Timeout bounds one POST (default 5s).
	Timeout time.Duration
	// Retry is how long one event is retried while its webhook is healthy
	// (default 30s); Backoff the first pause between tries (default
	// 250ms), doubled after each up to 5s (a 429's or 503's Retry-After is
	// honoured up to that).
	Retry, Backoff time.Duration
	// Late: an event delivered more than this after it happened means a
	// slow webhook, reported once (default 20s).
	Late time.Duration
	// Flush is how long Close waits with no delivery (default 750ms);
	// MaxFlush how long it waits in all (default 5s).
	Flush, MaxFlush time.Duration
	// Queue is each webhook's queue (default 256 events); an event that
	// does not fit is not delivered, and said so.
	Queue int
	// Client makes the requests (default: one with no timeout of its own;
	// Timeout bounds each request). Whatever its CheckRedirect, a
	// redirect is never followed: New uses a copy that stops at the
	// first answer.
	Client *http.Client
	// Problem is told, once per webhook, that it loses events or gets them
	// late (the journal and the screen); it is called from the webhook's
	// goroutine and must not block for long.
	Problem func(text string)
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Timeout, 5*time.Second)
	def(&o.Retry, 30*time.Second)
	def(&o.Backoff, 250*time.Millisecond)
	def(&o.Late, 20*time.Second)
	def(&o.Flush, 750*time.Millisecond)
	def(&o.MaxFlush, 5*time.Second)
	if o.Queue <= 0 {
		o.Queue = 256
	}
	c := http.Client{}
	if o.Client != nil {
		c = *o.Client
	}
	c.CheckRedirect = noRedirect
	o.Client = &c
	if o.Problem == nil {
		o.Problem = func(string) {}
	}
}

// noRedirect stops a client at a redirect, which post refuses: Go's client
// would re-POST the body to wherever the Location says, and keeps the
// Authorization header when only the port or the scheme changes (https to
// http), past Target.Check's "a token over https only".
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// maxBackoff caps the pause between tries.
const maxBackoff = 5 * time.Second

// Notifier is a steps.Reporter that posts a run's events to webhooks.
type Notifier struct {
	run  Run
	o    Options
	born string // this attempt's start, in every message's ID

	mu      sync.Mutex
	seq     int
	closed  bool
	senders []*sender

	progress chan struct{} // capacity 1: a delivery ended
}

// New starts one goroutine per target; Close ends them.
func New(run Run, targets []Target, o Options) *Notifier {
	o.defaults()
	n := &Notifier{run: run, o: o, born: strconv.FormatInt(time.Now().UnixMilli(), 10), progress: make(chan struct{}, 1)}
	for _, t := range targets {
		ctx, cancel := context.WithCancel(context.Background())
		s := &sender{t: t, name: Name(t.URL), n: n, q: make(chan item, o.Queue), ctx: ctx, cancel: cancel, done: make(chan struct{})}
		n.senders = append(n.senders, s)
		go s.loop()
	}
	return n
}

// Report implements steps.Reporter: it queues what the team is told of e
// and returns at once.
func (n *Notifier) Report(e steps.Event) {
	if m, ok := n.run.message(e); ok {
		n.send(m)
	}
}

// RunStart says the run (this attempt of it) starts; resumed when it
// continues from a journal.
func (n *Notifier) RunStart(resumed bool) { n.send(n.run.start(resumed)) }

// RunEnd says how this attempt of the run ended.
func (n *Notifier) RunEnd(e End) { n.send(n.run.end(e)) }

func (n *Notifier) send(m Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.seq++
	m.Seq, m.ID = n.seq, n.run.ID+"/"+n.born+"/"+strconv.Itoa(n.seq)
	m.Run, m.Runbook, m.Cluster, m.Lab = n.run.ID, n.run.Runbook, n.run.Cluster, n.run.Lab
	if m.Time.IsZero() {
		m.Time = time.Now()
	}
	m.Time = m.Time.UTC()
	for _, s := range n.senders {
		b, err := body(s.t.format(), &n.run, m)
		if err != nil {
			s.lost(m.Event, "it could not be encoded: "+err.Error())
			continue
		}
		select {
		case s.q <- item{event: m.Event, body: b, at: time.Now()}:
		default:
			s.lost(m.Event, fmt.Sprintf("its queue of %d events is full", n.o.Queue))
		}
	}
}

// Undelivered is what one webhook did not get by the end.
type Undelivered struct {
	// Line says it for the journal: the webhook, how many events, which.
	Line string
	// Reported: the webhook's trouble was already reported (Problem).
	Reported bool
}

// Close stops taking events and waits for the queued ones: until every
// webhook's queue is empty, Options.Flush with no delivery, or
// Options.MaxFlush in all; then it gives up on the rest. It returns, per
// webhook that did not get every event, what it lost.
func (n *Notifier) Close() []Undelivered {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	for _, s := range n.senders {
		close(s.q)
	}
	n.mu.Unlock()
	hard := time.Now().Add(n.o.MaxFlush)
	quiet := time.NewTimer(n.o.Flush)
	defer quiet.Stop()
	for _, s := range n.senders {
	wait:
		for {
			select {
			case <-s.done:
				break wait
			case <-n.progress:
				quiet.Reset(min(n.o.Flush, time.Until(hard)))
			case <-quiet.C:
				for _, s := range n.senders {
					s.cancel()
				}
				<-s.done
				break wait
			}
		}
	}
	var out []Undelivered
	for _, s := range n.senders {
		s.cancel()
		s.mu.Lock()
		if len(s.undelivered) > 0 {
			out = append(out, Undelivered{
				Line:     fmt.Sprintf("notifications to %s: %d events not delivered (%s)", s.name, len(s.undelivered), summary(s.undelivered)),
				Reported: s.reported,
			})
		}
		s.mu.Unlock()
	}
	return out
}

func summary(evs []string) string {
	if len(evs) <= 4 {
		return strings.Join(evs, ", ")
	}
	return fmt.Sprintf("%s, … %s", strings.Join(evs[:2], ", "), strings.Join(evs[len(evs)-2:], ", "))
}

// item is one queued event.
type item struct {
	event string
	body  []byte
	at    time.Time // when it was queued
}

// sender delivers one webhook's events in order.
type sender struct {
	t    Target
	name string
	n    *Notifier
	q    chan item

	ctx    context.Context // cancelled when Close gives up
	cancel context.CancelFunc
	done   chan struct{}

	// degraded: the last event was lost; each one is tried once until one
	// is delivered.
	degraded bool

	mu          sync.Mutex
	undelivered []string
	reported    bool
}

func (s *sender) loop() {
	defer close(s.done)
	for it := range s.q {
		err := s.deliver(it)
		switch {
		case err != nil:
			s.lost(it.event, err.Error())
			s.degraded = true
		default:
			s.degraded = false
			if late := time.Since(it.at); late > s.n.o.Late {
				s.problem(fmt.Sprintf("notifications to %s arrive late (%s was delivered %s after it happened); the run goes on", s.name, it.event, late.Round(time.Second)))
			}
		}
		select {
		case s.n.progress <- struct{}{}:
		default:
		}
	}
}

// lost counts an event not delivered and reports the webhook's trouble
// (once).
func (s *sender) lost(event, why string) {
	s.mu.Lock()
	s.undelivered = append(s.undelivered, event)
	s.mu.Unlock()
	if s.ctx.Err() != nil {
		return // Close gave up: it says what was lost
	}
	s.problem(fmt.Sprintf("notifications to %s: %s was not delivered: %s; the run goes on without waiting for it (later events are tried once each until one gets through)", s.name, event, why))
}

func (s *sender) problem(text string) {
	s.mu.Lock()
	first := !s.reported
	s.reported = true
	s.mu.Unlock()
	if first {
		s.n.o.Problem(text)
	}
}

// deliver posts one event, retried with backoff for Options.Retry while
// the webhook is healthy (once while it is degraded).
func (s *sender) deliver(it item) error {
	o := &s.n.o
	start := time.Now()
	pause := o.Backoff
	for try := 1; ; try++ {
		if s.ctx.Err() != nil {
			return errors.New("the run ended before it could be sent")
		}
		retryAfter, err := s.post(it.body)
		if err == nil {
			return nil
		}
		var perm *permanentError
		if errors.As(err, &perm) || s.degraded {
			return err
		}
		wait := min(max(pause, retryAfter), maxBackoff)
		if time.Since(start)+wait > o.Retry {
			return fmt.Errorf("%w (%d tries in %s)", err, try, time.Since(start).Round(100*time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (the run ended while it was retried)", err)
		}
		pause = min(pause*2, maxBackoff)
	}
}

// permanentError is a refusal that a retry would not change (a 4xx other
// than 408 and 429, or a redirect).
type permanentError struct {
	status int
	// to says where a redirect pointed ("to SCHEME://HOST": never its path
	// or query, which may be a secret); "" for a refusal.
	to string
}

func (e *permanentError) Error() string {
	if e.status >= 300 && e.status < 400 {
		return fmt.Sprintf("the webhook answered HTTP %d %s %s; kremedy does not follow redirects, so nothing was sent there (not the event, not the token): give the webhook's final URL", e.status, http.StatusText(e.status), e.to)
	}
	return fmt.Sprintf("the webhook refused it (HTTP %d %s)", e.status, http.StatusText(e.status))
}

// location says where a redirect points: "to SCHEME://HOST", never the
// path or query.
func location(resp *http.Response) string {
	u, err := resp.Location()
	if err != nil || u.Host == "" {
		return "with no usable Location"
	}
	return "to " + u.Scheme + "://" + u.Host
}

// post sends one body; a 429's or 503's Retry-After comes back with the
// error.
func (s *sender) post(body []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.n.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.t.URL, bytes.NewReader(body))
	if err != nil {
		return 0, &permanentError{status: 0}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "kremedy/"+s.n.run.Version)
	if s.t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.t.Token)
	}
	resp, err := s.n.o.Client.Do(req)
	if err != nil {
		// url.Error names the URL, which may be the webhook's secret.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("no answer within %s", s.n.o.Timeout)
		}
		return 0, fmt.Errorf("%v", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return 0, nil
	case c == http.StatusTooManyRequests || c == http.StatusServiceUnavailable || c == http.StatusRequestTimeout || c >= 500:
		var ra time.Duration
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			ra = time.Duration(secs) * time.Second
		}
		return ra, fmt.Errorf("HTTP %d %s", c, http.StatusText(c))
	case c >= 300 && c < 400:
		return 0, &permanentError{status: c, to: location(resp)}
	default:
		return 0, &permanentError{status: c}
	}
}
