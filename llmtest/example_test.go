package llmtest_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/chorusrt/chorus/llmtest"
)

func Example() {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(llmtest.Text("Hello!"), llmtest.Status(http.StatusTooManyRequests, 0))

	call := func() (int, string) {
		resp, err := http.Post(srv.OpenAIBaseURL()+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := call()
	fmt.Println(status, strings.Contains(body, `"content":"Hello!"`))
	status, _ = call()
	fmt.Println(status, srv.Count(), srv.RateLimited())
	http.DefaultClient.CloseIdleConnections()
	// Output:
	// 200 true
	// 429 2 1
}
