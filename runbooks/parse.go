package runbooks

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"

	"github.com/kremedy/kremedy/internal/strictyaml"
	"github.com/kremedy/kremedy/steps"
)

// The values the schema accepts.
var (
	modes       = []string{"zookeeper", "kraft"}
	paramTypes  = steps.ValueTypeNames()
	risks       = steps.RiskNames()
	confirms    = steps.ConfirmNames()
	nameRe      = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	paramNameRe = regexp.MustCompile(`^[a-z_]+$`)
	// reserved are the template names every runbook has besides its
	// parameters and artifacts.
	reserved = []string{"run_dir", "report", "inventory", "cluster"}
)

const maxSummary = 100 // characters

type (
	pos   = strictyaml.Pos
	field = strictyaml.Field
)

// Parse reads the runbook in data, which came from file (used in messages
// and as Runbook.File). kinds are the step kinds a step may name, with
// their options; a step of any other kind, or an option its kind does not
// have, is an error. Parse is strict: unknown keys, values
// of the wrong type, duplicate keys, anchors, aliases, tags and several
// documents are errors too. On failure the error is one *strictyaml.Error,
// or several joined with errors.Join, in the order they appear in the file.
func Parse(file string, data []byte, kinds *steps.Registry) (*Runbook, error) {
	return parse(file, data, kinds, "")
}

// parse is Parse; a non-empty wantName is the name the runbook must have.
func parse(file string, data []byte, kinds *steps.Registry, wantName string) (*Runbook, error) {
	p := &parser{
		Decoder: strictyaml.NewDecoder(file, strictyaml.Doc{
			Noun:    "runbook",
			A:       "a runbook",
			MaxSize: MaxSize,
			Empty:   "it needs at least name, summary, mode, confirm and steps",
			Single:  "a runbook file holds one runbook",
		}),
		kinds:    kinds,
		wantName: wantName,
		lines:    strings.Split(string(data), "\n"),
	}
	root := p.Parse(data)
	if root == nil {
		return nil, p.Err()
	}
	rb := p.runbook(root)
	if err := p.Err(); err != nil {
		return nil, err
	}
	rb.File, rb.kinds = file, kinds
	for i := range rb.Steps {
		rb.Steps[i].with, rb.Steps[i].rollbackAt, rb.Steps[i].at = nil, nil, pos{} // checked
	}
	return rb, nil
}

type parser struct {
	*strictyaml.Decoder
	kinds    *steps.Registry
	wantName string
	lines    []string // of the file, to place template errors
}

// isMapping reports whether n is a mapping Object decodes; anything else it
// has already reported.
func isMapping(n ast.Node) bool {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return true
	}
	return false
}

// firstKey is where the mapping n starts: its first key.
func firstKey(n ast.Node) pos {
	switch m := n.(type) {
	case *ast.MappingNode:
		if len(m.Values) > 0 {
			return strictyaml.NodePos(m.Values[0].Key)
		}
	case *ast.MappingValueNode:
		return strictyaml.NodePos(m.Key)
	}
	return strictyaml.NodePos(n)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// need reports, at at (where the mapping at path starts), each of keys
// that the mapping lacks; hints explain each key.
func (p *parser) need(path string, at pos, hints map[string]string, keys ...string) {
	for _, k := range keys {
		if !p.Has(join(path, k)) {
			p.Errorf(at, "%s is required: %s", join(path, k), hints[k])
		}
	}
}

// nonEmpty reports a value that is empty or only spaces.
func (p *parser) nonEmpty(hint string) strictyaml.Check {
	return func(path string, at pos, s string) {
		if strings.TrimSpace(s) == "" {
			p.Errorf(at, "%s is empty: %s", path, hint)
		}
	}
}

// oneOf reports a non-empty value that is not one of values.
func (p *parser) oneOf(values []string, why string) strictyaml.Check {
	return func(path string, at pos, s string) {
		switch {
		case s == "" || slices.Contains(values, s):
		case len(values) == 1:
			p.Errorf(at, "%s is %q; it must be %s%s", path, s, values[0], why)
		default:
			p.Errorf(at, "%s %q is not one of %s%s", path, s, strings.Join(values, ", "), why)
		}
	}
}

// unique reports a non-empty value that an earlier entry already has;
// seen maps each value to the path of the first entry with it.
func (p *parser) unique(seen map[string]string, what string) strictyaml.Check {
	return func(path string, at pos, s string) {
		if s == "" {
			return
		}
		if prev, ok := seen[s]; ok {
			p.Errorf(at, "%s %q is also used by %s; %s are unique", path, s, prev, what)
			return
		}
		seen[s] = path[:strings.LastIndexByte(path, '.')]
	}
}

var hints = map[string]string{
	"name":        "the runbook's name, lower-case letters, digits and '-', such as topic-cleanup",
	"summary":     "one line, at most 100 characters, saying what the runbook repairs",
	"mode":        "the cluster mode the runbook acts on: zookeeper or kraft",
	"confirm_top": "what a destructive step's operator types: word (a template such as {{.topic}} or {{.cluster}}) and noun (topic, cluster)",
	"word":        "a template of what the operator types, such as {{.topic}} (a parameter) or {{.cluster}} (the inventory's cluster name)",
	"noun":        "what the word is, for the prompt \"type the <noun> name\": topic, cluster",
	"aid":         "the artifact's name in templates and for the step kinds: lower-case letters and '_'",
	"what":        "what the file is, for humans: \"znode backup (data, ACLs, versions)\"",
	"path":        "where the file is, relative to the run directory, such as backup/znodes.json",
	"steps":       "a runbook needs at least one step",
	"ptype":       "one of " + strings.Join(paramTypes, ", "),
	"pname":       "the name used in --set name=value, lower-case letters and '_'",
	"id":          "a name for the step, unique in the runbook: lower-case letters, digits and '-'",
	"kind":        "the step kind the engine runs",
	"with":        "the kind's options: a value as written, or $name for a runbook parameter",
	"title":       "one line saying what the step does",
	"why":         "the training note: why this step is done, and what it changes",
	"risk":        "one of " + strings.Join(risks, ", "),
	"confirm":     "one of " + strings.Join(confirms, ", ") + "; a destructive step needs typed",
	"window": "a name shared by consecutive steps that are planned and confirmed together before the first of them runs, " +
		"then run back to back (an outage window: stop, wipe, start)",
	"rollback": "a step that changes the cluster says how to undo it (a text/template); " +
		"only read-only steps may leave it out",
}

func (p *parser) runbook(root ast.Node) *Runbook {
	rb := &Runbook{}
	ids, params := map[string]string{}, map[string]string{}
	p.Object("", root, map[string]field{
		"name": p.Str(&rb.Name, p.nonEmpty(hints["name"]), func(path string, at pos, s string) {
			switch {
			case s == "":
			case !nameRe.MatchString(s):
				p.Errorf(at, "name %q may hold only lower-case letters, digits and '-', and must start with a letter or digit", s)
			case p.wantName != "" && s != p.wantName:
				p.Errorf(at, "name %q must be %q, the base name of the file, for a built-in runbook", s, p.wantName)
			}
		}),
		"summary": p.Str(&rb.Summary, p.nonEmpty(hints["summary"]), func(path string, at pos, s string) {
			if n := utf8.RuneCountInString(s); n > maxSummary {
				p.Errorf(at, "summary is %d characters long; keep it to %d and put the rest in description", n, maxSummary)
			}
		}),
		"description": p.Text(&rb.Description),
		"mode": p.Str(&rb.Mode, p.nonEmpty(hints["mode"]),
			p.oneOf(modes, "")),
		"confirm": func(path string, at pos, n ast.Node) {
			p.Object(path, n, map[string]field{
				"word": p.Str(&rb.ConfirmWord, p.nonEmpty(hints["word"])),
				"noun": p.Str(&rb.ConfirmNoun, p.nonEmpty(hints["noun"])),
			})
			if isMapping(n) {
				p.need(path, firstKey(n), hints, "word", "noun")
			} else if strictyaml.IsNull(n) {
				p.Errorf(at, "confirm is empty: %s", hints["confirm_top"])
			}
		},
		"artifacts": func(path string, at pos, n ast.Node) {
			seen := map[string]string{}
			p.List(path, n, func(path string, at pos, n ast.Node) {
				if a, ok := p.artifact(path, at, n, seen); ok {
					rb.Artifacts = append(rb.Artifacts, a)
				}
			})
		},
		"next": p.Strs(&rb.Next),
		"params": func(path string, at pos, n ast.Node) {
			p.List(path, n, func(path string, at pos, n ast.Node) {
				if pr, ok := p.param(path, at, n, params); ok {
					rb.Params = append(rb.Params, pr)
				}
			})
		},
		"steps": func(path string, at pos, n ast.Node) {
			if s, ok := n.(*ast.SequenceNode); strictyaml.IsNull(n) || ok && len(s.Values) == 0 {
				p.Errorf(at, "steps is empty: %s", hints["steps"])
			}
			p.List(path, n, func(path string, at pos, n ast.Node) {
				if s, ok := p.step(path, at, n, ids); ok {
					rb.Steps = append(rb.Steps, s)
				}
			})
			p.windows(path, rb.Steps)
		},
	})
	if isMapping(root) || strictyaml.IsNull(root) { // a lone "~" is an empty mapping
		p.need("", firstKey(root), map[string]string{"name": hints["name"], "summary": hints["summary"], "mode": hints["mode"],
			"confirm": hints["confirm_top"], "steps": hints["steps"]}, "name", "summary", "mode", "confirm", "steps")
	}
	p.crossCheck(rb)
	return rb
}

// windows refuses a window whose steps are not consecutive, and a window of
// one step (nothing to confirm together).
func (p *parser) windows(path string, ss []StepSpec) {
	closed := map[string]bool{}
	count := map[string]int{}
	for i, s := range ss {
		if s.Window == "" {
			continue
		}
		count[s.Window]++
		if closed[s.Window] {
			p.Errorf(s.windowAt, "%s[%d].window %q: the window's steps must be consecutive; step %s is separated from the others", path, i, s.Window, s.ID)
		}
		if i+1 == len(ss) || ss[i+1].Window != s.Window {
			closed[s.Window] = true
		}
	}
	for i, s := range ss {
		if s.Window != "" && count[s.Window] == 1 {
			p.Errorf(s.windowAt, "%s[%d].window %q holds only step %s: a window groups two or more consecutive steps", path, i, s.Window, s.ID)
		}
	}
}

func (p *parser) param(path string, at pos, n ast.Node, seen map[string]string) (Param, bool) {
	if strictyaml.IsNull(n) {
		p.Errorf(at, "%s is empty; a parameter needs at least name and type", path)
		return Param{}, false
	}
	var pr Param
	var defaultAt pos
	p.Object(path, n, map[string]field{
		"name": p.Str(&pr.Name, p.nonEmpty(hints["pname"]), func(path string, at pos, s string) {
			if s != "" && !paramNameRe.MatchString(s) {
				p.Errorf(at, "%s %q may hold only lower-case letters and '_'", path, s)
			}
		}, p.unique(seen, "parameter names")),
		"type":        p.Str(&pr.Type, p.nonEmpty(hints["ptype"]), p.oneOf(paramTypes, "")),
		"required":    p.Bool(&pr.Required),
		"description": p.Text(&pr.Description),
		"default": p.Str(&pr.Default, func(path string, at pos, s string) {
			pr.HasDefault, defaultAt = true, at
		}),
	})
	if !isMapping(n) {
		return Param{}, false
	}
	p.need(path, at, map[string]string{"name": hints["pname"], "type": hints["ptype"]}, "name", "type")
	switch {
	case !pr.HasDefault:
	case pr.Required:
		p.Errorf(defaultAt, "%s.default: a required parameter has no default; remove the default or required: true", path)
	case slices.Contains(paramTypes, pr.Type):
		if err := checkValue(pr.Type, pr.Default); err != nil {
			p.Errorf(defaultAt, "%s.default: %v", path, err)
		}
	}
	return pr, true
}

func (p *parser) step(path string, at pos, n ast.Node, ids map[string]string) (StepSpec, bool) {
	if strictyaml.IsNull(n) {
		p.Errorf(at, "%s is empty; a step needs at least id, kind, title, why, risk and confirm", path)
		return StepSpec{}, false
	}
	s := StepSpec{Line: at.Line, at: at}
	rollback := false // rollback decoded, even if empty
	p.Object(path, n, map[string]field{
		"id": p.Str(&s.ID, p.nonEmpty(hints["id"]), func(path string, at pos, v string) {
			if v != "" && !nameRe.MatchString(v) {
				p.Errorf(at, "%s %q may hold only lower-case letters, digits and '-', and must start with a letter or digit", path, v)
			}
		}, p.unique(ids, "step ids")),
		"kind": p.Str(&s.Kind, p.nonEmpty(hints["kind"]), func(path string, at pos, v string) {
			if _, ok := p.kinds.Lookup(v); v == "" || ok {
				return
			}
			known := "kremedy knows no step kinds"
			if names := p.kinds.Names(); len(names) > 0 {
				known = "the step kinds kremedy knows are " + strings.Join(names, ", ")
			}
			p.Errorf(at, "%s %q is not a step kind kremedy knows; %s", path, v, known)
		}),
		"with":    func(path string, at pos, n ast.Node) { s.with = &withNode{path: path, at: at, n: n} },
		"title":   p.Str(&s.Title, p.nonEmpty(hints["title"])),
		"why":     p.Text(&s.Why, p.nonEmpty(hints["why"])),
		"risk":    p.Str(&s.Risk, p.nonEmpty(hints["risk"]), p.oneOf(risks, "")),
		"confirm": p.Str(&s.Confirm, p.nonEmpty(hints["confirm"]), p.oneOf(confirms, "")),
		"rollback": func(path string, at pos, n ast.Node) {
			p.Text(&s.Rollback, func(path string, _ pos, v string) {
				rollback = true
				if p.checkTemplate(path, n, v) {
					s.rollbackAt = &withNode{path: path, at: at, n: n}
				}
			})(path, at, n)
		},
		"timeout": p.Duration(&s.Timeout),
		"window": p.Str(&s.Window, p.nonEmpty(hints["window"]), func(path string, at pos, v string) {
			if v != "" && !nameRe.MatchString(v) {
				p.Errorf(at, "%s %q may hold only lower-case letters, digits and '-'", path, v)
			}
			s.windowAt = at
		}),
	})
	if !isMapping(n) {
		return StepSpec{}, false
	}
	p.need(path, at, hints, "id", "kind", "title", "why", "risk", "confirm")
	validConfirm := slices.Contains(confirms, s.Confirm)
	switch s.Risk {
	case "destructive":
		if validConfirm && s.Confirm != "typed" {
			p.Errorf(p.At(path+".confirm"), "%s.confirm is %s, but the step is destructive: it needs confirm: typed "+
				"(the operator types the runbook's confirm word; Enter alone never confirms)", path, s.Confirm)
		}
	case "read-only":
		if validConfirm && s.Confirm != "none" {
			p.Errorf(p.At(path+".confirm"), "%s.confirm is %s, but the step is read-only: it changes nothing, so confirm must be none", path, s.Confirm)
		}
	}
	if slices.Contains(risks, s.Risk) && s.Risk != "read-only" {
		switch {
		case !p.Has(path + ".rollback"):
			p.Errorf(at, "%s.rollback is required: %s", path, hints["rollback"])
		case rollback && strings.TrimSpace(s.Rollback) == "":
			p.Errorf(p.At(path+".rollback"), "%s.rollback is empty: %s", path, hints["rollback"])
		}
	}
	return s, true
}

// tmplErrRe takes text/template's parse errors apart:
// "template: rollback:3: unexpected ..." is line 3 of the template.
var (
	tmplErrRe  = regexp.MustCompile(`^template: rollback:(\d+): (.*)$`)
	tmplLineRe = regexp.MustCompile(`rollback:(\d+)`)
)

// checkTemplate reports a rollback note that does not parse as a
// text/template, at the line of the YAML file that holds the template's bad
// line. Lines of the template named in the message become lines of the file.
func (p *parser) checkTemplate(path string, n ast.Node, text string) bool {
	_, err := template.New("rollback").Parse(text)
	if err == nil {
		return true
	}
	at, msg := strictyaml.NodePos(n), err.Error()
	last := strings.Count(strings.TrimSuffix(text, "\n"), "\n") + 1
	fileLine := func(s string) pos {
		line, _ := strconv.Atoi(s)
		return p.templateLine(n, at, min(line, last))
	}
	if m := tmplErrRe.FindStringSubmatch(msg); m != nil {
		at = fileLine(m[1])
		msg = tmplLineRe.ReplaceAllStringFunc(m[2], func(s string) string {
			return fmt.Sprintf("line %d", fileLine(strings.TrimPrefix(s, "rollback:")).Line)
		})
	}
	p.Errorf(at, "%s is not a valid text/template: %s", path, msg)
	return false
}

// templateLine is where line (1-based) of the template in n is in the
// file, or at when that cannot be told: a block scalar (|) starts on the
// line after its header; a folded one (>) joins lines, so its first line
// stands for all of them; any other scalar starts where it is.
func (p *parser) templateLine(n ast.Node, at pos, line int) pos {
	y := at.Line + line - 1
	if l, ok := n.(*ast.LiteralNode); ok {
		y = at.Line + line
		if strings.HasPrefix(l.Start.Value, ">") {
			y = at.Line + 1
		}
	} else if line == 1 {
		return at
	}
	if y < 1 || y > len(p.lines) {
		return at
	}
	text := p.lines[y-1]
	col := len(text) - len(strings.TrimLeft(text, " ")) + 1
	return pos{Line: y, Col: col}
}
