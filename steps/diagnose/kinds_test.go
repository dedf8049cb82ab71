package diagnose_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kremedy/kremedy/steps/diagnose"
)

// TestKindsIsEveryKind: every Find* constant of the package is declared in
// finding.go's one block and listed in Kinds, once; Kinds lists nothing
// else.
func TestKindsIsEveryKind(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{} // kind -> file
	fset := token.NewFileSet()
	for _, fn := range files {
		if strings.HasSuffix(fn, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, fn, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Find") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: %s is not a string literal", fn, n.Name)
						continue
					}
					kind, _ := strconv.Unquote(lit.Value)
					if fn != "finding.go" {
						t.Errorf("%s declares %s (%q): every finding kind is declared in finding.go's one block", fn, n.Name, kind)
					}
					declared[kind] = fn
				}
			}
		}
	}
	if len(declared) < 49 {
		t.Fatalf("found %d finding kinds in the package's source, want at least 49: the scan is broken", len(declared))
	}
	seen := map[string]bool{}
	for _, k := range diagnose.Kinds {
		if seen[k] {
			t.Errorf("Kinds lists %q twice", k)
		}
		seen[k] = true
		if declared[k] == "" {
			t.Errorf("Kinds lists %q, which no Find* constant declares", k)
		}
	}
	for k := range declared {
		if !seen[k] {
			t.Errorf("finding kind %q is not in Kinds", k)
		}
	}
}

// docKinds are the kinds docs/diagnose.md's tables of findings list: the
// backquoted names in the first cell of every table whose first column is
// "kind".
func docKinds(t *testing.T) map[string]bool {
	b, err := os.ReadFile("../../docs/diagnose.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("`([^`]+)`")
	out := map[string]bool{}
	inKinds := false
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "|") {
			inKinds = false
			continue
		}
		first := strings.TrimSpace(strings.Split(l, "|")[1])
		switch {
		case first == "kind":
			inKinds = true
		case inKinds && !strings.HasPrefix(first, "---"):
			for _, m := range name.FindAllStringSubmatch(first, -1) {
				out[m[1]] = true
			}
		}
	}
	return out
}

// TestEveryKindIsDocumented: docs/diagnose.md has a row for every finding
// kind, and documents no kind that does not exist.
func TestEveryKindIsDocumented(t *testing.T) {
	doc := docKinds(t)
	if len(doc) < 40 {
		t.Fatalf("found %d kinds in docs/diagnose.md's tables: the parse is broken", len(doc))
	}
	for _, k := range diagnose.Kinds {
		if !doc[k] {
			t.Errorf("finding kind %q has no row in docs/diagnose.md", k)
		}
	}
	for k := range doc {
		if !slices.Contains(diagnose.Kinds, k) {
			t.Errorf("docs/diagnose.md documents %q, which is no finding kind", k)
		}
	}
}
