package gateway

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/anthropic"
	"github.com/chorusrt/chorus/providers/gemini"
	"github.com/chorusrt/chorus/providers/openai"
)

// listedModel is one model the gateway lists: an alias, or a provider's
// model as provider/model.
type listedModel struct {
	id, owner string
	info      llm.ModelInfo
}

// modelList is the aliases (with the fan-outs when fanOut: only the
// OpenAI format serves them), then every provider's models as
// provider/model, limited to what the key may call. A provider whose list
// fails is left out (and logged), so one provider down does not hide the
// others.
func (h *Handler) modelList(ctx context.Context, ks *keyState, fanOut bool) []listedModel {
	var out []listedModel
	add := func(id, owner string, info llm.ModelInfo) {
		if ks == nil || ks.allows(id) {
			out = append(out, listedModel{id: id, owner: owner, info: info})
		}
	}
	aliases := h.rt.Aliases()
	names := make([]string, 0, len(aliases))
	for a := range aliases {
		names = append(names, a)
	}
	if fanOut {
		for name := range h.opts.FanOut {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, a := range names {
		if targets, fan := h.opts.FanOut[a]; fan {
			if fanOutAllowed(ks, a, targets) {
				out = append(out, listedModel{id: a, owner: "chorus"})
			}
			continue
		}
		add(a, "chorus", llm.ModelInfo{})
	}
	for _, p := range h.rt.Providers() {
		ms, err := h.rt.ListModels(ctx, p)
		if err != nil {
			h.log.Warn("gateway: listing models failed", "provider", p, "error", err.Error())
			continue
		}
		for _, m := range ms {
			id := m.ID
			if !strings.HasPrefix(id, p+"/") {
				id = p + "/" + strings.TrimPrefix(id, "models/")
			}
			add(id, p, m)
		}
	}
	return out
}

// anthropicClient reports whether a request on a path both formats share
// (/v1/models) comes from an Anthropic SDK, which sends anthropic-version
// with every request.
func anthropicClient(r *http.Request) bool { return r.Header.Get("anthropic-version") != "" }

// listModels serves GET /v1/models: OpenAI's list, or Anthropic's pages
// (limit, after_id, before_id) to an Anthropic client.
func (h *Handler) listModels(w http.ResponseWriter, r *http.Request) {
	f := formatOf(r)
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	all := h.modelList(r.Context(), ks, f == formatOpenAI)
	now := h.opts.Now()
	if f == formatAnthropic {
		q := r.URL.Query()
		limit := 20
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1000 {
				h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: "limit: want 1 to 1000"})
				return
			}
			limit = n
		}
		lo, hi := 0, len(all)
		if id := q.Get("after_id"); id != "" {
			lo = indexOf(all, id) + 1
		}
		if id := q.Get("before_id"); id != "" {
			if i := indexOf(all, id); i >= 0 {
				hi = i
			}
		}
		page := all[min(lo, hi):hi]
		more := len(page) > limit
		if more {
			if q.Get("before_id") != "" && q.Get("after_id") == "" {
				page = page[len(page)-limit:] // the page just before before_id
			} else {
				page = page[:limit]
			}
		}
		out := make([]anthropic.ServerModel, len(page))
		for i, m := range page {
			out[i] = anthropicModel(m, now)
		}
		b, err := anthropic.EncodeServerModels(out, more)
		if err != nil {
			h.fail(w, f, errorFor(err))
			return
		}
		h.writeJSON(w, b)
		return
	}
	out := make([]openai.ServerModel, len(all))
	for i, m := range all {
		out[i] = openai.ServerModel{ID: m.id, OwnedBy: m.owner, Created: now.Unix()}
	}
	b, err := openai.EncodeServerModels(out)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	h.writeJSON(w, b)
}

// getModel serves GET /v1/models/{model} (the model may hold a slash) in
// the client's format; a model the list does not hold is 404.
func (h *Handler) getModel(w http.ResponseWriter, r *http.Request) {
	f := formatOf(r)
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	id := r.PathValue("id")
	all := h.modelList(r.Context(), ks, f == formatOpenAI)
	i := indexOf(all, id)
	if i < 0 {
		h.fail(w, f, &Error{Status: http.StatusNotFound, Message: "no such model: " + strconv.Quote(id)})
		return
	}
	var b []byte
	var err error
	if f == formatAnthropic {
		b, err = anthropic.EncodeServerModel(anthropicModel(all[i], h.opts.Now()))
	} else {
		b, err = openai.EncodeServerModel(openai.ServerModel{ID: all[i].id, OwnedBy: all[i].owner, Created: h.opts.Now().Unix()})
	}
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	h.writeJSON(w, b)
}

func anthropicModel(m listedModel, now time.Time) anthropic.ServerModel {
	created := m.info.Created
	if created.IsZero() {
		created = now
	}
	return anthropic.ServerModel{ID: m.id, DisplayName: m.info.DisplayName, Created: created}
}

func indexOf(all []listedModel, id string) int {
	return slices.IndexFunc(all, func(m listedModel) bool { return m.id == id })
}

// geminiServed are the methods the gateway serves in the Gemini format.
var geminiServed = []string{"generateContent", "streamGenerateContent", "embedContent", "batchEmbedContents"}

// geminiModel describes a listed model as the Gemini API does: its
// supportedGenerationMethods are those of the provider's own report the
// gateway serves (a Gemini model's generateContent brings
// streamGenerateContent), else what its name suggests.
func geminiModel(m listedModel) gemini.ServerModel {
	var methods []string
	for _, c := range m.info.Capabilities {
		if slices.Contains(geminiServed, c) && !slices.Contains(methods, c) {
			methods = append(methods, c)
		}
	}
	if slices.Contains(methods, "generateContent") && !slices.Contains(methods, "streamGenerateContent") {
		methods = append(methods, "streamGenerateContent")
	}
	if len(methods) == 0 {
		methods = geminiServed[:2]
		if strings.Contains(m.id, "embed") {
			methods = geminiServed[2:]
		}
	}
	return gemini.ServerModel{ID: m.id, DisplayName: m.info.DisplayName, InputTokenLimit: m.info.ContextWindow,
		OutputTokenLimit: m.info.MaxOutputTokens, Methods: methods}
}

// geminiModels serves GET /v1beta/models (pageSize, pageToken) and GET
// /v1beta/models/{model}, as the Gemini API answers them.
func (h *Handler) geminiModels(w http.ResponseWriter, r *http.Request) {
	const f = formatGemini
	ks, e := h.authenticate(r)
	if e != nil {
		h.fail(w, f, e)
		return
	}
	all := h.modelList(r.Context(), ks, false)
	if id := r.PathValue("rest"); id != "" {
		id = strings.TrimPrefix(id, "models/")
		i := indexOf(all, id)
		if i < 0 {
			h.fail(w, f, &Error{Status: http.StatusNotFound, Message: "no such model: " + strconv.Quote(id)})
			return
		}
		b, err := gemini.EncodeServerModel(geminiModel(all[i]))
		if err != nil {
			h.fail(w, f, errorFor(err))
			return
		}
		h.writeJSON(w, b)
		return
	}
	q := r.URL.Query()
	size := 50
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: "pageSize: want a number of models"})
			return
		}
		if n > 0 {
			size = min(n, 1000)
		}
	}
	lo := 0
	if tok := q.Get("pageToken"); tok != "" {
		// The token is the last model of the previous page.
		if lo = indexOf(all, tok) + 1; lo == 0 {
			h.fail(w, f, &Error{Status: http.StatusBadRequest, Message: "pageToken: not a token of this list"})
			return
		}
	}
	page, next := all[lo:], ""
	if len(page) > size {
		page = page[:size]
		next = page[size-1].id
	}
	out := make([]gemini.ServerModel, len(page))
	for i, m := range page {
		out[i] = geminiModel(m)
	}
	b, err := gemini.EncodeServerModels(out, next)
	if err != nil {
		h.fail(w, f, errorFor(err))
		return
	}
	h.writeJSON(w, b)
}
