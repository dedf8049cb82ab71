// Package drill runs kremedy's rehearsals with customers in them: the
// Session the drill commands drive (start, status, hint, end), the
// traffic a drill starts before it breaks the lab, the Recorder of the
// trainee's commands, and the debrief that scores the repair by the
// customers' counts and the runs' journals.
package drill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Counts is what one topic's customers saw. Lost is an acknowledged record
// never consumed: only Stop, after its drain, knows it for sure; Snapshot
// reports the acknowledged records not consumed yet as Pending instead.
type Counts struct {
	Sent       int64 `json:"sent"`       // records handed to the producer
	Acked      int64 `json:"acked"`      // acknowledged by the cluster (acks=all)
	Failed     int64 `json:"failed"`     // the producer gave up on them
	Consumed   int64 `json:"consumed"`   // distinct records the group read
	Duplicated int64 `json:"duplicated"` // reads of a record already read
	Pending    int64 `json:"pending"`    // acknowledged, not read yet
	InFlight   int64 `json:"in_flight"`  // sent, neither acknowledged nor failed yet
	// The oldest record in flight and the oldest acknowledged unread one,
	// in seconds: a partition that takes no writes, or serves no reads,
	// shows here long before the producer gives up.
	OldestInFlightS float64 `json:"oldest_in_flight_s"`
	OldestUnreadS   float64 `json:"oldest_unread_s"`
	Lost            int64   `json:"lost"` // acknowledged, never read (after Stop)
	// Foreign counts records the group read that this traffic did not send
	// (an old segment served again, another writer).
	Foreign      int64     `json:"foreign"`
	MaxLatencyMs int64     `json:"max_latency_ms"` // send to first read
	LastAck      time.Time `json:"last_ack,omitzero"`
	LastRead     time.Time `json:"last_read,omitzero"`
	// Errors holds the first distinct errors the producer and the group saw.
	Errors []string `json:"errors,omitempty"`
}

// Flowing says whether records were acknowledged and read within the last
// d and none waits longer than d for its acknowledgement: the customers see
// a working topic. (An acknowledged record that never comes — lost with a
// wiped topic — is counted, not held against the topic's recovery.)
func (c Counts) Flowing(now time.Time, d time.Duration) bool {
	return now.Sub(c.LastAck) <= d && now.Sub(c.LastRead) <= d && c.OldestInFlightS <= d.Seconds()
}

// TrafficOptions shape the traffic. Rate is records per second per topic.
type TrafficOptions struct {
	Bootstrap       []string
	Topics          []string
	Group           string
	Rate            int
	DeliveryTimeout time.Duration
	Client          []kgo.Opt // security and the like, for both clients
}

const maxErrors = 8

// topicLog is one topic's ledger: the records sent (by sequence number,
// with their send time), acknowledged and read.
type topicLog struct {
	c      Counts
	sent   map[int64]time.Time
	acked  map[int64]bool
	failed map[int64]bool
	read   map[int64]bool

	paused   bool
	producer *kgo.Client // nil while paused
	consumer *kgo.Client // nil while paused
	reading  sync.WaitGroup
	// sending is held (read) around a Produce call, so that Pause waits for
	// it before it flushes and closes the producer.
	sending sync.RWMutex
}

// Traffic is a running drill's customers: per topic, one acks=all
// idempotent producer writing numbered records and one consumer group
// member (group Group-topic) reading them back from the topic's start (a
// recreated topic is read again from its start). A paused topic's
// customers are stopped as a client process is: what is in flight is
// flushed, both clients closed (the member leaves its group); Resume starts
// new ones, with fresh metadata, as a restarted process would.
type Traffic struct {
	opts TrafficOptions
	mu   sync.Mutex
	logs map[string]*topicLog

	stopProducing chan struct{}
	produced      chan struct{} // closed when the producer loop returned
	stopOnce      sync.Once
}

// StartTraffic connects both clients and starts writing and reading.
func StartTraffic(o TrafficOptions) (*Traffic, error) {
	if len(o.Topics) == 0 {
		return nil, errors.New("drill traffic: no topic to write to")
	}
	o.Rate = max(o.Rate, 1)
	if o.DeliveryTimeout <= 0 {
		o.DeliveryTimeout = 30 * time.Second
	}
	t := &Traffic{opts: o, logs: map[string]*topicLog{},
		stopProducing: make(chan struct{}), produced: make(chan struct{})}
	for _, name := range o.Topics {
		t.logs[name] = &topicLog{sent: map[int64]time.Time{}, acked: map[int64]bool{}, failed: map[int64]bool{}, read: map[int64]bool{}}
	}
	for _, name := range o.Topics {
		if err := t.attach(name, t.logs[name]); err != nil {
			for _, other := range t.logs {
				other.close()
			}
			return nil, err
		}
	}
	go func() { defer close(t.produced); t.produce() }()
	return t, nil
}

// value is a record's payload: the sequence number and the send time, so
// that the reader needs nothing but the record to score it.
func value(seq int64, at time.Time) []byte {
	return []byte("kremedy-drill " + strconv.FormatInt(seq, 10) + " " + strconv.FormatInt(at.UnixMicro(), 10))
}

func parseValue(b []byte) (seq int64, ok bool) {
	f := strings.Fields(string(b))
	if len(f) != 3 || f[0] != "kremedy-drill" {
		return 0, false
	}
	seq, err := strconv.ParseInt(f[1], 10, 64)
	return seq, err == nil
}

func (t *Traffic) produce() {
	tick := time.NewTicker(time.Second / time.Duration(t.opts.Rate))
	defer tick.Stop()
	for seq := int64(0); ; seq++ {
		select {
		case <-t.stopProducing:
			return
		case <-tick.C:
		}
		for _, name := range t.opts.Topics {
			now := time.Now()
			t.mu.Lock()
			l := t.logs[name]
			l.sending.RLock()
			pr := l.producer
			if l.paused || pr == nil {
				t.mu.Unlock()
				l.sending.RUnlock()
				continue
			}
			l.sent[seq] = now
			l.c.Sent++
			t.mu.Unlock()
			rec := &kgo.Record{Topic: name, Key: []byte(strconv.FormatInt(seq, 10)), Value: value(seq, now)}
			pr.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
				t.mu.Lock()
				defer t.mu.Unlock()
				if err != nil {
					l.failed[seq] = true
					l.c.Failed++
					l.c.addErr("produce: " + err.Error())
					return
				}
				l.acked[seq] = true
				l.c.Acked++
				l.c.LastAck = time.Now()
			})
			l.sending.RUnlock()
		}
	}
}

// attach starts topic name's producer and consumer group member; t.mu is
// held or the traffic not yet running.
func (t *Traffic) attach(name string, l *topicLog) error {
	pr, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(t.opts.Bootstrap...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(t.opts.DeliveryTimeout),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(10_000),
	}, t.opts.Client...)...)
	if err != nil {
		return fmt.Errorf("drill traffic: producer of %s: %w", name, err)
	}
	co, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(t.opts.Bootstrap...),
		kgo.ConsumerGroup(t.opts.Group + "-" + name),
		kgo.ConsumeTopics(name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250 * time.Millisecond),
	}, t.opts.Client...)...)
	if err != nil {
		pr.Close()
		return fmt.Errorf("drill traffic: consumer of %s: %w", name, err)
	}
	l.producer, l.consumer = pr, co
	l.reading.Go(func() { t.consume(name, co) })
	return nil
}

func (t *Traffic) consume(name string, co *kgo.Client) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := co.PollFetches(ctx)
		cancel()
		if fs.IsClientClosed() {
			return
		}
		now := time.Now()
		t.mu.Lock()
		l := t.logs[name]
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				return
			}
			if topic == "" { // the group's own error
				l.c.addErr(fmt.Sprintf("consume %s (group %s-%s): %v", name, t.opts.Group, name, err))
				return
			}
			l.c.addErr(fmt.Sprintf("consume %s-%d: %v", topic, p, err))
		})
		fs.EachRecord(func(r *kgo.Record) { t.read(r, now) })
		t.mu.Unlock()
	}
}

// pauseGrace is how long Pause lets a producer flush before it drops what
// it still holds (the drill's `clients pause` waits 30 s for the pause).
var pauseGrace = 10 * time.Second

// Pause detaches topic's customers: its writes stop and its group member
// leaves. Resume attaches them again.
func (t *Traffic) Pause(topic string) error {
	t.mu.Lock()
	l := t.logs[topic]
	if l == nil {
		t.mu.Unlock()
		return fmt.Errorf("drill traffic: no traffic on %q (topics: %v)", topic, t.opts.Topics)
	}
	l.paused = true
	t.mu.Unlock()
	l.sending.Lock() // no Produce call in progress, none to come
	pr, co := l.producer, l.consumer
	l.producer, l.consumer = nil, nil
	l.sending.Unlock()
	if pr != nil {
		// A client being stopped flushes for a grace period and then
		// drops what it still holds, as an application's shutdown does:
		// a record stuck on a partition with no leader would otherwise
		// hold the detach for the whole delivery timeout. The dropped
		// records fail (they were never acknowledged): counted as failed.
		ctx, cancel := context.WithTimeout(context.Background(), pauseGrace)
		if err := pr.Flush(ctx); err != nil {
			actx, acancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = pr.AbortBufferedRecords(actx)
			acancel()
		}
		cancel()
	}
	(&topicLog{producer: pr, consumer: co}).close()
	if co != nil {
		l.reading.Wait()
	}
	return nil
}

// close closes l's clients (the consumer's member leaves its group).
func (l *topicLog) close() {
	if l.consumer != nil {
		l.consumer.Close()
	}
	if l.producer != nil {
		l.producer.Close()
	}
}

// Resume attaches topic's customers again after Pause.
func (t *Traffic) Resume(topic string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.logs[topic]
	if l == nil {
		return fmt.Errorf("drill traffic: no traffic on %q (topics: %v)", topic, t.opts.Topics)
	}
	if !l.paused {
		return nil
	}
	l.paused = false
	return t.attach(topic, l)
}

// Paused lists the topics whose customers are detached.
func (t *Traffic) Paused() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, name := range t.opts.Topics {
		if t.logs[name].paused {
			out = append(out, name)
		}
	}
	return out
}

// read scores one record the group read; t.mu is held.
func (t *Traffic) read(r *kgo.Record, now time.Time) {
	l := t.logs[r.Topic]
	seq, ok := parseValue(r.Value)
	at, sent := l.sent[seq]
	if !ok || !sent {
		l.c.Foreign++
		return
	}
	if l.read[seq] {
		l.c.Duplicated++
		return
	}
	l.read[seq] = true
	l.c.Consumed++
	l.c.LastRead = now
	l.c.MaxLatencyMs = max(l.c.MaxLatencyMs, now.Sub(at).Milliseconds())
}

func (c *Counts) addErr(s string) {
	if len(c.Errors) < maxErrors && !slices.Contains(c.Errors, s) {
		c.Errors = append(c.Errors, s)
	}
}

// Snapshot is the counts so far, by topic.
func (t *Traffic) Snapshot() map[string]Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.countsLocked(false)
}

func (t *Traffic) countsLocked(final bool) map[string]Counts {
	out := map[string]Counts{}
	for name, l := range t.logs {
		c := l.c
		c.Errors = slices.Clone(c.Errors)
		var missing int64
		now := time.Now()
		for seq := range l.acked {
			if !l.read[seq] {
				missing++
				c.OldestUnreadS = max(c.OldestUnreadS, now.Sub(l.sent[seq]).Seconds())
			}
		}
		for seq, at := range l.sent {
			if !l.acked[seq] && !l.failed[seq] {
				c.InFlight++
				c.OldestInFlightS = max(c.OldestInFlightS, now.Sub(at).Seconds())
			}
		}
		if final {
			c.Lost = missing
		} else {
			c.Pending = missing
		}
		out[name] = c
	}
	return out
}

// Stop ends the writing, waits for every record in flight to be
// acknowledged or failed, reads on for at most drain until every
// acknowledged record was read, and returns the final counts: an
// acknowledged record still unread then is lost. Stop may be called again;
// it then returns the same counts.
func (t *Traffic) Stop(drain time.Duration) map[string]Counts {
	t.stopOnce.Do(func() {
		close(t.stopProducing)
		<-t.produced
		ctx, cancel := context.WithTimeout(context.Background(), t.opts.DeliveryTimeout+5*time.Second)
		for _, name := range t.opts.Topics {
			if pr := t.logs[name].producer; pr != nil { // the producer loop has ended: no one else changes it
				_ = pr.Flush(ctx)
			}
		}
		cancel()
		for deadline := time.Now().Add(drain); time.Now().Before(deadline) && t.pending() > 0; {
			time.Sleep(100 * time.Millisecond)
		}
		for _, name := range t.opts.Topics {
			_ = t.Pause(name) // closes its clients, ends its consumer loop
		}
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.countsLocked(true)
}

func (t *Traffic) pending() int64 {
	var n int64
	for _, c := range t.Snapshot() {
		n += c.Pending
	}
	return n
}
