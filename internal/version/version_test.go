package version

import (
	"runtime/debug"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFrom: the version comes from the main module when Chorus is it (with
// the VCS revision), from the dependency list when it is not, and is
// "unknown" rather than guessed when neither names it.
func TestFrom(t *testing.T) {
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want Info
		str  string
	}{
		{"main module, stamped", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: Module, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}},
			Info{Version: "(devel)", Revision: "0123456789abcdef0123", Modified: true, Go: "go1.26.0"}, "(devel) (rev 0123456789ab, modified)"},
		{"installed at a tag", debug.BuildInfo{Main: debug.Module{Path: Module, Version: "v1.2.3"}},
			Info{Version: "v1.2.3"}, "v1.2.3"},
		{"a dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps:     []*debug.Module{{Path: "golang.org/x/time", Version: "v0.5.0"}, {Path: Module, Version: "v0.9.1"}},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "feedface"}}},
			Info{Version: "v0.9.1"}, "v0.9.1"},
		{"a replaced dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: Module, Version: "v0.9.1", Replace: &debug.Module{Path: Module, Version: "v0.9.2"}}}},
			Info{Version: "v0.9.2"}, "v0.9.2"},
		{"not there", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}}, Info{Version: "unknown"}, "unknown"},
	} {
		got := from(&c.bi)
		if got != c.want || got.String() != c.str {
			t.Errorf("%s: %+v %q; want %+v %q", c.name, got, got.String(), c.want, c.str)
		}
	}
}

// TestGetInTest: a test binary has build information whose main module is
// this one's, so Get names a version (never empty).
func TestGetInTest(t *testing.T) {
	if v := Get(); v.Version == "" {
		t.Fatalf("Get() = %+v: empty version", v)
	}
	readBuildInfo = func() (*debug.BuildInfo, bool) { return nil, false }
	t.Cleanup(func() { readBuildInfo = debug.ReadBuildInfo })
	if v := Get(); v.Version != "unknown" {
		t.Fatalf("without build information: %+v", v)
	}
}
