package zookeeper

import (
	"bufio"
	"net"
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
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// dialBuffered is the zk.Dialer Dial uses: net.DialTimeout behind a read
// buffer.
func dialBuffered(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: nc, r: bufio.NewReaderSize(nc, readBufferSize)}, nil
}
