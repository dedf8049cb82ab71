package zookeeper

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
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

// refusals records, per server, whether its last connection attempt was
// refused; go-zookeeper retries forever, so Dial watches this to say
// "connection refused" as soon as every server has refused, instead of
// waiting out its deadline in silence.
type refusals struct {
	// tls, when set, wraps every connection (ZooKeeper's secureClientPort).
	tls      *tls.Config
	tlsErr   error // the last TLS handshake failure
	mu       sync.Mutex
	servers  int
	refused  map[string]bool // address -> its last attempt was refused
	attempts map[string]int
	changed  chan struct{}
}

func newRefusals(servers int) *refusals {
	return &refusals{servers: servers, refused: map[string]bool{}, attempts: map[string]int{}, changed: make(chan struct{}, 1)}
}

// dial wraps dialBuffered, recording refusals.
func (r *refusals) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	var nc net.Conn
	var err error
	if r.tls != nil {
		nc, err = r.dialTLS(network, address, timeout)
	} else {
		nc, err = dialBuffered(network, address, timeout)
	}
	r.mu.Lock()
	r.attempts[address]++
	// A server that refuses the connection, or whose TLS handshake fails
	// (a certificate not trusted is no transient failure), is one Dial
	// stops waiting for once every server has answered so.
	var ce *tls.CertificateVerificationError
	r.refused[address] = err != nil && (errors.Is(err, syscall.ECONNREFUSED) || (r.tls != nil && errors.As(err, &ce)))
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	return nc, err
}

// all returns, once go-zookeeper has gone round every address (a host name
// may resolve to several) and each one's last attempt was refused, the
// addresses ("" otherwise).
func (r *refusals) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	round := false
	var out []string
	for a, refused := range r.refused {
		if !refused {
			return ""
		}
		round = round || r.attempts[a] > 1
		out = append(out, a)
	}
	if !round || len(out) < r.servers {
		return ""
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// dialTLS connects, runs the TLS handshake within timeout (checking the
// server's certificate against the address it was dialled at, unless the
// configuration says otherwise) and puts the read buffer above TLS.
func (r *refusals) dialTLS(network, address string, timeout time.Duration) (net.Conn, error) {
	raw, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	cfg := r.tls.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(address)
	}
	tc := tls.Client(raw, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		r.mu.Lock()
		r.tlsErr = fmt.Errorf("TLS with %s: %w", address, err)
		r.mu.Unlock()
		return nil, err
	}
	return &bufferedConn{Conn: tc, r: bufio.NewReaderSize(tc, readBufferSize)}, nil
}

// lastTLS is the last TLS failure, if any.
func (r *refusals) lastTLS() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tlsErr
}
