package abi

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

const (
	testSvc  = "021a9004-0382-4aea-bff4-6b3f1c5adfb4"
	testChar = "021aff51-0382-4aea-bff4-6b3f1c5adfb4"
)

func TestGATTServiceRoundTrip(t *testing.T) {
	in := GATTService{UUID: testSvc, Chars: []GATTChar{
		{UUID: testChar, Props: GATTPropRead | GATTPropWrite, Description: "prov-session"},
		{UUID: "021aff52-0382-4aea-bff4-6b3f1c5adfb4", Props: GATTPropNotify},
	}}
	out, err := DecodeGATTService(AppendGATTService(nil, in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
}

func TestGATTServiceRefused(t *testing.T) {
	ok := GATTChar{UUID: testChar, Props: GATTPropRead}
	many := make([]GATTChar, MaxGATTChars+1)
	for i := range many {
		many[i] = GATTChar{UUID: strings.Replace(testChar, "ff51", "ff"+string("0123456789abcdefg"[i])+"0", 1), Props: GATTPropRead}
	}
	for name, svc := range map[string]GATTService{
		"short uuid":     {UUID: "180a", Chars: []GATTChar{ok}},
		"upper case":     {UUID: strings.ToUpper(testSvc), Chars: []GATTChar{ok}},
		"no chars":       {UUID: testSvc},
		"too many":       {UUID: testSvc, Chars: many},
		"repeated":       {UUID: testSvc, Chars: []GATTChar{ok, ok}},
		"same as svc":    {UUID: testSvc, Chars: []GATTChar{{UUID: testSvc, Props: GATTPropRead}}},
		"no props":       {UUID: testSvc, Chars: []GATTChar{{UUID: testChar}}},
		"unknown prop":   {UUID: testSvc, Chars: []GATTChar{{UUID: testChar, Props: 8}}},
		"control in der": {UUID: testSvc, Chars: []GATTChar{{UUID: testChar, Props: 1, Description: "a\nb"}}},
	} {
		if _, err := DecodeGATTService(AppendGATTService(nil, svc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	b := AppendGATTService(nil, GATTService{UUID: testSvc, Chars: []GATTChar{ok}})
	for n := 0; n < len(b); n++ {
		if _, err := DecodeGATTService(b[:n]); err == nil {
			t.Errorf("truncated to %d: accepted", n)
		}
	}
	if _, err := DecodeGATTService(append(b, 0)); err == nil {
		t.Error("trailing byte accepted")
	}
}

func TestGATTRecordsRoundTrip(t *testing.T) {
	ev := GATTEvent{ID: 7, Op: GATTWrite, Conn: 2, Char: 3, MTU: 185, Value: []byte{1, 2, 3}}
	if got, err := DecodeGATTEvent(AppendGATTEvent(nil, ev)); err != nil || !reflect.DeepEqual(got, ev) {
		t.Errorf("event: %+v, %v", got, err)
	}
	rep := GATTReply{ID: 7, ATT: 0x0e, Value: []byte("x")}
	if got, err := DecodeGATTReply(AppendGATTReply(nil, rep)); err != nil || !reflect.DeepEqual(got, rep) {
		t.Errorf("reply: %+v, %v", got, err)
	}
	no := GATTNotification{Char: 1, Value: []byte("v")}
	if got, err := DecodeGATTNotification(AppendGATTNotification(nil, no)); err != nil || !reflect.DeepEqual(got, no) {
		t.Errorf("notification: %+v, %v", got, err)
	}
	if _, err := DecodeGATTReply(AppendGATTReply(nil, GATTReply{Value: make([]byte, MaxGATTValue+1)})); err == nil {
		t.Error("oversized reply accepted")
	}
}

func TestPortalRecords(t *testing.T) {
	paths, err := DecodePortalPaths(AppendStrings(nil, []string{"/prov-session", "/proto-ver"}))
	if err != nil || !reflect.DeepEqual(paths, []string{"/prov-session", "/proto-ver"}) {
		t.Fatalf("paths: %v, %v", paths, err)
	}
	if p, err := DecodePortalPaths(nil); err != nil || len(p) != 0 {
		t.Errorf("none: %v, %v", p, err)
	}
	for _, bad := range [][]string{{"/api/v1/prov"}, {"/prov-session", "/prov-session"}, {"prov-session"}} {
		if _, err := DecodePortalPaths(AppendStrings(nil, bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	req := PortalRequest{ID: 3, Method: "POST", Path: "/prov-session", Conn: "10.0.0.2:5555", Cookie: "session=ab", Body: []byte{0, 1}}
	if got, err := DecodePortalRequest(AppendPortalRequest(nil, req)); err != nil || !reflect.DeepEqual(got, req) {
		t.Errorf("request: %+v, %v", got, err)
	}
	resp := PortalResponse{ID: 3, Status: 200, SetCookie: "session=ab; Path=/", Body: []byte{9}}
	if got, err := DecodePortalResponse(AppendPortalResponse(nil, resp)); err != nil || !reflect.DeepEqual(got, resp) {
		t.Errorf("response: %+v, %v", got, err)
	}
	for _, bad := range []PortalResponse{{Status: 100}, {Status: 200, SetCookie: "a\r\nX-Evil: 1"}} {
		if _, err := DecodePortalResponse(AppendPortalResponse(nil, bad)); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestWiFiCredentials(t *testing.T) {
	for _, tc := range []struct {
		c  WiFiCredentials
		ok bool
	}{
		{WiFiCredentials{"boat", "longenough"}, true},
		{WiFiCredentials{"open", ""}, true},
		{WiFiCredentials{"hex", strings.Repeat("a1", 32)}, true},
		{WiFiCredentials{"", "longenough"}, false},
		{WiFiCredentials{"short", "1234567"}, false},
		{WiFiCredentials{"nothex", strings.Repeat("zz", 32)}, false},
		{WiFiCredentials{strings.Repeat("s", 33), ""}, false},
	} {
		got, err := DecodeWiFiCredentials(AppendWiFiCredentials(nil, tc.c))
		if (err == nil) != tc.ok || (tc.ok && got != tc.c) {
			t.Errorf("%+v: %+v, %v", tc.c, got, err)
		}
	}
}

func FuzzPeriphDecoders(f *testing.F) {
	f.Add(AppendGATTService(nil, GATTService{UUID: testSvc, Chars: []GATTChar{{UUID: testChar, Props: 3}}}))
	f.Add(AppendGATTEvent(nil, GATTEvent{ID: 1, Op: GATTRead}))
	f.Add(AppendPortalResponse(nil, PortalResponse{ID: 1, Status: 200}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := DecodeGATTService(b); err == nil && !bytes.Equal(AppendGATTService(nil, s), b) {
			t.Error("service does not re-encode")
		}
		_, _ = DecodeGATTEvent(b)
		_, _ = DecodeGATTReply(b)
		_, _ = DecodeGATTNotification(b)
		_, _ = DecodePortalPaths(b)
		_, _ = DecodePortalRequest(b)
		_, _ = DecodePortalResponse(b)
		_, _ = DecodeWiFiCredentials(b)
	})
}
