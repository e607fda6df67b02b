package gateway

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/chorusrt/chorus/internal/version"
)

// The gateway's root, for whoever opens the address without knowing an
// endpoint:
//
//	GET / from a browser (Accept: text/html)   302 to Options.Console when a console is mounted
//	GET / otherwise                            200 JSON: the version and the endpoint families
//	GET /version                               200 JSON: version.Info
//	anything else no route serves              404 in the client's own format, code unknown_endpoint
//
// The 404 names the method and path and says it is not an endpoint, in
// the format the client speaks: Gemini's for /v1beta/..., Anthropic's for a
// client that sends anthropic-version or x-api-key (an Anthropic SDK),
// OpenAI's otherwise (with code unknown_endpoint, never model_not_found,
// which an SDK would read as a model the gateway does not serve). None of
// these answers needs a gateway key: they say nothing about keys, models
// or traffic.

// Family is one wire format's endpoints, as GET / lists them.
type Family struct {
	Name      string   `json:"name"`
	Endpoints []string `json:"endpoints"`
}

// Families are the endpoint families the gateway serves, in the order GET /
// lists them. TestRootFamiliesAreRouted holds it to the routes.
var Families = []Family{
	{"openai", []string{
		"POST /v1/chat/completions", "POST /v1/responses", "POST /v1/embeddings",
		"GET /v1/models", "GET /v1/models/{id}",
		"POST /v1/files", "GET /v1/files", "GET /v1/files/{id}", "DELETE /v1/files/{id}", "GET /v1/files/{id}/content",
		"POST /v1/batches", "GET /v1/batches", "GET /v1/batches/{id}", "POST /v1/batches/{id}/cancel",
	}},
	{"anthropic", []string{"POST /v1/messages", "POST /v1/messages/count_tokens", "GET /v1/models"}},
	{"gemini", []string{
		"POST /v1beta/models/{model}:generateContent", "POST /v1beta/models/{model}:streamGenerateContent",
		"POST /v1beta/models/{model}:embedContent", "POST /v1beta/models/{model}:batchEmbedContents",
		"GET /v1beta/models", "GET /v1beta/models/{model}",
	}},
}

// Root is what GET / answers an API client.
type Root struct {
	Name     string       `json:"name"`
	Version  version.Info `json:"version"`
	Console  string       `json:"console,omitempty"`
	Families []Family     `json:"families"`
}

// UnknownEndpoint is the OpenAI error code of a path no route serves.
const UnknownEndpoint = "unknown_endpoint"

func (h *Handler) rootRoutes() {
	h.mux.HandleFunc("GET /{$}", h.root)
	h.mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, version.Get()) })
	h.mux.HandleFunc("/", h.unknownEndpoint)
}

func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	if h.opts.Console != "" && wantsHTML(r) {
		http.Redirect(w, r, h.opts.Console, http.StatusFound)
		return
	}
	writeJSON(w, Root{Name: "chorus gateway", Version: version.Get(), Console: h.opts.Console, Families: Families})
}

func (h *Handler) unknownEndpoint(w http.ResponseWriter, r *http.Request) {
	f := formatOf(r)
	if f == formatOpenAI && (r.Header.Get("anthropic-version") != "" || r.Header.Get("x-api-key") != "") {
		f = formatAnthropic
	}
	h.fail(w, f, &Error{Status: http.StatusNotFound, Code: UnknownEndpoint,
		Message: r.Method + " " + r.URL.Path + " is not an endpoint of this gateway (GET / lists them)"})
}

// wantsHTML reports whether the request's Accept header prefers an HTML
// page to JSON, as a browser's navigation does (text/html first, */* last).
func wantsHTML(r *http.Request) bool {
	html, jsonQ := -1.0, -1.0
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			q = f
		}
		switch mt {
		case "text/html", "application/xhtml+xml":
			html = max(html, q)
		case "application/json":
			jsonQ = max(jsonQ, q)
		}
	}
	return html > 0 && html >= jsonQ
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}
