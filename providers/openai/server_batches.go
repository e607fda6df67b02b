package openai

import (
	"encoding/json"
	"fmt"
)

// This file is the server side of OpenAI's Files and Batch APIs (POST
// /files, POST /batches and their reads), for a gateway that runs OpenAI
// batch jobs: the objects a client reads, in OpenAI's wire format, and the
// decoding of a batch's creation request.

// ServerFile is a file object (GET /files/{id}).
type ServerFile struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int64   `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     *int64  `json:"expires_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
}

// NewServerFile is a processed file object.
func NewServerFile(id, filename, purpose string, size, created int64) ServerFile {
	return ServerFile{ID: id, Object: "file", Bytes: size, CreatedAt: created, Filename: filename, Purpose: purpose, Status: "processed"}
}

// ServerBatch is a batch object (GET /batches/{id}). Timestamps are Unix
// seconds, nil until the batch reaches that state.
type ServerBatch struct {
	ID               string             `json:"id"`
	Object           string             `json:"object"`
	Endpoint         string             `json:"endpoint"`
	Errors           *ServerBatchErrors `json:"errors"`
	InputFileID      string             `json:"input_file_id"`
	CompletionWindow string             `json:"completion_window"`
	// Status: validating, failed, in_progress, finalizing, completed,
	// expired, cancelling, cancelled.
	Status        string            `json:"status"`
	OutputFileID  *string           `json:"output_file_id"`
	ErrorFileID   *string           `json:"error_file_id"`
	CreatedAt     int64             `json:"created_at"`
	InProgressAt  *int64            `json:"in_progress_at"`
	ExpiresAt     *int64            `json:"expires_at"`
	FinalizingAt  *int64            `json:"finalizing_at"`
	CompletedAt   *int64            `json:"completed_at"`
	FailedAt      *int64            `json:"failed_at"`
	ExpiredAt     *int64            `json:"expired_at"`
	CancellingAt  *int64            `json:"cancelling_at"`
	CancelledAt   *int64            `json:"cancelled_at"`
	RequestCounts ServerBatchCounts `json:"request_counts"`
	Metadata      map[string]string `json:"metadata"`
}

// ServerBatchErrors lists why a batch failed validation.
type ServerBatchErrors struct {
	Object string             `json:"object"`
	Data   []ServerBatchError `json:"data"`
}

// ServerBatchError is one validation error; Line is 1-based.
type ServerBatchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// ServerBatchCounts are a batch's request counts.
type ServerBatchCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Terminal reports whether the batch's status is final.
func (b *ServerBatch) Terminal() bool {
	switch b.Status {
	case "failed", "completed", "expired", "cancelled":
		return true
	}
	return false
}

// ServerBatchCreate is a client's decoded POST /batches request.
type ServerBatchCreate struct {
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
}

// DecodeServerBatchCreate decodes a POST /batches request. endpoints are
// the endpoints served; the completion window must be "24h" (the only one
// OpenAI accepts). Errors are *llm.ConfigError naming the field.
func DecodeServerBatchCreate(body []byte, endpoints ...string) (*ServerBatchCreate, error) {
	var b ServerBatchCreate
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, badField("body", "is not a batch request: %v", err)
	}
	if b.InputFileID == "" {
		return nil, badField("input_file_id", "is missing")
	}
	ok := false
	for _, e := range endpoints {
		ok = ok || e == b.Endpoint
	}
	if !ok {
		return nil, badField("endpoint", "%q is not served (served: %v)", b.Endpoint, endpoints)
	}
	if b.CompletionWindow != "24h" {
		return nil, badField("completion_window", "%q: only 24h is supported", b.CompletionWindow)
	}
	if len(b.Metadata) > 16 {
		return nil, badField("metadata", "holds %d pairs (16 at most)", len(b.Metadata))
	}
	for k, v := range b.Metadata {
		if len(k) > 64 || len(v) > 512 {
			return nil, badField(fmt.Sprintf("metadata[%q]", k), "keys hold 64 characters at most and values 512")
		}
	}
	return &b, nil
}

type serverList[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// EncodeServerList encodes a page of a list (GET /files, GET /batches);
// ids are the page's first and last ids ("" when empty).
func EncodeServerList[T any](data []T, firstID, lastID string, hasMore bool) ([]byte, error) {
	l := serverList[T]{Object: "list", Data: data, HasMore: hasMore}
	if l.Data == nil {
		l.Data = []T{}
	}
	if firstID != "" {
		l.FirstID, l.LastID = &firstID, &lastID
	}
	return json.Marshal(l)
}

// EncodeServerDeleted encodes the answer to a DELETE.
func EncodeServerDeleted(id, object string) []byte {
	b, _ := json.Marshal(struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, object, true})
	return b
}
