package plugin

import (
	"bytes"
	"context"
	"crypto/rsa"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"

	"devhost/abi"
)

// tinyModule is the smallest valid Wasm module: enough for bundle parsing.
var tinyModule = []byte("\x00asm\x01\x00\x00\x00")

// fuzzManager is a Manager with fakes and no network: downloads fail at the dial.
func fuzzManager(t testing.TB) *Manager {
	t.Helper()
	noNet := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no network while fuzzing")
	}}}
	m, err := New(Options{Dir: t.TempDir(), TrustedKeys: []*rsa.PublicKey{&loadKey(t, "publisher").PublicKey},
		HTTPClient: noNet, SignalK: newFakeSK(), GPIO: newFakeGPIO(), CAN: &fakeCAN{}, BLE: &fakeBLE{}, Power: &fakePower{}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzBundle feeds arbitrary bytes to the install verification: it never panics, and
// whatever it accepts is signed by the trusted key with a valid manifest.
func FuzzBundle(f *testing.F) {
	key := loadKey(f, "publisher")
	good, err := abi.Pack(manifest("fz", abi.CapLog), tinyModule, key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(append(append([]byte(nil), good...), 0))
	bad := append([]byte(nil), good...)
	bad[20] ^= 0xff
	f.Add(bad)
	other, _ := abi.Pack(manifest("fz"), tinyModule, loadKey(f, "other"))
	f.Add(other)
	f.Add([]byte(abi.Magic))
	f.Add([]byte{})
	m := fuzzManager(f)
	trusted, _ := abi.KeyID(&key.PublicKey)
	f.Fuzz(func(t *testing.T, b []byte) {
		bd, err := m.verify(b)
		if err != nil {
			if !errors.Is(err, errRefused) {
				t.Fatalf("refusal not marked: %v", err)
			}
			return
		}
		if bd.KeyID != trusted {
			t.Fatalf("accepted a bundle of key %s", bd.KeyID)
		}
		if err := bd.Manifest.Validate(); err != nil {
			t.Fatalf("accepted an invalid manifest: %v", err)
		}
	})
}

// FuzzHostCalls gives every host function arbitrary plugin memory and arguments: no call
// panics, every answer is a value or an ABI error code, and nothing escapes the memory.
func FuzzHostCalls(f *testing.F) {
	seeds := [][]byte{
		abi.AppendValues(nil, []abi.PathValue{{Path: "a.b", Value: abi.Number(1)}, {Path: "c", Value: abi.JSON([]byte(`{"x":1}`))}}),
		abi.AppendMeta(nil, []abi.Meta{{Path: "a.b", JSON: []byte(`{"units":"m"}`)}}),
		abi.AppendStrings(nil, []string{"a.*", "*"}),
		abi.AppendPutReply(nil, abi.PutReply{ID: 1, Result: abi.PutDeferred}),
		abi.AppendHealthReport(nil, abi.HealthReport{Name: "x", State: abi.HealthAlarm, Reboot: true}),
		abi.AppendHTTPResponse(nil, abi.HTTPResponse{ID: 1, Status: 200}),
		abi.AppendSSEEvent(nil, abi.SSEEvent{Event: "fz", Data: []byte(`{}`)}),
		abi.AppendCANFrame(nil, abi.CANFrame{ID: 0x1fffffff, Extended: true, Data: []byte{1}}),
		abi.AppendCANFilters(nil, []abi.CANFilter{{ID: 1, Mask: 1}}),
		[]byte(`{"namespace":"f_fz","version":1,"title":"t","keys":[]}`),
	}
	for i, s := range seeds {
		f.Add(s, uint32(0), uint32(len(s)), uint64(i), uint8(i))
	}
	f.Add([]byte{}, uint32(0xffffffff), uint32(0xffffffff), uint64(1)<<40, uint8(200))
	m := fuzzManager(f)
	p := m.newPlugin(record{ID: "fz", Wanted: WantRunning})
	p.man = manifest("fz", abi.CapEvents)
	defs := []hostFunc{fnEventRead, fnLog, fnNsRegister, fnConfigGet, fnSKPublish, fnSKMeta, fnSKSubscribe,
		fnSKUnsubscribe, fnSKPutHandle, fnSKPutReply, fnSKPutSend, fnHealthReport, fnTimerSet, fnTimerCancel,
		fnPowerHold, fnClockNow, fnHTTPReply, fnSSEPublish, fnGPIORead, fnGPIOWrite, fnGPIOWatch, fnCANSend,
		fnCANFilter, fnBLEScan, fnBLEAdvertise, fnMDNSService}
	var all []string
	for _, c := range abi.Capabilities {
		all = append(all, string(c))
	}
	f.Fuzz(func(t *testing.T, mem []byte, ptr, n uint32, wide uint64, which uint8) {
		buf := append([]byte(nil), mem...)
		snapshot := append([]byte(nil), buf...)
		inst := &instance{alloc: &allocator{}, memory: &linearMem{buf: buf}}
		s := newSession(p, inst, p.inbox.open(), all)
		s.batch = mem
		defer func() {
			s.end()
			p.inbox.close()
		}()
		fn := defs[int(which)%len(defs)]
		rc := s.invoke("", fn, []uint64{uint64(ptr), uint64(n), wide})
		if rc < 0 && rc < int32(abi.ErrInternal) {
			t.Fatalf("answer %d is not an ABI error", rc)
		}
		if len(buf) != len(snapshot) {
			t.Fatal("memory length changed")
		}
		// Only the read functions write, and only inside [ptr, ptr+n).
		for i := range buf {
			if buf[i] != snapshot[i] && (uint64(i) < uint64(ptr) || uint64(i) >= uint64(ptr)+uint64(n)) {
				t.Fatalf("byte %d outside the output buffer changed", i)
			}
		}
	})
}

// FuzzValueFromJSON: a Signal K value either converts to an ABI value that survives the
// delta encoding, or is refused.
func FuzzValueFromJSON(f *testing.F) {
	for _, s := range []string{`1.5`, `"x"`, `true`, `null`, `{"latitude":1,"longitude":2}`, `[1,2]`, `1e999`, `"\ud800"`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := valueFromJSON([]byte(s))
		if err != nil {
			return
		}
		enc := abi.AppendValue(nil, "a.b", v)
		vals, err := abi.DecodeValues(enc, 0)
		if err != nil || len(vals) != 1 || vals[0].Value.Kind != v.Kind {
			t.Fatalf("%q: round trip %v %v", s, vals, err)
		}
	})
}

// FuzzAPIBodies sends arbitrary bodies to every endpoint that reads one: the answer is
// always the spec's JSON, never a 5xx other than a storage failure.
func FuzzAPIBodies(f *testing.F) {
	for _, s := range []string{`{"url":"http://127.0.0.1:1/x"}`, `{"upload":"abc","grant":["log"]}`, `{"size":10}`,
		`{"offset":0,"data":"AAAA"}`, `{"pem":"x"}`, `{"purge":true}`, `{}`, ``, `[`, `{"size":1e99}`, `{"offset":-1,"data":null}`} {
		f.Add(s, uint8(0))
	}
	m := fuzzManager(f)
	up, err := m.uploads.create(100, "chunks")
	if err != nil {
		f.Fatal(err)
	}
	type ep struct {
		method string
		id     string
		sub    string
		h      http.HandlerFunc
	}
	eps := []ep{
		{http.MethodPost, "", "", m.serveInstall},
		{http.MethodPost, segUploads, "", m.servePostID},
		{http.MethodPost, segKeys, "", m.servePostID},
		{http.MethodPut, segUploads, up.ID, m.servePutSub},
		{http.MethodDelete, "fz", "", m.serveDelete},
		{http.MethodPost, "fz", "start", m.servePostSub},
	}
	f.Fuzz(func(t *testing.T, body string, which uint8) {
		e := eps[int(which)%len(eps)]
		req := httptest.NewRequest(e.method, "/api/v1/plugins", strings.NewReader(body))
		ps := httprouter.Params{{Key: "id", Value: e.id}, {Key: "sub", Value: e.sub}}
		req = req.WithContext(context.WithValue(req.Context(), httprouter.ParamsKey, ps))
		w := httptest.NewRecorder()
		e.h(w, req)
		if w.Code >= 500 && !bytes.Contains(w.Body.Bytes(), []byte("write_failed")) {
			t.Fatalf("%s %q: %d %s", e.method, body, w.Code, w.Body)
		}
		if w.Code >= 400 && !bytes.HasPrefix(w.Body.Bytes(), []byte(`{"error":`)) {
			t.Fatalf("error body %s", w.Body)
		}
	})
}

// FuzzValidJSON holds sse_publish's JSON check to encoding/json's: the same texts pass, so
// a plugin's event is refused or taken as it was when the host used json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{
		`[{"context":"vessels.self","updates":[{"values":[{"path":"a.b","value":{"x":-1.5e-3}}]}]}]`,
		` {"s":"\u00e9\n\"","t":true,"f":false,"n":null,"a":[]} `, "\"\xff\"",
		`[01]`, `1.`, `-`, `1e+`, `"\x"`, `[1,]`, `{"a" 1}`, `{"a":1,}`, `tru`, `nul`, `[[[]]`, "\"\x01\"", ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > abi.MaxSSEData {
			return
		}
		e := abi.SSEEvent{Event: "e", Data: b}
		_, std := abi.DecodeSSEEvent(abi.AppendSSEEvent(nil, e))
		_, host := decodeSSEEvent(abi.AppendSSEEvent(nil, e))
		if (std == nil) != (host == nil) {
			t.Fatalf("%q: encoding/json says %v, the host %v", b, std, host)
		}
	})
}
