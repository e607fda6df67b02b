package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/console"
)

// getConsole GETs a console path with the token.
func getConsole(t *testing.T, base, path, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestNodeConsole: chorus node --console-addr serves the console: the
// member's credentials by fingerprint (never the key) and the Cluster page
// with its members. It listens on loopback, so reading needs no token.
func TestNodeConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a cluster member")
	}
	bin := buildChorus(t)
	addrs := freePairs(t, 1)
	const key = "sk-console-test-KEY-0123456789"
	const token = "node-console-token"
	cmd := exec.Command(bin, "node", "--cluster", "consoletest", "--bind", addrs[0], "--peers", addrs[0], "--console-addr", "127.0.0.1:0")
	cmd.Env = cleanEnv("OPENAI_API_KEY="+key, "CHORUS_CONSOLE_TOKEN="+token)
	n, base := launchNode(t, cmd, addrs[0], regexp.MustCompile(`console at (http://\S+)/console/`))
	defer n.stop(t)
	status, body := getConsole(t, base, console.APIPrefix+"cluster", "")
	var cv console.ClusterView
	if status != 200 || json.Unmarshal(body, &cv) != nil || !cv.Enabled || cv.Address != addrs[0] || len(cv.Members) != 1 || len(cv.BudgetOwners) < 2 || cv.BudgetOwners[0].Member != addrs[0] {
		t.Fatalf("cluster: %d %s", status, body)
	}
	status, body = getConsole(t, base, console.APIPrefix+"credentials", "")
	var crv console.CredentialsView
	if status != 200 || json.Unmarshal(body, &crv) != nil || len(crv.Credentials) < 2 {
		t.Fatalf("credentials: %d %s", status, body)
	}
	for _, p := range []string{console.APIPrefix + "credentials", console.PagePrefix + "credentials", console.PagePrefix + "cluster"} {
		status, body := getConsole(t, base, p, token)
		if status != 200 || strings.Contains(string(body), key) || strings.Contains(string(body), "sk-console") {
			t.Fatalf("%s: %d, or it shows the key", p, status)
		}
	}
	// Sessions need --journal: without it, state changes find none.
	req, _ := http.NewRequest(http.MethodPost, base+console.APIPrefix+"sessions/x/cancel", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("cancel without sessions: %d", res.StatusCode)
	}
	if strings.Contains(n.out.String(), key) {
		t.Fatal("the node printed the key")
	}
}

// TestServeConsole: chorus serve serves the console on the gateway's
// port, with a session manager: a message sent through the console's API
// starts a session on the default model (the simulator), which the list
// and the session show; the gateway still answers beside it.
func TestServeConsole(t *testing.T) {
	const token = "serve-console-token"
	journal := filepath.Join(t.TempDir(), "sessions.db")
	base, stop := startServe(t, map[string]string{"CHORUS_CONSOLE_TOKEN": token}, "--addr", "127.0.0.1:0", "--journal", journal)
	defer func() {
		if code, errOut := stop(); code != 0 {
			t.Errorf("serve exited %d: %s", code, errOut)
		}
	}()
	if code, body := post(t, base+console.APIPrefix+"sessions/hello/messages", `{"text":"hello console"}`, "Authorization", "Bearer "+token); code != http.StatusAccepted {
		t.Fatalf("send: %d %s", code, body)
	}
	var sv console.SessionView
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status, body := getConsole(t, base, console.APIPrefix+"sessions/hello", "")
		if status != 200 || json.Unmarshal(body, &sv) != nil {
			t.Fatalf("session: %d %s", status, body)
		}
		if sv.LastStatus == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session did not finish: %s", body)
		}
	}
	if !strings.Contains(sv.Answer, "hello console") {
		t.Fatalf("answer %q", sv.Answer)
	}
	if code, _ := post(t, base+console.APIPrefix+"sessions/hello/messages", `{"text":"no token"}`); code != http.StatusUnauthorized {
		t.Fatalf("send without token: %d", code)
	}
	if status, body := getConsole(t, base, console.PagePrefix+"sessions", ""); status != 200 || !strings.Contains(string(body), "hello") {
		t.Fatalf("sessions page: %d", status)
	}
	if status, _ := getConsole(t, base, "/v1/models", ""); status != 200 {
		t.Fatalf("the gateway beside the console: %d", status)
	}
}
