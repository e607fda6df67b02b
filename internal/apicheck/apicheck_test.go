package apicheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is .ci/apidiff.sh, two directories above this package.
func script(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", ".ci", "apidiff.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// repo is a git repository holding module example.com/m, on branch main.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.write("go.mod", "module example.com/m\n\ngo 1.22\n")
	return r
}

func (r *repo) write(name, text string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *repo) git(args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = r.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func (r *repo) commit(msg string) {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
}

// check runs the script in the repository; ok is its exit status 0.
func (r *repo) check(env ...string) (ok bool, out string) {
	r.t.Helper()
	cmd := exec.Command("bash", script(r.t))
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			r.t.Fatalf("running the check: %v\n%s", err, b)
		}
	}
	return err == nil, string(b)
}

const pkgV1 = `package p

// F does nothing.
func F(a int) {}

// Options are options.
type Options struct{ Keys []string }
`

// TestIncompatibleChangeFailsUntilNamed: changing F's signature and
// removing a field fails the check, naming both; an Unreleased entry naming
// only one still fails; naming both passes. An entry under a released
// version, under Unreleased's Added, or a longer name that starts with it
// does not count.
func TestIncompatibleChangeFailsUntilNamed(t *testing.T) {
	r := newRepo(t)
	r.write("p/p.go", pkgV1)
	r.write("internal/q/q.go", "package q\n\nfunc G() {}\n")
	r.commit("v1")
	r.write("p/p.go", strings.NewReplacer("F(a int)", "F(a, b int)", "struct{ Keys []string }", "struct{}").Replace(pkgV1))
	r.write("internal/q/q.go", "package q\n") // internal: not API
	r.commit("break p")

	ok, out := r.check()
	if ok || !strings.Contains(out, "not in CHANGELOG.md's Unreleased section: p.F") || !strings.Contains(out, "p.Options.Keys") {
		t.Fatalf("an incompatible change passed, or was not named:\n%s", out)
	}
	if strings.Contains(out, "q.G") {
		t.Fatalf("an internal package's change counted:\n%s", out)
	}

	r.write("CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- `p.Options.Keys` is documented.\n\n### Changed\n\n- `p.F` takes two arguments; `p.Options.KeysX` is new.\n\n## [0.1.0] - 2026-01-01\n\n- `p.Options.Keys` was added.\n")
	r.commit("changelog, one of two")
	if ok, out := r.check("APIDIFF_BASE=HEAD~2"); ok || !strings.Contains(out, "in CHANGELOG.md: p.F") || !strings.Contains(out, "not in CHANGELOG.md's Unreleased section: p.Options.Keys") {
		t.Fatalf("one change named, one not (the other only under a release, under Added, or as a prefix):\n%s", out)
	}

	r.write("CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n\n### Changed\n\n- `p.F` takes two arguments.\n\n### Removed\n\n- `p.Options.Keys`.\n")
	r.commit("changelog, both")
	if ok, out := r.check("APIDIFF_BASE=HEAD~3"); !ok {
		t.Fatalf("both changes named, yet the check failed:\n%s", out)
	}
}

// TestCompatibleChangePasses: an added function is no break; on a branch,
// the base is its merge-base with main.
func TestCompatibleChangePasses(t *testing.T) {
	r := newRepo(t)
	r.write("p/p.go", pkgV1)
	r.commit("v1")
	r.git("checkout", "-q", "-b", "feature")
	r.write("p/more.go", "package p\n\n// H is new.\nfunc H() {}\n")
	r.commit("add H")
	r.write("p/evenmore.go", "package p\n\n// K is new.\nfunc K() {}\n")
	r.commit("add K")
	ok, out := r.check()
	if !ok || !strings.Contains(out, "no incompatible change") {
		t.Fatalf("a compatible change failed:\n%s", out)
	}
	// The merge-base, not HEAD~1: removing what the branch added is no
	// break of main's API, removing F is.
	r.write("p/evenmore.go", "package p\n")
	r.write("p/p.go", "package p\n\n// Options are options.\ntype Options struct{ Keys []string }\n")
	r.commit("drop K and F")
	if ok, out := r.check(); ok || !strings.Contains(out, "p.F") || strings.Contains(out, "p.K") {
		t.Fatalf("against the merge-base, F's removal must fail and K's not count:\n%s", out)
	}
}

// TestFirstCommitPasses: with no previous commit there is nothing to
// compare, and the check says so.
func TestFirstCommitPasses(t *testing.T) {
	r := newRepo(t)
	r.write("p/p.go", pkgV1)
	r.commit("v1")
	if ok, out := r.check(); !ok || !strings.Contains(out, "nothing to compare") {
		t.Fatalf("first commit: ok %v\n%s", ok, out)
	}
}
