package inventory

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

// Limits on nesting, checked before the YAML parser runs: an inventory is
// three levels deep, and the parser's cost grows quickly with depth.
const (
	maxFlowDepth = 32  // unclosed '[' and '{'
	maxIndent    = 256 // columns of leading spaces and "- " on one line
)

// Parse reads an inventory from data and validates it. file is used only in
// error messages. Parse is strict: unknown keys, values of the wrong type,
// duplicate keys, several YAML documents, anchors, aliases and tags are all
// errors. On failure the error is one *Error, or several joined with
// errors.Join, in the order they appear in the file.
func Parse(file string, data []byte) (*Inventory, error) {
	d := &decoder{file: file, pos: map[string]pos{}, skip: map[ast.Node]bool{}}
	root := d.parse(data)
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	inv := &Inventory{}
	d.checkNodes("", root)
	d.inventory(root, inv)
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	d.validate(inv)
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return inv, nil
}

type pos struct{ line, col int }

type decoder struct {
	file string
	errs []*Error
	pos  map[string]pos    // field path ("brokers[1].id") -> where it is
	skip map[ast.Node]bool // nodes already reported by checkNodes
}

func (d *decoder) errorf(p pos, format string, args ...any) {
	if p.line == 0 {
		p = pos{1, 1}
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: p.line, Column: p.col, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) err() error {
	slices.SortStableFunc(d.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	if len(d.errs) == 1 {
		return d.errs[0]
	}
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// at is where the field at path is, or else where its nearest enclosing
// field is, or else the start of the file.
func (d *decoder) at(path string) pos {
	for {
		if p, ok := d.pos[path]; ok {
			return p
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return pos{1, 1}
		}
		path = path[:i]
	}
}

func nodePos(n ast.Node) pos {
	if n == nil {
		return pos{}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return pos{}
	}
	return pos{tk.Position.Line, tk.Position.Column}
}

// parse checks the raw text and runs the YAML parser. It returns the body
// of the only document, or nil for an empty one.
func (d *decoder) parse(data []byte) ast.Node {
	if len(data) > MaxSize {
		d.errorf(pos{1, 1}, "the file is larger than %d KiB, which no inventory needs; is it the right file?", MaxSize>>10)
		return nil
	}
	data = []byte(strings.TrimPrefix(string(data), "\ufeff"))
	if !utf8.Valid(data) {
		d.errorf(invalidUTF8(data), "the file is not valid UTF-8 text")
		return nil
	}
	if p, ok := tooDeep(data); ok {
		d.errorf(p, "YAML nested too deeply for an inventory")
		return nil
	}
	f, err := parseYAML(data)
	if err != nil {
		var ye yaml.Error
		p, msg := pos{1, 1}, err.Error()
		if errors.As(err, &ye) {
			p, msg = nodeTokenPos(ye), ye.GetMessage()
		}
		msg, _, _ = strings.Cut(msg, "\n")
		if strings.Contains(msg, "\t") {
			msg += "; YAML indents with spaces, never tabs"
		}
		d.errorf(p, "%s", printable(msg))
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
		d.errorf(pos{1, 1}, "the inventory is empty; it needs at least name, zookeeper, kafka, ssh and brokers (see example.yaml)")
		return nil
	case 1:
		return bodies[0]
	default:
		d.errorf(nodePos(bodies[1]), "a second YAML document; an inventory is one document describing one cluster")
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

func nodeTokenPos(e yaml.Error) pos {
	tk := e.GetToken()
	if tk == nil || tk.Position == nil {
		return pos{1, 1}
	}
	return pos{tk.Position.Line, tk.Position.Column}
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
func invalidUTF8(data []byte) pos {
	p := pos{1, 1}
	for len(data) > 0 {
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n == 1 {
			return p
		}
		if r == '\n' {
			p.line, p.col = p.line+1, 1
		} else {
			p.col++
		}
		data = data[n:]
	}
	return p
}

// tooDeep reports the first place the text nests deeper than any
// inventory does. It looks at characters, not YAML, so brackets inside
// strings count too; that only matters past maxFlowDepth of them.
func tooDeep(data []byte) (pos, bool) {
	depth := 0
	for i, line := range strings.Split(string(data), "\n") {
		indent := 0
		for indent < len(line) && (line[indent] == ' ' || line[indent] == '-' || line[indent] == '?' || line[indent] == ':') {
			indent++
		}
		if indent > maxIndent {
			return pos{i + 1, 1}, true
		}
		for j, c := range []byte(line) {
			switch c {
			case '[', '{':
				depth++
				if depth > maxFlowDepth {
					return pos{i + 1, j + 1}, true
				}
			case ']', '}':
				depth = max(depth-1, 0)
			}
		}
	}
	return pos{}, false
}

// checkNodes walks the whole tree before decoding and reports what no
// inventory may contain wherever it is, even under unknown keys: a key
// that looks like a password, and YAML anchors, aliases, merge keys,
// complex keys and tags.
func (d *decoder) checkNodes(path string, n ast.Node) {
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
			if isPasswordKey(k.Value) {
				d.skip[v] = true
				d.errorf(nodePos(k), "%s: kremedy never reads a password from the inventory; remove it and set "+
					"zookeeper.auth.password_env (an environment variable) or zookeeper.auth.password_file (a file only you can read)", child)
				return
			}
		case *ast.MergeKeyNode:
			d.skip[v] = true
			d.errorf(nodePos(k), "%s: merge keys (<<) are not supported in an inventory; write the values out", orRoot(path))
			return
		case *ast.MappingKeyNode:
			d.skip[v] = true
			d.errorf(nodePos(k), "%s: complex keys (?) are not supported in an inventory", orRoot(path))
			return
		}
		d.checkNodes(child, v.Value)
	case *ast.SequenceNode:
		for i, e := range v.Values {
			d.checkNodes(fmt.Sprintf("%s[%d]", path, i), e)
		}
	case *ast.AnchorNode:
		d.skip[v] = true
		d.errorf(nodePos(v), "%s: anchors (&) are not supported in an inventory; write each value out", orRoot(path))
	case *ast.AliasNode:
		d.skip[v] = true
		d.errorf(nodePos(v), "%s: aliases (*) are not supported in an inventory; write each value out", orRoot(path))
	case *ast.TagNode:
		d.skip[v] = true
		d.errorf(nodePos(v), "%s: YAML tags (!) are not supported in an inventory; quote the value instead", orRoot(path))
	}
}

func isPasswordKey(k string) bool {
	k = strings.ToLower(k)
	if k == "password_env" || k == "password_file" {
		return false
	}
	return strings.Contains(k, "password") || strings.Contains(k, "passwd") || k == "pass" || strings.Contains(k, "secret")
}

func orRoot(path string) string {
	if path == "" {
		return "the inventory"
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

func isNull(n ast.Node) bool {
	if n == nil {
		return true
	}
	_, ok := n.(*ast.NullNode)
	return ok
}

// A field decodes the value of one key; at is where the key is.
type field func(path string, at pos, v ast.Node)

// object decodes the mapping n at path, calling the field for each key and
// reporting unknown keys. A null (an empty key in YAML) is an empty mapping.
func (d *decoder) object(path string, at pos, n ast.Node, fields map[string]field) {
	if isNull(n) || d.skip[n] {
		return
	}
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		d.errorf(nodePos(n), "%s must be a mapping of keys to values, not %s", orRoot(path), describe(n))
		return
	}
	for _, mv := range values {
		if d.skip[mv] {
			continue
		}
		k, ok := mv.Key.(*ast.StringNode)
		if !ok {
			d.errorf(nodePos(mv.Key), "%s: key %s is not a name", orRoot(path), mv.Key.String())
			continue
		}
		kp := nodePos(k)
		child := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			where := "at the top level"
			if path != "" {
				where = "in " + path
			}
			d.errorf(kp, "unknown key %q %s; known keys there are %s", k.Value, where,
				strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			continue
		}
		switch mv.Value.(type) {
		case nil, *ast.NullNode, *ast.MappingNode, *ast.MappingValueNode, *ast.SequenceNode:
			d.pos[child] = kp
		default:
			d.pos[child] = nodePos(mv.Value)
		}
		f(child, kp, mv.Value)
	}
}

// list decodes the sequence n at path, calling item for each element with
// the element's path and position. A null is an empty list.
func (d *decoder) list(path string, n ast.Node, item func(path string, at pos, v ast.Node)) {
	if isNull(n) || d.skip[n] {
		return
	}
	s, ok := n.(*ast.SequenceNode)
	if !ok {
		d.errorf(nodePos(n), "%s must be a list, not %s", path, describe(n))
		return
	}
	for i, e := range s.Values {
		p := fmt.Sprintf("%s[%d]", path, i)
		at := nodePos(e)
		if m, ok := e.(*ast.MappingNode); ok && len(m.Values) > 0 {
			at = nodePos(m.Values[0].Key)
		} else if isNull(e) && i < len(s.Entries) && s.Entries[i] != nil && s.Entries[i].Start != nil {
			at = pos{s.Entries[i].Start.Position.Line, s.Entries[i].Start.Position.Column} // the "-"
		}
		d.pos[p] = at
		item(p, at, e)
	}
}

func (d *decoder) str(dst *string) field {
	return func(path string, at pos, n ast.Node) {
		if isNull(n) || d.skip[n] {
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
			d.errorf(nodePos(n), "%s must be text, not %s", path, describe(n))
			return
		}
		for _, r := range s {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				what, fix := "a control character", ""
				switch {
				case r == '\n':
					what, fix = "a line break", " (a block scalar needs |- to drop its final line break)"
				case unicode.Is(unicode.Cf, r):
					what = "an invisible formatting character"
				}
				d.errorf(nodePos(n), "%s contains %s (%U); write it on one line in plain characters%s", path, what, r, fix)
				return
			}
		}
		*dst = s
	}
}

func (d *decoder) strs(dst *[]string) field {
	return func(path string, at pos, n ast.Node) {
		var out []string
		d.list(path, n, func(p string, at pos, e ast.Node) {
			if isNull(e) {
				d.errorf(at, "%s is empty", p)
				return
			}
			var s string
			d.str(&s)(p, at, e)
			out = append(out, s)
		})
		*dst = out
	}
}

func (d *decoder) boolean(dst *bool) field {
	return func(path string, at pos, n ast.Node) {
		if isNull(n) || d.skip[n] {
			return
		}
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.errorf(nodePos(n), "%s must be true or false, not %s", path, describe(n))
			return
		}
		*dst = b.Value
	}
}

// integer decodes a whole number in [lo, hi] into set; what explains the
// range in the error.
func (d *decoder) integer(lo, hi int64, what string, set func(int64)) field {
	return func(path string, at pos, n ast.Node) {
		if isNull(n) || d.skip[n] {
			return
		}
		v, ok := n.(*ast.IntegerNode)
		if !ok {
			d.errorf(nodePos(n), "%s must be a whole number, not %s", path, describe(n))
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
			d.errorf(nodePos(n), "%s must be a whole number", path)
			return
		}
		if x < lo || x > hi {
			d.errorf(nodePos(n), "%s is %s; it must be %s", path, v.GetToken().Value, what)
			return
		}
		set(x)
	}
}

func (d *decoder) port(dst *int) field {
	return d.integer(1, 65535, "a port from 1 to 65535", func(x int64) { *dst = int(x) })
}

func (d *decoder) duration(dst *Duration) field {
	return func(path string, at pos, n ast.Node) {
		if isNull(n) || d.skip[n] {
			return
		}
		var s string
		switch v := n.(type) {
		case *ast.StringNode:
			s = v.Value
		case *ast.IntegerNode, *ast.FloatNode:
			d.errorf(nodePos(n), "%s needs a unit, such as 10s or 1m", path)
			return
		default:
			d.errorf(nodePos(n), "%s must be a duration such as 10s, not %s", path, describe(n))
			return
		}
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			d.errorf(nodePos(n), "%s is %q; it must be a positive duration such as 10s or 1m", path, s)
			return
		}
		dst.Duration = v
	}
}

func (d *decoder) inventory(root ast.Node, inv *Inventory) {
	d.object("", pos{1, 1}, root, map[string]field{
		"name": d.str(&inv.Name),
		"lab":  d.boolean(&inv.Lab),
		"zookeeper": func(path string, at pos, n ast.Node) {
			z := &inv.ZooKeeper
			d.object(path, at, n, map[string]field{
				"connect": d.str(&z.Connect),
				"auth": func(path string, at pos, n ast.Node) {
					if isNull(n) {
						return // "auth:" with nothing under it: no auth
					}
					a := &ZKAuth{}
					z.Auth = a
					d.object(path, at, n, map[string]field{
						"user":          d.str(&a.User),
						"password_env":  d.str(&a.PasswordEnv),
						"password_file": d.str(&a.PasswordFile),
					})
				},
			})
		},
		"kafka": func(path string, at pos, n ast.Node) {
			k := &inv.Kafka
			d.object(path, at, n, map[string]field{
				"bootstrap":         d.strs(&k.Bootstrap),
				"client_properties": d.str(&k.ClientProperties),
			})
		},
		"ssh": func(path string, at pos, n ast.Node) {
			s := &inv.SSH
			d.object(path, at, n, map[string]field{
				"user":            d.str(&s.User),
				"port":            d.port(&s.Port),
				"identity_file":   d.str(&s.IdentityFile),
				"agent":           d.boolean(&s.Agent),
				"known_hosts":     d.str(&s.KnownHosts),
				"config":          d.str(&s.Config),
				"proxy_jump":      d.str(&s.ProxyJump),
				"connect_timeout": d.duration(&s.ConnectTimeout),
			})
		},
		"brokers": func(path string, at pos, n ast.Node) {
			d.list(path, n, func(path string, at pos, n ast.Node) {
				var b Broker
				if isNull(n) {
					d.errorf(at, "%s is empty; a broker needs at least id, host, stop and start", path)
				}
				d.object(path, at, n, map[string]field{
					"id":            d.integer(0, math.MaxInt32, "a broker.id from 0 to 2147483647", func(x int64) { b.ID = int32(x) }),
					"host":          d.str(&b.Host),
					"port":          d.port(&b.Port),
					"user":          d.str(&b.User),
					"identity_file": d.str(&b.IdentityFile),
					"known_hosts":   d.str(&b.KnownHosts),
					"stop":          d.str(&b.Stop),
					"start":         d.str(&b.Start),
					"log_dirs":      d.strs(&b.LogDirs),
				})
				inv.Brokers = append(inv.Brokers, b)
			})
		},
		"clients": func(path string, at pos, n ast.Node) {
			d.list(path, n, func(path string, at pos, n ast.Node) {
				var c Client
				if isNull(n) {
					d.errorf(at, "%s is empty; a client needs name, host, stop and start", path)
				}
				d.object(path, at, n, map[string]field{
					"name":  d.str(&c.Name),
					"host":  d.str(&c.Host),
					"stop":  d.str(&c.Stop),
					"start": d.str(&c.Start),
				})
				inv.Clients = append(inv.Clients, c)
			})
		},
	})
}
