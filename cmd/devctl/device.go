package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The device's REST API as every command that talks to it reaches it: the same --url and
// --key flags, one way to send a request, and one error for a refusal.

// maxAnswer bounds a JSON answer read from the device (a log page is the largest).
const maxAnswer = 8 << 20

// deviceFlags are a command's --url and --key.
type deviceFlags struct{ url, key *string }

// addDeviceFlags registers --url and --key on fs.
func addDeviceFlags(fs *flag.FlagSet) deviceFlags {
	return deviceFlags{
		url: fs.String("url", "", "the device, http://HOST:PORT (else $DEVCTL_URL, else "+defaultURL+")"),
		key: fs.String("key", "", "API key (default $DEVCTL_KEY)"),
	}
}

// apiClient sends requests to one device's API root, http://HOST:PORT/api/v1.
type apiClient struct {
	http *http.Client
	base string
	key  string
	// timeout bounds one request, its answer's body included; 0 leaves a stream open.
	timeout time.Duration
}

// device resolves the parsed flags of f into a client whose requests take at most timeout.
func (a *app) device(f deviceFlags, timeout time.Duration) (*apiClient, error) {
	base, err := a.apiBase(*f.url)
	if err != nil {
		return nil, err
	}
	return &apiClient{http: a.http, base: base, key: a.key(*f.key), timeout: timeout}, nil
}

// do sends one request for path (below the API root) with body as JSON (nil: none). An
// answer other than 2xx is an *httpError; closing the answer's body ends the request.
func (c *apiClient) do(ctx context.Context, method, path, accept string, body []byte) (*http.Response, error) {
	cancel := context.CancelFunc(func() {})
	if c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", accept)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer cancel()
		defer resp.Body.Close()
		return nil, readHTTPError(resp)
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

// call sends body as JSON (when not nil) and decodes the JSON answer into out (when not nil).
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var js []byte
	if body != nil {
		var err error
		if js, err = json.Marshal(body); err != nil {
			return err
		}
	}
	resp, err := c.do(ctx, method, path, "application/json", js)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: answer: %w", method, c.base+path, err)
	}
	return nil
}

// cancelOnClose ends a request's context when its answer's body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { err := c.ReadCloser.Close(); c.cancel(); return err }

// httpError is an error status from the device.
type httpError struct {
	status     int
	code       string
	msg        string
	retryAfter string // the Retry-After header of a 429
}

func (e *httpError) Error() string {
	s := fmt.Sprintf("device answered %d", e.status)
	if e.code != "" {
		s += " " + e.code
	}
	if e.msg != "" {
		s += ": " + e.msg
	}
	switch e.status {
	case http.StatusUnauthorized:
		s += " (give the API key with --key or $DEVCTL_KEY)"
	case http.StatusTooManyRequests:
		if e.retryAfter != "" {
			s += "; retry in " + e.retryAfter + " s"
		}
	}
	return s
}

// final reports errors that retrying cannot fix: the request itself is refused.
func final(err error) bool {
	var he *httpError
	if !errors.As(err, &he) {
		return false
	}
	return he.status >= 400 && he.status < 500 && he.status != http.StatusRequestTimeout && he.status != http.StatusTooManyRequests
}

func readHTTPError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var body struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(b, &body)
	return &httpError{status: resp.StatusCode, code: body.Error, msg: body.Message,
		retryAfter: resp.Header.Get("Retry-After")}
}
