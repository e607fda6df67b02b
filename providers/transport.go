package providers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// ErrCrossHostRedirect is returned when a provider redirects to another
// host: the request is not followed, so its credentials never leave.
var ErrCrossHostRedirect = errors.New("providers: redirect to another host refused")

// NewHTTPClient returns the pooled client Chorus uses by default: keep-alive
// connections sized for many concurrent streams, HTTP/2 where offered, no
// client-level timeout (the whole-call budget is the request context), and
// no redirect to another host.
func NewHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tr, CheckRedirect: sameHostRedirect}
}

func sameHostRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("providers: too many redirects")
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return ErrCrossHostRedirect
	}
	return nil
}

// CloseIdleConnections closes the client's idle keep-alive connections.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Body caps. They are variables so an application can change them at start-up.
var (
	// MaxResponseBytes caps a buffered answer.
	MaxResponseBytes int64 = 32 << 20
	// MaxErrorBytes caps the part of an error body that is read.
	MaxErrorBytes int64 = 1 << 20
)

var defaultHTTPClient = NewHTTPClient()

// send performs one HTTP request. Non-2xx answers come back as typed errors
// with the body consumed and closed.
func (c *Client) send(ctx context.Context, wreq *wire.Request, stream bool) (*http.Response, error) {
	method := wreq.Method
	if method == "" {
		method = http.MethodPost
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.cfg.BaseURL+wreq.Path, bytes.NewReader(wreq.Body))
	if err != nil {
		return nil, &llm.ConfigError{Field: "base_url", Msg: c.redact(err.Error())}
	}
	h := hreq.Header
	h["Content-Type"] = hdrJSON
	if stream {
		h["Accept"] = hdrEventStream
	} else {
		h["Accept"] = hdrJSON
	}
	h["User-Agent"] = hdrUserAgent
	for k, v := range c.cfg.Headers {
		h.Set(k, v)
	}
	for k, vs := range wreq.Header {
		h[k] = vs
	}
	c.codec.Authorize(h, string(c.cfg.APIKey), c.cfg.Quirks)
	resp, err := c.hc.Do(hreq)
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, cerr
		}
		return nil, &llm.TransportError{Provider: c.cfg.ID, Err: errors.New(c.redact(err.Error()))}
	}
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBytes))
		resp.Body.Close()
		return nil, c.statusError(resp, body)
	}
	accepted(ctx)
	return resp, nil
}

// The values of the headers every request carries, shared by all
// requests (one allocation each saved per call): nothing writes into a
// request's header values, it only replaces them (Header.Set), and each
// holds one element at full capacity, so an Add copies.
var (
	hdrJSON        = []string{"application/json"}
	hdrEventStream = []string{"text/event-stream"}
	hdrUserAgent   = []string{"chorus/0"}
)

var errTooLarge = errors.New("providers: response body exceeds its cap")

func readCapped(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", errTooLarge, limit)
	}
	return b, nil
}
