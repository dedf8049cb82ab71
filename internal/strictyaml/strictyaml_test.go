package strictyaml

import (
	"strings"
	"testing"

	"github.com/goccy/go-yaml/ast"
)

var testDoc = Doc{Noun: "thing", A: "a thing", MaxSize: 1 << 10, Empty: "it needs a name", Single: "one thing per file"}

// decode reads data as a mapping with a one-line name, a multi-line note
// and a list of tags, and returns what it read and the errors, one a line.
func decode(data string) (name, note string, tags []string, errs string) {
	d := NewDecoder("t.yaml", testDoc)
	root := d.Parse([]byte(data))
	if root != nil {
		d.Object("", root, map[string]Field{
			"name": d.Str(&name, func(path string, at Pos, s string) {
				if s == "" {
					d.Errorf(at, "%s is empty", path)
				}
			}),
			"note": d.Text(&note),
			"tags": d.Strs(&tags),
		})
	}
	if err := d.Err(); err != nil {
		errs = err.Error()
	}
	return name, note, tags, errs
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		in, name, note string
		tags           []string
		errs           string
	}{
		{in: "name: 0042\nnote: |\n  a\tb\n  c\ntags: [x, y]\n", name: "0042", note: "a\tb\nc\n", tags: []string{"x", "y"}},
		{in: "name:\n", errs: "t.yaml:1:1: name is empty"},
		{in: "name: |\n  a\n", errs: "t.yaml:1:7: name contains a line break (U+000A); write it on one line in plain characters (a block scalar needs |- to drop its final line break)"},
		{in: "name: x\nnote: \"a\\rb\"\n", name: "x", errs: "t.yaml:2:7: note contains a control character (U+000D); write it in plain characters"},
		{in: "name: x\ntags: [a, ~]\n", name: "x", tags: []string{"a"}, errs: "t.yaml:2:9: tags[1] is empty"},
		{in: "nmae: x\nname: y\n", name: "y", errs: `t.yaml:1:1: unknown key "nmae" at the top level; known keys there are name, note, tags`},
		{in: "name: &a x\n", errs: "t.yaml:1:7: name: anchors (&) are not supported in a thing; write each value out"},
		{in: "name: x\nname: y\n", errs: `t.yaml:2:1: mapping key "name" already defined at [1:1]`},
		{in: "# only a comment\n", errs: "t.yaml:1:1: the thing is empty; it needs a name"},
		{in: "name: x\n---\nname: y\n", errs: "t.yaml:3:5: a second YAML document; one thing per file"},
		{in: "- x\n", errs: "t.yaml:1:1: the thing must be a mapping of keys to values, not a list"},
		{in: "name: " + strings.Repeat("x", 2000), errs: "t.yaml:1:1: the file is larger than 1 KiB, which no thing needs; is it the right file?"},
		{in: "name: [x\n", errs: "t.yaml:1:7: sequence end token ']' not found"},
		{in: "name: 1\nnote: [y]\ntags: {a: b}\n", name: "1",
			errs: "t.yaml:2:7: note must be text, not a list\nt.yaml:3:7: tags must be a list, not a mapping"},
	}
	for _, tt := range tests {
		name, note, tags, errs := decode(tt.in)
		if errs != tt.errs {
			t.Errorf("%q: errors\n got: %s\nwant: %s", tt.in, errs, tt.errs)
		}
		if name != tt.name || note != tt.note || strings.Join(tags, ",") != strings.Join(tt.tags, ",") {
			t.Errorf("%q: read %q %q %q, want %q %q %q", tt.in, name, note, tags, tt.name, tt.note, tt.tags)
		}
	}
}

func TestRefuseKey(t *testing.T) {
	doc := testDoc
	doc.RefuseKey = func(path, key string) string {
		if key == "secret" {
			return "no secrets here"
		}
		return ""
	}
	d := NewDecoder("t.yaml", doc)
	root := d.Parse([]byte("a:\n  secret: x\n"))
	d.Object("", root, map[string]Field{"a": func(path string, at Pos, n ast.Node) {
		d.Object(path, n, map[string]Field{"b": d.Str(new(string))})
	}})
	if got, want := d.Err().Error(), "t.yaml:2:3: a.secret: no secrets here"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tt := range []struct {
		e    *Error
		want string
	}{
		{&Error{File: "f.yaml", Line: 3, Column: 7, Msg: "bad"}, "f.yaml:3:7: bad"},
		{&Error{File: "f.yaml", Msg: "cannot read"}, "f.yaml: cannot read"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
