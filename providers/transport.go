package providers

import (
	"errors"
	"net"
	"net/http"
	"time"
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
