package segments

import (
	"strings"
	"testing"
)

func dir(name string) Entry       { return Entry{Name: name, IsDir: true} }
func dirID(name, id string) Entry { return Entry{Name: name, IsDir: true, TopicID: id} }
func file(name string) Entry      { return Entry{Name: name} }
func names(ms []Match) (out []string) {
	for _, m := range ms {
		out = append(out, m.Dir.Name)
	}
	return out
}
func strayNames(ss []Unparseable) (out []string) {
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// brokerLogDir is one broker's log dir after a stuck deletion of orders, next
// to orders-v2 and a few things an operator left behind.
var brokerLogDir = []Entry{
	file("meta.properties"),
	file(".lock"),
	file(".kafka_cleanshutdown"),
	file("recovery-point-offset-checkpoint"),
	file("log-start-offset-checkpoint"),
	file("replication-offset-checkpoint"),
	file("cleaner-offset-checkpoint.tmp"),
	dir("remote-log-index-cache"),
	dirID("orders-0", idOrders),
	dirID("orders-1", idOrders),
	dirID("orders-12", idOrders),
	dirID("orders-v2-0", idOther),
	dirID("orders-v2-1", idOther),
	dirID("orders-v2-0."+uuid+"-delete", idOther),
	dir("orders-v2-3." + uuid + "-future"),
	dir("orders--1"), // topic "orders-"
	dir("orders.v2-0"),
	dir("orders_v2-0"),
	dir("ordersx-0"),
	dir("xorders-0"),
	dir("Orders-0"),
	dirID("orders-0."+uuid+"-delete", idOrders),
	dir("orders-3." + uuid + "-future"),
	dirID("orders-2."+uuid+"-stray", idOther), // a name says orders: an older incarnation's id does not matter
	dir("orders-0.bak"),
	dir("orders-0-old"),
	dir("lost+found"),
	dir("a b-0"), // Kafka loads it as topic "a b"; not ours, not blocking
	dir("__consumer_offsets-7"),
	file("orders-5"),         // a file named like a partition: Kafka does not look at files
	file("orders-0.bak.tgz"), // nor at backups kept as files
	dir("orders-01"),         // Kafka reads partition 1 of orders
}

func TestSelect(t *testing.T) {
	matches, strays := Select(brokerLogDir, "orders", []string{idOrders})
	wantMatches := []string{
		"orders-0", "orders-1", "orders-12",
		"orders-0." + uuid + "-delete", "orders-3." + uuid + "-future", "orders-2." + uuid + "-stray",
		"orders-01",
	}
	if got := names(matches); strings.Join(got, " ") != strings.Join(wantMatches, " ") {
		t.Errorf("matches:\n got %q\nwant %q", got, wantMatches)
	}
	for _, m := range matches {
		if m.Reason != "name" || m.Dir.Topic != "orders" {
			t.Errorf("match %s: topic %q reason %q, want orders by name", m.Dir.Name, m.Dir.Topic, m.Reason)
		}
	}
	wantStrays := []string{"orders-0.bak", "orders-0-old", "lost+found"}
	if got := strayNames(strays); strings.Join(got, " ") != strings.Join(wantStrays, " ") {
		t.Errorf("strays:\n got %q\nwant %q", got, wantStrays)
	}
	for _, s := range strays {
		for _, want := range []string{"refuses to start", "not moved", "log.dirs"} {
			if !strings.Contains(s.Why, want) {
				t.Errorf("stray %s: Why %q does not say %q", s.Name, s.Why, want)
			}
		}
	}
	if !strings.Contains(strays[0].Why, `"0.bak" after the last '-' is not a partition number`) {
		t.Errorf("stray orders-0.bak: Why %q does not say what is wrong", strays[0].Why)
	}

	// The other topics get exactly their own directories.
	for topic, want := range map[string][]string{
		"orders-v2": {"orders-v2-0", "orders-v2-1", "orders-v2-0." + uuid + "-delete", "orders-v2-3." + uuid + "-future"},
		"orders-":   {"orders--1"},
		"orders.v2": {"orders.v2-0"},
		"Orders":    {"Orders-0"},
		"order":     nil,
		"a b":       nil, // not a valid topic: nothing matches
		"":          nil,
	} {
		m, s := Select(brokerLogDir, topic, nil)
		if got := names(m); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Select(%q):\n got %q\nwant %q", topic, got, want)
		}
		if len(s) != len(wantStrays) {
			t.Errorf("Select(%q): %d strays, want %d whatever the topic", topic, len(s), len(wantStrays))
		}
	}
}

func TestSelectNeverMatchesOtherTopics(t *testing.T) {
	others := []string{
		"orders-v2-0", "orders-v2-12", "orders-v2-0." + uuid + "-delete", "orders-v2-0." + uuid + "-future",
		"orders-v2-0." + uuid + "-stray", "orders--0", "orders--0." + uuid + "-delete", "orders-0-0", "orders-0.1-2",
		"orders0-0", "orders.-0", "order-0", "rders-0", "orders-x-0", "orders-0." + uuid + "-delete-1",
		"orders-0." + uuid + "-stray-0", "orders-+1-0",
	}
	for _, name := range others {
		m, _ := Select([]Entry{dirID(name, idOrders)}, "orders", []string{idOrders})
		if len(m) != 0 {
			t.Errorf("Select(orders) matched %q (%s)", name, m[0].Reason)
		}
	}
}

func TestSelectTruncatedNames(t *testing.T) {
	long := "t" + strings.Repeat("x", 239) // 240 characters: every -delete/-stray name of it is cut
	exact := long[:213]                    // its -delete name for partition 0 fills 255 bytes without a cut
	sibling := exact + "yyy"               // cut to the same 213 characters
	cutDelete := cappedName(long, 0, "-delete")
	cutStray := cappedName(long, 12, "-stray")
	future := exact + "-0." + uuid + "-future" // 255 bytes, but -future names are never cut

	if cutDelete != cappedName(exact, 0, "-delete") || cutDelete != cappedName(sibling, 0, "-delete") {
		t.Fatal("test set-up: the three topics should share one cut -delete name")
	}
	byID := "topic id " + idLong + " (name truncated)"
	tests := []struct {
		name     string
		entry    Entry
		topic    string
		topicIDs []string
		reason   string // "" means no match
	}{
		{"cut name, id matches", dirID(cutDelete, idLong), long, []string{idOther, idLong}, byID},
		{"cut stray name, id matches", dirID(cutStray, idLong), long, []string{idLong}, byID},
		{"cut name, padded id", dirID(cutDelete, idLong+"=="), long, []string{idLong}, byID},
		{"cut name, no partition.metadata", dir(cutDelete), long, []string{idLong}, ""},
		{"cut name, other id", dirID(cutDelete, idOther), long, []string{idLong}, ""},
		{"cut name, no ids given", dirID(cutDelete, idLong), long, nil, ""},
		{"cut name, empty id given", dir(cutDelete), long, []string{""}, ""},
		{"cut name, sibling's id", dirID(cutDelete, idOther), sibling, []string{idLong}, ""},
		{"cut name is not the sibling's by prefix", dirID(cutDelete, idLong), sibling, []string{idOther}, ""},
		{"future names are never cut", dirID(future, idLong), long, []string{idLong}, ""},

		// The topic part equals the whole topic: the name decides unless a known id says otherwise.
		{"exact fit, its id", dirID(cutDelete, idExact), exact, []string{idExact}, "name"},
		{"exact fit, no partition.metadata", dir(cutDelete), exact, []string{idExact}, "name"},
		{"exact fit, no ids given", dirID(cutDelete, idLong), exact, nil, "name"},
		{"exact fit, a longer topic's id", dirID(cutDelete, idLong), exact, []string{idExact}, ""},
		{"exact fit, unreadable id counts as none", dirID(cutDelete, "garbage"), exact, []string{idExact}, "name"},
		{"not 255 bytes: the name decides", dirID(exact[:200]+"-0."+uuid+"-delete", idOther), exact[:200], []string{idExact}, "name"},
		{"live dir of the long topic", dirID(long+"-0", idOther), long, []string{idLong}, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.entry.Name) > maxNameLen {
				t.Fatalf("test set-up: %d-byte name", len(tt.entry.Name))
			}
			m, s := Select([]Entry{tt.entry}, tt.topic, tt.topicIDs)
			if len(s) != 0 {
				t.Fatalf("strays %+v", s)
			}
			switch {
			case tt.reason == "" && len(m) != 0:
				t.Fatalf("matched %q (%s), want no match", tt.entry.Name, m[0].Reason)
			case tt.reason != "" && len(m) != 1:
				t.Fatalf("no match, want one by %q", tt.reason)
			case tt.reason != "" && m[0].Reason != tt.reason:
				t.Fatalf("reason %q, want %q", m[0].Reason, tt.reason)
			}
		})
	}
}

func TestSelectReportsUnusualNames(t *testing.T) {
	entries := []Entry{dir("caf\xe9-0"), dir("orders-0.\xff-delete"), dir("meta.properties"), dir(".lock"), file("\xff")}
	m, s := Select(entries, "orders", nil)
	if len(m) != 0 {
		t.Errorf("matches %+v, want none", m)
	}
	want := []string{"caf\xe9-0", "orders-0.\xff-delete", "meta.properties", ".lock"}
	if got := strayNames(s); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("strays %q, want %q", got, want)
	}
	if !strings.Contains(s[0].Why, "not valid UTF-8") || !strings.Contains(s[0].Why, "not moved") {
		t.Errorf("Why %q", s[0].Why)
	}
	if !strings.Contains(s[2].Why, "refuses to start") {
		t.Errorf("a directory named meta.properties: Why %q", s[2].Why)
	}
}
