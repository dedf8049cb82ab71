package segments

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

// uuid is a -delete/-future/-stray id as Kafka writes it
// (UUID.randomUUID with the dashes removed).
const uuid = "3f2a9c1e7b6d4e0f8a1b2c3d4e5f6a7b"

// cappedName builds a -delete or -stray name the way Kafka does
// (LocalLog.logDirNameWithSuffixCappedLength): the topic part is cut so the
// whole name fits in 255 characters.
func cappedName(topic string, partition int, suffix string) string {
	full := "-" + itoa(partition) + "." + uuid + suffix
	return topic[:min(len(topic), 255-len(full))] + full
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + itoa(i%10)
}

func TestParseDir(t *testing.T) {
	long := "t" + strings.Repeat("x", 239) // a 240-character topic
	tests := []struct {
		name string
		in   string
		want Dir // Name is filled in from in
		err  string
		// blocks says the error must wrap ErrBlocksStartup: Kafka itself cannot parse it.
		blocks bool
	}{
		{name: "live", in: "orders-0", want: Dir{Topic: "orders", Partition: 0}},
		{name: "two digits", in: "orders-12", want: Dir{Topic: "orders", Partition: 12}},
		{name: "split on the last dash", in: "orders-v2-0", want: Dir{Topic: "orders-v2", Partition: 0}},
		{name: "many dashes", in: "my-topic-with-dashes-3", want: Dir{Topic: "my-topic-with-dashes", Partition: 3}},
		{name: "dot and underscore", in: "a.b_c-1", want: Dir{Topic: "a.b_c", Partition: 1}},
		{name: "internal topic", in: "__consumer_offsets-49", want: Dir{Topic: "__consumer_offsets", Partition: 49}},
		{name: "largest partition", in: "orders-2147483647", want: Dir{Topic: "orders", Partition: 2147483647}},
		{name: "delete", in: "orders-0." + uuid + "-delete", want: Dir{Topic: "orders", Partition: 0, Kind: Delete, UUID: uuid}},
		{name: "future", in: "orders-7." + uuid + "-future", want: Dir{Topic: "orders", Partition: 7, Kind: Future, UUID: uuid}},
		{name: "stray", in: "orders-v2-3." + uuid + "-stray", want: Dir{Topic: "orders-v2", Partition: 3, Kind: Stray, UUID: uuid}},
		{name: "delete of dotted topic", in: "a.b-0." + uuid + "-delete", want: Dir{Topic: "a.b", Partition: 0, Kind: Delete, UUID: uuid}},
		{name: "cut delete name keeps the topic prefix", in: cappedName(long, 5, "-delete"),
			want: Dir{Topic: long[:213], Partition: 5, Kind: Delete, UUID: uuid}},

		// Kafka reads these loosely; ParseDir mirrors it (Integer.parseInt, regex \S+).
		{name: "leading zero is accepted like Integer.parseInt", in: "orders-01", want: Dir{Topic: "orders", Partition: 1}},
		{name: "plus sign is accepted like Integer.parseInt", in: "orders-+1", want: Dir{Topic: "orders", Partition: 1}},
		{name: "Arabic-Indic digit is a digit to Character.digit", in: "orders-٣", want: Dir{Topic: "orders", Partition: 3}},
		{name: "fullwidth digits", in: "orders-１２", want: Dir{Topic: "orders", Partition: 12}},
		{name: "double dash is topic ending in dash", in: "orders--1", want: Dir{Topic: "orders-", Partition: 1}},
		{name: "uppercase uuid is read as Kafka reads it", in: "orders-0." + strings.ToUpper(uuid) + "-delete",
			want: Dir{Topic: "orders", Partition: 0, Kind: Delete, UUID: strings.ToUpper(uuid)}},
		{name: "any non-blank uuid", in: "orders-0.bak-delete", want: Dir{Topic: "orders", Partition: 0, Kind: Delete, UUID: "bak"}},
		{name: "empty uuid after the last dot", in: "a-b.c-1.-delete", want: Dir{Topic: "a-b.c", Partition: 1, Kind: Delete}},

		// Kafka throws on these, and the broker does not start.
		{name: "backup suffix", in: "orders-0.bak", err: `"0.bak" after the last '-' is not a partition number`, blocks: true},
		{name: "old suffix", in: "orders-0-old", err: `"old" after the last '-' is not a partition number`, blocks: true},
		{name: "empty topic", in: "-0", err: "topic is empty", blocks: true},
		{name: "empty partition", in: "orders-", err: "partition is empty", blocks: true},
		{name: "overflow", in: "orders-2147483648", err: `"2147483648" after the last '-' is not a partition number`, blocks: true},
		{name: "sign only", in: "orders-+", err: "not a partition number", blocks: true},
		{name: "trailing space", in: "orders-1 ", err: "not a partition number", blocks: true},
		{name: "digit outside the BMP", in: "orders-𝟏", err: "not a partition number", blocks: true},
		{name: "no dash", in: "orders", err: "has no '-'", blocks: true},
		{name: "lost+found", in: "lost+found", err: "has no '-'", blocks: true},
		{name: "empty", in: "", err: "empty", blocks: true},
		{name: "suffix alone", in: "orders-delete", err: `ends in "-delete" but is not`, blocks: true},
		{name: "no uuid", in: "orders-0.-delete", err: `ends in "-delete"`, blocks: true},
		{name: "no dot", in: "orders-0-future", err: `ends in "-future"`, blocks: true},
		{name: "whitespace in suffixed form", in: "orders-0.a b-stray", err: `ends in "-stray"`, blocks: true},
		{name: "dot inside partition of suffixed form", in: "orders-0.a.b-delete", err: `"0.a" after the last '-'`, blocks: true},

		// Kafka would load these as logs of a topic that cannot exist, or never sees them.
		{name: "space in topic", in: "a b-0", err: `Kafka reads topic "a b"`},
		{name: "dot topic", in: ".-0", err: `"." and ".." are not topic names`},
		{name: "topic too long", in: strings.Repeat("a", 250) + "-0", err: "at most 249 characters"},
		{name: "non-UTF-8 topic", in: "caf\xe9-0", err: "byte 0xe9 at byte 3 is not valid UTF-8"},
		{name: "non-UTF-8 uuid", in: "orders-0.\xff-delete", err: "byte 0xff at byte 9 is not valid UTF-8"},
		{name: "path", in: "x/orders-0", err: "not a file name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDir(tt.in)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("ParseDir(%q): %v", tt.in, err)
				}
				tt.want.Name = tt.in
				if got != tt.want {
					t.Fatalf("ParseDir(%q) = %+v, want %+v", tt.in, got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseDir(%q) = %+v, want an error about %s", tt.in, got, tt.err)
			}
			if !errors.Is(err, ErrNotPartitionDir) {
				t.Errorf("error %v does not wrap ErrNotPartitionDir", err)
			}
			if errors.Is(err, ErrBlocksStartup) != tt.blocks {
				t.Errorf("error %v: wraps ErrBlocksStartup = %v, want %v", err, !tt.blocks, tt.blocks)
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %q does not say %q", err, tt.err)
			}
			if got != (Dir{}) {
				t.Errorf("ParseDir(%q) returned %+v with its error", tt.in, got)
			}
		})
	}
}

func TestMaybeTruncated(t *testing.T) {
	long := "t" + strings.Repeat("x", 239)
	exact := long[:213] // the longest topic whose -delete name for partition 0 is not cut
	tests := []struct {
		in   string
		want bool
	}{
		{cappedName(long, 0, "-delete"), true},
		{cappedName(long, 12, "-stray"), true},
		{cappedName(exact, 0, "-delete"), true}, // fits exactly: cannot be told from a cut name
		{cappedName(exact[:212], 0, "-delete"), false},
		{exact + "-0." + uuid[:31] + "x-stray", false},      // not a uuid Kafka writes
		{exact + "-0." + uuid + "-future", false},           // -future names are never cut
		{exact[:208] + "-00012." + uuid + "-delete", false}, // not Kafka's spelling of the partition
		{"orders-0", false},
	}
	for _, tt := range tests {
		d, err := ParseDir(tt.in)
		if err != nil {
			t.Fatalf("ParseDir(%q): %v", tt.in, err)
		}
		if got := d.MaybeTruncated(); got != tt.want {
			t.Errorf("MaybeTruncated(%q, %d bytes) = %v, want %v", tt.in, len(tt.in), got, tt.want)
		}
	}
	if n := len(cappedName(long, 0, "-delete")); n != maxNameLen {
		t.Errorf("cut name is %d bytes, want %d", n, maxNameLen)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Live: "live", Delete: "delete", Future: "future", Stray: "stray", Kind(9): "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}

// TestDecimalDigitTable checks what decimalDigit assumes about Go's Unicode
// tables: decimal digits of the BMP come in stride-1 ranges made of whole
// 0..9 runs, so a digit's value is its offset modulo 10.
func TestDecimalDigitTable(t *testing.T) {
	for _, rg := range unicode.Nd.R16 {
		if rg.Stride != 1 || (rg.Hi-rg.Lo+1)%10 != 0 {
			t.Errorf("Nd range %#x-%#x stride %d is not whole runs of ten", rg.Lo, rg.Hi, rg.Stride)
		}
	}
	for r, want := range map[rune]int{'7': 7, '٠': 0, '٩': 9, '۵': 5, '५': 5, '０': 0, '９': 9, '၁': 1, '꧹': 9} {
		if got, ok := decimalDigit(r); !ok || got != want {
			t.Errorf("decimalDigit(%q) = %d, %v; want %d", r, got, ok, want)
		}
	}
	for _, r := range []rune{'a', '²', '½', 'Ⅳ', '𝟏', -1} {
		if got, ok := decimalDigit(r); ok {
			t.Errorf("decimalDigit(%q) = %d, want not a digit", r, got)
		}
	}
}

func TestIsLogDirFile(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"meta.properties", true},
		{"meta.properties.tmp", true},
		{".lock", true},
		{".kafka_cleanshutdown", true},
		{"recovery-point-offset-checkpoint", true},
		{"recovery-point-offset-checkpoint.tmp", true},
		{"log-start-offset-checkpoint", true},
		{"log-start-offset-checkpoint.tmp", true},
		{"replication-offset-checkpoint", true},
		{"replication-offset-checkpoint.tmp", true},
		{"cleaner-offset-checkpoint", true},
		{"cleaner-offset-checkpoint.tmp", true},
		{"remote-log-index-cache", true},
		{".lock.tmp", false},
		{".kafka_cleanshutdown.tmp", false},
		{"partition.metadata", false}, // lives inside partition directories
		{"orders-0", false},
		{"meta.properties.bak", false},
		{"Meta.properties", false},
		{".tmp", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsLogDirFile(tt.name); got != tt.want {
			t.Errorf("IsLogDirFile(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
