package zookeeper

// The bulk reader against a fake server over net.Pipe that answers with
// frames a real ZooKeeper 3.8 sent (testdata/zk38-session.bin, held to the
// real thing by TestCannedFramesAreZooKeepers), whole or broken.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The canned session's frames, in the order ZooKeeper sent them.
const (
	fConnect = iota
	fProbe   // the multiRead of the chroot that proves multiRead
	fSync
	fMultiRead // of CannedPaths
	fPing
	fSync2
	fClose
)

func cannedFrames(tb testing.TB) [][]byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/zk38-session.bin")
	if err != nil {
		tb.Fatal(err)
	}
	fs, err := SplitFrames(b)
	if err != nil || len(fs) != 7 {
		tb.Fatalf("testdata/zk38-session.bin: %d frames, %v", len(fs), err)
	}
	return fs
}

func framed(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// withXid is a reply frame with its xid set to xid's.
func withXid(f []byte, xid int32) []byte {
	f = bytes.Clone(f)
	binary.BigEndian.PutUint32(f, uint32(xid))
	return f
}

// fake answers a reader's requests with the canned frames. multiRead, when
// set, says what to send for each multiRead after the probe (its canned
// reply given, xid set): the raw bytes, and whether to hang up after them.
type fake struct {
	frames    [][]byte
	connect   []byte // raw; nil: the canned connect response
	hangUp    bool   // hang up after the connect response
	probe     func(reply []byte) []byte
	multiRead func(reply []byte) (raw []byte, hangUp bool)
	pingFirst bool          // send a ping reply before each multiRead's
	pings     chan struct{} // told of each ping received
}

func (fk *fake) serve(srv net.Conn) {
	defer srv.Close()
	if _, err := readFrame(srv); err != nil {
		return
	}
	connect := fk.connect
	if connect == nil {
		connect = framed(fk.frames[fConnect])
	}
	if _, err := srv.Write(connect); err != nil || fk.hangUp {
		return
	}
	probed := false
	for {
		req, err := readFrame(srv)
		if err != nil || len(req) < 8 {
			return
		}
		xid, op := int32(binary.BigEndian.Uint32(req)), int32(binary.BigEndian.Uint32(req[4:]))
		var raw []byte
		hangUp := false
		switch op {
		case opPing:
			raw = framed(fk.frames[fPing])
			select {
			case fk.pings <- struct{}{}:
			default: // nobody counts them (nil), or enough counted
			}
		case opSync:
			raw = framed(withXid(fk.frames[fSync], xid))
		case opCloseSession:
			raw, hangUp = framed(withXid(fk.frames[fClose], xid)), true
		case opMultiRead:
			reply := withXid(fk.frames[fMultiRead], xid)
			if !probed {
				probed, reply = true, withXid(fk.frames[fProbe], xid)
				if fk.probe != nil {
					reply = fk.probe(reply)
				}
				raw = framed(reply)
			} else if fk.multiRead != nil {
				raw, hangUp = fk.multiRead(reply)
			} else {
				raw = framed(reply)
			}
			if fk.pingFirst {
				raw = append(framed(fk.frames[fPing]), raw...)
			}
		default:
			return
		}
		if _, err := srv.Write(raw); err != nil || hangUp {
			return
		}
	}
}

// startFake opens a reader on fk.
func startFake(t *testing.T, fk *fake) (*reader, error) {
	t.Helper()
	cli, srv := net.Pipe()
	go fk.serve(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := startReader(ctx, cli, "canned", CannedChroot, Options{SessionTimeout: 30 * time.Second}, 10*time.Second)
	if err == nil {
		t.Cleanup(r.close)
	}
	return r, err
}

func getCanned(t *testing.T, r *reader) ([]got, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.getAll(ctx, CannedPaths)
}

func TestCannedMultiRead(t *testing.T) {
	fk := &fake{frames: cannedFrames(t), pingFirst: true}
	r, err := startFake(t, fk)
	if err != nil {
		t.Fatal(err)
	}
	if r.session == 0 || r.timeout != 30*time.Second {
		t.Fatalf("session %#x, timeout %v: want the canned session's id and 30s", r.session, r.timeout)
	}
	res, err := getCanned(t, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results for 4 reads", len(res))
	}
	if a := res[0]; string(a.data) != "alpha, twice" || a.stat.Version != 1 || a.err != nil || a.stat.Mtime.Before(a.stat.Ctime) || a.stat.Ctime.Year() < 2020 {
		t.Errorf("/a: %q %+v %v", a.data, a.stat, a.err)
	}
	if m := res[1]; !errors.Is(m.err, ErrNoNode) || !strings.Contains(m.err.Error(), "/canned/missing") {
		t.Errorf("/missing: %v, want ErrNoNode naming /canned/missing", m.err)
	}
	if b := res[2]; len(b.data) != 0 || b.err != nil || b.stat.Version != 0 {
		t.Errorf("/b: %q %+v %v", b.data, b.stat, b.err)
	}
	if root := res[3]; root.err != nil || root.stat.NumChildren != 2 {
		t.Errorf("/: %+v %v", root.stat, root.err)
	}
	if err := r.sync(context.Background()); err != nil {
		t.Fatalf("sync after the multiRead: %v", err)
	}
}

func TestCannedWholeRequestError(t *testing.T) {
	// The server refuses the request (ZooKeeper before 3.6 answers
	// multiRead so: -6, Unimplemented): no results; the session stays
	// usable.
	first := true
	fk := &fake{frames: cannedFrames(t), multiRead: func(reply []byte) ([]byte, bool) {
		if first {
			first = false
			return framed(refused(reply, -6)), false
		}
		return framed(reply), false
	}}
	r, err := startFake(t, fk)
	if err != nil {
		t.Fatal(err)
	}
	res, err := getCanned(t, r)
	var ze *zkError
	if !errors.As(err, &ze) || ze.code != -6 || res != nil {
		t.Fatalf("getAll = %v, %v; want zookeeper error -6", res, err)
	}
	if res, err := getCanned(t, r); err != nil || len(res) != 4 {
		t.Fatalf("the next multiRead: %d results, %v", len(res), err)
	}
}

// refused is a reply's header with err set and no body.
func refused(reply []byte, code int32) []byte {
	f := bytes.Clone(reply[:16])
	binary.BigEndian.PutUint32(f[12:], uint32(code))
	return f
}

func TestCannedProbeRefused(t *testing.T) {
	fk := &fake{frames: cannedFrames(t), probe: func(reply []byte) []byte { return refused(reply, -6) }}
	if _, err := startFake(t, fk); !errors.Is(err, errNoMultiRead) {
		t.Fatalf("a server refusing the probe: %v, want errNoMultiRead", err)
	}
}

func TestCannedBrokenFrames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mr     func(reply []byte) ([]byte, bool)
		want   error
		says   string
		usable bool // the session still answers
	}{
		{"frame cut short", func(reply []byte) ([]byte, bool) {
			return framed(reply[:len(reply)-10]), false
		}, io.ErrUnexpectedEOF, "multiRead:", true},
		{"result cut short", func(reply []byte) ([]byte, bool) {
			return framed(reply[:16+9+4+3]), false // header, a result's header, 3 of data's 12 bytes
		}, io.ErrUnexpectedEOF, "multiRead:", true},
		{"reply header cut short", func(reply []byte) ([]byte, bool) {
			return framed(reply[:10]), false
		}, io.ErrUnexpectedEOF, "shorter than its header", false},
		{"data length past the frame", func(reply []byte) ([]byte, bool) {
			reply = bytes.Clone(reply)
			binary.BigEndian.PutUint32(reply[16+9:], 0x7fffffff)
			return framed(reply), false
		}, io.ErrUnexpectedEOF, "multiRead:", true},
		{"oversized frame length", func(reply []byte) ([]byte, bool) {
			return binary.BigEndian.AppendUint32(nil, 0xfffffff0), false
		}, nil, "response is past", false},
		{"server closes mid-frame", func(reply []byte) ([]byte, bool) {
			raw := framed(reply)
			return raw[:len(raw)/2], true
		}, io.ErrUnexpectedEOF, "connection ended", false},
		{"server closes between frames", func(reply []byte) ([]byte, bool) {
			return nil, true
		}, io.EOF, "connection ended", false},
		{"more results than reads", func(reply []byte) ([]byte, bool) {
			body := reply[16:]
			first := body[:9+4+12+68] // a's result: header, data, stat
			return framed(append(append(bytes.Clone(reply[:16]), first...), body...)), false
		}, nil, "more results than", true},
		{"bytes after the last result", func(reply []byte) ([]byte, bool) {
			return framed(append(bytes.Clone(reply), 0)), false
		}, nil, "after the last result", true},
		{"unknown result type", func(reply []byte) ([]byte, bool) {
			reply = bytes.Clone(reply)
			binary.BigEndian.PutUint32(reply[16:], 5)
			return framed(reply), false
		}, nil, "unexpected result type 5", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := true
			fk := &fake{frames: cannedFrames(t), multiRead: func(reply []byte) ([]byte, bool) {
				if first {
					first = false
					return tc.mr(reply)
				}
				return framed(reply), false
			}}
			r, err := startFake(t, fk)
			if err != nil {
				t.Fatal(err)
			}
			res, err := getCanned(t, r)
			if err == nil || res != nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("getAll = %d results, %v; want an error wrapping %v saying %q", len(res), err, tc.want, tc.says)
			}
			_, err = getCanned(t, r)
			if tc.usable != (err == nil) || tc.usable != r.alive() {
				t.Fatalf("after it the session answers %v (alive %v); want it usable: %v", err, r.alive(), tc.usable)
			}
		})
	}
}

func TestCannedConnectResponse(t *testing.T) {
	frames := cannedFrames(t)
	noSession := bytes.Clone(frames[fConnect])
	binary.BigEndian.PutUint32(noSession[4:], 0) // timeOut 0: refused
	for _, tc := range []struct {
		name, raw string
		want      error
	}{
		{"no session", string(framed(noSession)), ErrNoSession},
		{"cut short", string(framed(frames[fConnect][:14])), io.ErrUnexpectedEOF},
		{"closed mid-frame", string(framed(frames[fConnect])[:20]), io.ErrUnexpectedEOF},
		{"closed", "", io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := startFake(t, &fake{frames: frames, connect: []byte(tc.raw), hangUp: true}); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestIdleReaderPings: a session idle for a third of its timeout pings
// (xid -2, opcode 11), and the ping replies among the responses are
// dropped.
func TestIdleReaderPings(t *testing.T) {
	frames := cannedFrames(t)
	connect := bytes.Clone(frames[fConnect])
	binary.BigEndian.PutUint32(connect[4:], 600) // a 600 ms session: pings after 200 ms idle
	fk := &fake{frames: frames, connect: framed(connect), pings: make(chan struct{}, 16), pingFirst: true}
	r, err := startFake(t, fk)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case <-fk.pings:
		case <-time.After(5 * time.Second):
			t.Fatal("an idle bulk session sent no ping within 5s (its timeout is 600ms)")
		}
	}
	if res, err := getCanned(t, r); err != nil || len(res) != 4 {
		t.Fatalf("after the pings: %d results, %v", len(res), err)
	}
}

// TestReadFrameAllocatesWhatArrives: a frame's claimed length (here 60 MB,
// under maxFrame) costs no more memory than the bytes that come.
func TestReadFrameAllocatesWhatArrives(t *testing.T) {
	raw := append(binary.BigEndian.AppendUint32(nil, 60<<20), make([]byte, 100<<10)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readFrame(bytes.NewReader(raw))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a 60 MB frame of 100 KB: %v, want io.ErrUnexpectedEOF", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Fatalf("reading a 60 MB frame cut at 100 KB allocated %d bytes", n)
	}
}
