package diagnose

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// wedgeEvery is how long the wedge check waits between its reads of the
// quorum, and wedgeReads how many it makes after the first. A live KRaft
// leader appends a no-op record whenever nothing else was appended for
// metadata.max.idle.interval.ms (500 ms by default, KIP-835,
// metadata.version 3.3-IV0 and later), so its high watermark moves at
// least every half second: a working quorum is seen moving at the first
// re-read (750 ms), and 3 s — six no-op intervals — without a move is not
// an idle cluster.
const (
	wedgeEvery = 750 * time.Millisecond
	wedgeReads = 4
)

// noOpSince is the first metadata.version feature level whose controllers
// append no-op records (3.3-IV0: MetadataVersion.isNoOpRecordSupported).
const noOpSince = 4

// wedge watches the quorum's high watermark while the rest of the
// diagnosis runs: a silent wedge (strimzi #12760: a leader elected, nothing
// committed or applied, for hours) looks healthy to every one-shot read.
type wedge struct {
	done chan struct{}
	once sync.Once
	f    *Finding
	note string
}

// startWedge starts the watch when the quorum has a leader; it is judged
// (wedge.judge) at the end of the diagnosis.
func (g *kraftDiag) startWedge(ctx context.Context) *wedge {
	w := &wedge{done: make(chan struct{})}
	q := g.d.Quorum
	if q == nil || q.Leader < 0 || g.noMajority {
		close(w.done)
		return w
	}
	first := *q
	go func() {
		defer close(w.done)
		w.f, w.note = g.watchWedge(ctx, first)
	}()
	return w
}

// wait blocks until the watch ended.
func (w *wedge) wait() { <-w.done }

// judge waits for the watch and adds what it found (once).
func (w *wedge) judge(g *kraftDiag) {
	w.wait()
	w.once.Do(func() {
		if w.f != nil {
			g.add(*w.f)
		}
		if w.note != "" {
			g.d.Methods = append(g.d.Methods, w.note)
		}
	})
}

// watchWedge reads the quorum up to wedgeReads more times, wedgeEvery apart: a new leader
// or epoch, or a high watermark past the first, is a quorum at work. A high
// watermark that stayed put over all of them is a wedge, unless the controllers
// are not expected to append no-ops (metadata.version before 3.3-IV0, or
// metadata.max.idle.interval.ms set to 0 or above the window).
func (g *kraftDiag) watchWedge(ctx context.Context, first ports.Quorum) (*Finding, string) {
	reads := []ports.Quorum{first}
	for range wedgeReads {
		if !sleep(ctx, wedgeEvery) {
			return nil, ""
		}
		q, err := g.readQuorum(ctx)
		if err != nil {
			return nil, "wedge check: the quorum read again: " + err.Error()
		}
		if q.Leader != first.Leader || q.Epoch != first.Epoch || q.HighWatermark != first.HighWatermark {
			return nil, ""
		}
		reads = append(reads, q)
	}
	window := time.Duration(len(reads)-1) * wedgeEvery
	if why := g.noOpsExpected(ctx, first.Leader, window); why != "" {
		return nil, "wedge check: the high watermark did not move in " + window.String() + ", but " + why
	}
	return &Finding{Kind: FindQuorumWedged, Severity: Critical, Brokers: []int32{first.Leader},
		Summary:  fmt.Sprintf("the metadata quorum has a leader (controller %d, epoch %d) but its log does not advance: the high watermark stayed at %d for %v, where a working leader appends a no-op every 500 ms — nothing is being committed (no broker registers, no ISR changes, no topic is made)", first.Leader, first.Epoch, first.HighWatermark, window),
		Evidence: []string{fmt.Sprintf("DescribeQuorum read %d times, %v apart: leader %d, epoch %d, high watermark %d each time (asked at %s)", len(reads), wedgeEvery, first.Leader, first.Epoch, first.HighWatermark, first.AskedAt)},
		Fix:      fmt.Sprintf("read controller %d's server log (controller.log, its event queue) for why it does not append; then restart controller %d's process (its stop and start commands): the quorum elects another leader; if the new leader's high watermark does not move either, restart the other controllers one at a time, `kremedy diagnose` between each (strimzi #12760: a cold start wedged like this for 8 hours until the controllers were restarted)", first.Leader, first.Leader),
		DoNot:    "do not format a controller or move its metadata log aside: the wedge is in the running processes, the logs are whole"}, ""
}

// noOpsExpected says why a still high watermark is no wedge ("" when it
// is one): controllers that do not append no-ops idle with a still log.
func (g *kraftDiag) noOpsExpected(ctx context.Context, leader int32, window time.Duration) string {
	if f, err := g.c.Kafka.Features(ctx, g.unfenced()); err == nil {
		if mv, ok := f.Finalized["metadata.version"]; ok && mv < noOpSince {
			return fmt.Sprintf("metadata.version is finalized at level %d, before 3.3-IV0: controllers append no no-op records, an idle cluster's log stays still", mv)
		}
	}
	h, ok := g.c.Target.Controller(leader)
	if !ok || h.Config == "" {
		return ""
	}
	b, err := brokers.ReadFile(ctx, g.c.Hosts, h.ID, h.Config)
	if err != nil {
		return ""
	}
	p, err := javaprops.Parse(b)
	if err != nil {
		return ""
	}
	s, ok := p.Get("metadata.max.idle.interval.ms")
	if !ok {
		return ""
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return ""
	}
	if ms <= 0 || time.Duration(ms)*time.Millisecond*2 > window {
		return fmt.Sprintf("controller %d's metadata.max.idle.interval.ms is %d: its no-ops are disabled or too rare for the window to judge", leader, ms)
	}
	return ""
}
