package kafkazk

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrInvalidTopic is wrapped by every error ValidateTopic returns.
var ErrInvalidTopic = errors.New("invalid topic name")

// MaxTopicLength is Kafka's limit on a topic name (Topic.MAX_NAME_LENGTH).
const MaxTopicLength = 249

// ValidateTopic applies Kafka's own topic-name rules (Topic.validate in
// apache/kafka): not empty, not "." or "..", at most 249 characters, and only
// ASCII letters, digits, '.', '_' and '-'. A name that passes is also a safe
// shell word, a safe ZooKeeper path segment and a safe file-name prefix: it
// has no '/', no whitespace and nothing a shell interprets. Every topic name
// from outside (flags, runbooks, cluster metadata) goes through here before
// it is used in a plan.
func ValidateTopic(name string) error {
	const nothing = "nothing was touched"
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty; %s", ErrInvalidTopic, nothing)
	case name == "." || name == "..":
		return fmt.Errorf("%w %q: \".\" and \"..\" are not allowed as topic names; %s", ErrInvalidTopic, name, nothing)
	case len(name) > MaxTopicLength:
		return fmt.Errorf("%w %q: %d characters long, Kafka allows at most %d; %s",
			ErrInvalidTopic, name, len(name), MaxTopicLength, nothing)
	}
	for i, r := range name {
		if r == utf8.RuneError && !strings.HasPrefix(name[i:], string(utf8.RuneError)) {
			return fmt.Errorf("%w %q: byte %#x at byte %d is not valid UTF-8, Kafka allows only ASCII letters, digits, '.', '_' and '-'; %s",
				ErrInvalidTopic, name, name[i], i, nothing)
		}
		if r >= utf8.RuneSelf || !legalTopicByte(byte(r)) {
			return fmt.Errorf("%w %q: character %q at byte %d is not allowed, Kafka allows only ASCII letters, digits, '.', '_' and '-'; %s",
				ErrInvalidTopic, name, r, i, nothing)
		}
	}
	return nil
}

// IsInternalTopic reports whether name is one of Kafka's internal topics
// (__consumer_offsets, __transaction_state) or any other topic whose name
// starts with "__", which by convention belongs to Kafka or a platform
// component (__cluster_metadata, __confluent.*). Runbooks refuse to repair
// these by the generic path.
func IsInternalTopic(name string) bool {
	return strings.HasPrefix(name, "__")
}

func legalTopicByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// AllTopics is the topics value that names every topic ("*").
const AllTopics = "*"

// ParseTopics reads a list of topics as an operator writes it: topic names,
// comma-separated, or AllTopics; empty is none. Each name passes
// ValidateTopic, and none is named twice.
func ParseTopics(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	if strings.TrimSpace(v) == AllTopics {
		return []string{AllTopics}, nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		t := strings.TrimSpace(f)
		if err := ValidateTopic(t); err != nil {
			return nil, fmt.Errorf("%q is not a list of topic names such as orders,payments (or * for every one): %w", v, err)
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("%q names topic %s twice", v, t)
		}
		out = append(out, t)
	}
	return out, nil
}
