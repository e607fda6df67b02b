package server

import (
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"time"
)

// TLS serves the same handler, mode and gate as its Server over TLS on
// another loopback port, with HTTP/2 or HTTP/1.1 only.
type TLS struct {
	// URL is "https://127.0.0.1:port".
	URL string
	// CAPEM is the PEM of the server's self-signed certificate: a client
	// trusts it by adding it to its RootCAs, as a user of a private CA does.
	CAPEM []byte
	// HTTP2 says whether the server offers h2 in its ALPN.
	HTTP2 bool

	s  *Server
	ts *httptest.Server
}

// StartTLS starts a TLS listener for s; HTTP/2 is offered when http2 is
// set, else only HTTP/1.1.
func (s *Server) StartTLS(http2 bool) *TLS {
	ts := httptest.NewUnstartedServer(s)
	ts.EnableHTTP2 = http2
	ts.Config.ReadHeaderTimeout = time.Minute
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	return &TLS{
		URL:   ts.URL,
		CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}),
		HTTP2: http2,
		s:     s,
		ts:    ts,
	}
}

// Close opens the gate, closes every connection and stops the listener.
func (t *TLS) Close() {
	t.s.Release()
	t.ts.CloseClientConnections()
	t.ts.Close()
}
