package segments

import (
	"errors"
	"strings"
	"testing"
)

// Topic IDs as Kafka prints them (Uuid.toString: 22 characters of base64url).
const (
	idOrders = "r2cQ6QF8TFWIy3Mh9DQdwA"
	idOther  = "Hpkv2Zl0QwqV3dyoYxXsYg"
	idLong   = "mN7lU4xWQ0yPdW1Lr9S3kQ"
	idExact  = "0Zk8tV2eRmKq6bX1yW3cJw"
)

func TestParsePartitionMetadata(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want PartitionMetadata
		err  string
	}{
		{name: "as Kafka writes it", in: "version: 0\ntopic_id: " + idOrders, want: PartitionMetadata{0, idOrders}},
		{name: "final newline", in: "version: 0\ntopic_id: " + idOrders + "\n", want: PartitionMetadata{0, idOrders}},
		{name: "CRLF", in: "version: 0\r\ntopic_id: " + idOrders + "\r\n", want: PartitionMetadata{0, idOrders}},
		{name: "CR", in: "version: 0\rtopic_id: " + idOrders, want: PartitionMetadata{0, idOrders}},
		{name: "extra lines are ignored, as by Kafka", in: "version: 0\ntopic_id: " + idOrders + "\ntopic_id: " + idOther + "\ngarbage\n",
			want: PartitionMetadata{0, idOrders}},
		{name: "tab and spaces after the colon", in: "version:\t 0\ntopic_id:   " + idOrders, want: PartitionMetadata{0, idOrders}},
		{name: "later version is accepted for downgrades", in: "version: 1\ntopic_id: " + idOrders, want: PartitionMetadata{1, idOrders}},
		{name: "padded id", in: "version: 0\ntopic_id: " + idOrders + "==", want: PartitionMetadata{0, idOrders}},
		{name: "unused low bits are ignored and the id re-encoded", in: "version: 0\ntopic_id: " + idOrders[:21] + "B",
			want: PartitionMetadata{0, idOrders}},

		{name: "empty", in: "", err: "the file is empty"},
		{name: "missing version line", in: "topic_id: " + idOrders + "\n", err: `"` + idOrders + `" is not a number`},
		{name: "missing version number", in: "version: \ntopic_id: " + idOrders, err: "malformed version line"},
		{name: "no space after colon", in: "version:0\ntopic_id: " + idOrders, err: "malformed version line"},
		{name: "negative version", in: "version: -1\ntopic_id: " + idOrders, err: "unrecognized version -1"},
		{name: "no topic_id line", in: "version: 0\n", err: "no topic_id line"},
		{name: "blank topic_id line", in: "version: 0\n\ntopic_id: " + idOrders, err: "malformed topic_id line"},
		{name: "id too short", in: "version: 0\ntopic_id: " + idOrders[:21], err: "not base64url"},
		{name: "id one character too long", in: "version: 0\ntopic_id: " + idOrders + "A", err: "decodes to 17 bytes"},
		{name: "id far too long", in: "version: 0\ntopic_id: " + idOrders + "AAAAAAAA", err: "too long"},
		{name: "hex uuid is not a topic id", in: "version: 0\ntopic_id: " + uuid, err: "too long"},
		{name: "standard base64 alphabet", in: "version: 0\ntopic_id: +" + idOrders[1:], err: "not base64url"},
		{name: "zero uuid", in: "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", err: "zero Uuid"},
		{name: "trailing text on the id", in: "version: 0\ntopic_id: " + idOrders + " x", err: "not base64url"},
		{name: "not UTF-8", in: "version: 0\ntopic_id: " + idOrders + "\n\xff", err: "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePartitionMetadata([]byte(tt.in))
			if tt.err == "" {
				if err != nil {
					t.Fatalf("ParsePartitionMetadata(%q): %v", tt.in, err)
				}
				if got != tt.want {
					t.Fatalf("ParsePartitionMetadata(%q) = %+v, want %+v", tt.in, got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParsePartitionMetadata(%q) = %+v, want an error about %s", tt.in, got, tt.err)
			}
			if !errors.Is(err, ErrBadPartitionMetadata) {
				t.Errorf("error %v does not wrap ErrBadPartitionMetadata", err)
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %q does not say %q", err, tt.err)
			}
		})
	}
}

func TestTestIDsAreCanonical(t *testing.T) {
	for _, id := range []string{idOrders, idOther, idLong, idExact} {
		if c, err := canonicalTopicID(id); err != nil || c != id {
			t.Errorf("test id %q: canonical %q, %v", id, c, err)
		}
	}
}

func TestSplitColonSpace(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"version: 0", []string{"version", "0"}},
		{"a: b: c", []string{"a", "b", "c"}},
		{": 0", []string{"", "0"}},                 // Java keeps a leading empty field
		{"version: 0: ", []string{"version", "0"}}, // and drops trailing ones
		{": ", nil},
		{"a:b", []string{"a:b"}},
		{"", []string{""}},
		{"a:\x0bb", []string{"a", "b"}}, // \x0B is whitespace to java.util.regex
	}
	for _, tt := range tests {
		got := splitColonSpace(tt.in)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("splitColonSpace(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
