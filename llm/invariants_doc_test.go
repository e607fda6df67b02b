package llm_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// invariantCount is the number of invariants DESIGN.md numbers.
const invariantCount = 11

var (
	invariantItem = regexp.MustCompile(`^\s*(\d+)\.\s`)
	invariantTest = regexp.MustCompile(`\bTestInvariant(\d\d)_\w+`)
	invariantFunc = regexp.MustCompile(`^TestInvariant\d\d_\w+$`)
)

// docInvariants parses the numbered invariant list of the package doc
// (doc.go): for each number, the TestInvariantNN_* names its item gives.
func docInvariants(t *testing.T) map[int][]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatal("doc.go has no package doc")
	}
	_, list, ok := strings.Cut(f.Doc.Text(), "# Invariants\n")
	if !ok {
		t.Fatal(`package doc has no "# Invariants" section`)
	}
	items := map[int][]string{}
	cur := 0
	for _, line := range strings.Split(list, "\n") {
		if m := invariantItem.FindStringSubmatch(line); m != nil {
			cur, _ = strconv.Atoi(m[1])
			if _, dup := items[cur]; dup {
				t.Errorf("invariant %d listed twice", cur)
			}
			items[cur] = []string{}
		} else if strings.TrimSpace(line) == "" || !strings.HasPrefix(line, " ") {
			if cur > 0 && strings.TrimSpace(line) != "" {
				cur = 0 // prose after the list
			}
			continue
		}
		if cur == 0 {
			continue
		}
		for _, m := range invariantTest.FindAllStringSubmatch(line, -1) {
			if n, _ := strconv.Atoi(m[1]); n != cur {
				t.Errorf("invariant %d lists %s, a test of invariant %d", cur, m[0], n)
			}
			items[cur] = append(items[cur], m[0])
		}
	}
	return items
}

// repoInvariantTests finds every top-level TestInvariantNN_* function in
// the _test.go files of the repository (the module this package is in,
// and any nested module under it), by file.
func repoInvariantTests(t *testing.T) map[string]string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at the repository root %s: %v", root, err)
	}
	found := map[string]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && invariantFunc.MatchString(fn.Name.Name) {
				rel, _ := filepath.Rel(root, path)
				found[fn.Name.Name] = rel
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestInvariantsDocumented keeps the package doc's invariant list honest:
// every invariant 1..11 is listed once with at least one test, every test
// it names exists in the repository, and every TestInvariantNN_* test in
// the repository is listed under its number.
func TestInvariantsDocumented(t *testing.T) {
	items := docInvariants(t)
	tests := repoInvariantTests(t)
	for n := 1; n <= invariantCount; n++ {
		names, ok := items[n]
		switch {
		case !ok:
			t.Errorf("invariant %d is not in the package doc's list", n)
		case len(names) == 0:
			t.Errorf("invariant %d names no TestInvariant%02d_* test", n, n)
		}
		for _, name := range names {
			if _, ok := tests[name]; !ok {
				t.Errorf("invariant %d names %s, which no _test.go file in the repository defines", n, name)
			}
		}
	}
	for n := range items {
		if n < 1 || n > invariantCount {
			t.Errorf("the list has an invariant %d; DESIGN.md numbers 1..%d", n, invariantCount)
		}
	}
	for name, file := range tests {
		n, _ := strconv.Atoi(name[len("TestInvariant") : len("TestInvariant")+2])
		if !slices.Contains(items[n], name) {
			t.Errorf("%s (%s) is not listed under invariant %d in llm/doc.go", name, file, n)
		}
	}
}
