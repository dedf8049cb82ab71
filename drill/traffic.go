// Package drill runs kremedy's rehearsals with customers in them: the
// traffic a drill starts before it breaks the lab, and the counts the
// debrief scores the repair by.
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
	Lost       int64 `json:"lost"`       // acknowledged, never read (after Stop)
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
// d: the customers see a working topic again.
func (c Counts) Flowing(now time.Time, d time.Duration) bool {
	return now.Sub(c.LastAck) <= d && now.Sub(c.LastRead) <= d
}

// Options shape the traffic. Rate is records per second per topic.
type Options struct {
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
	c     Counts
	sent  map[int64]time.Time
	acked map[int64]bool
	read  map[int64]bool
}

// Traffic is a running drill's customers: one acks=all idempotent producer
// writing numbered records to every topic, and one consumer group reading
// them back from the start of each topic (a recreated topic is read again
// from its start).
type Traffic struct {
	opts     Options
	producer *kgo.Client
	consumer *kgo.Client
	mu       sync.Mutex
	logs     map[string]*topicLog

	stopProducing chan struct{}
	produced      chan struct{} // closed when the producer loop returned
	stopOnce      sync.Once
	wg            sync.WaitGroup
}

// Start connects both clients and starts writing and reading.
func Start(o Options) (*Traffic, error) {
	if len(o.Topics) == 0 {
		return nil, errors.New("drill traffic: no topic to write to")
	}
	o.Rate = max(o.Rate, 1)
	if o.DeliveryTimeout <= 0 {
		o.DeliveryTimeout = 30 * time.Second
	}
	pr, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(o.Bootstrap...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(o.DeliveryTimeout),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(10_000),
	}, o.Client...)...)
	if err != nil {
		return nil, fmt.Errorf("drill traffic: producer: %w", err)
	}
	co, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(o.Bootstrap...),
		kgo.ConsumerGroup(o.Group),
		kgo.ConsumeTopics(o.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250 * time.Millisecond),
	}, o.Client...)...)
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("drill traffic: consumer: %w", err)
	}
	t := &Traffic{opts: o, producer: pr, consumer: co, logs: map[string]*topicLog{},
		stopProducing: make(chan struct{}), produced: make(chan struct{})}
	for _, name := range o.Topics {
		t.logs[name] = &topicLog{sent: map[int64]time.Time{}, acked: map[int64]bool{}, read: map[int64]bool{}}
	}
	go func() { defer close(t.produced); t.produce() }()
	t.wg.Go(t.consume)
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
			l.sent[seq] = now
			l.c.Sent++
			t.mu.Unlock()
			rec := &kgo.Record{Topic: name, Key: []byte(strconv.FormatInt(seq, 10)), Value: value(seq, now)}
			t.producer.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
				t.mu.Lock()
				defer t.mu.Unlock()
				if err != nil {
					l.c.Failed++
					l.c.addErr("produce: " + err.Error())
					return
				}
				l.acked[seq] = true
				l.c.Acked++
				l.c.LastAck = time.Now()
			})
		}
	}
}

func (t *Traffic) consume() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := t.consumer.PollFetches(ctx)
		cancel()
		if fs.IsClientClosed() {
			return
		}
		now := time.Now()
		t.mu.Lock()
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			if l := t.logs[topic]; l != nil {
				l.c.addErr(fmt.Sprintf("consume %s-%d: %v", topic, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) { t.read(r, now) })
		t.mu.Unlock()
	}
}

// read scores one record the group read; t.mu is held.
func (t *Traffic) read(r *kgo.Record, now time.Time) {
	l := t.logs[r.Topic]
	if l == nil {
		return
	}
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
		for seq := range l.acked {
			if !l.read[seq] {
				missing++
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
		_ = t.producer.Flush(ctx)
		cancel()
		for deadline := time.Now().Add(drain); time.Now().Before(deadline) && t.pending() > 0; {
			time.Sleep(100 * time.Millisecond)
		}
		t.consumer.Close() // ends the consumer loop
		t.wg.Wait()
		t.producer.Close()
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
