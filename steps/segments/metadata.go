package segments

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// PartitionMetadataFile is the file in a partition directory that holds its
// topic ID (PartitionMetadataFile.java).
const PartitionMetadataFile = "partition.metadata"

// PartitionMetadata is partition.metadata: "version: 0\ntopic_id: <id>", where
// the id is a Kafka Uuid in base64url without padding, 22 characters
// (PartitionMetadata.encode, Uuid.toString). Kafka writes no final newline.
type PartitionMetadata struct {
	Version int
	TopicID string // always in Kafka's canonical form, as Uuid.toString prints it
}

// ErrBadPartitionMetadata is wrapped by every error ParsePartitionMetadata returns.
var ErrBadPartitionMetadata = errors.New("bad partition.metadata")

// ParsePartitionMetadata reads partition.metadata exactly as Kafka 3.9 does
// (PartitionMetadataReadBuffer.read, PartitionMetadataReadBuffer.java:40-76),
// so the ID it returns is the one the broker would use:
//
//   - Only the first two lines count, ended by "\n", "\r\n" or "\r" (Java's
//     BufferedReader.readLine); a final newline is optional and any further
//     lines are ignored.
//   - Each line is split on ":" followed by Java whitespace and must give
//     exactly two fields (Java's String.split drops trailing empty fields).
//     Like Kafka, the keys "version" and "topic_id" are not checked.
//   - The version is read with Integer.parseInt and must be at least 0; Kafka
//     accepts versions above 0 to allow downgrades.
//   - The ID is read with Uuid.fromString: at most 24 characters of base64url,
//     "==" padding allowed, decoding to exactly 16 bytes that are not all zero.
//     Java's decoder ignores the unused low bits of the last character, so
//     TopicID is re-encoded to the form Kafka prints, which is what topic IDs
//     from ZooKeeper or the admin API are compared against.
//   - The file must be valid UTF-8 (Kafka reads it with a strict decoder).
//
// A file without a second line is refused too; Kafka 3.9 fails with a
// NullPointerException on it rather than an IOException.
func ParsePartitionMetadata(b []byte) (PartitionMetadata, error) {
	bad := func(format string, args ...any) (PartitionMetadata, error) {
		return PartitionMetadata{}, fmt.Errorf("%w: "+format, append([]any{ErrBadPartitionMetadata}, args...)...)
	}
	if !utf8.Valid(b) {
		return bad("the file is not valid UTF-8")
	}
	line, rest, ok := readLine(string(b))
	if !ok {
		return bad("the file is empty; it should start with %q", "version: 0")
	}
	f := splitColonSpace(line)
	if len(f) != 2 {
		return bad("malformed version line %q; want %q", line, "version: 0")
	}
	v, ok := javaParseInt(f[1])
	if !ok {
		return bad("malformed version line %q: %q is not a number", line, f[1])
	}
	if v < 0 {
		return bad("unrecognized version %d", v)
	}
	line, _, ok = readLine(rest)
	if !ok {
		return bad("no topic_id line after the version")
	}
	f = splitColonSpace(line)
	if len(f) != 2 {
		return bad("malformed topic_id line %q; want %q", line, "topic_id: <22 characters of base64url>")
	}
	id, err := canonicalTopicID(f[1])
	if err != nil {
		return bad("topic_id line %q: %v", line, err)
	}
	return PartitionMetadata{Version: int(v), TopicID: id}, nil
}

// readLine is java.io.BufferedReader.readLine over s: the text up to the first
// "\n", "\r\n" or "\r", and what follows it. ok is false at the end of s.
func readLine(s string) (line, rest string, ok bool) {
	if s == "" {
		return "", "", false
	}
	i := strings.IndexAny(s, "\r\n")
	if i < 0 {
		return s, "", true
	}
	line, rest = s[:i], s[i+1:]
	if s[i] == '\r' && strings.HasPrefix(rest, "\n") {
		rest = rest[1:]
	}
	return line, rest, true
}

// splitColonSpace is Pattern.compile(":\\s+").split(line)
// (PartitionMetadataReadBuffer.java:27): split at every ':' followed by one or
// more Java whitespace characters, keep a leading empty field, drop trailing
// empty fields.
func splitColonSpace(line string) []string {
	var f []string
	start := 0
	for i := 0; i < len(line); i++ {
		if line[i] != ':' {
			continue
		}
		j := i + 1
		for j < len(line) && strings.IndexByte(javaSpace, line[j]) >= 0 {
			j++
		}
		if j == i+1 {
			continue
		}
		f = append(f, line[start:i])
		start = j
		i = j - 1
	}
	if f == nil {
		return []string{line}
	}
	f = append(f, line[start:])
	for len(f) > 0 && f[len(f)-1] == "" {
		f = f[:len(f)-1]
	}
	return f
}

// canonicalTopicID reads s as Uuid.fromString does (Uuid.java) and returns it
// as Uuid.toString prints it.
func canonicalTopicID(s string) (string, error) {
	if len(s) > 24 {
		return "", fmt.Errorf("topic id %q is too long to be a base64 Uuid", s)
	}
	data := s
	if len(s) == 24 && strings.HasSuffix(s, "==") {
		data = s[:22]
	}
	b, err := base64.RawURLEncoding.DecodeString(data)
	if err != nil {
		return "", fmt.Errorf("topic id %q is not base64url: %v", s, err)
	}
	if len(b) != 16 {
		return "", fmt.Errorf("topic id %q decodes to %d bytes, a Uuid has 16", s, len(b))
	}
	if string(b) == string(make([]byte, 16)) {
		return "", fmt.Errorf("topic id %q is the zero Uuid, which Kafka refuses", s)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// SameTopicID reports whether a and b are the same topic id as Kafka
// compares them (the Uuid they decode to); an empty or unreadable id is
// never the same as anything.
func SameTopicID(a, b string) bool {
	ca, err1 := canonicalTopicID(a)
	cb, err2 := canonicalTopicID(b)
	return err1 == nil && err2 == nil && ca == cb
}
