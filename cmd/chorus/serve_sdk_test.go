package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/sim"
)

// TestServeOfficialSDKsOnSimulator runs the official openai and
// @anthropic-ai/sdk npm packages (pinned in gateway/testdata/npm,
// installed by make sdk-clients) against "chorus serve" itself, on the
// simulator: provider sim (OpenAI format) and the built-in anthropic
// provider moved onto a second simulator (Anthropic format). Each SDK
// streams each format's model: the Anthropic SDK on the OpenAI-format
// model and the OpenAI SDK on the Anthropic-format one give the same text
// and tool calls as the direct calls. Also: buffered chat, embeddings, the
// model list in each SDK's format, a provider's 400, an auth error and the
// gateway key's 429, each as the SDK's own exception.
func TestServeOfficialSDKsOnSimulator(t *testing.T) {
	root, sdk := npmSDKs(t)
	ant, err := sim.Start(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ant.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "chorus.yaml")
	const yml = `gateway:
  keys:
    - {name: good, key_env: SDK_GOOD_KEY}
    - {name: limited, key_env: SDK_LIMITED_KEY, rpm: 1}
`
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"SDK_GOOD_KEY": "gk-sim-good", "SDK_LIMITED_KEY": "gk-sim-limited",
		"ANTHROPIC_API_KEY": "sk-ant-sim-SECRET", "ANTHROPIC_BASE_URL": ant.AnthropicBaseURL()}
	base, stop := startServe(t, vars, "--addr", "127.0.0.1:0", "--config", cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "gateway", "testdata", "sdk", "sim.cjs"), base, "gk-sim-good", "gk-sim-limited")
	cmd.Env = append(os.Environ(), "SDK_DIR="+sdk)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	exit, serveErr := stop()
	if runErr != nil {
		t.Fatalf("node sim.cjs: %v\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", runErr, stdout.String(), stderr.String(), serveErr)
	}
	if exit != 0 || strings.Contains(serveErr, "SECRET") || strings.Contains(stdout.String(), "SECRET") {
		t.Errorf("serve exit %d, stderr %s", exit, serveErr)
	}
	out := nodeCases(&stdout)
	want := func(name, key string, v any) {
		t.Helper()
		if got := out[name][key]; !reflect.DeepEqual(got, v) {
			t.Errorf("%s: %s = %#v, want %#v (line %v)", name, key, got, v, out[name])
		}
	}
	want("openai-buffered", "text", "[simulated] hello sim")
	want("openai-buffered", "finish", "stop")
	want("anthropic-buffered", "text", "[simulated] hello sim")
	want("anthropic-buffered", "stop", "end_turn")
	for _, model := range []string{"sim/story", "anthropic/story"} {
		// The direct call: the SDK of the model's own format.
		direct := "openai:" + model
		if strings.HasPrefix(model, "anthropic/") {
			direct = "anthropic:" + model
		}
		d, dt := out[direct], out[direct+":tools"]
		if s, _ := d["text"].(string); !strings.HasPrefix(s, "[simulated") || d["deltas"].(float64) < 2 {
			t.Errorf("%s: %v", direct, d)
		}
		if calls, _ := dt["calls"].([]any); len(calls) != 1 || calls[0] != `get_weather {"city":"Paris"}` {
			t.Errorf("%s tools: %v", direct, dt)
		}
		for _, sdk := range []string{"openai", "anthropic"} {
			c := sdk + ":" + model
			want(c, "text", d["text"])
			want(c+":tools", "calls", dt["calls"])
		}
	}
	want("embeddings", "n", 2.0)
	want("embeddings", "dims", 8.0)
	if ids, _ := out["models"]["ids"].([]any); !containsAny(ids, "sim/") || !containsAny(ids, "anthropic/") {
		t.Errorf("models: %v", out["models"])
	}
	if ids, _ := out["models"]["anIds"].([]any); len(ids) < 3 || !reflect.DeepEqual(ids, out["models"]["ids"]) {
		t.Errorf("the Anthropic SDK's model list %v, the OpenAI SDK's %v", ids, out["models"]["ids"])
	}
	want("openai-400", "error", "BadRequestError")
	want("anthropic-400", "error", "BadRequestError")
	want("auth", "error", "AuthenticationError")
	want("openai-429", "error", "RateLimitError")
	want("anthropic-429", "error", "RateLimitError")
	if ra, _ := out["anthropic-429"]["retryAfter"].(string); ra == "" {
		t.Errorf("anthropic-429 without retry-after: %v", out["anthropic-429"])
	}
}

func containsAny(ids []any, prefix string) bool {
	for _, id := range ids {
		if s, _ := id.(string); strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// npmSDKs is the repository's root and the directory make sdk-clients
// installs the official npm SDKs into; without them (or node) the test
// skips, and fails under CI or CHORUS_REQUIRE_SDK.
func npmSDKs(t *testing.T) (root, sdk string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sdk = filepath.Join(root, ".cache", "npm-sdk")
	_, statErr := os.Stat(filepath.Join(sdk, "node_modules", "@anthropic-ai", "sdk", "package.json"))
	_, nodeErr := exec.LookPath("node")
	if statErr != nil || nodeErr != nil {
		if os.Getenv("CHORUS_REQUIRE_SDK") != "" || os.Getenv("CI") != "" {
			t.Fatalf("the official SDKs are not installed (run make sdk-clients): %v %v", statErr, nodeErr)
		}
		t.Skip("the official SDKs are not installed: run make sdk-clients (make test does)")
	}
	return root, sdk
}

// nodeCases reads an SDK script's output: one JSON line per case.
func nodeCases(stdout *bytes.Buffer) map[string]map[string]any {
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out[m["case"].(string)] = m
		}
	}
	return out
}
