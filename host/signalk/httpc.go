package signalk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// response is one answer of the server. A truncated body is never handed out.
type response struct {
	Status int
	Body   []byte
}

// httpHelper makes the device's REST calls to the Signal K server: a fresh client per call,
// the timeout, the body cap, Accept: application/json, and a bound on calls in flight.
type httpHelper struct {
	timeout time.Duration
	cap     int
	slots   chan struct{}
	tls     TLS
	// transport, when set, replaces the per-call transport (tests of the helper itself).
	transport func() http.RoundTripper
}

func newHTTPHelper(timeout time.Duration, bodyCap, inFlight int, t TLS) *httpHelper {
	if timeout <= 0 {
		timeout = HTTPTimeout
	}
	if bodyCap <= 0 {
		bodyCap = HTTPBodyCap
	}
	if inFlight < 1 || inFlight > 8 {
		inFlight = HTTPInFlight
	}
	return &httpHelper{timeout: timeout, cap: bodyCap, slots: make(chan struct{}, inFlight), tls: t}
}

// errCert marks a call refused by the certificate check.
var errCert = errors.New("signalk: certificate refused")

// do sends one request to srv. Any HTTP status is a successful call (err nil). Errors: the
// context, transport failures (wrapping errCert for a certificate refusal), ErrTruncated.
func (h *httpHelper) do(ctx context.Context, srv Server, token, method, path string, body []byte) (*response, error) {
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-h.slots }()

	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, srv.base()+path, rd)
	if err != nil {
		return nil, fmt.Errorf("signalk: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// A fresh client and transport per call: no connection outlives its call, so a server
	// change or a new trust anchor never meets a stale socket.
	var rt http.RoundTripper
	if h.transport != nil {
		rt = h.transport()
	} else {
		tr := &http.Transport{
			Proxy:                  nil,
			DialContext:            (&net.Dialer{Timeout: h.timeout}).DialContext,
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: 16 * 1024,
			TLSHandshakeTimeout:    h.timeout,
		}
		if h.tls != nil {
			tr.DialTLSContext = h.tls.DialTLSContext
		}
		rt = tr
	}
	c := &http.Client{Timeout: h.timeout, Transport: rt,
		// The server's answers are read where they are; a redirect is an answer too.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		if h.tls != nil && srv.TLS() && h.tls.IsCertError(err) {
			return nil, fmt.Errorf("%w: %s %s: %w", errCert, method, path, err)
		}
		return nil, fmt.Errorf("signalk: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if h.tls != nil && srv.TLS() {
		_ = h.tls.Proven(srv.Addr(), resp.TLS)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(h.cap)+1))
	if err != nil {
		return nil, fmt.Errorf("signalk: %s %s: reading the answer: %w", method, path, err)
	}
	if len(b) > h.cap {
		return &response{Status: resp.StatusCode}, fmt.Errorf("%w: %s %s", ErrTruncated, method, path)
	}
	return &response{Status: resp.StatusCode, Body: b}, nil
}
