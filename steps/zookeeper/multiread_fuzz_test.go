package zookeeper

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
)

// FuzzReaderFrames feeds the bulk reader's decoding what a server might
// send: a stream of frames, the first a connect response, the others
// replies (header, then a multiRead response to nreads reads). Nothing may
// panic, a frame's buffer may not outgrow the bytes that came, and a
// decoded multiRead has one result per read.
func FuzzReaderFrames(f *testing.F) {
	if session, err := os.ReadFile("testdata/zk38-session.bin"); err == nil {
		f.Add(session, uint8(len(CannedPaths)))
		f.Add(session, uint8(1))
		frames, _ := SplitFrames(session)
		for _, fr := range frames {
			f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(fr))), fr...), uint8(len(CannedPaths)))
		}
	} else {
		f.Fatal(err)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xf0}, uint8(1))
	f.Add([]byte{0x01, 0x00, 0x00, 0x00, 1, 2, 3}, uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, nreads uint8) {
		paths := make([]string, nreads%16)
		for i := range paths {
			paths[i] = "/p"
		}
		br := bytes.NewReader(stream)
		for i := 0; ; i++ {
			fr, err := readFrame(br)
			if err != nil {
				if fr != nil {
					t.Fatalf("readFrame returned %d bytes and %v", len(fr), err)
				}
				return
			}
			if c := cap(fr); c > 2*len(stream)+(64<<10) {
				t.Fatalf("a frame of %d bytes in a %d-byte stream took a %d-byte buffer", len(fr), len(stream), c)
			}
			if i == 0 {
				if _, timeout, err := parseConnect(fr); err == nil && timeout <= 0 {
					t.Fatalf("parseConnect granted a %v session", timeout)
				}
				continue
			}
			_, _, body, err := parseReply(fr)
			if err != nil {
				if len(fr) >= 16 {
					t.Fatalf("a %d-byte reply: %v", len(fr), err)
				}
				continue
			}
			res, err := parseMultiRead(body, "/c", paths)
			if err == nil && len(res) != len(paths) {
				t.Fatalf("%d results for %d reads", len(res), len(paths))
			}
			if err != nil && res != nil {
				t.Fatalf("results and an error: %v", err)
			}
		}
	})
}
