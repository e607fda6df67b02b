// Command racefilter reads the output of `go test -race` on the cluster
// package and decides, race by race, whose race it is.
//
// Proto.Actor's cluster and gRPC race inside themselves (the grpclog logger
// swapped at every Remote start, disthash's member list read unlocked, the
// endpoint manager's shutdown), so the cluster's tests cannot simply run
// under -race and fail on any report. racefilter takes each
// "WARNING: DATA RACE" report, finds in each of its access stacks (the
// "Read at" / "Write at" / "Previous ..." sections, not the "created at"
// sections) the first frame outside Go's standard library, and sorts it:
//
//   - a frame in github.com/chorusrt/chorus: a race in Chorus's own code;
//     racefilter prints it whole and exits 1;
//   - any other module (Proto.Actor, gRPC, ...): a known third-party race;
//     racefilter counts it and prints one line per distinct pair of frames.
//
// It decides races only: the same tests run without -race in make test and
// decide pass or fail there. Under -race a test that failed only because a
// race was detected is expected; racefilter lists failed tests for
// information. It exits 1 too when the input holds no test result at all
// (a build failure or an empty run), so a broken run never reads as clean.
//
//	go test -race -count=1 ./cluster/... 2>&1 | go run ./internal/racefilter
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

const ours = "github.com/chorusrt/chorus/"

// report is one race report: its lines and the first non-standard-library
// frame of each access stack.
type report struct {
	lines  []string
	access []string
}

// verdict is what racefilter found in one run's output.
type verdict struct {
	ours       []report
	theirs     map[string]int // "frame A / frame B" -> count
	failed     []string       // "--- FAIL: Test..." lines
	results    int            // "ok" / "FAIL" package result lines
	buildError bool
}

func main() {
	v := scan(os.Stdin)
	os.Exit(v.print(os.Stdout))
}

// scan reads go test output and sorts its race reports.
func scan(r io.Reader) verdict {
	v := verdict{theirs: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var cur *report
	inAccess := false
	wantFrame := false
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if cur != nil {
			cur.lines = append(cur.lines, line)
			switch {
			case strings.HasPrefix(trim, "=================="):
				v.add(*cur)
				cur = nil
			case isAccessHeader(trim):
				inAccess, wantFrame = true, true
			case strings.HasPrefix(trim, "Goroutine ") && strings.Contains(trim, "created at"):
				inAccess = false
			case inAccess && wantFrame && trim != "" && !strings.HasPrefix(line, "      "):
				// A frame's function line (its file line is indented more).
				if fn := frameFunc(trim); fn != "" && !stdlib(fn) {
					cur.access = append(cur.access, fn)
					wantFrame = false
				}
			}
			continue
		}
		switch {
		case trim == "WARNING: DATA RACE":
			cur = &report{lines: []string{line}}
			inAccess, wantFrame = false, false
		case strings.HasPrefix(trim, "--- FAIL: "):
			v.failed = append(v.failed, trim)
		case strings.HasPrefix(line, "ok  \t") || strings.HasPrefix(line, "FAIL\t") || strings.HasPrefix(line, "ok \t"):
			v.results++
			if strings.Contains(line, "[build failed]") || strings.Contains(line, "[setup failed]") {
				v.buildError = true
			}
		}
	}
	if cur != nil { // a report cut short by the end of the output
		v.add(*cur)
	}
	return v
}

func isAccessHeader(s string) bool {
	for _, p := range []string{"Read at ", "Write at ", "Previous read at ", "Previous write at ",
		"Atomic read at ", "Atomic write at ", "Previous atomic read at ", "Previous atomic write at "} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// frameFunc returns the function of a stack line such as
// "github.com/x/y.(*T).m()" or "sync.(*Mutex).Lock()".
func frameFunc(s string) string {
	if i := strings.LastIndex(s, "("); i > 0 && strings.HasSuffix(s, ")") {
		return s[:i]
	}
	return ""
}

// stdlib reports whether fn is in Go's standard library or runtime: its
// import path's first element has no dot.
func stdlib(fn string) bool {
	first, _, hasSlash := strings.Cut(fn, "/")
	if !hasSlash {
		return true // "runtime.mapassign", "sync.(*Mutex).Lock": one-element paths are the standard library's
	}
	return !strings.Contains(first, ".")
}

func (v *verdict) add(r report) {
	for _, fn := range r.access {
		if strings.HasPrefix(fn, ours) {
			v.ours = append(v.ours, r)
			return
		}
	}
	key := strings.Join(r.access, " / ")
	if key == "" {
		key = "(no frame outside the standard library)"
	}
	v.theirs[key]++
}

// print writes the summary and returns the exit status.
func (v verdict) print(w io.Writer) int {
	total := 0
	keys := make([]string, 0, len(v.theirs))
	for k, n := range v.theirs {
		keys = append(keys, k)
		total += n
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "racefilter: %d race report(s) inside third-party code (Proto.Actor, gRPC), not failing:\n", total)
	for _, k := range keys {
		fmt.Fprintf(w, "  %4d  %s\n", v.theirs[k], k)
	}
	if len(v.failed) > 0 {
		fmt.Fprintf(w, "racefilter: %d test(s) failed under -race (pass or fail is decided by the run without -race):\n", len(v.failed))
		for _, f := range v.failed {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	status := 0
	if v.results == 0 || v.buildError {
		fmt.Fprintln(w, "racefilter: FAIL: the output holds no test result, or a build failed")
		status = 1
	}
	if len(v.ours) > 0 {
		fmt.Fprintf(w, "racefilter: FAIL: %d race report(s) with an access in Chorus's own code:\n", len(v.ours))
		for _, r := range v.ours {
			fmt.Fprintln(w, strings.Join(r.lines, "\n"))
		}
		status = 1
	}
	if status == 0 {
		fmt.Fprintln(w, "racefilter: no race in Chorus's own code")
	}
	return status
}
