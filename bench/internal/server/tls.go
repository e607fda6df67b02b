package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
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
// set, else only HTTP/1.1. The certificate is a fresh self-signed ECDSA
// P-256 one for 127.0.0.1, the key type the providers' own endpoints
// present (httptest's built-in RSA certificate makes each handshake cost
// milliseconds of the server's CPU, which at a thousand new connections
// measures the server, not the clients).
func (s *Server) StartTLS(http2 bool) (*TLS, error) {
	cert, err := selfSigned()
	if err != nil {
		return nil, err
	}
	ts := httptest.NewUnstartedServer(s)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
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
	}, nil
}

// selfSigned makes a self-signed ECDSA P-256 certificate for 127.0.0.1
// and localhost, valid for a day.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{Organization: []string{"chorus bench"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// Close opens the gate, closes every connection and stops the listener.
func (t *TLS) Close() {
	t.s.Release()
	t.ts.CloseClientConnections()
	t.ts.Close()
}
