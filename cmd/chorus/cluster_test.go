package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chorusrt/chorus/cluster"
	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
)

// chorusNode is a running "chorus node" process.
type chorusNode struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncbuf.Buffer
}

func startNode(t *testing.T, bin, name, addr string, peers []string, extra ...string) *chorusNode {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"node", "--cluster", name, "--bind", addr, "--peers", strings.Join(peers, ","), "--lease-ttl", "1s"}, extra...)...)
	cmd.Env = cleanEnv("CHORUS_SIM_LATENCY=40ms")
	n, _ := launchNode(t, cmd, addr, nil)
	return n
}

// launchNode starts a chorus node command, copies its stdout and stderr to
// n.out, and waits until it says it is a member and, when want is not nil,
// has printed a line matching want, whose first group it returns (the URL
// of an endpoint the node serves).
func launchNode(t *testing.T, cmd *exec.Cmd, addr string, want *regexp.Regexp) (*chorusNode, string) {
	t.Helper()
	n := &chorusNode{addr: addr, cmd: cmd, done: make(chan struct{}), out: &syncbuf.Buffer{}}
	cmd.Stderr = n.out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		member, found, sent := false, want == nil, false
		var got string
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(n.out, line)
			if want != nil && !found {
				if m := want.FindStringSubmatch(line); m != nil {
					found, got = true, m[1]
				}
			}
			member = member || strings.Contains(line, "member of")
			if member && found && !sent {
				sent = true
				ready <- got
			}
		}
		_ = cmd.Wait()
		close(n.done)
	}()
	select {
	case got := <-ready:
		return n, got
	case <-n.done:
		t.Fatalf("chorus node %s exited: %s", addr, n.out.String())
	case <-time.After(60 * time.Second):
		n.kill()
		t.Fatalf("chorus node %s not ready after 60s: %s", addr, n.out.String())
	}
	return nil, ""
}

func (n *chorusNode) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

func (n *chorusNode) stop(t *testing.T) {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
		if !n.cmd.ProcessState.Success() {
			t.Errorf("chorus node %s left with %v: %s", n.addr, n.cmd.ProcessState, n.out.String())
		}
	case <-time.After(40 * time.Second):
		n.kill()
		t.Errorf("chorus node %s did not leave on SIGTERM: %s", n.addr, n.out.String())
	}
}

// freePairs returns k loopback addresses for chorus node processes.
func freePairs(t *testing.T, k int) []string {
	addrs, err := cluster.LocalAddrs(k)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// waitLines waits until path has at least n lines.
func waitLines(t *testing.T, path string, n int, proc *exec.Cmd, stderr *syncbuf.Buffer) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Count(b, []byte("\n")) >= n {
			return
		}
		if time.Now().After(deadline) {
			_ = proc.Process.Kill()
			t.Fatalf("fewer than %d lines after 60s; stderr:\n%s", n, stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBatchClusterSIGKILL spreads a batch (chat and embedding lines) over
// three chorus node processes, and kills one of them with SIGKILL
// mid-batch: the batch still ends with every custom_id exactly once. Then it kills the batch process itself
// mid-run and resumes it over the cluster: again every custom_id once, and
// the lines already written kept byte for byte.
func TestBatchClusterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a cluster")
	}
	bin := buildChorus(t)
	addrs := freePairs(t, 3)
	nodes := make([]*chorusNode, 3)
	for i, a := range addrs {
		nodes[i] = startNode(t, bin, "batchtest", a, addrs)
	}
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.stop(t)
			}
		}
	}()
	const items = 300
	var lines, want []string
	for i := range items {
		id := fmt.Sprintf("k%03d", i)
		if i%10 == 3 { // embedding lines go to the members too
			lines = append(lines, fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/embeddings","body":{"input":"item %d"}}`, id, i))
		} else {
			lines = append(lines, chatLine(id, "", fmt.Sprintf("item %d", i)))
		}
		want = append(want, id)
	}
	in := writeInput(t, lines...)
	batch := func(out string, extra ...string) (*exec.Cmd, *syncbuf.Buffer) {
		args := append([]string{"batch", "-i", in, "-o", out, "-c", "6", "--cluster", "batchtest", "--peers", strings.Join(addrs, ",")}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Env = cleanEnv()
		errb := &syncbuf.Buffer{}
		cmd.Stderr = errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, errb
	}
	checkAll := func(out string) {
		t.Helper()
		got := readOutput(t, out) // whole JSON lines, no custom_id twice
		if len(got) != items {
			t.Fatalf("%d custom_ids in %s, want %d", len(got), out, items)
		}
		for _, id := range want {
			if l, ok := got[id]; !ok || l.Response == nil || l.Response.StatusCode != 200 {
				t.Fatalf("custom_id %s: %+v", id, l)
			}
		}
	}

	// A member dies mid-batch.
	out1 := filepath.Join(t.TempDir(), "out1.jsonl")
	cmd, errb := batch(out1)
	waitLines(t, out1, 40, cmd, errb)
	nodes[1].kill()
	nodes[1] = nil
	if err := cmd.Wait(); err != nil {
		t.Fatalf("batch over a cluster that lost a member: %v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), `lines go to cluster "batchtest"`) {
		t.Fatalf("the batch did not say it used the cluster:\n%s", errb.String())
	}
	checkAll(out1)

	// The batch process dies mid-run and resumes over the cluster.
	out2 := filepath.Join(t.TempDir(), "out2.jsonl")
	cmd, errb = batch(out2)
	waitLines(t, out2, 40, cmd, errb)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	killed, _ := os.ReadFile(out2)
	whole := killed[:bytes.LastIndexByte(killed, '\n')+1]
	if bytes.Count(whole, []byte("\n")) >= items {
		t.Fatal("the batch finished before the kill: nothing was tested")
	}
	cmd, errb = batch(out2, "--resume")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("resume over the cluster: %v\n%s", err, errb.String())
	}
	final, _ := os.ReadFile(out2)
	if !bytes.HasPrefix(final, whole) {
		t.Fatal("resume changed the lines the killed run wrote")
	}
	checkAll(out2)
}
