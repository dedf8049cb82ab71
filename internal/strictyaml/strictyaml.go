package strictyaml

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Limits on nesting, checked before the YAML parser runs: the files this
// package reads are a few levels deep, and the parser's cost grows quickly
// with depth.
const (
	maxFlowDepth = 32  // unclosed '[' and '{'
	maxIndent    = 256 // columns of leading spaces and "- " on one line
)

// Error is a problem with a file, located at a line and column (both
// 1-based). Line is 0 when the problem is not in the text, such as a file
// that cannot be read; Err then holds the cause.
type Error struct {
	File   string
	Line   int
	Column int
	Msg    string
	Err    error
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Pos is a place in a file, 1-based. The zero Pos is reported as 1:1.
type Pos struct{ Line, Col int }

// NodePos is where n starts, or the zero Pos when goccy does not say.
func NodePos(n ast.Node) Pos {
	if n == nil {
		return Pos{}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return Pos{}
	}
	return Pos{tk.Position.Line, tk.Position.Column}
}

// IsNull reports whether n is absent or YAML null (an empty value, ~, null).
func IsNull(n ast.Node) bool {
	if n == nil {
		return true
	}
	_, ok := n.(*ast.NullNode)
	return ok
}

// Doc describes the kind of file a Decoder reads: its size limit and the
// words its messages use.
type Doc struct {
	Noun    string // "inventory", as in "the inventory is empty"
	A       string // "an inventory", as in "not supported in an inventory"
	MaxSize int    // bytes
	// Empty follows "the <Noun> is empty; " and says what a file needs.
	Empty string
	// Single follows "a second YAML document; " and says why one is enough.
	Single string
	// RefuseKey, when set, is asked about every key in the file, even
	// under unknown keys, before decoding. A non-empty answer is reported
	// as "<path>: <answer>" at the key, and the key's value is skipped.
	RefuseKey func(path, key string) string
}

// A Decoder decodes one file. Its methods record problems instead of
// returning them; Err returns them all.
type Decoder struct {
	file string
	doc  Doc
	errs []*Error
	pos  map[string]Pos    // field path ("brokers[1].id") -> where it is
	skip map[ast.Node]bool // nodes already reported by checkNodes
}

// NewDecoder returns a Decoder for file, which is used only in messages.
func NewDecoder(file string, doc Doc) *Decoder {
	return &Decoder{file: file, doc: doc, pos: map[string]Pos{}, skip: map[ast.Node]bool{}}
}

// Errorf records a problem at p.
func (d *Decoder) Errorf(p Pos, format string, args ...any) {
	if p.Line == 0 {
		p = Pos{1, 1}
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: p.Line, Column: p.Col, Msg: fmt.Sprintf(format, args...)})
}

// Err returns nil, the only problem, or all problems joined, in file order.
func (d *Decoder) Err() error {
	slices.SortStableFunc(d.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	switch len(d.errs) {
	case 0:
		return nil
	case 1:
		return d.errs[0]
	}
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// Has reports whether Object or List met the field at path, whatever its
// value.
func (d *Decoder) Has(path string) bool {
	_, ok := d.pos[path]
	return ok
}

// At is where the field at path is (its value, or its key when the value
// is empty or a collection), or else where its nearest enclosing field is,
// or else the start of the file.
func (d *Decoder) At(path string) Pos {
	for {
		if p, ok := d.pos[path]; ok {
			return p
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return Pos{1, 1}
		}
		path = path[:i]
	}
}

// Parse checks the raw text, runs the YAML parser and checks the tree for
// what no file may contain. It returns the body of the only document, or
// nil, with the reason recorded, when there is nothing to decode. Problems
// found in the tree do not stop decoding: the offending nodes are skipped.
func (d *Decoder) Parse(data []byte) ast.Node {
	root := d.parse(data)
	if root != nil {
		d.checkNodes("", root)
	}
	return root
}

func (d *Decoder) parse(data []byte) ast.Node {
	if len(data) > d.doc.MaxSize {
		d.Errorf(Pos{1, 1}, "the file is larger than %d KiB, which no %s needs; is it the right file?", d.doc.MaxSize>>10, d.doc.Noun)
		return nil
	}
	data = []byte(strings.TrimPrefix(string(data), "\ufeff"))
	if !utf8.Valid(data) {
		d.Errorf(invalidUTF8(data), "the file is not valid UTF-8 text")
		return nil
	}
	if p, ok := tooDeep(data); ok {
		d.Errorf(p, "YAML nested too deeply for %s", d.doc.A)
		return nil
	}
	f, err := parseYAML(data)
	if err != nil {
		var ye yaml.Error
		p, msg := Pos{1, 1}, err.Error()
		if errors.As(err, &ye) {
			p, msg = tokenPos(ye), ye.GetMessage()
		}
		msg, _, _ = strings.Cut(msg, "\n")
		if strings.Contains(msg, "\t") {
			msg += "; YAML indents with spaces, never tabs"
		}
		d.Errorf(p, "%s", printable(msg))
		return nil
	}
	var bodies []ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		switch doc.Body.(type) {
		case *ast.DirectiveNode, *ast.CommentGroupNode, *ast.CommentNode:
			continue
		}
		bodies = append(bodies, doc.Body)
	}
	switch len(bodies) {
	case 0:
		d.Errorf(Pos{1, 1}, "the %s is empty; %s", d.doc.Noun, d.doc.Empty)
		return nil
	case 1:
		return bodies[0]
	default:
		d.Errorf(NodePos(bodies[1]), "a second YAML document; %s", d.doc.Single)
		return nil
	}
}

// printable escapes control characters in a parser message.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, strings.ReplaceAll(s, "\t", `\t`))
}

func tokenPos(e yaml.Error) Pos {
	tk := e.GetToken()
	if tk == nil || tk.Position == nil {
		return Pos{1, 1}
	}
	return Pos{tk.Position.Line, tk.Position.Column}
}

// parseYAML runs the YAML parser, turning a panic inside it into an error.
func parseYAML(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed on this file (%v)", r)
		}
	}()
	return parser.ParseBytes(data, 0)
}

// invalidUTF8 is the position of the first byte that is not UTF-8.
func invalidUTF8(data []byte) Pos {
	p := Pos{1, 1}
	for len(data) > 0 {
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n == 1 {
			return p
		}
		if r == '\n' {
			p.Line, p.Col = p.Line+1, 1
		} else {
			p.Col++
		}
		data = data[n:]
	}
	return p
}

// tooDeep reports the first place the text nests deeper than any file
// read here does. It looks at characters, not YAML, so brackets inside
// strings count too; that only matters past maxFlowDepth of them.
func tooDeep(data []byte) (Pos, bool) {
	depth := 0
	for i, line := range strings.Split(string(data), "\n") {
		indent := 0
		for indent < len(line) && (line[indent] == ' ' || line[indent] == '-' || line[indent] == '?' || line[indent] == ':') {
			indent++
		}
		if indent > maxIndent {
			return Pos{i + 1, 1}, true
		}
		for j, c := range []byte(line) {
			switch c {
			case '[', '{':
				depth++
				if depth > maxFlowDepth {
					return Pos{i + 1, j + 1}, true
				}
			case ']', '}':
				depth = max(depth-1, 0)
			}
		}
	}
	return Pos{}, false
}

// checkNodes walks the whole tree before decoding and reports what no file
// may contain wherever it is, even under unknown keys: keys Doc.RefuseKey
// refuses, and YAML anchors, aliases, merge keys, complex keys and tags.
func (d *Decoder) checkNodes(path string, n ast.Node) {
	a := d.doc.A
	switch v := n.(type) {
	case *ast.MappingNode:
		for _, mv := range v.Values {
			d.checkNodes(path, mv)
		}
	case *ast.MappingValueNode:
		child := path
		switch k := v.Key.(type) {
		case *ast.StringNode:
			child = join(path, k.Value)
			if d.doc.RefuseKey != nil {
				if msg := d.doc.RefuseKey(child, k.Value); msg != "" {
					d.skip[v] = true
					d.Errorf(NodePos(k), "%s: %s", child, msg)
					return
				}
			}
		case *ast.MergeKeyNode:
			d.skip[v] = true
			d.Errorf(NodePos(k), "%s: merge keys (<<) are not supported in %s; write the values out", d.orRoot(path), a)
			return
		case *ast.MappingKeyNode:
			d.skip[v] = true
			d.Errorf(NodePos(k), "%s: complex keys (?) are not supported in %s", d.orRoot(path), a)
			return
		}
		d.checkNodes(child, v.Value)
	case *ast.SequenceNode:
		for i, e := range v.Values {
			d.checkNodes(fmt.Sprintf("%s[%d]", path, i), e)
		}
	case *ast.AnchorNode:
		d.skip[v] = true
		d.Errorf(NodePos(v), "%s: anchors (&) are not supported in %s; write each value out", d.orRoot(path), a)
	case *ast.AliasNode:
		d.skip[v] = true
		d.Errorf(NodePos(v), "%s: aliases (*) are not supported in %s; write each value out", d.orRoot(path), a)
	case *ast.TagNode:
		d.skip[v] = true
		d.Errorf(NodePos(v), "%s: YAML tags (!) are not supported in %s; quote the value instead", d.orRoot(path), a)
	}
}

func (d *Decoder) orRoot(path string) string {
	if path == "" {
		return "the " + d.doc.Noun
	}
	return path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "true/false"
	case *ast.StringNode, *ast.LiteralNode:
		return "text"
	default:
		return "a " + strings.ToLower(n.Type().String())
	}
}

// A Field decodes the value n of the field at path; at is where its key
// (or, in a list, its element) is.
type Field func(path string, at Pos, n ast.Node)

// Object decodes the mapping n at path, calling the field for each key and
// reporting unknown keys. A null (an empty key in YAML) is an empty mapping.
func (d *Decoder) Object(path string, n ast.Node, fields map[string]Field) {
	if IsNull(n) || d.skip[n] {
		return
	}
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		d.Errorf(NodePos(n), "%s must be a mapping of keys to values, not %s", d.orRoot(path), describe(n))
		return
	}
	for _, mv := range values {
		if d.skip[mv] {
			continue
		}
		k, ok := mv.Key.(*ast.StringNode)
		if !ok {
			d.Errorf(NodePos(mv.Key), "%s: key %s is not a name", d.orRoot(path), mv.Key.String())
			continue
		}
		kp := NodePos(k)
		child := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			where := "at the top level"
			if path != "" {
				where = "in " + path
			}
			d.Errorf(kp, "unknown key %q %s; known keys there are %s", k.Value, where,
				strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			continue
		}
		switch mv.Value.(type) {
		case nil, *ast.NullNode, *ast.MappingNode, *ast.MappingValueNode, *ast.SequenceNode:
			d.pos[child] = kp
		default:
			d.pos[child] = NodePos(mv.Value)
		}
		f(child, kp, mv.Value)
	}
}

// List decodes the sequence n at path, calling item for each element with
// the element's path and position (its first key, for a mapping). A null
// is an empty list.
func (d *Decoder) List(path string, n ast.Node, item Field) {
	if IsNull(n) || d.skip[n] {
		return
	}
	s, ok := n.(*ast.SequenceNode)
	if !ok {
		d.Errorf(NodePos(n), "%s must be a list, not %s", path, describe(n))
		return
	}
	for i, e := range s.Values {
		p := fmt.Sprintf("%s[%d]", path, i)
		at := NodePos(e)
		if m, ok := e.(*ast.MappingNode); ok && len(m.Values) > 0 {
			at = NodePos(m.Values[0].Key)
		} else if IsNull(e) && i < len(s.Entries) && s.Entries[i] != nil && s.Entries[i].Start != nil {
			at = Pos{s.Entries[i].Start.Position.Line, s.Entries[i].Start.Position.Column} // the "-"
		}
		d.pos[p] = at
		item(p, at, e)
	}
}

// A Check looks at a text value that decoded (a null is ""); at is where
// the value is, or its key when it is null.
type Check func(path string, at Pos, s string)

// Str decodes one line of text into dst, then runs the checks on it.
// Numbers and true/false are kept as written ("0022" stays "0022"). A
// null leaves dst alone but still runs the checks, with "".
func (d *Decoder) Str(dst *string, checks ...Check) Field {
	return d.str(dst, false, checks)
}

// Text is Str for text that may span lines, such as a block scalar
// (key: |). It allows line breaks and tabs, and no other control character.
func (d *Decoder) Text(dst *string, checks ...Check) Field {
	return d.str(dst, true, checks)
}

func (d *Decoder) str(dst *string, multiline bool, checks []Check) Field {
	return func(path string, at Pos, n ast.Node) {
		if d.skip[n] {
			return
		}
		if IsNull(n) {
			for _, c := range checks {
				c(path, d.At(path), "")
			}
			return
		}
		var s string
		switch v := n.(type) {
		case *ast.StringNode:
			s = v.Value
		case *ast.LiteralNode:
			s = v.Value.Value
		case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
			s = n.GetToken().Value // the text as written: port-like 0022 stays 0022
		default:
			d.Errorf(NodePos(n), "%s must be text, not %s", path, describe(n))
			return
		}
		for _, r := range s {
			if multiline && (r == '\n' || r == '\t') {
				continue
			}
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				what, fix := "a control character", ""
				switch {
				case r == '\n':
					what, fix = "a line break", " (a block scalar needs |- to drop its final line break)"
				case unicode.Is(unicode.Cf, r):
					what = "an invisible formatting character"
				}
				if multiline {
					d.Errorf(NodePos(n), "%s contains %s (%U); write it in plain characters", path, what, r)
				} else {
					d.Errorf(NodePos(n), "%s contains %s (%U); write it on one line in plain characters%s", path, what, r, fix)
				}
				return
			}
		}
		*dst = s
		for _, c := range checks {
			c(path, NodePos(n), s)
		}
	}
}

// Strs decodes a list of one-line texts into dst; an element may not be
// empty.
func (d *Decoder) Strs(dst *[]string) Field {
	return func(path string, at Pos, n ast.Node) {
		var out []string
		d.List(path, n, func(p string, at Pos, e ast.Node) {
			if IsNull(e) {
				d.Errorf(at, "%s is empty", p)
				return
			}
			var s string
			d.Str(&s)(p, at, e)
			out = append(out, s)
		})
		*dst = out
	}
}

// Bool decodes true or false (nothing else YAML 1.1 might call a boolean).
func (d *Decoder) Bool(dst *bool) Field {
	return func(path string, at Pos, n ast.Node) {
		if IsNull(n) || d.skip[n] {
			return
		}
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.Errorf(NodePos(n), "%s must be true or false, not %s", path, describe(n))
			return
		}
		*dst = b.Value
	}
}

// Int decodes a whole number in [lo, hi] and passes it to set; what
// explains the range in the error ("a port from 1 to 65535").
func (d *Decoder) Int(lo, hi int64, what string, set func(int64)) Field {
	return func(path string, at Pos, n ast.Node) {
		if IsNull(n) || d.skip[n] {
			return
		}
		v, ok := n.(*ast.IntegerNode)
		if !ok {
			d.Errorf(NodePos(n), "%s must be a whole number, not %s", path, describe(n))
			return
		}
		var x int64
		switch i := v.Value.(type) {
		case int64:
			x = i
		case uint64:
			if i > math.MaxInt64 {
				x = math.MaxInt64
			} else {
				x = int64(i)
			}
		default:
			d.Errorf(NodePos(n), "%s must be a whole number", path)
			return
		}
		if x < lo || x > hi {
			d.Errorf(NodePos(n), "%s is %s; it must be %s", path, v.GetToken().Value, what)
			return
		}
		set(x)
	}
}

// Duration decodes a positive Go duration with its unit ("10s", "1m30s").
func (d *Decoder) Duration(dst *time.Duration) Field {
	return func(path string, at Pos, n ast.Node) {
		if IsNull(n) || d.skip[n] {
			return
		}
		var s string
		switch v := n.(type) {
		case *ast.StringNode:
			s = v.Value
		case *ast.IntegerNode, *ast.FloatNode:
			d.Errorf(NodePos(n), "%s needs a unit, such as 10s or 1m", path)
			return
		default:
			d.Errorf(NodePos(n), "%s must be a duration such as 10s, not %s", path, describe(n))
			return
		}
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			d.Errorf(NodePos(n), "%s is %q; it must be a positive duration such as 10s or 1m", path, s)
			return
		}
		*dst = v
	}
}
