package javaprops_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/lab"
)

// cases are the .properties edge cases where a hand-written parser and
// Java's part ways. Java itself is the oracle: TestJavaAgrees loads each
// with java.util.Properties.
var cases = map[string]string{
	"plain":             "a=b\nc:d\n",
	"space separator":   "key value with spaces\n",
	"blank then equals": "key   =   value\n",
	"blank then colon":  "key : value\n",
	"two separators":    "key==value\nk2=:v\nk3 = = v\n",
	"trailing blanks":   "key=value   \n",
	"leading blanks":    "   \t\fkey=value\n",
	"key only":          "lonely\n",
	"escaped separator": "a\\=b=c\nd\\:e:f\ng\\ h i\n",
	"escapes":           "t=a\\tb\\nc\\rd\\fe\\\\f\\qg\n",
	"unicode":           "u=\\u00e9t\\u00C9\\u20ac\n",
	"latin1 bytes":      "p=caf\xe9\n",
	"utf8 bytes":        "p=caf\xc3\xa9\n",
	"comments":          "# c\n! c\n  # indented\na=b # not a comment\n",
	"comment continued": "# comment \\\na=b\n",
	"continuation":      "a=one \\\n    two \\\n\tthree\n",
	"continued comment": "a=one\\\n# not a comment\n",
	"even backslashes":  "a=one\\\\\nb=two\n",
	"continued at EOF":  "a=one\\",
	"continued blank":   "a=one\\\n\nb=two\n",
	"cr line ends":      "a=1\rb=2\r\nc=3\n",
	"cr continuation":   "a=1\\\r\n  2\r",
	"no final newline":  "a=1\nb=2",
	"empty value":       "a=\nb\nc=   \n",
	"duplicate":         "a=1\na=2\n",
	"jaas":              "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  username=\"ops\" \\\n  password=\"s3cr\\\"et\";\n",
	"bad unicode":       "a=\\u00zz\n",
	"short unicode":     "a=\\u00e\n",
	"key escapes":       "\\u0041\\ B=x\n",
	"blank lines":       "\n\n  \n\ta=b\n\n",
}

func esc(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c < 0x20 || c > 0x7e || c == '\\' {
			fmt.Fprintf(&b, `\u%04x`, c)
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

func dump(p javaprops.Properties) string {
	var keys []string
	for k := range p.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s\t%s\n", esc(k), esc(p.Values[k]))
	}
	return b.String()
}

// TestJavaAgrees runs every case through java.util.Properties (the JDK the
// lab uses) and through Parse: the same keys and values, or both refuse.
func TestJavaAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Java; the full test run (make test) runs it")
	}
	java, err := lab.FindJava()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var names, files []string
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		f := filepath.Join(dir, fmt.Sprintf("c%02d.properties", i))
		if err := os.WriteFile(f, []byte(cases[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	out, err := exec.Command(java, append([]string{"testdata/Dump.java"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("java: %v\n%s", err, out)
	}
	want := map[string]*strings.Builder{}
	var cur *strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "== "); ok {
			cur = &strings.Builder{}
			want[f] = cur
			continue
		}
		cur.WriteString(sc.Text() + "\n")
	}
	for i, name := range names {
		got := "ERROR\n"
		if p, err := javaprops.Parse([]byte(cases[name])); err == nil {
			got = dump(p)
		}
		if w := want[files[i]]; w == nil || w.String() != got {
			t.Errorf("%s: %q\njava:\n%v\nkremedy:\n%s", name, cases[name], w, got)
		}
	}
}

func TestErrorsSayWhere(t *testing.T) {
	_, err := javaprops.Parse([]byte("ok=1\n# c\nbad=x\\u12G4\n"))
	var pe *javaprops.Error
	if !errors.As(err, &pe) || pe.Line != 3 || pe.Col != 6 {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(err.Error(), "line 3, column 6") {
		t.Fatal(err)
	}
	p, err := javaprops.Parse([]byte("a=1\n\nb=one\\\n  two\n"))
	if err != nil || p.Lines["a"] != 1 || p.Lines["b"] != 3 || p.Values["b"] != "onetwo" {
		t.Fatalf("%+v %v", p, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := javaprops.Parse(b)
		if err != nil {
			var pe *javaprops.Error
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("untyped or unplaced error %v", err)
			}
			return
		}
		for k := range p.Values {
			if p.Lines[k] < 1 {
				t.Fatalf("key %q has no line", k)
			}
		}
	})
}

// FuzzEscapeValue: what EscapeValue writes reads back as the value.
func FuzzEscapeValue(f *testing.F) {
	for _, s := range []string{"", " lead", "a\\b", "x\ny", `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="p\w";`, "=eq", ":colon", "é😀", "tab\there"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		p, err := javaprops.Parse([]byte("k=" + javaprops.EscapeValue(s) + "\n"))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := p.Values["k"]; got != s {
			t.Fatalf("EscapeValue(%q) reads back as %q", s, got)
		}
	})
}
