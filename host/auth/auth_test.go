package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"devhost/host/api"
	"devhost/host/api/apitest"
)

func TestOpenModeLetsEverythingThrough(t *testing.T) {
	a, e := newAuth(t, "", nil)
	reqs := []*http.Request{
		request(http.MethodGet, stationIP, ""),
		request(http.MethodPost, stationIP, "{}"), // no Origin, no credential
		request(http.MethodDelete, stationIP, "", bearerHdr("wrong-key-000")...),
		request(http.MethodPut, stationIP, "", cookieHdr("deadbeef")...),
	}
	for _, r := range reqs {
		m, err := a.Check(r)
		if err != nil || m != MethodNone {
			t.Errorf("%s %v: got %q, %v; want none, nil", r.Method, r.Header, m, err)
		}
	}
	// Bearers sent while the API is open are not key checks: none of them counted.
	for range 10 {
		_, _ = a.Check(request(http.MethodGet, stationIP, "", bearerHdr("wrong-key-000")...))
	}
	e.setKey(testKey)
	if m, err := a.Check(request(http.MethodGet, stationIP, "", bearerHdr(testKey)...)); err != nil || m != MethodBearer {
		t.Fatalf("after setting the key, right Bearer = %q, %v", m, err)
	}
}

func TestBearer(t *testing.T) {
	long := strings.Repeat("x", 100)
	cases := []struct {
		name    string
		hdr     []string
		ok      bool
		counted bool // a wrong key that counts toward the throttle
	}{
		{"right key", bearerHdr(testKey), true, false},
		{"lowercase scheme", []string{"Authorization", "bearer " + testKey}, true, false},
		{"uppercase scheme", []string{"Authorization", "BEARER " + testKey}, true, false},
		{"extra spaces", []string{"Authorization", "Bearer    " + testKey + "  "}, true, false},
		{"wrong key", bearerHdr("not the key"), false, true},
		{"key prefix", bearerHdr(testKey[:10]), false, true},
		{"key plus suffix", bearerHdr(testKey + "x"), false, true},
		{"over-long token", bearerHdr(long), false, true},
		{"no header", nil, false, false},
		{"scheme only", []string{"Authorization", "Bearer"}, false, false},
		{"scheme and blank", []string{"Authorization", "Bearer   "}, false, false},
		{"basic scheme", []string{"Authorization", "Basic dXNlcjpwYXNz"}, false, false},
		{"key without scheme", []string{"Authorization", testKey}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newAuth(t, testKey, nil)
			m, err := a.Check(request(http.MethodPost, stationIP, "", tc.hdr...))
			if tc.ok {
				if err != nil || m != MethodBearer {
					t.Fatalf("got %q, %v; want bearer", m, err)
				}
				return
			}
			if st, code := errCode(t, err); st != http.StatusUnauthorized || code != api.CodeUnauthorized {
				t.Fatalf("got %d %s; want 401 unauthorized", st, code)
			}
			// Four more wrong keys: the lockout starts only if this row counted.
			for range 4 {
				_, _ = a.Check(request(http.MethodGet, stationIP, "", bearerHdr("another wrong")...))
			}
			_, err = a.Check(request(http.MethodGet, stationIP, "", bearerHdr(testKey)...))
			if locked := RetryAfter(err) > 0; locked != tc.counted {
				t.Fatalf("counted = %v, want %v (right key after four more: %v)", locked, tc.counted, err)
			}
		})
	}
}

func TestBearerWinsOverCookie(t *testing.T) {
	a, _ := newAuth(t, testKey, nil)
	id := mustLogin(t, a)
	hdr := append(bearerHdr("wrong key!"), cookieHdr(id)...)
	if st, _ := errCode(t, mustErr(a.Check(request(http.MethodGet, stationIP, "", hdr...)))); st != http.StatusUnauthorized {
		t.Fatalf("wrong Bearer with live cookie = %d, want 401", st)
	}
	// A non-Bearer Authorization header is ignored, so the cookie is used.
	hdr = append([]string{"Authorization", "Basic Zm9vOmJhcg=="}, cookieHdr(id)...)
	if m, err := a.Check(request(http.MethodGet, stationIP, "", hdr...)); err != nil || m != MethodCookie {
		t.Fatalf("Basic plus cookie = %q, %v; want cookie", m, err)
	}
}

func mustErr(_ Method, err error) error { return err }

func TestChallengeAndWriteError(t *testing.T) {
	a, _ := newAuth(t, testKey, nil)
	if got, want := a.Challenge(), `Bearer realm="dev"`; got != want {
		t.Fatalf("Challenge = %q, want %q", got, want)
	}
	b, _ := newAuth(t, testKey, func(o *Options) { o.Realm = `dev-"a\b"` })
	if got, want := b.Challenge(), `Bearer realm="dev-\"a\\b\""`; got != want {
		t.Fatalf("Challenge = %q, want %q", got, want)
	}

	_, err := a.Check(request(http.MethodGet, stationIP, ""))
	w := httptest.NewRecorder()
	a.WriteError(w, err)
	if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != `Bearer realm="dev"` {
		t.Fatalf("401 = %d, WWW-Authenticate %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	if w.Header().Get("Retry-After") != "" {
		t.Fatalf("401 carries Retry-After %q", w.Header().Get("Retry-After"))
	}
	assertErrBody(t, w, api.CodeUnauthorized)

	w = httptest.NewRecorder()
	a.WriteError(w, &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden})
	if w.Header().Get("WWW-Authenticate") != "" {
		t.Fatalf("403 carries WWW-Authenticate")
	}
}

func assertErrBody(t *testing.T, w *httptest.ResponseRecorder, code string) {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error != code {
		t.Fatalf("body %q (%v), want error %q", w.Body, err, code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
}

func TestLoginIssuesCookie(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	e.setTTL(3600 * time.Second)
	w := login(a, `{"key":"`+testKey+`"}`)
	if w.Code != http.StatusNoContent || w.Body.Len() != 0 {
		t.Fatalf("login = %d %q", w.Code, w.Body)
	}
	sc := w.Header().Values("Set-Cookie")
	re := regexp.MustCompile(`^dev_sid=([0-9a-f]{32}); HttpOnly; SameSite=Strict; Path=/; Max-Age=3600$`)
	if len(sc) != 1 || !re.MatchString(sc[0]) {
		t.Fatalf("Set-Cookie = %q", sc)
	}
	if w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control = %q", w.Header().Get("Cache-Control"))
	}
	id := re.FindStringSubmatch(sc[0])[1]
	if !cookieOK(t, a, id) {
		t.Fatal("the issued cookie does not authenticate")
	}
	// Two logins never share an id.
	if other := mustLogin(t, a); other == id {
		t.Fatal("second login reused the session id")
	}

	// A TTL under one second reads as the default day.
	e.setTTL(0)
	w = login(a, `{"key":"`+testKey+`"}`)
	if !strings.HasSuffix(w.Header().Get("Set-Cookie"), "; Max-Age=86400") {
		t.Fatalf("Set-Cookie with TTL 0 = %q", w.Header().Get("Set-Cookie"))
	}
}

func TestLoginErrors(t *testing.T) {
	cases := []struct {
		name       string
		key        string
		body       string
		wantStatus int
		wantCode   string
	}{
		{"wrong key", testKey, `{"key":"nope nope"}`, 401, api.CodeUnauthorized},
		{"empty key", testKey, `{"key":""}`, 401, api.CodeUnauthorized},
		{"no key configured", "", `{"key":"anything"}`, 409, api.CodeAuthOpen},
		{"no key configured, bad body", "", `[]`, 409, api.CodeAuthOpen},
		{"array", testKey, `[]`, 400, api.CodeValidation},
		{"key not a string", testKey, `{"key":12345678}`, 400, api.CodeValidation},
		{"unknown member", testKey, `{"key":"` + testKey + `","user":"x"}`, 400, api.CodeValidation},
		{"trailing data", testKey, `{"key":"` + testKey + `"} x`, 400, api.CodeValidation},
		{"empty body", testKey, ``, 400, api.CodeValidation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newAuth(t, tc.key, nil)
			w := login(a, tc.body)
			if w.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d (%s)", w.Code, tc.wantStatus, w.Body)
			}
			assertErrBody(t, w, tc.wantCode)
			if got := w.Header().Get("WWW-Authenticate"); (tc.wantStatus == 401) != (got == `Bearer realm="dev"`) {
				t.Fatalf("WWW-Authenticate = %q", got)
			}
			if w.Header().Get("Set-Cookie") != "" {
				t.Fatal("failed login set a cookie")
			}
		})
	}
}

// With HTTPD_AUTH_REQUIRED and no key, a login is still 409 auth_open (Endpoints, POST
// /auth/login), but its message must not tell the operator the API is open: every protected
// endpoint answers 403 auth_unconfigured until a key is set from the portal.
func TestLoginWithoutKeyMessage(t *testing.T) {
	for _, required := range []bool{false, true} {
		a, _ := newAuth(t, "", func(o *Options) { o.Required = required })
		w := login(a, `{"key":"anything"}`)
		if w.Code != http.StatusConflict {
			t.Fatalf("required=%v: status %d, want 409 (%s)", required, w.Code, w.Body)
		}
		assertErrBody(t, w, api.CodeAuthOpen)
		var body struct{ Message string }
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if open := strings.Contains(body.Message, "open"); open == required {
			t.Errorf("required=%v: message %q", required, body.Message)
		}
	}
}

func TestParseLogin(t *testing.T) {
	cases := []struct {
		body    string
		want    string
		wantErr bool
	}{
		{`{"key":"abcdefgh"}`, "abcdefgh", false},
		{" \n{ \"key\" : \"a b\\\"c\" }\n ", `a b"c`, false},
		{`{"key":"\u00e9t\u00e9"}`, "été", false},
		{`{"key":""}`, "", false},
		{`{}`, "", true},
		{`null`, "", true},
		{`"abcdefgh"`, "", true},
		{`[{"key":"abcdefgh"}]`, "", true},
		{`{"key":null}`, "", true},
		{`{"key":true}`, "", true},
		{`{"key":["abcdefgh"]}`, "", true},
		{`{"Key":"abcdefgh"}`, "", true},
		{`{"key":"abcdefgh","x":1}`, "", true},
		{`{"key":"abcdefgh"}{}`, "", true},
		{`{"key":"abcdefgh"`, "", true},
		{``, "", true},
	}
	for _, tc := range cases {
		got, err := ParseLogin([]byte(tc.body))
		if tc.wantErr {
			if st, code := errCode(t, err); st != http.StatusBadRequest || code != api.CodeValidation {
				t.Errorf("%q: got %q, %d %s; want 400 validation", tc.body, got, st, code)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.body, got, err, tc.want)
		}
	}
}

func FuzzParseLogin(f *testing.F) {
	seeds := []string{`{"key":"abcdefgh"}`, `{"key":1}`, `{}`, `[]`, `null`, `{"key":"a"} x`,
		`{"key":"\ud800"}`, `{"key":"a","key":"b"}`, ` {"key" : "x"} `, `{"k\u0065y":"x"}`}
	apitest.FuzzParser(f, seeds, ParseLogin, func(t *testing.T, b []byte, key string) {
		// An accepted body is one object with a string key: it round-trips.
		var doc map[string]any
		if jerr := json.Unmarshal(b, &doc); jerr != nil || len(doc) != 1 {
			t.Fatalf("accepted %q, which is not a one-member object (%v)", b, jerr)
		}
		again, err := json.Marshal(map[string]string{"key": key})
		if err != nil {
			t.Fatal(err)
		}
		if k2, err := ParseLogin(again); err != nil || k2 != key {
			t.Fatalf("round trip %q -> %q, %v", key, k2, err)
		}
	})
}

func TestLogout(t *testing.T) {
	a, _ := newAuth(t, testKey, nil)
	mine, other := mustLogin(t, a), mustLogin(t, a)

	w := httptest.NewRecorder()
	a.handleLogout(w, request(http.MethodPost, stationIP, "", cookieHdr(mine)...))
	if w.Code != http.StatusNoContent {
		t.Fatalf("logout = %d", w.Code)
	}
	if got, want := w.Header().Get("Set-Cookie"), "dev_sid=; Max-Age=0; HttpOnly; SameSite=Strict; Path=/"; got != want {
		t.Fatalf("Set-Cookie = %q, want %q", got, want)
	}
	if cookieOK(t, a, mine) {
		t.Fatal("logged-out session still works")
	}
	if !cookieOK(t, a, other) {
		t.Fatal("logout dropped another session")
	}
	// Without a cookie (or with a stale one) logout still answers 204.
	for _, hdr := range [][]string{nil, cookieHdr(mine)} {
		w = httptest.NewRecorder()
		a.handleLogout(w, request(http.MethodPost, stationIP, "", hdr...))
		if w.Code != http.StatusNoContent {
			t.Fatalf("logout %v = %d", hdr, w.Code)
		}
	}
}

func TestRoutes(t *testing.T) {
	a, _ := newAuth(t, testKey, nil)
	want := map[string]bool{"POST /auth/login": false, "POST /auth/logout": true, "GET /auth/status": false}
	rts := a.Routes()
	if len(rts) != len(want) {
		t.Fatalf("%d routes", len(rts))
	}
	for _, rt := range rts {
		noBody, ok := want[rt.Method+" "+rt.Path]
		if !ok || !rt.Public || rt.NoBody != noBody || rt.Handler == nil || rt.Stream {
			t.Errorf("route %+v", rt)
		}
	}
}

func TestCtEqual(t *testing.T) {
	k64 := strings.Repeat("k", 64)
	cases := []struct {
		a, b string
		want bool
	}{
		{"abcdefgh", "abcdefgh", true},
		{"", "", true},
		{k64, k64, true},
		{"abcdefgh", "bbcdefgh", false},
		{"abcdefgh", "abcdefgi", false},
		{"abcdefgh", "abcdefg", false},
		{"abcdefg", "abcdefgh", false},
		{"abc", "abc\x00", false}, // padding must not make lengths equal
		{"", "\x00", false},
		{"", "a", false},
		{k64 + "k", k64 + "k", false}, // beyond the maximum never matches
		{k64 + "k", k64, false},
		{k64, k64 + "x", false},
	}
	for _, tc := range cases {
		if got := ctEqual(tc.a, tc.b, MaxKeyLen); got != tc.want {
			t.Errorf("ctEqual(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := ctEqual(tc.b, tc.a, MaxKeyLen); got != tc.want {
			t.Errorf("ctEqual(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}
