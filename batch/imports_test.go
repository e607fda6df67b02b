package batch

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBatchFloor: package batch sits above runtime and pipeline and below
// the cluster and the command: it reaches none of cluster, runtime,
// session, store, sim or cmd, even indirectly (--cluster comes in as a
// Runner).
func TestBatchFloor(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{join .Deps " "}}`, "github.com/chorusrt/chorus/batch").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/chorusrt/chorus/"
	for _, d := range strings.Fields(string(out)) {
		p, ok := strings.CutPrefix(d, mod)
		if !ok {
			continue
		}
		for _, bad := range []string{"cluster", "runtime", "session", "store", "sim", "cmd", "actors"} {
			if p == bad || strings.HasPrefix(p, bad+"/") {
				t.Errorf("batch depends on %s", d)
			}
		}
	}
}
