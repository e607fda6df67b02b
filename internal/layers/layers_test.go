package layers

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const mod = "github.com/chorusrt/chorus/"

// deps returns, for every package of the module, the module's packages it
// depends on (directly or not).
func deps(t *testing.T) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "github.com/chorusrt/chorus/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		m[pkg] = nil
		for _, d := range f[1:] {
			if strings.HasPrefix(d, mod) {
				m[pkg] = append(m[pkg], strings.TrimPrefix(d, mod))
			}
		}
	}
	return m
}

func under(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }

// TestImportsPointDown: each rule names a floor and the floors it must not
// reach, even indirectly.
func TestImportsPointDown(t *testing.T) {
	g := deps(t)
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		{"llm", []string{""}}, // nothing of the module
		{"store", []string{"runtime", "actors", "providers", "session", "pipeline", "cluster", "llmtest", "sim"}},
		{"providers", []string{"runtime", "actors", "session", "store", "pipeline", "cluster", "sim"}},
		{"actors", []string{"runtime", "session", "store", "pipeline", "cluster"}},
		{"runtime", []string{"session", "store", "pipeline", "cluster"}},
		{"pipeline", []string{"runtime", "actors", "providers", "session", "store", "cluster"}},
		{"session", []string{"runtime", "providers", "pipeline", "cluster"}},
		{"telemetry", []string{"runtime", "actors", "providers", "session", "store", "pipeline", "cluster", "batch", "gateway", "mcptools"}},
		{"batch", []string{"runtime", "cluster", "gateway", "cmd"}},
		{"mcptools", []string{"runtime", "cluster", "gateway", "batch", "cmd"}},
		{"gateway", []string{"cluster", "cmd"}},
		{"requestlog", []string{"runtime", "actors", "providers", "session", "store", "pipeline", "cluster", "batch", "gateway", "console", "cmd"}},
		{"keystore", []string{"llm", "runtime", "actors", "providers", "session", "store", "pipeline", "cluster", "batch", "gateway", "console", "cmd"}},
		{"console", []string{"gateway", "cmd", "llmtest", "sim"}},
	}
	for _, r := range rules {
		found := false
		for pkg, ds := range g {
			if !under(pkg, r.pkg) {
				continue
			}
			found = true
			for _, d := range ds {
				for _, f := range r.forbidden {
					if (f == "" && !strings.HasPrefix(d, "internal/")) || (f != "" && under(d, f)) {
						t.Errorf("%s depends on %s: %s must not reach %q", pkg, d, r.pkg, f)
					}
				}
			}
		}
		if !found {
			t.Errorf("no package under %s", r.pkg)
		}
	}
	// Only the command (and the cluster's own packages) import the cluster.
	for pkg, ds := range g {
		for _, d := range ds {
			if under(d, "cluster") && !under(pkg, "cluster") && pkg != "cmd/chorus" {
				t.Errorf("%s depends on %s: only cmd/chorus sits above the cluster", pkg, d)
			}
		}
	}
	if _, ok := g["cluster"]; !ok {
		t.Error("no top-level cluster package")
	}
}

// TestNoActorOrRxTypeInAPI: the exported API of actors, runtime, session
// and pipeline shows no Proto.Actor or RxGo type (only cluster and
// pipeline/rx are about them).
func TestNoActorOrRxTypeInAPI(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on PATH")
	}
	re := regexp.MustCompile(`\*?\b(actor|rxgo|remote|cluster)\.[A-Z]\w*`)
	for _, pkg := range []string{"actors", "runtime", "session", "pipeline", "llm", "providers", "store"} {
		out, err := exec.Command(goBin, "doc", "-all", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go doc %s: %v", pkg, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			trim := strings.TrimSpace(line)
			// Declarations only: doc text may name a Proto.Actor concept.
			if !strings.HasPrefix(line, "func ") && !strings.HasPrefix(line, "type ") && !strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "\t") {
				continue
			}
			if strings.HasPrefix(trim, "//") {
				continue
			}
			if m := re.FindString(trim); m != "" {
				t.Errorf("%s: exported API shows %s: %s", pkg, m, trim)
			}
		}
	}
}

// TestLibrariesUseTheOTelAPIOnly: Chorus's library packages import the
// OpenTelemetry API only; the SDK and its exporters are the command's (an
// application's) choice. (Proto.Actor itself links parts of the SDK; this
// checks Chorus's own imports.)
func TestLibrariesUseTheOTelAPIOnly(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/chorusrt/chorus/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		if under(pkg, "cmd") || under(pkg, "examples") || under(pkg, "internal/testkit") {
			continue
		}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(imp, "go.opentelemetry.io/otel/exporters") {
				t.Errorf("%s imports %s: library packages use the OpenTelemetry API only", pkg, imp)
			}
		}
	}
}
