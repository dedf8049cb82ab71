package segments

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is the form of a partition directory's name.
type Kind int

const (
	// Live is "<topic>-<partition>", the directory a broker serves.
	Live Kind = iota
	// Delete is "<topic>-<partition>.<uuid>-delete", queued for asynchronous deletion.
	Delete
	// Future is "<topic>-<partition>.<uuid>-future", a replica being moved between log dirs.
	Future
	// Stray is "<topic>-<partition>.<uuid>-stray", a replica the broker set aside (Kafka 3.7+).
	Stray
)

// String returns "live", "delete", "future" or "stray".
func (k Kind) String() string {
	switch k {
	case Live:
		return "live"
	case Delete:
		return "delete"
	case Future:
		return "future"
	case Stray:
		return "stray"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// suffix is the name suffix Kafka gives the kind (LocalLog.scala:584-591).
func (k Kind) suffix() string {
	switch k {
	case Delete:
		return "-delete"
	case Future:
		return "-future"
	case Stray:
		return "-stray"
	}
	return ""
}

// Dir is a partition directory name as Kafka reads it.
type Dir struct {
	Name      string // the directory's base name as found
	Topic     string // parsed topic; never empty. For a name Kafka cut to 255 bytes it is only the start of the real topic (see MaybeTruncated)
	Partition int32
	Kind      Kind
	UUID      string // the text between the last '.' and the suffix of -delete/-future/-stray forms (Kafka writes 32 lowercase hex); "" for live
}

// maxNameLen is the length Kafka keeps -delete and -stray names within by
// cutting the topic part (LocalLog.logDirNameWithSuffixCappedLength,
// LocalLog.scala:632-636): the usual file-name limit of 255 bytes.
const maxNameLen = 255

// MaybeTruncated reports whether Kafka may have cut the topic part of this
// name: a -delete or -stray name of exactly 255 bytes, in the shape
// Kafka writes (canonical partition, 32 lowercase hex uuid). Its Topic is then
// only known to be a prefix of the real topic, or the whole of it. -future
// names are never cut (LocalLog.logDirNameWithSuffix, LocalLog.scala:639-642).
func (d Dir) MaybeTruncated() bool {
	return (d.Kind == Delete || d.Kind == Stray) && len(d.Name) == maxNameLen &&
		isLowerHex32(d.UUID) && d.Name == d.canonicalName()
}

// canonicalName is the name Kafka would give d: the inverse of ParseDir for
// every name whose partition is written in plain decimal without a sign or
// leading zeros.
func (d Dir) canonicalName() string {
	name := d.Topic + "-" + strconv.FormatInt(int64(d.Partition), 10)
	if d.Kind != Live {
		name += "." + d.UUID + d.Kind.suffix()
	}
	return name
}

// ErrNotPartitionDir is wrapped by every error ParseDir returns.
var ErrNotPartitionDir = errors.New("not a partition directory")

// ErrBlocksStartup is also wrapped when Kafka itself cannot parse the name:
// LogManager.loadLogs parses every subdirectory of a log dir outside its
// per-log error handling, so one such directory stops the broker
// (LogManager.scala:465-470, LocalLog.scala:655-689).
var ErrBlocksStartup = errors.New("a broker refuses to start with this directory inside a log dir")

// ParseDir parses a log-dir entry name exactly as Kafka 3.9 does
// (LocalLog.parseTopicPartitionName, LocalLog.scala:655-689), then also
// requires the topic to be a name Kafka allows a topic to have.
//
//   - "<topic>-<partition>": split on the LAST '-', so "orders-v2-0" is topic
//     "orders-v2" and "orders--1" is topic "orders-", partition 1.
//   - "<topic>-<partition>.<uuid>-delete|-future|-stray": the name must match
//     ^(\S+)-(\S+)\.(\S+)<suffix>$ (Java \s: space, \t, \n, \v, \f, \r); the
//     text before the last '.' is then split on the last '-'. Like Kafka,
//     the uuid is not checked further: Kafka writes 32 lowercase hex digits but
//     reads any text, so "orders-0.ABC-delete" is orders-0 queued for deletion.
//   - The partition is read with Java's Integer.parseInt, as Scala's toInt
//     does: a leading '+' and leading zeros are accepted ("orders-+1" and
//     "orders-01" are both partition 1 of orders), so are other Unicode
//     decimal digits of the Basic Multilingual Plane; values above 2147483647
//     are not. A '-' cannot be part of it, so it is never negative.
//   - The topic must then be 1..249 characters of [a-zA-Z0-9._-], and not "."
//     or "..". Kafka does not check this when loading (it would load "a b-0"
//     as a log of topic "a b"), so such an error does not wrap ErrBlocksStartup.
//   - A name that is not valid UTF-8 is refused without wrapping
//     ErrBlocksStartup: Kafka never writes one, and whether a broker skips it
//     or stops depends on its JVM's file-name encoding.
//
// Every error wraps ErrNotPartitionDir and says why; those for names Kafka
// itself cannot parse, such as "orders-0.bak" or "orders-0-old", also wrap
// ErrBlocksStartup.
func ParseDir(name string) (Dir, error) {
	if i := strings.IndexAny(name, "/\x00"); i >= 0 {
		return Dir{}, fmt.Errorf("%w %q: %q at byte %d: not a file name, so not an entry of a log dir",
			ErrNotPartitionDir, name, name[i], i)
	}
	if !utf8.ValidString(name) {
		return Dir{}, fmt.Errorf("%w %q: %s", ErrNotPartitionDir, name, notUTF8(name))
	}
	d, why := parseKafka(name)
	if why != "" {
		return Dir{}, fmt.Errorf("%w %q: %s: %w", ErrNotPartitionDir, name, why, ErrBlocksStartup)
	}
	if why := topicProblem(d.Topic); why != "" {
		return Dir{}, fmt.Errorf("%w %q: Kafka reads topic %q from it, but %s, so it belongs to no topic", ErrNotPartitionDir, name, d.Topic, why)
	}
	return d, nil
}

// notUTF8 says why a name that is not valid UTF-8 is not a partition
// directory. Kafka's file names are Java strings: a broker whose JVM decodes
// file names as UTF-8 (or ASCII) cannot even open such a directory and skips
// it, one that decodes them as Latin-1 parses it and may stop on it.
func notUTF8(name string) string {
	i := 0
	for i < len(name) {
		r, size := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return fmt.Sprintf("byte %#x at byte %d is not valid UTF-8; Kafka never writes such a name, and whether a broker skips it or refuses to start depends on its JVM's file-name encoding (sun.jnu.encoding)", name[i], i)
}

// parseKafka mirrors LocalLog.parseTopicPartitionName (LocalLog.scala:655-689)
// step by step. why is "" when Kafka accepts the name, and otherwise says why
// Kafka throws. All the characters it looks for are ASCII, so searching the
// UTF-8 bytes finds the same places as Java's UTF-16 indexes.
func parseKafka(name string) (d Dir, why string) {
	if name == "" {
		return d, "the name is empty"
	}
	if !strings.Contains(name, "-") {
		return d, "the name has no '-', so it is not <topic>-<partition>"
	}
	kind := Live
	for _, k := range []Kind{Delete, Future, Stray} {
		if strings.HasSuffix(name, k.suffix()) {
			kind = k
			break
		}
	}
	body, uuid := name, ""
	if kind != Live {
		suffix := kind.suffix()
		if !matchesSuffixed(name[:len(name)-len(suffix)]) {
			return d, fmt.Sprintf("it ends in %q but is not <topic>-<partition>.<uuid>%s without whitespace", suffix, suffix)
		}
		dot := strings.LastIndexByte(name, '.')
		body, uuid = name[:dot], name[dot+1:len(name)-len(suffix)]
	}
	dash := strings.LastIndexByte(body, '-')
	topic, digits := body[:dash], body[dash+1:]
	switch {
	case topic == "":
		return d, "nothing comes before the last '-', so the topic is empty"
	case digits == "":
		return d, "nothing comes after the last '-', so the partition is empty"
	}
	p, ok := javaParseInt(digits)
	if !ok || p < 0 {
		return d, fmt.Sprintf("%q after the last '-' is not a partition number", digits)
	}
	return Dir{Name: name, Topic: topic, Partition: p, Kind: kind, UUID: uuid}, ""
}

// matchesSuffixed reports whether s followed by a suffix matches Kafka's
// ^(\S+)-(\S+)\.(\S+)<suffix>$ (LocalLog.scala:593-595, used with
// Matcher.matches): no Java whitespace anywhere, a '-' after at least one
// character, then a '.' with at least one character on each side of it. The
// first such '-' leaves the most room for the '.', so it is the one to try.
func matchesSuffixed(s string) bool {
	if strings.ContainsAny(s, javaSpace) {
		return false
	}
	i := strings.IndexByte(s[min(1, len(s)):], '-') + 1
	if i <= 0 || i+2 > len(s)-2 {
		return false
	}
	return strings.IndexByte(s[i+2:len(s)-1], '.') >= 0
}

// javaSpace is what \s matches in a java.util.regex.Pattern compiled without
// UNICODE_CHARACTER_CLASS: [ \t\n\x0B\f\r].
const javaSpace = " \t\n\v\f\r"

// javaParseInt mirrors java.lang.Integer.parseInt(s, 10): an optional '+' or
// '-', then one or more decimal digits in the int32 range. Java reads one UTF-16
// char at a time through Character.digit, which accepts any Unicode decimal
// digit (general category Nd) of the Basic Multilingual Plane; a supplementary
// one is two surrogate chars, neither a digit.
func javaParseInt(s string) (int32, bool) {
	neg := false
	switch {
	case s == "":
		return 0, false
	case s[0] == '-' || s[0] == '+':
		neg = s[0] == '-'
		s = s[1:]
		if s == "" {
			return 0, false
		}
	}
	limit := int64(1<<31 - 1)
	if neg {
		limit++
	}
	var v int64
	for _, r := range s {
		d, ok := decimalDigit(r)
		if !ok {
			return 0, false
		}
		v = v*10 + int64(d)
		if v > limit {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return int32(v), true
}

// decimalDigit is Character.digit(ch, 10) for a char of the Basic Multilingual
// Plane. Unicode encodes decimal digits only in contiguous runs 0..9 (a
// stability policy), so a digit's value is its offset into its run.
func decimalDigit(r rune) (int, bool) {
	if '0' <= r && r <= '9' {
		return int(r - '0'), true
	}
	if r > 0xFFFF || !unicode.IsDigit(r) {
		return 0, false
	}
	for _, rg := range unicode.Nd.R16 {
		if rune(rg.Lo) <= r && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) / int(rg.Stride) % 10, true
		}
	}
	return 0, false
}

// maxTopicLen is Kafka's limit on a topic name (Topic.MAX_NAME_LENGTH, Topic.java:42).
const maxTopicLen = 249

// topicProblem applies Kafka's topic-name rules (Topic.validate): not empty,
// not "." or "..", at most 249 characters of [a-zA-Z0-9._-]. It returns "" for a
// valid name and otherwise why it is not one.
func topicProblem(t string) string {
	switch {
	case t == "":
		return "a topic name cannot be empty"
	case t == "." || t == "..":
		return `"." and ".." are not topic names`
	case len(t) > maxTopicLen:
		return fmt.Sprintf("a topic name has at most %d characters, this one %d", maxTopicLen, len(t))
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("byte %q at %d is not allowed in a topic name (only [a-zA-Z0-9._-])", c, i)
		}
	}
	return ""
}

func isLowerHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
