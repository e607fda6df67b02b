package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A race whose accesses are both inside Proto.Actor (the standard library
// frames above them skipped) is counted, not failed; one with an access in
// Chorus's code fails, even when the other access is third-party.
const theirs = `=== RUN   TestJoin
==================
WARNING: DATA RACE
Write at 0x00c000123456 by goroutine 7:
  runtime.mapassign_faststr()
      /usr/local/go/src/internal/runtime/maps/runtime_swiss.go:207 +0x0
  github.com/asynkron/protoactor-go/cluster.(*MemberList).UpdateClusterTopology()
      /root/go/pkg/mod/github.com/asynkron/protoactor-go/cluster/member_list.go:120 +0x1a4
  github.com/chorusrt/chorus/cluster.Join()
      /work/main/cluster/node.go:150 +0x44

Previous read at 0x00c000123456 by goroutine 9:
  github.com/asynkron/protoactor-go/cluster/identitylookup/disthash.(*rendezvous).GetByIdentity()
      /root/go/pkg/mod/github.com/asynkron/protoactor-go/cluster/identitylookup/disthash/rendezvous.go:40 +0x88

Goroutine 7 (running) created at:
  github.com/chorusrt/chorus/cluster.startNode()
      /work/main/cluster/node.go:100 +0x1
==================
    testing.go:1617: race detected during execution of test
--- FAIL: TestJoin (3.01s)
FAIL
FAIL	github.com/chorusrt/chorus/cluster	12.3s
`

const mixed = `==================
WARNING: DATA RACE
Read at 0x00c0001 by goroutine 8:
  github.com/chorusrt/chorus/cluster.(*Node).members()
      /work/main/cluster/node.go:300 +0x10

Previous write at 0x00c0001 by goroutine 3:
  google.golang.org/grpc/grpclog.SetLoggerV2()
      /root/go/pkg/mod/google.golang.org/grpc/grpclog/grpclog.go:40 +0x1
==================
ok  	github.com/chorusrt/chorus/cluster	10.0s
`

func TestThirdPartyRaceIsCounted(t *testing.T) {
	v := scan(strings.NewReader(theirs))
	var out bytes.Buffer
	if code := v.print(&out); code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out.String())
	}
	want := "1  github.com/asynkron/protoactor-go/cluster.(*MemberList).UpdateClusterTopology / github.com/asynkron/protoactor-go/cluster/identitylookup/disthash.(*rendezvous).GetByIdentity"
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "--- FAIL: TestJoin") {
		t.Errorf("summary lacks the race's frames or the failed test:\n%s", out.String())
	}
}

func TestOwnRaceFails(t *testing.T) {
	v := scan(strings.NewReader(mixed))
	var out bytes.Buffer
	if code := v.print(&out); code != 1 || len(v.ours) != 1 {
		t.Fatalf("exit %d, %d own races, want 1 and 1:\n%s", code, len(v.ours), out.String())
	}
	if !strings.Contains(out.String(), "(*Node).members") {
		t.Errorf("the race is not printed whole:\n%s", out.String())
	}
}

func TestNoResultFails(t *testing.T) {
	for _, in := range []string{"", "# github.com/chorusrt/chorus/cluster\ncluster/node.go:1: syntax error\nFAIL\tgithub.com/chorusrt/chorus/cluster [build failed]\n"} {
		var out bytes.Buffer
		if code := scan(strings.NewReader(in)).print(&out); code != 1 {
			t.Errorf("input %q: exit %d, want 1", in, code)
		}
	}
}

// A real race, found by the real race detector in a package of this module
// (testdata/racy), fails the filter.
func TestRealRaceInOwnCodeFails(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a package with -race")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on PATH")
	}
	cmd := exec.Command(goBin, "test", "-race", "-count=1", "./testdata/racy")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	raw, _ := cmd.CombinedOutput() // fails: the race fails its test
	v := scan(bytes.NewReader(raw))
	var out bytes.Buffer
	if code := v.print(&out); code != 1 || len(v.ours) == 0 {
		t.Fatalf("exit %d with %d own races, want 1 and at least one; go test said:\n%s\nracefilter said:\n%s", code, len(v.ours), raw, out.String())
	}
	if !strings.Contains(out.String(), "racy.bump") {
		t.Errorf("the race's frame is not shown:\n%s", out.String())
	}
}
