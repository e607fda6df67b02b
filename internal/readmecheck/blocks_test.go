package readmecheck

import (
	"bufio"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the module root, two directories above this package.
var root = filepath.Join("..", "..")

// block is one fenced block of a Markdown file.
type block struct {
	file string
	line int    // of the opening fence
	lang string // the info string's first word
	text string
}

// docs are the README and the guides.
func docs(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) < 10 {
		t.Fatalf("only %d guides in docs/", len(guides))
	}
	return append(files, guides...)
}

func blocks(t *testing.T, file string) []block {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out []block
		cur *block
		n   int
		buf strings.Builder
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		if !strings.HasPrefix(line, "```") {
			if cur != nil {
				buf.WriteString(line + "\n")
			}
			continue
		}
		if cur == nil {
			lang, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "```")), " ")
			cur = &block{file: file, line: n, lang: lang}
			buf.Reset()
			continue
		}
		cur.text = buf.String()
		out = append(out, *cur)
		cur = nil
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: a fence is never closed", file, cur.line)
	}
	return out
}

// tokens is Go source as its tokens, comments and semicolons left out (a
// block written on one line and its gofmt'd copy have the same tokens).
func tokens(src []byte) (string, error) {
	fset := token.NewFileSet()
	var s scanner.Scanner
	var first error
	s.Init(fset.AddFile("", fset.Base(), len(src)), src, func(_ token.Position, msg string) {
		if first == nil {
			first = &scanError{msg}
		}
	}, 0)
	var b strings.Builder
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON {
			continue
		}
		b.WriteString("\x00")
		if lit != "" {
			b.WriteString(lit)
		} else {
			b.WriteString(tok.String())
		}
	}
	b.WriteString("\x00")
	return b.String(), first
}

type scanError struct{ msg string }

func (e *scanError) Error() string { return e.msg }

// goSources is every Go file of the repository that a build compiles (the
// module, and the modules of its own under it: bench, gateway/sdktest), as
// tokens, by path.
func goSources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".cache", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		toks, err := tokens(src)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
		out[p] = toks
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoBlocksCompile: every Go block of the README and the guides appears,
// token for token (comments and layout aside), in a Go file that the build
// compiles: an Example function, or a function of this package written for
// it. A block edited without its backing, or an API change that breaks the
// backing, fails here or in the build.
func TestGoBlocksCompile(t *testing.T) {
	srcs := goSources(t)
	n := 0
	for _, file := range docs(t) {
		for _, b := range blocks(t, file) {
			if b.lang != "go" {
				continue
			}
			n++
			want, err := tokens([]byte(b.text))
			if err != nil {
				t.Errorf("%s:%d: not Go: %v", b.file, b.line, err)
				continue
			}
			found := ""
			for p, toks := range srcs {
				if strings.Contains(toks, want) {
					found = p
					break
				}
			}
			if found == "" {
				t.Errorf("%s:%d: this Go block is in no compiled Go file: back it with an Example or a function in internal/readmecheck", b.file, b.line)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d Go blocks found", n)
	}
}

var runBy = regexp.MustCompile(`\b(?:Test|Example|Fuzz)\w+|\.ci/\w+`)

// TestCommandBlocksRunOrSayWhy: every shell block's first line says which
// test runs it ("# run by TestX", "# run by .ci/run") or what it needs that
// a test does not have ("# needs a key", "# needs the recorded corpus"),
// and every test it names exists. Untagged blocks hold output only: a "$ "
// prompt there is a command hiding from this check.
func TestCommandBlocksRunOrSayWhy(t *testing.T) {
	funcs := testFuncs(t)
	n := 0
	for _, file := range docs(t) {
		for _, b := range blocks(t, file) {
			switch b.lang {
			case "sh", "bash", "shell", "console":
			case "":
				for _, line := range strings.Split(b.text, "\n") {
					if strings.HasPrefix(line, "$ ") {
						t.Errorf("%s:%d: a command in an output block (%q): put it in a sh block", b.file, b.line, line)
					}
				}
				continue
			default:
				continue
			}
			n++
			first, _, _ := strings.Cut(b.text, "\n")
			switch {
			case strings.HasPrefix(first, "# needs "):
			case strings.HasPrefix(first, "# run by "):
				names := runBy.FindAllString(first, -1)
				if len(names) == 0 {
					t.Errorf("%s:%d: %q names no test", b.file, b.line, first)
				}
				for _, name := range names {
					if strings.HasPrefix(name, ".ci/") {
						if _, err := os.Stat(filepath.Join(root, name)); err != nil {
							t.Errorf("%s:%d: %s does not exist", b.file, b.line, name)
						}
						continue
					}
					if !funcs[name] {
						t.Errorf("%s:%d: no test %s in the repository", b.file, b.line, name)
					}
				}
			default:
				t.Errorf("%s:%d: a command block must start with \"# run by <test>\" or \"# needs <what>\", not %q", b.file, b.line, first)
			}
		}
	}
	if n < 5 {
		t.Fatalf("only %d command blocks found", n)
	}
}

// testFuncs are the names of the test, example and fuzz functions of every
// _test.go file in the repository.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func ((?:Test|Example|Fuzz)\w+)\(`)
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".cache" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// elsewhere are guides the README links to that another branch writes: a
// link to one may dangle until it lands, and its shape is not checked here
// until it is taken off this list.
var elsewhere = map[string]bool{}

var mdLink = regexp.MustCompile(`\]\(([^)#\s]+\.md)(#[^)]*)?\)`)

// TestReadmeIsALandingPage: the README stays under 250 lines and links to
// every guide in docs/; each guide starts from what the reader wants and
// ends with how it is tested; every local Markdown link of the README and
// the guides reaches a file.
func TestReadmeIsALandingPage(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n >= 250 {
		t.Errorf("README.md is %d lines: keep it under 250, move the rest to a guide", n)
	}
	guides, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, g := range guides {
		rel := "docs/" + filepath.Base(g)
		if !strings.Contains(string(readme), "]("+rel+")") {
			t.Errorf("README.md does not link to %s", rel)
		}
	}
	for _, g := range guides {
		src, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		// A guide starts from what the reader wants to do and ends with
		// how it is tested (a guide another branch writes is held to it
		// once it is taken off elsewhere).
		if elsewhere["docs/"+filepath.Base(g)] {
			continue
		}
		body := string(src)
		if _, rest, _ := strings.Cut(body, "\n\n"); !strings.HasPrefix(rest, "You want") {
			t.Errorf("%s: its first paragraph does not start from what the reader wants (\"You want ...\")", g)
		}
		h2 := regexp.MustCompile(`(?m)^## .*$`).FindAllString(body, -1)
		if len(h2) == 0 || h2[len(h2)-1] != "## How it is tested" {
			t.Errorf("%s: its last section is not \"## How it is tested\"", g)
		}
	}
	for _, file := range docs(t) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(src), -1) {
			target := filepath.Join(filepath.Dir(file), m[1])
			rel, _ := filepath.Rel(root, target)
			if elsewhere[filepath.ToSlash(rel)] {
				continue
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link to %s: %v", file, m[1], err)
			}
		}
	}
}
