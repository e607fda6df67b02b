package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
)

// nativeReq is one line as a provider's batch API carries it.
type nativeReq struct {
	customID string
	body     []byte // the live call's body (providers.Client.EncodeChat, EncodeEmbed)
	url      string // URLChat or URLEmbeddings (OpenAI)
}

// remoteStatus is a batch as a poll saw it.
type remoteStatus struct {
	// State is the provider's own status string.
	State string
	Ended bool
	// Total, Succeeded and Failed are the provider's request counts.
	Total, Succeeded, Failed int
}

// Item codes for requests a batch did not run. They are reported, never
// written: a resumed job runs them live.
const (
	CodeExpired   = "batch_expired"
	CodeCancelled = "batch_cancelled"
)

// remoteItem is one result of an ended batch: an answer, an error, or a
// code (CodeExpired, CodeCancelled) for a request that did not run.
type remoteItem struct {
	customID  string
	res       *llm.ChatResult
	emb       *llm.EmbedResult // an OpenAI embeddings batch
	requestID string
	err       error
	code      string
}

// batchAPI is one provider's batch API.
type batchAPI interface {
	// limits are the most requests and bytes one batch may hold.
	limits() (requests int, bytes int)
	// submit creates a batch carrying token and returns its id.
	submit(ctx context.Context, token, model string, reqs []nativeReq) (string, error)
	// find looks for a batch carrying token (a submit whose answer was
	// lost), created after after with n requests.
	find(ctx context.Context, token string, n int, after time.Time) (string, bool, error)
	poll(ctx context.Context, id string) (remoteStatus, error)
	// results reads an ended batch's results; ids are the batch's
	// custom_ids (a request missing from the results did not run).
	results(ctx context.Context, id string, st remoteStatus, ids []string) ([]remoteItem, error)
	cancel(ctx context.Context, id string) error
}

// apiFor is the batch API of a credential's wire format.
func apiFor(c *providers.Client) batchAPI {
	switch c.Config().Format {
	case providers.FormatOpenAI:
		return openaiBatches{c}
	case providers.FormatAnthropic:
		return anthropicBatches{c}
	case providers.FormatGemini:
		return geminiBatches{c}
	}
	return nil
}

// call sends one request and decodes a 2xx JSON answer into out.
func call(ctx context.Context, c *providers.Client, method, path, ctype string, body []byte, out any) error {
	resp, err := c.Do(ctx, method, path, ctype, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return &llm.TransportError{Provider: c.Config().ID, Err: err}
	}
	if out == nil {
		return nil
	}
	if b, ok := out.(*[]byte); ok {
		*b = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &llm.DecodeError{Provider: c.Config().ID, Err: fmt.Errorf("%s %s: %w", method, path, err)}
	}
	return nil
}

func jsonBody(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// ---- OpenAI: POST /files (purpose batch), POST /batches ----

type openaiBatches struct{ c *providers.Client }

func (openaiBatches) limits() (int, int) { return 50_000, 200 << 20 }

type oaBatch struct {
	ID            string            `json:"id"`
	Status        string            `json:"status"`
	OutputFileID  *string           `json:"output_file_id"`
	ErrorFileID   *string           `json:"error_file_id"`
	CreatedAt     int64             `json:"created_at"`
	Metadata      map[string]string `json:"metadata"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
}

func (o openaiBatches) submit(ctx context.Context, token, _ string, reqs []nativeReq) (string, error) {
	var in bytes.Buffer
	endpoint := URLChat
	for _, r := range reqs {
		if r.url != "" {
			endpoint = r.url
		}
		in.Write(jsonBody(map[string]any{"custom_id": r.customID, "method": "POST", "url": endpoint, "body": json.RawMessage(r.body)}))
		in.WriteByte('\n')
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", token+".jsonl")
	_, _ = fw.Write(in.Bytes())
	_ = mw.Close()
	var file struct {
		ID string `json:"id"`
	}
	if err := call(ctx, o.c, http.MethodPost, "/files", mw.FormDataContentType(), form.Bytes(), &file); err != nil {
		return "", fmt.Errorf("uploading the batch input: %w", err)
	}
	var b oaBatch
	create := map[string]any{"input_file_id": file.ID, "endpoint": endpoint, "completion_window": "24h", "metadata": map[string]string{"chorus_job": token}}
	if err := call(ctx, o.c, http.MethodPost, "/batches", "application/json", jsonBody(create), &b); err != nil {
		return "", fmt.Errorf("creating the batch: %w", err)
	}
	return b.ID, nil
}

func (o openaiBatches) find(ctx context.Context, token string, _ int, _ time.Time) (string, bool, error) {
	after := ""
	for range 20 { // pages of 100, newest first
		var list struct {
			Data    []oaBatch `json:"data"`
			HasMore bool      `json:"has_more"`
			LastID  string    `json:"last_id"`
		}
		path := "/batches?limit=100"
		if after != "" {
			path += "&after=" + after
		}
		if err := call(ctx, o.c, http.MethodGet, path, "", nil, &list); err != nil {
			return "", false, err
		}
		for _, b := range list.Data {
			if b.Metadata["chorus_job"] == token {
				return b.ID, true, nil
			}
		}
		if !list.HasMore || list.LastID == "" {
			break
		}
		after = list.LastID
	}
	return "", false, nil
}

func (o openaiBatches) get(ctx context.Context, id string) (oaBatch, error) {
	var b oaBatch
	err := call(ctx, o.c, http.MethodGet, "/batches/"+id, "", nil, &b)
	return b, err
}

func (o openaiBatches) poll(ctx context.Context, id string) (remoteStatus, error) {
	b, err := o.get(ctx, id)
	if err != nil {
		return remoteStatus{}, err
	}
	switch b.Status {
	case "failed", "completed", "expired", "cancelled":
	default:
		return remoteStatus{State: b.Status, Total: b.RequestCounts.Total, Succeeded: b.RequestCounts.Completed, Failed: b.RequestCounts.Failed}, nil
	}
	return remoteStatus{State: b.Status, Ended: true, Total: b.RequestCounts.Total, Succeeded: b.RequestCounts.Completed, Failed: b.RequestCounts.Failed}, nil
}

func (o openaiBatches) results(ctx context.Context, id string, st remoteStatus, ids []string) ([]remoteItem, error) {
	b, err := o.get(ctx, id)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var items []remoteItem
	for _, fid := range []*string{b.OutputFileID, b.ErrorFileID} {
		if fid == nil || *fid == "" {
			continue
		}
		var data []byte
		if err := call(ctx, o.c, http.MethodGet, "/files/"+*fid+"/content", "", nil, &data); err != nil {
			return nil, fmt.Errorf("downloading %s: %w", *fid, err)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var l struct {
				CustomID string `json:"custom_id"`
				Response *struct {
					StatusCode int             `json:"status_code"`
					RequestID  string          `json:"request_id"`
					Body       json.RawMessage `json:"body"`
				} `json:"response"`
				Error *struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(line, &l); err != nil || l.CustomID == "" {
				return nil, &llm.DecodeError{Provider: o.c.Config().ID, Err: fmt.Errorf("file %s: not a batch output line", *fid)}
			}
			it := remoteItem{customID: l.CustomID}
			switch {
			case l.Error != nil && (l.Error.Code == CodeExpired || l.Error.Code == CodeCancelled):
				it.code = l.Error.Code
			case l.Error != nil:
				it.err = &llm.APIError{Provider: o.c.Config().ID, Code: l.Error.Code, Message: l.Error.Message}
			case l.Response != nil && l.Response.StatusCode/100 == 2:
				var kind struct {
					Object string `json:"object"`
				}
				_ = json.Unmarshal(l.Response.Body, &kind)
				it.requestID = l.Response.RequestID
				if kind.Object == "list" { // an embeddings answer
					it.emb, it.err = o.c.DecodeEmbed(l.Response.Body)
					break
				}
				it.res, it.err = o.c.DecodeChat(l.Response.Body)
				if it.res != nil {
					it.res.Meta.RequestID = l.Response.RequestID
				}
			case l.Response != nil:
				it.err = o.c.DecodeError(l.Response.StatusCode, l.Response.Body)
			}
			seen[l.CustomID] = true
			items = append(items, it)
		}
	}
	return withMissing(items, ids, seen, st.State == "cancelled"), nil
}

// withMissing reports the custom_ids a batch's results lack as not run.
func withMissing(items []remoteItem, ids []string, seen map[string]bool, cancelled bool) []remoteItem {
	code := CodeExpired
	if cancelled {
		code = CodeCancelled
	}
	for _, id := range ids {
		if !seen[id] {
			items = append(items, remoteItem{customID: id, code: code})
		}
	}
	return items
}

func (o openaiBatches) cancel(ctx context.Context, id string) error {
	return call(ctx, o.c, http.MethodPost, "/batches/"+id+"/cancel", "application/json", nil, nil)
}

// ---- Anthropic Message Batches ----

type anthropicBatches struct{ c *providers.Client }

func (anthropicBatches) limits() (int, int) { return 100_000, 256 << 20 }

type anBatch struct {
	ID               string    `json:"id"`
	ProcessingStatus string    `json:"processing_status"`
	CreatedAt        time.Time `json:"created_at"`
	RequestCounts    struct {
		Processing, Succeeded, Errored, Canceled, Expired int
	} `json:"request_counts"`
}

func (b anBatch) total() int {
	c := b.RequestCounts
	return c.Processing + c.Succeeded + c.Errored + c.Canceled + c.Expired
}

func (a anthropicBatches) submit(ctx context.Context, _, _ string, reqs []nativeReq) (string, error) {
	items := make([]map[string]any, len(reqs))
	for i, r := range reqs {
		items[i] = map[string]any{"custom_id": r.customID, "params": json.RawMessage(r.body)}
	}
	var b anBatch
	if err := call(ctx, a.c, http.MethodPost, "/v1/messages/batches", "application/json", jsonBody(map[string]any{"requests": items}), &b); err != nil {
		return "", fmt.Errorf("creating the message batch: %w", err)
	}
	return b.ID, nil
}

// find: a Message Batch carries no name or metadata, so a lost submit is
// recognised as the batch created after the intent with the same number
// of requests (the newest first page of the list).
func (a anthropicBatches) find(ctx context.Context, _ string, n int, after time.Time) (string, bool, error) {
	var list struct {
		Data []anBatch `json:"data"`
	}
	if err := call(ctx, a.c, http.MethodGet, "/v1/messages/batches?limit=100", "", nil, &list); err != nil {
		return "", false, err
	}
	for _, b := range list.Data {
		if !b.CreatedAt.Before(after.Add(-time.Minute)) && b.total() == n {
			return b.ID, true, nil
		}
	}
	return "", false, nil
}

func (a anthropicBatches) poll(ctx context.Context, id string) (remoteStatus, error) {
	var b anBatch
	if err := call(ctx, a.c, http.MethodGet, "/v1/messages/batches/"+id, "", nil, &b); err != nil {
		return remoteStatus{}, err
	}
	c := b.RequestCounts
	return remoteStatus{State: b.ProcessingStatus, Ended: b.ProcessingStatus == "ended", Total: b.total(), Succeeded: c.Succeeded, Failed: c.Errored + c.Canceled + c.Expired}, nil
}

func (a anthropicBatches) results(ctx context.Context, id string, _ remoteStatus, ids []string) ([]remoteItem, error) {
	var data []byte
	if err := call(ctx, a.c, http.MethodGet, "/v1/messages/batches/"+id+"/results", "", nil, &data); err != nil {
		return nil, fmt.Errorf("downloading the results of %s: %w", id, err)
	}
	seen := map[string]bool{}
	var items []remoteItem
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l struct {
			CustomID string `json:"custom_id"`
			Result   struct {
				Type    string          `json:"type"`
				Message json.RawMessage `json:"message"`
				Error   json.RawMessage `json:"error"`
			} `json:"result"`
		}
		if err := json.Unmarshal(line, &l); err != nil || l.CustomID == "" {
			return nil, &llm.DecodeError{Provider: a.c.Config().ID, Err: fmt.Errorf("results of %s: not a result line", id)}
		}
		it := remoteItem{customID: l.CustomID}
		switch l.Result.Type {
		case "succeeded":
			it.res, it.err = a.c.DecodeChat(l.Result.Message)
		case "errored":
			it.err = a.c.DecodeError(http.StatusBadRequest, l.Result.Error)
		case "canceled":
			it.code = CodeCancelled
		default: // expired
			it.code = CodeExpired
		}
		seen[l.CustomID] = true
		items = append(items, it)
	}
	return withMissing(items, ids, seen, false), nil
}

func (a anthropicBatches) cancel(ctx context.Context, id string) error {
	return call(ctx, a.c, http.MethodPost, "/v1/messages/batches/"+id+"/cancel", "application/json", nil, nil)
}

// ---- Gemini Batch Mode (inlined requests) ----

type geminiBatches struct{ c *providers.Client }

// limits: inlined requests are capped at 20 MB per batch.
func (geminiBatches) limits() (int, int) { return 100_000, 20 << 20 }

type gmOperation struct {
	Name     string `json:"name"`
	Done     bool   `json:"done"`
	Metadata struct {
		DisplayName string            `json:"displayName"`
		State       string            `json:"state"`
		BatchStats  map[string]string `json:"batchStats"`
	} `json:"metadata"`
	Response struct {
		InlinedResponses struct {
			InlinedResponses []struct {
				Response json.RawMessage `json:"response"`
				Error    *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
				Metadata map[string]string `json:"metadata"`
			} `json:"inlinedResponses"`
		} `json:"inlinedResponses"`
	} `json:"response"`
}

func (g geminiBatches) submit(ctx context.Context, token, model string, reqs []nativeReq) (string, error) {
	items := make([]map[string]any, len(reqs))
	for i, r := range reqs {
		items[i] = map[string]any{"request": json.RawMessage(r.body), "metadata": map[string]string{"key": r.customID}}
	}
	body := map[string]any{"batch": map[string]any{"displayName": token, "inputConfig": map[string]any{"requests": map[string]any{"requests": items}}}}
	var op gmOperation
	if err := call(ctx, g.c, http.MethodPost, "/v1beta/models/"+model+":batchGenerateContent", "application/json", jsonBody(body), &op); err != nil {
		return "", fmt.Errorf("creating the batch: %w", err)
	}
	return op.Name, nil
}

func (g geminiBatches) find(ctx context.Context, token string, _ int, _ time.Time) (string, bool, error) {
	var list struct {
		Operations []gmOperation `json:"operations"`
	}
	if err := call(ctx, g.c, http.MethodGet, "/v1beta/batches?pageSize=100", "", nil, &list); err != nil {
		return "", false, err
	}
	for _, op := range list.Operations {
		if op.Metadata.DisplayName == token {
			return op.Name, true, nil
		}
	}
	return "", false, nil
}

func (g geminiBatches) get(ctx context.Context, id string) (gmOperation, error) {
	var op gmOperation
	err := call(ctx, g.c, http.MethodGet, "/v1beta/"+id, "", nil, &op)
	return op, err
}

func (g geminiBatches) poll(ctx context.Context, id string) (remoteStatus, error) {
	op, err := g.get(ctx, id)
	if err != nil {
		return remoteStatus{}, err
	}
	n := func(k string) int { v, _ := strconv.Atoi(op.Metadata.BatchStats[k]); return v }
	st := remoteStatus{State: op.Metadata.State, Total: n("requestCount"), Succeeded: n("successfulRequestCount"), Failed: n("failedRequestCount")}
	switch op.Metadata.State {
	case "BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED",
		"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED":
		st.Ended = true
	}
	return st, nil
}

func (g geminiBatches) results(ctx context.Context, id string, st remoteStatus, ids []string) ([]remoteItem, error) {
	op, err := g.get(ctx, id)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var items []remoteItem
	for i, r := range op.Response.InlinedResponses.InlinedResponses {
		key := r.Metadata["key"]
		if key == "" && i < len(ids) { // responses keep the input order
			key = ids[i]
		}
		it := remoteItem{customID: key}
		if r.Error != nil {
			it.err = g.c.DecodeError(httpStatus(r.Error.Code), jsonBody(map[string]any{"error": map[string]any{"code": httpStatus(r.Error.Code), "message": r.Error.Message}}))
		} else {
			it.res, it.err = g.c.DecodeChat(r.Response)
		}
		seen[key] = true
		items = append(items, it)
	}
	return withMissing(items, ids, seen, strings.HasSuffix(st.State, "CANCELLED")), nil
}

// httpStatus maps a google.rpc.Code to its HTTP status.
func httpStatus(code int) int {
	switch code {
	case 3, 9, 11:
		return http.StatusBadRequest
	case 5:
		return http.StatusNotFound
	case 7:
		return http.StatusForbidden
	case 8:
		return http.StatusTooManyRequests
	case 16:
		return http.StatusUnauthorized
	case 14:
		return http.StatusServiceUnavailable
	case 4:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func (g geminiBatches) cancel(ctx context.Context, id string) error {
	return call(ctx, g.c, http.MethodPost, "/v1beta/"+id+":cancel", "application/json", nil, nil)
}
