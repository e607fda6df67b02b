package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/chorusrt/chorus/telemetry"
)

// AttrServer is the Set's name for the MCP server a call went to
// (Server.Name): Chorus's own attribute, typed here (the conventions name
// the session, not the configured server).
const AttrServer = attribute.Key("chorus.mcp.server")

// startCallSpan starts the CLIENT span `tools/call {tool}` of one call,
// a child of ctx's span (the execute_tool span of the tool loop, the
// session or Set.Call), with the MCP conventions' attributes; the session
// and transport attributes also go on that execute_tool span. token is
// the call's progress token: while the span records, the JSON-RPC request
// carrying it has its id noted on the span (noteRequest).
func (c *serverConn) startCallSpan(ctx context.Context, t *Tool, cs *mcp.ClientSession, token string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	ctx, span := c.set.tel.Tracer().Start(ctx, "tools/call "+t.Name, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	session := c.sessionAttrs(cs)
	span.SetAttributes(semconv.McpMethodNameToolsCall, semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(t.Name))
	span.SetAttributes(session...)
	if parent.IsRecording() {
		parent.SetAttributes(session...)
	}
	c.pending.Store(token, span)
	c.npending.Add(1)
	return ctx, span
}

// sessionAttrs are the server's and session's attributes: the server's
// name, mcp.session.id (Streamable HTTP only), mcp.protocol.version, and
// the transport: pipe for a command; tcp, http, server.address and
// server.port for a URL.
func (c *serverConn) sessionAttrs(cs *mcp.ClientSession) []attribute.KeyValue {
	kv := []attribute.KeyValue{AttrServer.String(c.cfg.Name)}
	if id := cs.ID(); id != "" {
		kv = append(kv, semconv.McpSessionID(id))
	}
	if ir := cs.InitializeResult(); ir != nil && ir.ProtocolVersion != "" {
		kv = append(kv, semconv.McpProtocolVersion(ir.ProtocolVersion))
	}
	if len(c.cfg.Command) > 0 {
		return append(kv, semconv.NetworkTransportPipe)
	}
	kv = append(kv, semconv.NetworkTransportTCP, semconv.NetworkProtocolName("http"))
	if u, err := url.Parse(c.cfg.URL); err == nil {
		kv = append(kv, semconv.ServerAddress(u.Hostname()))
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if p, err := strconv.Atoi(port); err == nil {
			kv = append(kv, semconv.ServerPort(p))
		}
	}
	return kv
}

// endCallSpan ends the call's span: error.type and rpc.response.status_code for
// a JSON-RPC error (its code), error.type tool_error for a result marked
// isError, the error's class otherwise.
func (c *serverConn) endCallSpan(span trace.Span, token string, r *Result, err error) {
	if _, ok := c.pending.LoadAndDelete(token); ok {
		c.npending.Add(-1)
	}
	defer span.End()
	if !span.IsRecording() {
		return
	}
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, &werr):
		code := toolErrorType(err)
		span.SetAttributes(semconv.ErrorTypeKey.String(code), semconv.RPCResponseStatusCode(code))
		span.SetStatus(codes.Error, code)
	case err != nil:
		et := toolErrorType(err)
		span.SetAttributes(semconv.ErrorTypeKey.String(et))
		span.SetStatus(codes.Error, et)
	case r != nil && r.IsError:
		span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		span.SetStatus(codes.Error, "tool_error")
	}
}

// noteRequest puts a tools/call request's JSON-RPC id on the span of the
// call whose progress token it carries. It costs nothing while no call
// records a span.
func (c *serverConn) noteRequest(req *jsonrpc.Request) {
	if req == nil || req.Method != "tools/call" || c.npending.Load() == 0 || !req.ID.IsValid() {
		return
	}
	var p struct {
		Meta struct {
			ProgressToken any `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	tok, _ := p.Meta.ProgressToken.(string)
	if v, ok := c.pending.Load(tok); ok {
		v.(trace.Span).SetAttributes(semconv.JSONRPCRequestID(fmt.Sprint(req.ID.Raw())))
	}
}

// idTransport wraps a command's transport so that its outgoing requests
// reach noteRequest. (A Streamable HTTP connection cannot be wrapped: the
// SDK asks it for an unexported method; its requests are seen by
// headerTransport instead.)
type idTransport struct {
	mcp.Transport
	c *serverConn
}

func (t *idTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &idConn{Connection: conn, c: t.c}, nil
}

type idConn struct {
	mcp.Connection
	c *serverConn
}

func (i *idConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if req, ok := m.(*jsonrpc.Request); ok {
		i.c.noteRequest(req)
	}
	return i.Connection.Write(ctx, m)
}

// peekRequest hands a Streamable HTTP POST's JSON-RPC request to
// noteRequest, leaving the body as it was. Only while a call records.
func (c *serverConn) peekRequest(r *http.Request) *http.Request {
	if c == nil || c.npending.Load() == 0 || r.Method != http.MethodPost || r.Body == nil {
		return r
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	r.Body.Close()
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r.ContentLength = int64(len(b))
	if err == nil {
		if m, err := jsonrpc.DecodeMessage(b); err == nil {
			if req, ok := m.(*jsonrpc.Request); ok {
				c.noteRequest(req)
			}
		}
	}
	return r
}

// spans of the calls in flight, by progress token (sync.Map: written once
// per call, read once per request).
type pendingSpans struct {
	pending  sync.Map
	npending atomic.Int64
}

// toolErrorType is error.type for a failed call: the JSON-RPC error's
// code, as the MCP conventions say, else the error's class (timeout,
// canceled, ...; call_failed for a lost server or an unknown tool).
func toolErrorType(err error) string {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return strconv.FormatInt(werr.Code, 10)
	}
	if et := telemetry.ErrorType(err); et != "_OTHER" {
		return et
	}
	return "call_failed"
}
