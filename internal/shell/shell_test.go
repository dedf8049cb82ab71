package shell

import (
	"os/exec"
	"strings"
	"testing"
)

// hostile are strings that must reach a program unchanged through a shell
// (steps/remote's sshd test sends the same through a real OpenSSH).
var hostile = []string{
	"", "plain", "with space", "it's", `a"b`, `$(id)`, "`id`", "a;rm -rf /", "a;b|c&d>e<f",
	"line1\nline2", "trailing\n", "\t\r", `\`, `'\''`, `'`, `''`, "$HOME", "${HOME}", "*", "?", "[a]",
	"~", "~root", "-rf", "--", "A=B", "#comment", "!", "{a,b}", "ünï-код-日本", "%s%n", "a\x01b\x7f",
	"/var/lib/kafka/data/orders-0",
}

// shPrintf runs /bin/sh -c "printf %s <quoted>" and returns what printf got.
func shPrintf(t testing.TB, s string) string {
	t.Helper()
	out, err := exec.Command("/bin/sh", "-c", "printf %s "+Quote(s)).Output()
	if err != nil {
		t.Fatalf("sh -c printf %%s %s: %v", Quote(s), err)
	}
	return string(out)
}

func TestQuote(t *testing.T) {
	for _, s := range hostile {
		if got := shPrintf(t, s); got != s {
			t.Errorf("round trip of %q via %s gave %q", s, Quote(s), got)
		}
	}
	tests := []struct{ in, want string }{
		{"", "''"},
		{"abc", "abc"},
		{"/var/lib/kafka/data/orders-0", "/var/lib/kafka/data/orders-0"},
		{"user@host:9092,x%y+z", "user@host:9092,x%y+z"},
		{"-rf", "-rf"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"A=B", "'A=B'"}, // never an assignment
		{"~", "'~'"},     // no tilde expansion
		{"ü", "'ü'"},
	}
	for _, tc := range tests {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestCommand(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"echo"}, "echo"},
		{[]string{"rm", "-rf", "--", "/data/a b"}, "rm -rf -- '/data/a b'"},
		{[]string{"A=B", "x"}, "'A=B' x"},
		{[]string{"printf", "%s", ""}, "printf %s ''"},
		{nil, ""},
	}
	for _, tc := range tests {
		if got := Command(tc.argv...); got != tc.want {
			t.Errorf("Command(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
	// argv arrives intact as separate arguments.
	argv := []string{"$(id)", "a;b", "", "x y", "it's"}
	out, err := exec.Command("/bin/sh", "-c", Command(append([]string{"printf", "<%s>"}, argv...)...)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "<$(id)><a;b><><x y><it's>"; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}

// FuzzQuote: any string without NUL (which no shell word can carry) must
// reach printf unchanged. go test -fuzz=FuzzQuote ./internal/shell/
func FuzzQuote(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Add("'\"`$\\\n")
	f.Add("\xff\xfe invalid utf8")
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			t.Skip("NUL cannot be passed in a shell word")
		}
		if got := shPrintf(t, s); got != s {
			t.Fatalf("round trip of %q via %s gave %q", s, Quote(s), got)
		}
	})
}
