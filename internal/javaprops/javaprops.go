// Package javaprops reads .properties files exactly as Java's
// java.util.Properties.load(InputStream) does, which is how Kafka's tools
// and clients read client.properties and server.properties
// (org.apache.kafka.common.utils.Utils.loadProps): bytes are ISO-8859-1;
// lines end at \n, \r or \r\n; a line whose first non-blank character is
// # or ! is a comment; an odd number of trailing backslashes continues the
// line onto the next, whose leading blanks are dropped (at the end of the
// file the dangling backslash is dropped and the line kept); the key ends
// at the first unescaped '=', ':' or blank, and one '=' or ':' after blanks
// belongs to the separator; the value keeps its trailing blanks; \t \n \r
// \f and \uXXXX are escapes and any other backslash is dropped. A malformed
// \uXXXX is an error (Java throws), reported with its line and column.
package javaprops

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Error is a .properties text Java would refuse, with the line and column
// (1-based, in characters) where it went wrong.
type Error struct {
	Line, Col int
	Msg       string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg) }

// Properties is what a file set: the values and the line each key was
// last set on (later lines win, as in Java).
type Properties struct {
	Values map[string]string
	Lines  map[string]int
}

// Get returns the value of key and whether the file set it.
func (p Properties) Get(key string) (string, bool) {
	v, ok := p.Values[key]
	return v, ok
}

// logical is one logical line: its characters and, for each, the line and
// column it came from (for errors).
type logical struct {
	text []rune
	pos  [][2]int
}

func isBlank(r rune) bool { return r == ' ' || r == '\t' || r == '\f' }

// Parse reads data as java.util.Properties.load(InputStream) does.
func Parse(data []byte) (Properties, error) { return parse(latin1(data)) }

// ParseUTF8 reads data as Properties.load(Reader) over a UTF-8 reader does
// (Kafka's FileConfigProvider); bytes that are not UTF-8 are an error, as
// Java's decoder throws.
func ParseUTF8(data []byte) (Properties, error) {
	if !utf8.Valid(data) {
		line := 1 + bytes.Count(data[:invalidAt(data)], []byte("\n"))
		return Properties{}, &Error{Line: line, Col: 1, Msg: "not UTF-8"}
	}
	return parse([]rune(string(data)))
}

func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func parse(text []rune) (Properties, error) {
	p := Properties{Values: map[string]string{}, Lines: map[string]int{}}
	for _, l := range logicalLines(text) {
		k, v, err := split(l)
		if err != nil {
			return Properties{}, err
		}
		p.Values[k] = v
		p.Lines[k] = l.pos[0][0]
	}
	return p, nil
}

// latin1 decodes ISO-8859-1: each byte is the code point of its value.
func latin1(b []byte) []rune {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return r
}

// naturalLines splits on \n, \r and \r\n, keeping each line's number.
func naturalLines(in []rune) [][]rune {
	var out [][]rune
	start := 0
	for i := 0; i < len(in); i++ {
		if in[i] != '\n' && in[i] != '\r' {
			continue
		}
		out = append(out, in[start:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		start = i + 1
	}
	if start < len(in) {
		out = append(out, in[start:])
	}
	return out
}

// continues reports whether line ends in an odd number of backslashes.
func continues(line []rune) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func logicalLines(in []rune) []logical {
	var out []logical
	var cur *logical
	for n, line := range naturalLines(in) {
		col := 0
		for col < len(line) && isBlank(line[col]) {
			col++
		}
		rest := line[col:]
		if cur == nil {
			if len(rest) == 0 || rest[0] == '#' || rest[0] == '!' {
				continue
			}
			cur = &logical{}
		}
		more := continues(rest)
		if more {
			rest = rest[:len(rest)-1]
		}
		for i, r := range rest {
			cur.text = append(cur.text, r)
			cur.pos = append(cur.pos, [2]int{n + 1, col + i + 1})
		}
		if !more {
			if len(cur.text) > 0 {
				out = append(out, *cur)
			}
			cur = nil
		}
	}
	if cur != nil && len(cur.text) > 0 {
		out = append(out, *cur)
	}
	return out
}

// split finds the key's end and the value's start as Java's load0 does,
// then unescapes both.
func split(l logical) (key, value string, err error) {
	t := l.text
	keyLen, valStart := 0, len(t)
	hasSep, backslash := false, false
	for keyLen < len(t) {
		c := t[keyLen]
		if (c == '=' || c == ':') && !backslash {
			valStart, hasSep = keyLen+1, true
			break
		}
		if isBlank(c) && !backslash {
			valStart = keyLen + 1
			break
		}
		backslash = c == '\\' && !backslash
		keyLen++
	}
	for valStart < len(t) {
		c := t[valStart]
		if !isBlank(c) {
			if !hasSep && (c == '=' || c == ':') {
				hasSep = true
			} else {
				break
			}
		}
		valStart++
	}
	if key, err = unescape(t[:keyLen], l.pos[:keyLen]); err != nil {
		return "", "", err
	}
	if value, err = unescape(t[valStart:], l.pos[valStart:]); err != nil {
		return "", "", err
	}
	return key, value, nil
}

func unescape(t []rune, pos [][2]int) (string, error) {
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c != '\\' || i+1 >= len(t) {
			b.WriteRune(c)
			continue
		}
		i++
		switch c = t[i]; c {
		case 't':
			b.WriteRune('\t')
		case 'n':
			b.WriteRune('\n')
		case 'r':
			b.WriteRune('\r')
		case 'f':
			b.WriteRune('\f')
		case 'u':
			if i+4 >= len(t) {
				return "", &Error{Line: pos[i-1][0], Col: pos[i-1][1], Msg: `malformed \uxxxx encoding (fewer than four hex digits)`}
			}
			v := rune(0)
			for _, h := range t[i+1 : i+5] {
				d, ok := hexDigit(h)
				if !ok {
					return "", &Error{Line: pos[i-1][0], Col: pos[i-1][1], Msg: `malformed \uxxxx encoding`}
				}
				v = v<<4 | d
			}
			i += 4
			// A surrogate pair, as Java's String joins it into one
			// character.
			if v >= 0xD800 && v < 0xDC00 && i+6 < len(t) && t[i+1] == '\\' && t[i+2] == 'u' {
				lo := rune(0)
				ok := true
				for _, h := range t[i+3 : i+7] {
					d, isHex := hexDigit(h)
					ok = ok && isHex
					lo = lo<<4 | d
				}
				if ok && lo >= 0xDC00 && lo < 0xE000 {
					v = 0x10000 + (v-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			b.WriteRune(v)
		default:
			b.WriteRune(c)
		}
	}
	return b.String(), nil
}

func hexDigit(r rune) (rune, bool) {
	switch {
	case r >= '0' && r <= '9':
		return r - '0', true
	case r >= 'a' && r <= 'f':
		return r - 'a' + 10, true
	case r >= 'A' && r <= 'F':
		return r - 'A' + 10, true
	}
	return 0, false
}

// EscapeValue writes s as the value of a `key=value` line that Parse (and
// Java's load) reads back as s: backslashes, line ends, tabs and form feeds
// escaped, a leading blank escaped (load drops leading blanks), and every
// character outside printable ASCII as \uXXXX (the file is ISO-8859-1;
// Java's own store does the same). What Parse reads back is s.
func EscapeValue(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\f':
			b.WriteString(`\f`)
		case i == 0 && (r == ' ' || r == '=' || r == ':'):
			b.WriteString(`\` + string(r))
		case r < 0x20 || r > 0x7e:
			for _, u := range utf16Units(r) {
				fmt.Fprintf(&b, `\u%04X`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// utf16Units is r in UTF-16 code units, as Java's char holds it.
func utf16Units(r rune) []rune {
	if r < 0x10000 {
		return []rune{r}
	}
	r -= 0x10000
	return []rune{0xD800 + r>>10, 0xDC00 + r&0x3FF}
}
