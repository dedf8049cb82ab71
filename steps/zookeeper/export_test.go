package zookeeper

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"time"
)

// UsesMultiRead reports whether the Conn's scans read in bulk (multiRead
// sessions open), for the tests.
func (c *Conn) UsesMultiRead() bool {
	c.rd.mu.Lock()
	defer c.rd.mu.Unlock()
	return len(c.rd.list) > 0
}

// ReaderSessions returns the ids of the Conn's live bulk sessions and
// their negotiated timeouts.
func (c *Conn) ReaderSessions() (ids []int64, timeouts []time.Duration) {
	c.rd.mu.Lock()
	defer c.rd.mu.Unlock()
	for _, r := range c.rd.list {
		if r.alive() {
			ids, timeouts = append(ids, r.session), append(timeouts, r.timeout)
		}
	}
	return ids, timeouts
}

// CannedPaths are the reads of the canned multiRead (testdata/zk38-session.bin),
// relative to CannedChroot: data, a missing znode, empty data, the chroot.
var CannedPaths = []string{"/a", "/missing", "/b", "/"}

const CannedChroot = "/canned"

// CaptureReaderSession runs a bulk session's script on the ZooKeeper at
// addr and returns every byte the server sent: the connect response, the
// multiRead probe's reply, a sync's, the multiRead of CannedPaths, a
// ping's, a sync's and the closeSession's.
func CaptureReaderSession(ctx context.Context, addr string) ([]byte, error) {
	var rec bytes.Buffer
	readerConnHook = func(nc net.Conn) net.Conn { return recordConn{nc, &rec} }
	defer func() { readerConnHook = nil }()
	r, err := dialReaderAt(ctx, addr, CannedChroot, Options{SessionTimeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	err = r.sync(ctx)
	if err == nil {
		_, err = r.getAll(ctx, CannedPaths)
	}
	if err == nil {
		// The ping's reply comes before the sync's: a server answers in order.
		var h jute
		h.int32(xidPing)
		h.int32(opPing)
		err = r.send(h)
	}
	if err == nil {
		err = r.sync(ctx)
	}
	r.close()
	<-r.done
	return rec.Bytes(), err
}

type recordConn struct {
	net.Conn
	rec *bytes.Buffer
}

func (c recordConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.rec.Write(b[:n])
	return n, err
}

// SplitFrames cuts a recorded stream into its frames (without their
// length prefixes).
func SplitFrames(stream []byte) ([][]byte, error) {
	br := bytes.NewReader(stream)
	var out [][]byte
	for br.Len() > 0 {
		f, err := readFrame(br)
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

// DescribeReply is what a reply frame says, zxids and times left out: its
// xid and error, and for the multiRead of CannedPaths each read's data,
// version and children or error.
func DescribeReply(f []byte) string {
	xid, zerr, body, err := parseReply(f)
	if err != nil {
		return err.Error()
	}
	s := fmt.Sprintf("xid %d err %d", xid, zerr)
	if res, err := parseMultiRead(body, CannedChroot, CannedPaths); err == nil {
		for _, g := range res {
			s += fmt.Sprintf("; %q v%d kids %d err %v", g.data, g.stat.Version, g.stat.NumChildren, g.err)
		}
	}
	return s
}
