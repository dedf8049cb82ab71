package runbooks

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/goccy/go-yaml/ast"

	"github.com/kremedy/kremedy/internal/strictyaml"
	"github.com/kremedy/kremedy/steps"
)

// withNode is a field whose check waits until the whole runbook is read:
// a step's options need its kind and the runbook's parameters, a template
// the parameters and the artifacts, wherever they are in the file.
type withNode struct {
	path string
	at   pos
	n    ast.Node
}

var artifactIDRe = regexp.MustCompile(`^[a-z_]+$`)

func (p *parser) artifact(path string, at pos, n ast.Node, seen map[string]string) (Artifact, bool) {
	if strictyaml.IsNull(n) {
		p.Errorf(at, "%s is empty; an artifact needs id, what and path", path)
		return Artifact{}, false
	}
	var a Artifact
	p.Object(path, n, map[string]field{
		"id": p.Str(&a.ID, p.nonEmpty(hints["aid"]), func(path string, at pos, s string) {
			if s != "" && !artifactIDRe.MatchString(s) {
				p.Errorf(at, "%s %q may hold only lower-case letters and '_'", path, s)
			}
			if slices.Contains(reserved, s) {
				p.Errorf(at, "%s %q is a name every runbook's templates already have (%s)", path, s, strings.Join(reserved, ", "))
			}
		}, p.unique(seen, "artifact ids")),
		"what": p.Str(&a.What, p.nonEmpty(hints["what"])),
		"path": p.Str(&a.Path, p.nonEmpty(hints["path"]), func(where string, at pos, s string) {
			if s != "" && (filepath.IsAbs(s) || filepath.Clean(s) != s || s == "." || strings.HasPrefix(s, "..")) {
				p.Errorf(at, "%s %q must be a clean path inside the run directory, such as backup/znodes.json", where, s)
			}
		}),
	})
	if !isMapping(n) {
		return Artifact{}, false
	}
	p.need(path, at, map[string]string{"id": hints["aid"], "what": hints["what"], "path": hints["path"]}, "id", "what", "path")
	return a, true
}

// crossCheck checks what depends on more than one part of the runbook:
// each step's options against its kind and the parameters, the artifacts
// each kind needs, and every template's names.
func (p *parser) crossCheck(rb *Runbook) {
	if p.Err() != nil {
		// References are checked in a file with no other error: a broken
		// parameter or step would only repeat itself here.
		return
	}
	params := map[string]Param{}
	for _, pr := range rb.Params {
		params[pr.Name] = pr
	}
	names := map[string]bool{}
	for _, k := range reserved {
		names[k] = true
	}
	for _, pr := range rb.Params {
		if slices.Contains(reserved, pr.Name) {
			p.Errorf(p.At("params"), "parameter %s has a name every runbook's templates already have (%s); rename it", pr.Name, strings.Join(reserved, ", "))
		}
		names[pr.Name] = true
	}
	declared := map[string]bool{}
	for _, a := range rb.Artifacts {
		if _, clash := params[a.ID]; clash {
			p.Errorf(p.At("artifacts"), "artifact %s has the name of a parameter; rename one of them", a.ID)
		}
		names[a.ID], declared[a.ID] = true, true
	}
	line := func(at pos) func(int) pos { return func(int) pos { return at } }
	if rb.ConfirmNoun != "" {
		p.checkNames("confirm.noun", line(p.At("confirm.noun")), rb.ConfirmNoun, names)
	}
	if rb.ConfirmWord != "" {
		p.checkNames("confirm.word", line(p.At("confirm.word")), rb.ConfirmWord, names)
	}
	for i, n := range rb.Next {
		path := fmt.Sprintf("next[%d]", i)
		if _, err := template.New("next").Parse(n); err != nil {
			p.Errorf(p.At(path), "%s is not a valid text/template: %v", path, err)
			continue
		}
		p.checkNames(path, line(p.At(path)), n, names)
	}
	for i := range rb.Steps {
		s := &rb.Steps[i]
		if r := s.rollbackAt; r != nil {
			last := strings.Count(strings.TrimSuffix(s.Rollback, "\n"), "\n") + 1
			p.checkNames(r.path, func(l int) pos { return p.templateLine(r.n, strictyaml.NodePos(r.n), min(l, last)) }, s.Rollback, names)
		}
		spec, ok := p.kinds.Lookup(s.Kind)
		if !ok {
			continue // already reported
		}
		at := s.at
		for _, need := range spec.Needs {
			if !declared[need] {
				p.Errorf(at, "step %s: kind %s writes or reads the artifact %q, which the runbook does not declare under artifacts", s.ID, s.Kind, need)
			}
		}
		p.options(s, spec, params)
	}
}

// options decodes a step's with: against its kind's options.
func (p *parser) options(s *StepSpec, spec steps.KindSpec, params map[string]Param) {
	s.With = map[string]string{}
	given := map[string]bool{}
	if s.with != nil {
		fields := map[string]field{}
		for _, o := range spec.Options {
			fields[o.Name] = func(path string, at pos, n ast.Node) {
				given[o.Name] = true
				var v string
				p.Str(&v, func(path string, at pos, v string) { p.optionValue(s, o, path, at, v, params) })(path, at, n)
			}
		}
		if len(fields) == 0 && !strictyaml.IsNull(s.with.n) {
			p.Errorf(s.with.at, "%s: step kind %s has no options", s.with.path, s.Kind)
		} else {
			p.Object(s.with.path, s.with.n, fields)
		}
	}
	for _, o := range spec.Options {
		if !given[o.Name] && !o.HasDefault {
			at := s.at
			if s.with != nil {
				at = s.with.at
			}
			p.Errorf(at, "step %s: kind %s needs option %s (%s) in with:, as a value or $parameter", s.ID, s.Kind, o.Name, o.Type)
		}
	}
}

func (p *parser) optionValue(s *StepSpec, o steps.Option, path string, at pos, v string, params map[string]Param) {
	if ref, ok := strings.CutPrefix(v, "$"); ok {
		pr, ok := params[ref]
		switch {
		case !ok:
			known := "it has no parameters"
			if len(params) > 0 {
				known = "its parameters are " + strings.Join(slices.Sorted(maps.Keys(params)), ", ")
			}
			p.Errorf(at, "%s refers to parameter %s, which the runbook does not declare; %s", path, ref, known)
			return
		case !pr.Required && !pr.HasDefault && !o.HasDefault:
			p.Errorf(at, "%s refers to parameter %s, which has no default and is not required: option %s would have no value when it is not set", path, ref, o.Name)
			return
		}
		if t, err := steps.ParseValueType(pr.Type); err == nil && !o.Type.Accepts(t) {
			p.Errorf(at, "%s: option %s is a %s, but parameter %s is a %s", path, o.Name, o.Type, ref, pr.Type)
			return
		}
	} else if err := o.Type.Check(v); err != nil {
		p.Errorf(at, "%s: option %s (%s): %v", path, o.Name, o.Type, err)
		return
	}
	s.With[o.Name] = v
}

// checkNames reports the names a template uses that the runbook has not:
// it runs the template on every name it may use. at places a line of the
// template in the file.
func (p *parser) checkNames(path string, at func(line int) pos, text string, names map[string]bool) {
	t, err := template.New("t").Option("missingkey=error").Parse(text)
	if err != nil {
		return // reported where it is parsed
	}
	data := map[string]string{}
	for n := range names {
		data[n] = "x"
	}
	if err := t.Execute(discard{}, data); err != nil {
		msg, l := err.Error(), 1
		if m := execLineRe.FindStringSubmatch(msg); m != nil {
			l, _ = strconv.Atoi(m[1])
		}
		if m := mapKeyRe.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("{{.%s}} is neither a parameter nor an artifact of the runbook (it may use %s)", m[1], strings.Join(slices.Sorted(maps.Keys(names)), ", "))
		}
		p.Errorf(at(l), "%s: %s", path, msg)
	}
}

var (
	mapKeyRe   = regexp.MustCompile(`map has no entry for key "([^"]*)"`)
	execLineRe = regexp.MustCompile(`^template: t:(\d+):`)
)

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
