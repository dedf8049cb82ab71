package journal

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
)

// minSecretLen is the shortest secret Redact accepts; shorter ones would
// blank out ordinary words.
const minSecretLen = 4

// RedactedText replaces a secret in a redacted record.
const RedactedText = "[redacted]"

const redactedText = RedactedText

// Redact makes every later Append replace each secret (ignoring those shorter
// than 4 bytes) with "[redacted]" in the record's Step and Data, before the
// line reaches the disk. Data is redacted value by value, so a secret is
// found however JSON escapes it (quotes, backslashes, <, >, &, \u sequences)
// and the line stays valid JSON; a number that contains a secret becomes the
// string "[redacted]". Records already written are not changed.
func (j *Journal) Redact(secrets ...string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range secrets {
		if len(s) >= minSecretLen && !slices.Contains(j.secrets, s) {
			j.secrets = append(j.secrets, s)
		}
	}
	slices.SortStableFunc(j.secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	j.redacted = len(j.secrets) > 0
}

// RedactText is s with every secret registered by Redact replaced, as
// Append would write it: for the run's other sinks (the --output jsonl
// stream, webhooks), which must not carry what the journal hides.
func (j *Journal) RedactText(s string) string {
	j.mu.Lock()
	secrets := j.secrets
	j.mu.Unlock()
	if len(secrets) == 0 {
		return s
	}
	return redactString(s, secrets)
}

// redactString replaces every stretch of s covered by an occurrence of any
// secret with one "[redacted]". Overlapping occurrences, of one secret or of
// several, merge, so no part of a secret survives.
func redactString(s string, secrets []string) string {
	var cover []bool
	for _, sec := range secrets {
		for i := 0; ; {
			k := strings.Index(s[i:], sec)
			if k < 0 {
				break
			}
			if cover == nil {
				cover = make([]bool, len(s))
			}
			for p := i + k; p < i+k+len(sec); p++ {
				cover[p] = true
			}
			i += k + 1
		}
	}
	if cover == nil {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case !cover[i]:
			b.WriteByte(s[i])
		case i == 0 || !cover[i-1]:
			b.WriteString(redactedText)
		}
	}
	return b.String()
}

// redactJSON re-encodes one JSON value token by token, keeping key order and
// number text, with every string and object key passed through redactString
// and every number that contains a secret replaced by the string
// "[redacted]".
func redactJSON(data []byte, secrets []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	out := make([]byte, 0, len(data))
	type frame struct {
		obj bool
		n   int // tokens seen inside: keys and values alike for objects
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			out = append(out, byte(d))
			continue
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			switch {
			case top.obj && top.n%2 == 1:
				out = append(out, ':')
			case top.n > 0:
				out = append(out, ',')
			}
			top.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out = append(out, byte(v))
			stack = append(stack, frame{obj: v == '{'})
		case string:
			b, err := json.Marshal(redactString(v, secrets))
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		case json.Number:
			if redactString(string(v), secrets) != string(v) {
				out = strconv.AppendQuote(out, redactedText)
			} else {
				out = append(out, v...)
			}
		case bool:
			out = strconv.AppendBool(out, v)
		case nil:
			out = append(out, "null"...)
		}
	}
}
