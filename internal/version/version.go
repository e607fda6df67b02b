// Package version says which Chorus a binary was built from, read from the
// build information Go embeds (runtime/debug.ReadBuildInfo): the module's
// version and, when the binary was built from a git checkout with VCS
// stamping, the revision and whether the tree was modified.
//
// When Chorus is a dependency of the user's program the version is the one
// the program's go.mod requires; when Chorus is the main module (go build
// ./cmd/chorus in a checkout) it is "(devel)" unless built from a tagged
// module (go install github.com/chorusrt/chorus/cmd/chorus@v1.2.3). A binary
// built without build information (rare: go build -buildvcs=false still has
// the module version) reports "unknown". Nothing is guessed.
//
//	fmt.Println(version.Get()) // v0.4.0 (rev 1a2b3c4d5e6f, modified)
package version

import (
	"runtime/debug"
	"strings"
)

// Module is Chorus's module path.
const Module = "github.com/chorusrt/chorus"

// Info is what a binary knows of the Chorus it was built from.
type Info struct {
	// Version is the module version: a semantic version, "(devel)" for a
	// build of the main module from its source, or "unknown".
	Version string `json:"version"`
	// Revision is the VCS revision (a git commit) when the build stamped
	// one, and Modified whether the tree had uncommitted changes.
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Go is the toolchain the binary was built with.
	Go string `json:"go,omitempty"`
}

// String is the version, with the short revision when there is one:
// "v0.4.0", "(devel) (rev 1a2b3c4d5e6f, modified)".
func (i Info) String() string {
	s := i.Version
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (rev " + rev
		if i.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s
}

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// Get returns the running binary's Chorus version.
func Get() Info {
	bi, ok := readBuildInfo()
	if !ok || bi == nil {
		return Info{Version: "unknown"}
	}
	return from(bi)
}

func from(bi *debug.BuildInfo) Info {
	info := Info{Version: "unknown", Go: bi.GoVersion}
	main := bi.Main.Path == Module || strings.HasPrefix(bi.Main.Path, Module+"/")
	if main {
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
		return info
	}
	for _, d := range bi.Deps {
		if d.Path != Module {
			continue
		}
		if d.Replace != nil && d.Replace.Version != "" {
			d = d.Replace
		}
		if d.Version != "" {
			info.Version = d.Version
		}
		break
	}
	return info
}
