package zookeeper

import (
	"context"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
)

// siblings are extra sessions a Conn opens for its scans, with the same
// servers, chroot and credentials. BenchmarkScan measured that one
// pipelined session tops out at about half the reads per second of four,
// with more CPU per read on both sides. The likely cause: ZooKeeper's NIO
// layer reads one request of a connection per selector/worker hand-off
// before it listens on that connection again, so one connection's intake
// is bounded by that hand-off however many requests are queued on it.
// Siblings are dialled in the background on first use, kept for later scans
// (a session costs the ensemble a transaction to open and one to close) and
// closed with the Conn. They own no ephemeral znodes and set no watches.
type siblings struct {
	mu     sync.Mutex
	list   []*sibling
	closed bool
}

type sibling struct {
	ready chan struct{} // closed when the dial is over
	conn  *Conn         // nil when it failed
}

// sibling returns the i-th sibling session, starting its dial if needed.
// A failed dial is forgotten, so that a later scan tries again.
func (c *Conn) sibling(i int) *sibling {
	c.sib.mu.Lock()
	defer c.sib.mu.Unlock()
	if c.sib.closed {
		return nil
	}
	for len(c.sib.list) <= i {
		c.sib.list = append(c.sib.list, nil)
	}
	if s := c.sib.list[i]; s != nil {
		return s
	}
	s := &sibling{ready: make(chan struct{})}
	c.sib.list[i] = s
	go func() {
		// Not the scan's context: the session outlives the scan. Dial
		// bounds itself (DefaultOpTimeout).
		sc, err := Dial(context.Background(), strings.Join(c.servers, ",")+c.chroot, c.opts)
		c.sib.mu.Lock()
		defer c.sib.mu.Unlock()
		switch {
		case err != nil:
			c.sib.list[i] = nil
		case c.sib.closed:
			sc.Close()
		default:
			s.conn = sc
		}
		close(s.ready)
	}()
	return s
}

// closeSiblings closes the sibling sessions; one still dialling is closed
// when its dial ends.
func (c *Conn) closeSiblings() {
	c.sib.mu.Lock()
	defer c.sib.mu.Unlock()
	c.sib.closed = true
	for _, s := range c.sib.list {
		if s == nil {
			continue
		}
		select {
		case <-s.ready:
			if s.conn != nil {
				s.conn.Close()
			}
		default:
		}
	}
}

// scanSession is a sibling as one scan uses it: usable once it is dialled
// and synced.
type scanSession struct {
	ready chan struct{} // closed when zc is set, or when the session is not to be used
	zc    *zk.Conn
}

// scanSessions prepares n sibling sessions for one scan. Each is synced
// before use: a sibling may be connected to another server of the ensemble,
// and after the sync that server has applied everything the leader had
// committed, so the sibling reads nothing older than what this session has
// already read. Sessions that are not ready in time are simply not used;
// the scan's workers start on this session and move over as siblings
// become ready. Cancelling ctx abandons the preparation.
func (c *Conn) scanSessions(ctx context.Context, n int) []*scanSession {
	out := make([]*scanSession, 0, n)
	for i := range n {
		sib := c.sibling(i)
		if sib == nil {
			break
		}
		ss := &scanSession{ready: make(chan struct{})}
		out = append(out, ss)
		go func() {
			defer close(ss.ready)
			select {
			case <-sib.ready:
			case <-ctx.Done():
				return
			}
			if sib.conn == nil {
				return
			}
			if _, err := bound(ctx, func() (string, error) { return sib.conn.zc.Sync(c.Full("/")) }); err == nil {
				ss.zc = sib.conn.zc
			}
		}()
	}
	return out
}
