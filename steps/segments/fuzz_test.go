package segments

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func FuzzParseDir(f *testing.F) {
	long := "t" + strings.Repeat("x", 239)
	for _, seed := range []string{
		"orders-0", "orders-12", "orders-v2-0", "my-topic-with-dashes-3", "a.b_c-1", "__consumer_offsets-49",
		"orders-0." + uuid + "-delete", "orders-0." + uuid + "-future", "orders-0." + uuid + "-stray",
		"orders-0." + strings.ToUpper(uuid) + "-delete", "orders-0.bak-delete", "a-b.c-1.-delete",
		cappedName(long, 0, "-delete"), cappedName(long, 99, "-stray"),
		"orders-0.bak", "orders-0-old", "orders--1", "orders-+1", "orders-01", "orders-٣", "orders-１２", "orders-𝟏",
		"-0", "orders-", "orders-2147483647", "orders-2147483648", "orders", "lost+found", "",
		"orders-delete", "orders-0.-delete", "orders-0.a b-stray", "a b-0", ".-0", "caf\xe9-0", "orders-0.\xff-delete", "x/y-0",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		d, err := ParseDir(name)
		_, why := parseKafka(name)
		entries := []Entry{{Name: name, IsDir: true}}
		if err != nil {
			if !errors.Is(err, ErrNotPartitionDir) {
				t.Fatalf("ParseDir(%q): error %v does not wrap ErrNotPartitionDir", name, err)
			}
			if errors.Is(err, ErrBlocksStartup) && why == "" {
				t.Fatalf("ParseDir(%q): %v, but Kafka parses it", name, err)
			}
			if why != "" && !strings.ContainsAny(name, "/\x00") && name != RemoteIndexCacheDir {
				if _, s := Select(entries, "orders", nil); len(s) != 1 {
					t.Fatalf("Select does not report %q, which Kafka cannot parse", name)
				}
			}
			return
		}
		if why != "" {
			t.Fatalf("ParseDir(%q) = %+v, but Kafka cannot parse it: %s", name, d, why)
		}
		if d.Name != name {
			t.Fatalf("ParseDir(%q).Name = %q", name, d.Name)
		}
		if p := topicProblem(d.Topic); p != "" {
			t.Fatalf("ParseDir(%q) topic %q is not a valid topic: %s", name, d.Topic, p)
		}
		if d.Partition < 0 || (d.Kind == Live) != (d.UUID == "" && !strings.HasSuffix(name, "-delete") &&
			!strings.HasSuffix(name, "-future") && !strings.HasSuffix(name, "-stray")) {
			t.Fatalf("ParseDir(%q) = %+v", name, d)
		}

		// Formatting the Dir back gives the name, except for how the partition
		// is spelled ("01", "+1", "٣"), which Kafka reads loosely.
		back := d.canonicalName()
		if back != name {
			head, tail := d.Topic+"-", ""
			if d.Kind != Live {
				tail = "." + d.UUID + d.Kind.suffix()
			}
			if !strings.HasPrefix(name, head) || !strings.HasSuffix(name, tail) || len(name) < len(head)+len(tail) {
				t.Fatalf("ParseDir(%q) = %+v, which formats as %q", name, d, back)
			}
			digits := name[len(head) : len(name)-len(tail)]
			if p, ok := javaParseInt(digits); !ok || p != d.Partition || digits == strconv.Itoa(int(p)) {
				t.Fatalf("ParseDir(%q) = %+v, which formats as %q", name, d, back)
			}
		}
		d2, err := ParseDir(back)
		if err != nil {
			t.Fatalf("ParseDir(%q) = %+v, but its formatted name %q does not parse: %v", name, d, back, err)
		}
		d2.Name = name
		if d2 != d {
			t.Fatalf("ParseDir(%q) = %+v, but its formatted name %q parses as %+v", name, d, back, d2)
		}

		// Select claims it for its own topic, by name, and for no other.
		m, s := Select(entries, d.Topic, nil)
		if len(s) != 0 || len(m) != 1 || m[0].Dir != d || m[0].Reason != "name" {
			t.Fatalf("Select(%q, %q) = %+v, %+v", name, d.Topic, m, s)
		}
		if m, _ := Select(entries, d.Topic+"x", []string{idOrders}); len(m) != 0 {
			t.Fatalf("Select(%q, %q) = %+v", name, d.Topic+"x", m)
		}
		if len(d.Topic) > 1 {
			if m, _ := Select(entries, d.Topic[:len(d.Topic)-1], []string{idOrders}); len(m) != 0 {
				t.Fatalf("Select(%q, %q) = %+v", name, d.Topic[:len(d.Topic)-1], m)
			}
		}
	})
}

func FuzzParsePartitionMetadata(f *testing.F) {
	for _, seed := range []string{
		"version: 0\ntopic_id: " + idOrders,
		"version: 0\ntopic_id: " + idOrders + "\n",
		"version: 0\r\ntopic_id: " + idOrders + "\r\n",
		"version: 0\rtopic_id: " + idOrders,
		"version: 0\ntopic_id: " + idOrders + "\nextra: line\n",
		"version: 1\ntopic_id: " + idOrders + "==",
		"version: 0\ntopic_id: " + idOrders[:21] + "B",
		"version:\t+0\ntopic_id:\v" + idOrders,
		"", "\n", "version: 0\n", "topic_id: " + idOrders, "version: -1\ntopic_id: " + idOrders,
		"version: 0\ntopic_id: " + idOrders[:21], "version: 0\ntopic_id: " + idOrders + "A",
		"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "version: 0\ntopic_id: " + uuid,
		"version: 0: \ntopic_id: : " + idOrders, "version: 2147483648\ntopic_id: " + idOrders,
		"version: 0\ntopic_id: " + idOrders + "\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pm, err := ParsePartitionMetadata(b)
		if err != nil {
			if !errors.Is(err, ErrBadPartitionMetadata) {
				t.Fatalf("ParsePartitionMetadata(%q): error %v does not wrap ErrBadPartitionMetadata", b, err)
			}
			return
		}
		if pm.Version < 0 || len(pm.TopicID) != 22 {
			t.Fatalf("ParsePartitionMetadata(%q) = %+v", b, pm)
		}
		if c, err := canonicalTopicID(pm.TopicID); err != nil || c != pm.TopicID {
			t.Fatalf("ParsePartitionMetadata(%q) = %+v: id not canonical (%q, %v)", b, pm, c, err)
		}
		// What Kafka would write for it reads back the same.
		again, err := ParsePartitionMetadata([]byte("version: " + strconv.Itoa(pm.Version) + "\ntopic_id: " + pm.TopicID))
		if err != nil || again != pm {
			t.Fatalf("ParsePartitionMetadata(%q) = %+v, but re-encoded it reads %+v, %v", b, pm, again, err)
		}
	})
}
