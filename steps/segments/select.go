package segments

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Entry is one name in a log dir listing, with the topic id read from its
// partition.metadata (ParsePartitionMetadata) when available ("" if none).
type Entry struct {
	Name    string
	IsDir   bool // a directory or a symbolic link to one: Java's File.isDirectory follows links
	TopicID string
}

// Match is a directory whose data must be quarantined, and why it was chosen.
type Match struct {
	Dir    Dir
	Reason string // "name", or "topic id <id> (name truncated)"
}

// Unparseable is a directory in a log dir that a broker may be unable to
// load. It is to be reported, never moved: it is not known to hold the topic's
// data. (The brief called it Stray, which is taken by the Kind of Kafka's own
// "-stray" directories, a different thing.)
type Unparseable struct {
	Name string
	Why  string // what is wrong, what was not done and what to do next
}

// Select returns exactly the directories of topic whose data must be
// quarantined, in the order of entries: the live, -delete, -future and -stray
// forms whose topic, as Kafka parses the name (see ParseDir), equals topic.
// That includes names Kafka reads loosely, such as "orders-01" or
// "orders-+1" (partition 1 of orders, which the broker would load or report
// as a duplicate), and never "orders-v2-0" or "orders--1" for topic orders.
//
// Kafka cuts the topic part of -delete and -stray names so that the whole fits
// 255 bytes (LocalLog.logDirNameWithSuffixCappedLength, LocalLog.scala:632-636;
// -future names are never cut). For such a name (Dir.MaybeTruncated) whose
// topic part is only a prefix of topic, the prefix proves nothing: it matches
// only when the entry's TopicID is one of topicIDs. When the topic part equals
// topic in full, the name may still be a longer topic's cut to the same
// length; then it matches unless its TopicID is known, topicIDs is not empty,
// and TopicID is not among them. Topic IDs are compared as Kafka compares
// them (the Uuid they decode to); empty or unreadable ones never match.
//
// It also returns, separately, the directories Kafka cannot parse, which stop
// a broker at start-up (ParseDir errors wrapping ErrBlocksStartup, such as
// "orders-0.bak" or "lost+found"), and those whose names are not valid UTF-8,
// so the caller can report them. Files (IsDir false), RemoteIndexCacheDir,
// directories of other topics, and directories Kafka loads as logs of an
// impossible topic name (such as "a b-0") are ignored. When topic is not a
// valid topic name nothing matches; strays are still returned.
func Select(entries []Entry, topic string, topicIDs []string) (matches []Match, strays []Unparseable) {
	ids := make(map[string]bool, len(topicIDs))
	for _, id := range topicIDs {
		if c, err := canonicalTopicID(id); err == nil {
			ids[c] = true
		}
	}
	topicOK := topicProblem(topic) == ""
	for _, e := range entries {
		if !e.IsDir || e.Name == RemoteIndexCacheDir {
			continue // LogManager.loadLogs only parses directories, and skips this one (LogManager.scala:465-470)
		}
		d, why := parseEntry(e.Name)
		if why != "" {
			strays = append(strays, Unparseable{Name: e.Name, Why: why})
			continue
		}
		if !topicOK {
			continue
		}
		id, err := canonicalTopicID(e.TopicID)
		if err != nil {
			id = ""
		}
		cut := d.MaybeTruncated()
		switch {
		case d.Topic == topic:
			if cut && id != "" && len(ids) > 0 && !ids[id] {
				continue // may be a longer topic's name, cut to this topic's length
			}
			matches = append(matches, Match{Dir: d, Reason: "name"})
		case cut && len(d.Topic) < len(topic) && strings.HasPrefix(topic, d.Topic) && id != "" && ids[id]:
			matches = append(matches, Match{Dir: d, Reason: fmt.Sprintf("topic id %s (name truncated)", id)})
		}
	}
	return matches, strays
}

// parseEntry parses a directory name as Kafka does. why is "" when Kafka can
// load it, and otherwise the Why of an Unparseable.
func parseEntry(name string) (Dir, string) {
	const notMoved = "It was not moved; move it out of every log.dirs entry (or delete it) before the broker starts."
	if i := strings.IndexAny(name, "/\x00"); i >= 0 {
		return Dir{}, fmt.Sprintf("%q at byte %d: this is not a file name, so the listing that produced it is wrong. %s", name[i], i, "Nothing was moved; check how the log dir was listed.")
	}
	if !utf8.ValidString(name) {
		return Dir{}, notUTF8(name) + ". " + notMoved
	}
	d, why := parseKafka(name)
	if why != "" {
		return Dir{}, fmt.Sprintf("%s: %v (LocalLog.parseTopicPartitionName). %s", why, ErrBlocksStartup, notMoved)
	}
	return d, ""
}
