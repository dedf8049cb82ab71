package zookeeper

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kremedy/kremedy/steps/kafkazk"
)

// A reader is a session of kremedy's own on the ensemble for one request
// go-zookeeper does not make: multiRead (OpCode 22, ZooKeeper 3.6+), many
// getData in one request. The server answers each read of the batch as a
// getData of its own — ACL checked, a missing znode an error result, not a
// failed batch (FinalRequestProcessor, case OpCode.multiRead) — but handles
// one request, not hundreds: at 10,000 partitions ZooKeeper spent most of
// a diagnosis's CPU on the per-request path (queues, threads, a response
// write each) of 12,000 getData. Reads only: the reader never writes, and
// sends nothing but multiRead, sync, pings when idle and its session's end.
//
// The wire format is ZooKeeper's jute (zookeeper-jute's zookeeper.jute):
// big-endian ints and longs, a bool as one byte, a string or buffer as its
// int32 length (-1: null) and bytes; every request and response framed by
// an int32 length. Only what these requests need is written here.
type reader struct {
	conn   net.Conn
	chroot string
	wmu    sync.Mutex // one frame written at a time
	xid    atomic.Int32

	// The session the server granted: its id and negotiated timeout.
	session int64
	timeout time.Duration
	// lastSend is when a request was last written (UnixNano): the session
	// pings when idle for a third of its timeout (see pingLoop).
	lastSend atomic.Int64

	mu   sync.Mutex
	wait map[int32]chan frame
	err  error // why the read loop ended
	done chan struct{}
}

// frame is one response: its reply header and body.
type frame struct {
	err  int32
	body []byte
}

// OpCodes and xids (ZooDefs.OpCode; ClientCnxn's special xids).
const (
	opGetData      = 4
	opSync         = 9
	opMultiRead    = 22
	opPing         = 11
	opAuth         = 100
	opCloseSession = -11
	opError        = -1
	xidAuth        = -4
	xidPing        = -2
	xidWatch       = -1
	maxFrame       = 64 << 20
)

// errNoMultiRead means the server did not answer a multiRead as ZooKeeper
// 3.6+ does: the scan reads one znode per request instead.
var errNoMultiRead = errors.New("the ZooKeeper server does not answer multiRead (ZooKeeper 3.6+)")

// dialReader opens a session for bulk reads on one of servers, with the
// Conn's TLS and digest identity, and proves the server answers multiRead
// (a batch of one read of the chroot) before it is used.
func dialReader(ctx context.Context, servers []string, chroot string, o Options) (*reader, error) {
	var errs []error
	for _, i := range rand.Perm(len(servers)) {
		r, err := dialReaderAt(ctx, servers[i], chroot, o)
		if err == nil {
			return r, nil
		}
		errs = append(errs, err)
		if errors.Is(err, errNoMultiRead) || ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func dialReaderAt(ctx context.Context, addr, chroot string, o Options) (*reader, error) {
	timeout := DefaultOpTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	var nc net.Conn
	var err error
	if o.TLS != nil {
		rf := newRefusals(1)
		rf.tls = o.TLS
		nc, err = rf.dialTLS("tcp", addr, timeout)
	} else {
		nc, err = net.DialTimeout("tcp", addr, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", addr, err)
	}
	if readerConnHook != nil {
		nc = readerConnHook(nc)
	}
	return startReader(ctx, nc, addr, chroot, o, timeout)
}

// readerConnHook, when set (by tests only), wraps each bulk session's
// connection: the tests record the bytes ZooKeeper sends.
var readerConnHook func(net.Conn) net.Conn

// startReader opens the session on nc (closed on failure): connect,
// digest auth, and a multiRead probe.
func startReader(ctx context.Context, nc net.Conn, addr, chroot string, o Options, timeout time.Duration) (*reader, error) {
	r := &reader{conn: nc, chroot: chroot, wait: map[int32]chan frame{}, done: make(chan struct{})}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	ok := false
	defer func() {
		stop()
		if !ok {
			nc.Close()
		}
	}()
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
	// passwd, readOnly.
	var b jute
	b.int32(0)
	b.int64(0)
	b.int32(int32(cmp.Or(o.SessionTimeout, 10*time.Second) / time.Millisecond))
	b.int64(0)
	b.buffer(make([]byte, 16))
	b.bool(false)
	nc.SetDeadline(time.Now().Add(timeout))
	if err := writeFrame(nc, b); err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", addr, err)
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	resp, err := readFrame(br)
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: no session: %w", addr, err)
	}
	if r.session, r.timeout, err = parseConnect(resp); err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", addr, err)
	}
	nc.SetDeadline(time.Time{})
	r.lastSend.Store(time.Now().UnixNano())
	go r.readLoop(br)
	go r.pingLoop(max(r.timeout/3, 100*time.Millisecond))
	if o.DigestAuth != "" {
		var a jute
		a.int32(0)
		a.string("digest")
		a.buffer([]byte(o.DigestAuth))
		f, err := r.call(ctx, xidAuth, opAuth, a)
		if err == nil && f.err != 0 {
			err = fmt.Errorf("zookeeper error %d", f.err)
		}
		if err != nil {
			return nil, fmt.Errorf("zookeeper %s: digest auth: %w", addr, err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.getAll(pctx, []string{"/"}); err != nil {
		// A server without multiRead answers it with an error code
		// (UnimplementedRequestProcessor: -6) and ends the connection; a
		// slow or lost server is only a failed dial.
		var ze *zkError
		if errors.As(err, &ze) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("zookeeper %s: %w (%v)", addr, errNoMultiRead, err)
		}
		return nil, fmt.Errorf("zookeeper %s: multiRead probe: %w", addr, err)
	}
	ok = true
	return r, nil
}

// zkError is a request's error code in its reply header.
type zkError struct {
	op   string
	code int32
}

func (e *zkError) Error() string { return fmt.Sprintf("%s: zookeeper error %d", e.op, e.code) }

// parseConnect reads a ConnectResponse: protocolVersion, timeOut (0: the
// server refused the session), sessionId, passwd, readOnly (absent from
// servers before 3.4).
func parseConnect(b []byte) (session int64, timeout time.Duration, err error) {
	d := unjute{b: b}
	d.int32()
	to := d.int32()
	session = d.int64()
	d.buffer()
	if d.err != nil {
		return 0, 0, fmt.Errorf("a malformed session response (%d bytes): %w", len(b), d.err)
	}
	if to <= 0 {
		return 0, 0, fmt.Errorf("%w: the server granted no session", ErrNoSession)
	}
	return session, time.Duration(to) * time.Millisecond, nil
}

// parseReply reads a ReplyHeader (xid, zxid, err) and returns the body
// after it.
func parseReply(b []byte) (xid, zerr int32, body []byte, err error) {
	d := unjute{b: b}
	xid, _, zerr = d.int32(), d.int64(), d.int32()
	if d.err != nil {
		return 0, 0, nil, fmt.Errorf("a %d-byte response is shorter than its header: %w", len(b), d.err)
	}
	return xid, zerr, d.b, nil
}

// pingLoop pings the server whenever the session has sent nothing for
// every (a third of the negotiated timeout, as ZooKeeper's own clients
// do), so that an idle bulk session is not expired; readLoop drops the
// replies (xid -2). It ends with the connection.
func (r *reader) pingLoop(every time.Duration) {
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		wait := every - time.Since(time.Unix(0, r.lastSend.Load()))
		if wait <= 0 {
			var h jute
			h.int32(xidPing)
			h.int32(opPing)
			if err := r.send(h); err != nil {
				r.conn.Close() // readLoop ends and says why
				return
			}
			wait = every
		}
		t.Reset(wait)
	}
}

// send writes one request frame.
func (r *reader) send(h jute) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.conn.SetWriteDeadline(time.Now().Add(DefaultOpTimeout))
	err := writeFrame(r.conn, h)
	r.lastSend.Store(time.Now().UnixNano())
	return err
}

// readLoop hands each response to its caller by xid until the connection
// ends.
func (r *reader) readLoop(br *bufio.Reader) {
	var err error
	for {
		var b []byte
		if b, err = readFrame(br); err != nil {
			break
		}
		var xid, zerr int32
		if xid, zerr, b, err = parseReply(b); err != nil {
			break
		}
		if xid == xidPing || xid == xidWatch {
			continue
		}
		r.mu.Lock()
		ch := r.wait[xid]
		delete(r.wait, xid)
		r.mu.Unlock()
		if ch != nil {
			ch <- frame{err: zerr, body: b}
		}
	}
	r.mu.Lock()
	r.err = fmt.Errorf("zookeeper %s: connection ended: %w", r.conn.RemoteAddr(), err)
	r.mu.Unlock()
	r.conn.Close()
	close(r.done)
}

// call sends one request and waits for its response (xid 0: the next).
func (r *reader) call(ctx context.Context, xid, op int32, body jute) (frame, error) {
	if xid == 0 {
		xid = r.xid.Add(1)
	}
	ch := make(chan frame, 1)
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		return frame{}, r.err
	}
	r.wait[xid] = ch
	r.mu.Unlock()
	var h jute
	h.int32(xid)
	h.int32(op)
	h = append(h, body...)
	if err := r.send(h); err != nil {
		r.conn.Close()
		return frame{}, err
	}
	select {
	case f := <-ch:
		return f, nil
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return frame{}, r.err
	case <-ctx.Done():
		// Its reply, if it comes, finds no one waiting and is dropped (xids
		// are never reused): the session stays usable.
		r.mu.Lock()
		delete(r.wait, xid)
		r.mu.Unlock()
		return frame{}, ctx.Err()
	}
}

// got is one read of a multiRead: the znode's data and stat, or its error.
type got struct {
	data []byte
	stat kafkazk.ZStat
	err  error
}

// getAll reads the znodes at paths (relative to the chroot) in one
// multiRead. A read's own failure (no such znode: ErrNoNode; no right to
// read it: ErrNoAuth) is its result; an error is the request's.
func (r *reader) getAll(ctx context.Context, paths []string) ([]got, error) {
	var b jute
	for _, p := range paths {
		b.int32(opGetData) // MultiHeader: type, done, err
		b.bool(false)
		b.int32(-1)
		b.string(full(r.chroot, p)) // GetDataRequest: path, watch
		b.bool(false)
	}
	b.int32(-1)
	b.bool(true)
	b.int32(-1)
	f, err := r.call(ctx, 0, opMultiRead, b)
	if err != nil {
		return nil, err
	}
	if f.err != 0 {
		return nil, &zkError{"multiRead", f.err}
	}
	return parseMultiRead(f.body, r.chroot, paths)
}

// parseMultiRead reads a MultiReadResponse to reads of paths: for each, a
// MultiHeader (type, done, err) and a GetDataResponse (data, stat) or an
// ErrorResult (err); then a header with done set.
func parseMultiRead(body []byte, chroot string, paths []string) ([]got, error) {
	d := unjute{b: body}
	out := make([]got, 0, len(paths))
	for {
		typ, done := d.int32(), d.bool()
		d.int32() // the header's err: an error result carries its own
		if d.err != nil {
			return nil, fmt.Errorf("multiRead: %w", d.err)
		}
		if done {
			break
		}
		if len(out) == len(paths) {
			return nil, fmt.Errorf("multiRead: more results than the %d reads", len(paths))
		}
		switch typ {
		case opGetData:
			data := d.buffer()
			st := d.stat()
			out = append(out, got{data: data, stat: st})
		case opError:
			code := d.int32()
			out = append(out, got{err: zkErr(code, full(chroot, paths[len(out)]))})
		default:
			return nil, fmt.Errorf("multiRead: unexpected result type %d", typ)
		}
		if d.err != nil {
			return nil, fmt.Errorf("multiRead: %w", d.err)
		}
	}
	if len(out) != len(paths) {
		return nil, fmt.Errorf("multiRead: %d results for %d reads", len(out), len(paths))
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("multiRead: %d bytes after the last result", len(d.b))
	}
	return out, nil
}

// sync makes the reader's server apply everything the leader committed
// before it (as Conn.scanSessions syncs its siblings).
func (r *reader) sync(ctx context.Context) error {
	var b jute
	b.string(full(r.chroot, "/"))
	f, err := r.call(ctx, 0, opSync, b)
	if err == nil && f.err != 0 {
		err = fmt.Errorf("sync: zookeeper error %d", f.err)
	}
	return err
}

// close ends the session (closeSession, bounded) and the connection.
func (r *reader) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = r.call(ctx, 0, opCloseSession, nil)
	r.conn.Close()
}

// zkErr is a read's error code as this package's errors.
func zkErr(code int32, path string) error {
	switch code {
	case -101:
		return fmt.Errorf("get %s: %w", path, ErrNoNode)
	case -102:
		return fmt.Errorf("get %s: %w", path, ErrNoAuth)
	}
	return fmt.Errorf("get %s: zookeeper error %d", path, code)
}

func full(chroot, p string) string {
	if chroot == "" {
		return p
	}
	if p == "/" {
		return chroot
	}
	return chroot + p
}

// jute is a request being written.
type jute []byte

func (b *jute) int32(v int32) { *b = binary.BigEndian.AppendUint32(*b, uint32(v)) }
func (b *jute) int64(v int64) { *b = binary.BigEndian.AppendUint64(*b, uint64(v)) }
func (b *jute) bool(v bool) {
	if v {
		*b = append(*b, 1)
	} else {
		*b = append(*b, 0)
	}
}
func (b *jute) buffer(v []byte) { b.int32(int32(len(v))); *b = append(*b, v...) }
func (b *jute) string(v string) { b.int32(int32(len(v))); *b = append(*b, v...) }

// unjute reads a response; the first short read sets err and every
// later read returns zero.
type unjute struct {
	b   []byte
	err error
}

func (d *unjute) take(n int) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		if d.err == nil {
			d.err = io.ErrUnexpectedEOF
		}
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
func (d *unjute) int32() int32 {
	if v := d.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}
func (d *unjute) int64() int64 {
	if v := d.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}
func (d *unjute) bool() bool {
	v := d.take(1)
	return v != nil && v[0] != 0
}
func (d *unjute) buffer() []byte {
	n := d.int32()
	if n < 0 {
		return nil
	}
	return d.take(int(n))
}

// stat reads a Stat: czxid, mzxid, ctime, mtime, version, cversion,
// aversion, ephemeralOwner, dataLength, numChildren, pzxid.
func (d *unjute) stat() kafkazk.ZStat {
	d.int64()
	d.int64()
	ctime, mtime := d.int64(), d.int64()
	version, cversion, aversion := d.int32(), d.int32(), d.int32()
	owner := d.int64()
	d.int32()
	kids := d.int32()
	d.int64()
	return kafkazk.ZStat{Version: version, Cversion: cversion, Aversion: aversion,
		Ctime: time.UnixMilli(ctime), Mtime: time.UnixMilli(mtime), EphemeralOwner: owner, NumChildren: kids}
}

func writeFrame(w io.Writer, b []byte) error {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(out, b...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, fmt.Errorf("a %d-byte response is past %d", size, maxFrame)
	}
	if size <= 64<<10 {
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, unexpectedEOF(err)
		}
		return b, nil
	}
	// A large frame's buffer grows with the bytes that arrive, not with
	// what its length claims: a bad length costs no more than its frame.
	var buf bytes.Buffer
	got, err := io.CopyN(&buf, r, int64(size))
	if got < int64(size) {
		return nil, unexpectedEOF(cmp.Or(err, io.EOF))
	}
	return buf.Bytes(), nil
}

// unexpectedEOF is err, but io.ErrUnexpectedEOF for a frame cut short.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readers are a Conn's bulk-read sessions, opened by the first scan that
// spreads (ScanSpreadMin topics) and kept until Close; none says why the
// ensemble's servers are read one znode per request instead.
type readers struct {
	mu   sync.Mutex
	list []*reader
	none error
}

func (r *reader) alive() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// bulkReaders returns up to n bulk-read sessions, each synced with the
// leader (as scanSessions syncs its siblings: nothing read is older than
// what this session has read), or none when the servers do not answer
// multiRead (ZooKeeper before 3.6), which is remembered.
func (c *Conn) bulkReaders(ctx context.Context, n int) []*reader {
	c.rd.mu.Lock()
	defer c.rd.mu.Unlock()
	if c.rd.none != nil {
		return nil
	}
	live := c.rd.list[:0]
	for _, r := range c.rd.list {
		if r.alive() {
			live = append(live, r)
		}
	}
	c.rd.list = live
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	type dialed struct {
		r   *reader
		err error
	}
	ch := make(chan dialed, n)
	for range n - len(live) {
		go func() {
			r, err := dialReader(dctx, c.servers, c.chroot, c.opts)
			ch <- dialed{r, err}
		}()
	}
	var unsupported error
	for range n - len(live) {
		d := <-ch
		switch {
		case d.err == nil:
			c.rd.list = append(c.rd.list, d.r)
		case errors.Is(d.err, errNoMultiRead):
			unsupported = d.err
		}
	}
	if len(c.rd.list) == 0 && unsupported != nil {
		c.rd.none = unsupported
		return nil
	}
	var synced []*reader
	var smu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range c.rd.list {
		wg.Go(func() {
			if r.sync(dctx) == nil {
				smu.Lock()
				synced = append(synced, r)
				smu.Unlock()
			}
		})
	}
	wg.Wait()
	return synced
}

func (c *Conn) closeReaders() {
	c.rd.mu.Lock()
	defer c.rd.mu.Unlock()
	for _, r := range c.rd.list {
		r.close()
	}
	c.rd.list, c.rd.none = nil, errors.New("closed")
}

// Batch sizes of a bulk scan's multiReads: topic znodes can be large (one
// of 1,000 partitions is ~20 KB), state znodes are ~100 bytes.
const (
	bulkTopicBatch = 50
	bulkStateBatch = 200
)

// runBulk performs reads as multiReads of up to batch reads each, at most
// inflight requests at once spread over the readers, and records every
// result as run's workers do. It returns at the first error that is not a
// znode's own (see record), or when ctx ends.
func (s *scanner) runBulk(ctx context.Context, rs []*reader, inflight, batch int, reads iter.Seq[read]) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan []read, inflight)
	var wg sync.WaitGroup
	for i := range inflight {
		rd := rs[i%len(rs)]
		wg.Go(func() {
			for rb := range ch {
				if ctx.Err() != nil {
					continue // drain
				}
				paths := make([]string, len(rb))
				for j, r := range rb {
					paths[j] = s.pathOf(r)
				}
				cctx, ccancel := context.WithTimeout(ctx, DefaultOpTimeout)
				res, err := rd.getAll(cctx, paths)
				ccancel()
				if err != nil {
					cancel(fmt.Errorf("scan %s: %w: %w", s.c.Full("/"), errBulk, err))
					continue
				}
				for j, r := range rb {
					s.reads.Add(1)
					if err := s.record(r, res[j].data, res[j].stat, res[j].err); err != nil {
						cancel(err)
						break
					}
				}
				s.completed.Add(int64(len(rb)))
			}
		})
	}
	next := make([]read, 0, batch)
	for r := range reads {
		if next = append(next, r); len(next) == batch {
			select {
			case ch <- next:
			case <-ctx.Done():
			}
			next = make([]read, 0, batch)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(next) > 0 && ctx.Err() == nil {
		ch <- next
	}
	close(ch)
	wg.Wait()
	return context.Cause(ctx)
}
