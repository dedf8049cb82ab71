package kafkazk

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestValidateTopic(t *testing.T) {
	tests := []struct {
		name  string
		topic string
		rule  string // substring of the error; "" means valid
	}{
		{"simple", "orders", ""},
		{"all legal chars", "Orders.v2_eu-1", ""},
		{"dots inside", "a..b", ""},
		{"leading dot", ".orders", ""},
		{"internal is still valid", "__consumer_offsets", ""},
		{"249 chars", strings.Repeat("a", 249), ""},
		{"empty", "", "empty"},
		{"dot", ".", `"." and ".." are not allowed`},
		{"dotdot", "..", `"." and ".." are not allowed`},
		{"250 chars", strings.Repeat("a", 250), "250 characters long"},
		{"path traversal", "../../etc", `character '/'`},
		{"slash", "orders/0", `character '/'`},
		{"shell command", "a;rm -rf /", `character ';'`},
		{"command substitution", "$(id)", `character '$'`},
		{"backticks", "`id`", "character '`'"},
		{"newline", "orders\nother", `character '\n'`},
		{"NUL", "orders\x00", `character '\x00'`},
		{"space", "orders topic", `character ' '`},
		{"tab", "\torders", `character '\t'`},
		{"glob", "orders-*", `character '*'`},
		{"quote", "it's", `character '\''`},
		{"unicode", "ördérs", `character 'ö'`},
		{"bidi override", "orders\u202e", `character '\u202e'`},
		{"unicode lookalike dash", "orders‐v2", `character '‐'`},
		{"invalid utf-8", "orders\xff", "byte 0xff at byte 6 is not valid UTF-8"},
		{"250 hostile chars", strings.Repeat(";", 250), "250 characters long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateTopic(tt.topic)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("ValidateTopic(%q) = %v, want nil", tt.topic, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateTopic(%q) = nil, want an error about %s", tt.topic, tt.rule)
			}
			if !errors.Is(err, ErrInvalidTopic) {
				t.Errorf("error %v does not wrap ErrInvalidTopic", err)
			}
			msg := err.Error()
			for _, want := range []string{tt.rule, "nothing was touched"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
			if tt.topic != "" && !strings.Contains(msg, strconv.Quote(tt.topic)) {
				t.Errorf("error %q does not quote the name as %s", msg, strconv.Quote(tt.topic))
			}
			if strings.ContainsAny(msg, "\n\x00") {
				t.Errorf("error %q carries a raw control character from the name", msg)
			}
		})
	}
}

func TestIsInternalTopic(t *testing.T) {
	tests := []struct {
		topic string
		want  bool
	}{
		{"__consumer_offsets", true},
		{"__transaction_state", true},
		{"__cluster_metadata", true},
		{"__confluent.support.metrics", true},
		{"__", true},
		{"_schemas", false},
		{"orders", false},
		{"orders__x", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsInternalTopic(tt.topic); got != tt.want {
			t.Errorf("IsInternalTopic(%q) = %v, want %v", tt.topic, got, tt.want)
		}
	}
}

func FuzzValidateTopic(f *testing.F) {
	for _, s := range []string{
		"orders", "__consumer_offsets", ".", "..", "", "../../etc", "a;rm -rf /", "$(id)",
		"orders\nx", "orders\x00", "ördérs", strings.Repeat("a", 249), strings.Repeat("a", 250),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateTopic(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidTopic) {
				t.Fatalf("error %v does not wrap ErrInvalidTopic", err)
			}
			return
		}
		if name == "" || name == "." || name == ".." || len(name) > MaxTopicLength {
			t.Fatalf("ValidateTopic(%q) accepted a name Kafka rejects", name)
		}
		for i := 0; i < len(name); i++ {
			c := name[i]
			safe := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
			if !safe {
				t.Fatalf("ValidateTopic(%q) accepted byte %#x", name, c)
			}
		}
		if strings.Contains(name, "/") {
			t.Fatalf("ValidateTopic(%q) accepted a path separator", name)
		}
	})
}
