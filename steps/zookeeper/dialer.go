package zookeeper

import (
	"bufio"
	"net"
	"os"
	"sync"
	"time"
)

// readBufferSize is the read buffer dialBuffered puts under go-zookeeper.
const readBufferSize = 64 << 10

// bufferedConn reads through a buffer. go-zookeeper's receive loop reads
// every response with two unbuffered reads (length, then body); when many
// requests are in flight — a Scan — the server sends responses back to
// back, and one read system call now brings in dozens of them. Deadlines
// still apply: they are set on the underlying connection, which the buffer
// reads from whenever it runs dry.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader

	mu       sync.Mutex
	out      []byte
	flushing bool
	err      error
	timeout  time.Duration
	kick     chan struct{}
	done     chan struct{}
	once     sync.Once
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *bufferedConn) SetWriteDeadline(t time.Time) error {
	if !coalesce {
		return c.Conn.SetWriteDeadline(t)
	}
	if !t.IsZero() {
		c.mu.Lock()
		c.timeout = time.Until(t)
		c.mu.Unlock()
	}
	return nil
}

func (c *bufferedConn) Write(p []byte) (int, error) {
	if !coalesce {
		return c.Conn.Write(p)
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.out = append(c.out, p...)
	if !c.flushing {
		c.flushing = true
		c.mu.Unlock()
		c.kick <- struct{}{}
		return len(p), nil
	}
	c.mu.Unlock()
	return len(p), nil
}

func (c *bufferedConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

func (c *bufferedConn) flusher() {
	var spare []byte
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		for {
			c.mu.Lock()
			if len(c.out) == 0 {
				c.flushing = false
				c.mu.Unlock()
				break
			}
			buf, to := c.out, c.timeout
			c.out = spare[:0]
			c.mu.Unlock()
			if to > 0 {
				c.Conn.SetWriteDeadline(time.Now().Add(to))
			}
			_, err := c.Conn.Write(buf)
			spare = buf
			if err != nil {
				c.mu.Lock()
				c.err = err
				c.flushing = false
				c.mu.Unlock()
				c.Conn.Close()
				return
			}
		}
	}
}

var coalesce = os.Getenv("ZK_COALESCE") != ""

// dialBuffered is the zk.Dialer Dial uses: net.DialTimeout behind a read
// buffer.
func dialBuffered(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	c := &bufferedConn{Conn: nc, r: bufio.NewReaderSize(nc, readBufferSize), kick: make(chan struct{}, 1), done: make(chan struct{})}
	if coalesce {
		go c.flusher()
	}
	return c, nil
}
