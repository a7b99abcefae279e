package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"devhost/host/sntp/sntptest"
)

// rawCall sends bytes as written on a fresh connection to the device and reads one response.
func (d *dev) rawCall(req string) reply {
	d.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(d.base, "http://"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = io.WriteString(c, req) }()
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		d.t.Fatalf("%.40q: read response: %v", req, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatalf("%.40q: read body: %v", req, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// errorRow is one answer of the spec's Errors table, produced over the wire.
type errorRow struct {
	name   string
	status int
	code   string       // "" for a row without a body (304)
	send   func() reply // the request that produces it
}

// specRows is the spec's Errors table ("Errors"), one entry a row, as status and error code
// ("" for the rows without a body). TestErrorsTable must produce each of them over the wire.
var specRows = []string{
	"304 ", "400 bad_request", "400 validation", "401 unauthorized", "403 forbidden",
	"403 auth_unconfigured", "404 not_found", "404 unknown_namespace", "405 method_not_allowed",
	"408 timeout", "409 auth_open", "409 busy", "409 outranked", "411 length_required",
	"413 too_large", "414 uri_too_long", "415 unsupported_media_type", "429 too_many_attempts",
	"431 headers_too_large", "500 internal", "500 write_failed", "503 restarting",
	"507 insufficient_storage",
}

// unreachable names the spec rows no request from outside can produce, and why.
var unreachable = map[string]string{
	"500 internal": "it answers the device's own faults (a handler panic, a plugin endpoint left unanswered for 30 s, otadata unwritable on POST /ota/confirm of an unconfirmed image), none of which a request provokes in a test's time",
}

// produced records which spec rows a test produced over the wire, and which it had to skip.
type produced struct {
	mu      sync.Mutex
	seen    map[string]bool
	skipped map[string]string
}

func newProduced() *produced {
	return &produced{seen: map[string]bool{}, skipped: map[string]string{}}
}

func (p *produced) add(status int, code string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[strconv.Itoa(status)+" "+code] = true
}

// run runs a subtest that produces the row status code; the row counts once the subtest passes.
func (p *produced) run(t *testing.T, name string, status int, code string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		f(t)
		key := strconv.Itoa(status) + " " + code
		if t.Skipped() {
			p.mu.Lock()
			p.skipped[key] = name
			p.mu.Unlock()
			return
		}
		if !t.Failed() {
			p.add(status, code)
		}
	})
}

// check fails for every spec row neither produced nor named unreachable; a row whose only
// test was skipped (no mount here, no chronyd) is logged, not failed.
func (p *produced) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, row := range specRows {
		switch {
		case p.seen[row]:
		case unreachable[row] != "":
			t.Logf("spec row %q not produced over the wire: %s", row, unreachable[row])
		case p.skipped[row] != "":
			t.Logf("spec row %q not produced: %q was skipped", row, p.skipped[row])
		default:
			t.Errorf("spec row %q was not produced over the wire", row)
		}
	}
}

// checkRows runs rows in order: each must answer its status with the JSON `{error}` body.
func checkRows(t *testing.T, p *produced, rows []errorRow) {
	t.Helper()
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			defer func() {
				if !t.Failed() {
					p.add(row.status, row.code)
				}
			}()
			r := row.send()
			if r.status != row.status {
				t.Fatalf("status %d, want %d: %s", r.status, row.status, r.body)
			}
			if row.code == "" {
				if len(r.body) != 0 {
					t.Fatalf("body %q, want none", r.body)
				}
				return
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q: %s", ct, r.body)
			}
			var b struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(r.body, &b); err != nil || b.Error != row.code {
				t.Fatalf("body %s, want error %q", r.body, row.code)
			}
		})
	}
}

const rawHead = "Host: 127.0.0.1\r\nContent-Type: application/json\r\n"

// TestErrorsTable walks the spec's Errors table row by row against the real device, plus the
// answers the probing found outside it (net/http's own, duplicates, invalid UTF-8,
// the Host check), and fails when a row of the spec (specRows) was not produced over the
// wire. 500 `internal` is the one row no outside request reaches (see unreachable); host/httpd
// produces it from a handler panic.
func TestErrorsTable(t *testing.T) {
	p := newProduced()
	defer p.check(t)
	d := newDev(t)
	put := func(path, body string, hdr ...string) func() reply {
		return func() reply { return d.call("PUT", path, body, hdr...) }
	}
	post := func(path, body string, hdr ...string) func() reply {
		return func() reply { return d.call("POST", path, body, hdr...) }
	}
	get := func(path string, hdr ...string) func() reply {
		return func() reply { return d.call("GET", path, "", hdr...) }
	}
	raw := func(req string) func() reply { return func() reply { return d.rawCall(req) } }

	etag := d.call("GET", "/api/v1/config/schema", "").header.Get("ETag")
	if etag == "" {
		t.Fatal("schema without ETag")
	}
	// Open mode: every row that needs no key.
	checkRows(t, p, []errorRow{
		{"304 schema ETag matches", 304, "", get("/api/v1/config/schema", "If-None-Match", etag)},
		{"400 bad_request garbage", 400, "bad_request", raw("GARBAGE\r\n\r\n")},
		{"400 bad_request malformed header line", 400, "bad_request", raw("GET /api/v1/time HTTP/1.1\r\nHost: 127.0.0.1\r\nNoColon\r\n\r\n")},
		{"400 bad_request two Content-Length", 400, "bad_request", raw("PUT /api/v1/time HTTP/1.1\r\n" + rawHead + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}")},
		{"400 bad_request UI path with ..", 400, "bad_request", raw("GET /assets/../x.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")},
		{"400 validation unknown key", 400, "validation", put("/api/v1/config", `{"net":{"nope":1}}`)},
		{"400 validation trailing data", 400, "validation", put("/api/v1/config", `{"net":{}} x`)},
		{"400 validation invalid UTF-8", 400, "validation", put("/api/v1/config", "{\"net\":{\"hostname\":\"a\xffb\"}}")},
		{"400 validation tz by PUT /config as by PUT /time", 400, "validation", put("/api/v1/config", `{"time":{"tz":"été A\nB"}}`)},
		{"400 validation duplicate /config", 400, "validation", put("/api/v1/config", `{"sk":{"batch_ms":1,"batch_ms":2}}`)},
		{"400 validation duplicate /time", 400, "validation", put("/api/v1/time", `{"tz":"UTC0","tz":"CET-1"}`)},
		{"400 validation duplicate /logs/level", 400, "validation", put("/api/v1/logs/level", `{"level":"info","level":"none"}`)},
		{"400 validation duplicate /health/test", 400, "validation", post("/api/v1/health/test", `{"key":"test.a","key":"test.b","state":"warn"}`)},
		{"400 validation duplicate /sk/tls/ca", 400, "validation", put("/api/v1/sk/tls/ca", `{"pem":"x","pem":"y"}`)},
		{"400 validation duplicate /plugins/keys", 400, "validation", post("/api/v1/plugins/keys", `{"pem":"x","pem":"y"}`)},
		{"400 validation duplicate /plugins", 400, "validation", post("/api/v1/plugins", `{"url":"http://127.0.0.1:1/a","url":"http://127.0.0.1:1/b"}`)},
		{"400 validation duplicate /plugins/uploads", 400, "validation", post("/api/v1/plugins/uploads", `{"size":1,"size":2}`)},
		{"404 not_found unknown API path", 404, "not_found", get("/api/v1/nope")},
		{"404 not_found no core dump", 404, "not_found", get("/api/v1/system/coredump")},
		{"404 not_found missing file with an extension", 404, "not_found", get("/missing.js")},
		{"404 unknown_namespace", 404, "unknown_namespace", get("/api/v1/config?ns=zzz")},
		{"405 method_not_allowed", 405, "method_not_allowed", func() reply { return d.call("DELETE", "/api/v1/time", "") }},
		{"408 timeout body did not arrive", 408, "timeout", raw("PUT /api/v1/config HTTP/1.1\r\n" + rawHead + "Content-Length: 20\r\n\r\n{")},
		{"409 auth_open login without a key", 409, "auth_open", post("/api/v1/auth/login", `{"key":"whatever-key"}`)},
		{"409 busy WiFi scan while the radio cannot scan", 409, "busy", func() reply {
			d.devctlBoard("wifi", "scan-busy", "on")
			defer d.devctlBoard("wifi", "scan-busy", "off")
			return d.call("POST", "/api/v1/wifi/scan", "")
		}},
		{"411 length_required chunked", 411, "length_required", raw("PUT /api/v1/config HTTP/1.1\r\n" + rawHead + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")},
		{"411 length_required neither length nor body", 411, "length_required", raw("PUT /api/v1/time HTTP/1.1\r\n" + rawHead + "\r\n")},
		{"413 too_large", 413, "too_large", put("/api/v1/config", `{"net":{"hostname":"`+strings.Repeat("a", 17<<10)+`"}}`)},
		{"414 uri_too_long", 414, "uri_too_long", get("/api/v1/config?ns=" + strings.Repeat("a", 125))},
		{"415 unsupported_media_type", 415, "unsupported_media_type", put("/api/v1/config", `{}`, "Content-Type", "text/plain")},
		{"421 misdirected_request foreign Host", 421, "misdirected_request", raw("GET /api/v1/time HTTP/1.1\r\nHost: rebind.example.com:80\r\n\r\n")},
		{"431 headers_too_large", 431, "headers_too_large", raw("GET /api/v1/time HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + strings.Repeat("a", 9<<10) + "\r\n\r\n")},
		{"431 headers_too_large 20,000 headers", 431, "headers_too_large", raw("GET /api/v1/time HTTP/1.1\r\nHost: 127.0.0.1\r\n" + strings.Repeat("X-A: b\r\n", 20000) + "\r\n")},
		{"505 HTTP/9.9", 505, "http_version_not_supported", raw("GET /api/v1/time HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n")},
	})

	// 507: drill keys keep their slot for the boot, so distinct keys fill the table.
	p.run(t, "507 insufficient_storage condition table full", 507, "insufficient_storage", func(t *testing.T) {
		for i := range 40 {
			r := d.call("POST", "/api/v1/health/test", `{"key":"test.fill`+strconv.Itoa(i)+`","state":"warn"}`)
			if r.status == 507 {
				if ct := r.header.Get("Content-Type"); ct != "application/json" || r.json(t)["error"] != "insufficient_storage" {
					t.Fatalf("507 body %q %s", ct, r.body)
				}
				return
			}
			if r.status != 200 {
				t.Fatalf("drill %d: %d %s", i, r.status, r.body)
			}
		}
		t.Fatal("the condition table never filled")
	})

	// With a key: the credential rows, and defect 4 (streams end with their credential).
	d.putConfig(`{"httpd":{"api_key":"boat-key-42"}}`)
	d.key = "boat-key-42"
	sid := d.login(t, "boat-key-42")
	origin := "http://" + strings.TrimPrefix(d.base, "http://")
	checkRows(t, p, []errorRow{
		{"401 unauthorized no credential", 401, "unauthorized", func() reply {
			r := d.call("GET", "/api/v1/time", "", "Authorization", "")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer realm=") {
				t.Errorf("401 without WWW-Authenticate: %v", r.header)
			}
			return r
		}},
		{"401 unauthorized stale cookie", 401, "unauthorized", get("/api/v1/time", "Authorization", "", "Cookie", "dev_sid=0123456789abcdef0123456789abcdef")},
		{"403 forbidden cross-origin cookie write", 403, "forbidden", put("/api/v1/time", `{}`, "Authorization", "", "Cookie", sid, "Origin", "http://evil.example")},
		{"403 forbidden cookie write without Origin or Referer", 403, "forbidden", put("/api/v1/time", `{}`, "Authorization", "", "Cookie", sid)},
		{"400 validation duplicate /auth/login", 400, "validation", post("/api/v1/auth/login", `{"key":"boat-key-42","key":"x"}`)},
	})
	if r := d.call("PUT", "/api/v1/time", `{}`, "Authorization", "", "Cookie", sid, "Origin", origin); r.status != 200 {
		t.Fatalf("same-origin cookie write: %d %s", r.status, r.body)
	}

	t.Run("key change ends streams of the old credentials", func(t *testing.T) {
		bearer := d.stream(t, "Authorization", "Bearer boat-key-42")
		cookie := d.stream(t, "Cookie", sid)
		if r := d.call("PUT", "/api/v1/config", `{"httpd":{"api_key":"boat-key-43"}}`); r.status != 200 {
			t.Fatalf("change key: %d %s", r.status, r.body)
		}
		d.key = "boat-key-43"
		<-bearer
		<-cookie
	})
	t.Run("logout ends the session's stream", func(t *testing.T) {
		sid2 := d.login(t, "boat-key-43")
		s := d.stream(t, "Cookie", sid2)
		if r := d.call("POST", "/api/v1/auth/logout", "", "Authorization", "", "Cookie", sid2, "Origin", origin); r.status != 204 {
			t.Fatalf("logout: %d %s", r.status, r.body)
		}
		<-s
	})

	sid = d.login(t, "boat-key-43")
	p.run(t, "429 too_many_attempts", 429, "too_many_attempts", func(t *testing.T) {
		for i := range 5 {
			d.call("GET", "/api/v1/time", "", "Authorization", "Bearer wrong-"+strconv.Itoa(i))
		}
		r := d.call("GET", "/api/v1/time", "")
		if r.status != 429 || r.json(t)["error"] != "too_many_attempts" || r.header.Get("Retry-After") == "" {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
	})
	// A live cookie still works during the lockout: it arms the reboot.
	p.run(t, "503 restarting", 503, "restarting", func(t *testing.T) {
		if r := d.call("POST", "/api/v1/system/reboot", "", "Authorization", "", "Cookie", sid, "Origin", origin); r.status != 202 {
			t.Fatalf("reboot: %d %s", r.status, r.body)
		}
		r := d.call("PUT", "/api/v1/time", `{}`, "Authorization", "", "Cookie", sid, "Origin", origin)
		if r.status != 503 || r.json(t)["error"] != "restarting" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	d.waitBoot()

	t.Run("403 auth_unconfigured", func(t *testing.T) {
		d := newDev(t, withArgs("--auth-required"))
		checkRows(t, p, []errorRow{{"GET /time with no key set", 403, "auth_unconfigured", func() reply { return d.call("GET", "/api/v1/time", "") }}})
	})

	// 409 outranked: a real NTP server (chronyd on loopback) gives the clock to SNTP, the
	// highest-ranked source, which a manual PUT /time cannot override.
	p.run(t, "409 outranked manual time over an SNTP-held clock", 409, "outranked", func(t *testing.T) {
		ntpd := sntptest.Chrony(t, true)
		if r := d.call("PUT", "/api/v1/config", fmt.Sprintf(`{"time":{"server0":%q}}`, ntpd.Addr)); r.status != 200 {
			t.Fatalf("time.server0: %d %s", r.status, r.body)
		}
		// The SNTP keys take effect at the next boot.
		if r := d.call("POST", "/api/v1/system/reboot", ""); r.status != 202 {
			t.Fatalf("reboot: %d %s", r.status, r.body)
		}
		d.waitBoot()
		for end := time.Now().Add(hangGuard); ; time.Sleep(50 * time.Millisecond) {
			doc := d.call("GET", "/api/v1/time", "").json(t)
			if doc["source"] == "sntp" {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("the clock never went to SNTP: %v", doc)
			}
		}
		checkRows(t, p, []errorRow{{"PUT /time now", 409, "outranked", func() reply { return d.call("PUT", "/api/v1/time", `{"now":1795000000000}`) }}})
	})

	// 500 write_failed: a validated PUT /config whose write meets a full flash (a tmpfs;
	// skipped where mounting is not allowed).
	p.run(t, "500 write_failed config write on a full flash", 500, "write_failed", func(t *testing.T) {
		d := newDev(t, withFullableFlash(t))
		d.putConfig(`{"sk":{"batch_ms":150}}`)
		fill(t, filepath.Join(d.data, "flash"))
		// The store's file may still have room in its last page: write until a record no
		// longer fits, then that write must be 500 write_failed and leave the value as it was.
		last := 150
		checkRows(t, p, []errorRow{{"PUT /config", 500, "write_failed", func() reply {
			for v := 151; v < 151+5000; v++ {
				r := d.call("PUT", "/api/v1/config", fmt.Sprintf(`{"sk":{"batch_ms":%d}}`, 100+v%900))
				if r.status != 200 {
					if strings.Contains(string(r.body), d.data) {
						t.Errorf("the answer shows a file path: %s", r.body)
					}
					return r
				}
				last = 100 + v%900
			}
			t.Fatal("5000 writes on a full flash all succeeded")
			return reply{}
		}}})
		if got := d.config("sk")["batch_ms"]; got != float64(last) {
			t.Errorf("sk.batch_ms %v after the failed write, want %d (the last value stored)", got, last)
		}
	})
}

// login opens a session and returns its cookie pair.
func (d *dev) login(t *testing.T, key string) string {
	t.Helper()
	r := d.call("POST", "/api/v1/auth/login", `{"key":"`+key+`"}`, "Authorization", "")
	if r.status != 204 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	return strings.SplitN(r.header.Get("Set-Cookie"), ";", 2)[0]
}

// stream opens GET /events with the given credential header (and no other); the channel
// closes when the device ends the stream.
func (d *dev) stream(t *testing.T, hdr ...string) <-chan struct{} {
	t.Helper()
	req, _ := http.NewRequest("GET", d.base+"/api/v1/events", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("events: %d", resp.StatusCode)
	}
	// The first frame proves the stream is registered before the credential changes.
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatalf("events: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, br)
	}()
	t.Cleanup(func() { resp.Body.Close(); <-done })
	return done
}

// TestPortalSSIDDefaultAndEmptyTimePut: wifi.portal_ssid reads back as dev-<id> by default,
// and PUT /time {} is a no-op answering the time document.
func TestPortalSSIDDefaultAndEmptyTimePut(t *testing.T) {
	d := newDev(t)
	id, _ := d.call("GET", "/api/v1/net/status", "").json(t)["id"].(string)
	if len(id) != 4 {
		t.Fatalf("device id %q", id)
	}
	wifi := d.config("wifi")
	if wifi["portal_ssid"] != "dev-"+id {
		t.Fatalf("wifi.portal_ssid = %v, want dev-%s", wifi["portal_ssid"], id)
	}
	before := d.call("GET", "/api/v1/time", "").json(t)
	r := d.call("PUT", "/api/v1/time", `{}`)
	got := r.json(t)
	if r.status != 200 || got["source"] != before["source"] || got["tz"] != before["tz"] {
		t.Fatalf("PUT /time {}: %d %s, before %v", r.status, r.body, before)
	}
}
