package plugin

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"devhost/abi"
	"devhost/host/sk"
)

// upload sends a bundle in chunks through the API and commits it; it returns the upload id
// and the commit answer.
func (h *harness) upload(b []byte, chunk int) (string, int, []byte) {
	h.t.Helper()
	code, body := h.do(http.MethodPost, "/plugins/uploads", map[string]int{"size": len(b)})
	if code != http.StatusCreated {
		h.t.Fatalf("create upload: %d %s", code, body)
	}
	up := decode[uploadDoc](h.t, body)
	if up.MaxChunk != MaxChunk || up.Received != 0 {
		h.t.Fatalf("new upload: %s", body)
	}
	for off := 0; off < len(b); off += chunk {
		end := min(off+chunk, len(b))
		req := map[string]any{"offset": off, "data": base64.StdEncoding.EncodeToString(b[off:end])}
		js, _ := json.Marshal(req)
		if len(js) > 16<<10 {
			h.t.Fatalf("a chunk request of %d bytes exceeds the 16 KiB body limit", len(js))
		}
		code, body := h.do(http.MethodPut, "/plugins/uploads/"+up.ID, js)
		if code != http.StatusOK {
			h.t.Fatalf("chunk at %d: %d %s", off, code, body)
		}
	}
	code, body = h.do(http.MethodPost, "/plugins/uploads/"+up.ID, nil)
	return up.ID, code, body
}

func TestUploadAndInstall(t *testing.T) {
	h := newHarness(t)
	h.run()
	b := pack(t, manifest("good", abi.CapHTTP, abi.CapLog, abi.CapConfig), loadKey(t, "publisher"))
	id, code, body := h.upload(b, MaxChunk)
	if code != http.StatusOK {
		t.Fatalf("commit: %d %s", code, body)
	}
	doc := decode[uploadDoc](t, body)
	if doc.Bundle == nil || doc.Bundle.Manifest.ID != "good" || len(doc.Bundle.Manifest.Capabilities) != 3 {
		t.Fatalf("commit does not show what the bundle asks for: %s", body)
	}
	// Install granting a subset.
	code, body = h.do(http.MethodPost, "/plugins", map[string]any{"upload": id, "grant": []string{"http", "log"}})
	if code != http.StatusCreated {
		t.Fatalf("install: %d %s", code, body)
	}
	res := decode[InstallResult](t, body)
	if strings.Join(res.Granted, ",") != "http,log" || len(res.Asked) != 3 || res.Replaced {
		t.Fatalf("install answer: %s", body)
	}
	if code, _ := h.do(http.MethodGet, "/plugins/uploads/"+id, nil); code != http.StatusNotFound {
		t.Fatalf("the upload survived its install: %d", code)
	}
	if st := h.waitState("good", StateRunning); st.Namespace != nil {
		t.Fatal("a plugin without the config capability registered its namespace")
	}
	// Installing the same id again replaces it.
	code, body = h.do(http.MethodPost, "/plugins", map[string]any{"url": serveBytes(t, b)})
	if code != http.StatusOK || !decode[InstallResult](t, body).Replaced {
		t.Fatalf("reinstall: %d %s", code, body)
	}
	st := h.waitState("good", StateRunning)
	if strings.Join(st.Granted, ",") != "http,log,config" {
		t.Fatalf("reinstall without grant: %v, want every asked capability", st.Granted)
	}
}

func TestUploadRules(t *testing.T) {
	h := newHarness(t)
	h.run()
	b := pack(t, manifest("good"), loadKey(t, "publisher"))
	code, body := h.do(http.MethodPost, "/plugins/uploads", map[string]int{"size": len(b)})
	if code != http.StatusCreated {
		t.Fatal(code, string(body))
	}
	id := decode[uploadDoc](t, body).ID
	chunk := func(off int, data []byte) (int, []byte) {
		return h.do(http.MethodPut, "/plugins/uploads/"+id, map[string]any{"offset": off, "data": base64.StdEncoding.EncodeToString(data)})
	}
	cases := []struct {
		name string
		do   func() (int, []byte)
		want int
	}{
		{"out of order", func() (int, []byte) { return chunk(100, b[100:200]) }, http.StatusConflict},
		{"too big", func() (int, []byte) { return chunk(0, b[:MaxChunk+1]) }, http.StatusBadRequest},
		{"empty", func() (int, []byte) { return chunk(0, nil) }, http.StatusBadRequest},
		{"bad base64", func() (int, []byte) {
			return h.do(http.MethodPut, "/plugins/uploads/"+id, `{"offset":0,"data":"%%%"}`)
		}, http.StatusBadRequest},
		{"unknown member", func() (int, []byte) {
			return h.do(http.MethodPut, "/plugins/uploads/"+id, `{"offset":0,"data":"","x":1}`)
		}, http.StatusBadRequest},
		{"first chunk", func() (int, []byte) { return chunk(0, b[:100]) }, http.StatusOK},
		{"repeat", func() (int, []byte) { return chunk(0, b[:100]) }, http.StatusConflict},
		{"incomplete commit", func() (int, []byte) { return h.do(http.MethodPost, "/plugins/uploads/"+id, nil) }, http.StatusConflict},
		{"install incomplete", func() (int, []byte) { return h.do(http.MethodPost, "/plugins", map[string]string{"upload": id}) }, http.StatusConflict},
		{"unknown upload", func() (int, []byte) { return h.do(http.MethodGet, "/plugins/uploads/0000", nil) }, http.StatusNotFound},
		{"size zero", func() (int, []byte) { return h.do(http.MethodPost, "/plugins/uploads", `{"size":0}`) }, http.StatusBadRequest},
		{"size too big", func() (int, []byte) {
			return h.do(http.MethodPost, "/plugins/uploads", fmt.Sprintf(`{"size":%d}`, abi.MaxBundle+1))
		}, http.StatusBadRequest},
		{"second upload", func() (int, []byte) { return h.do(http.MethodPost, "/plugins/uploads", `{"size":10}`) }, http.StatusCreated},
		{"third upload", func() (int, []byte) { return h.do(http.MethodPost, "/plugins/uploads", `{"size":10}`) }, http.StatusConflict},
		{"beyond size", func() (int, []byte) {
			var small string
			for _, u := range h.m.uploads.list() {
				if u.Size == 10 {
					small = u.ID
				}
			}
			return h.do(http.MethodPut, "/plugins/uploads/"+small, map[string]any{"offset": 0, "data": base64.StdEncoding.EncodeToString(make([]byte, 11))})
		}, http.StatusBadRequest},
		{"both members", func() (int, []byte) { return h.do(http.MethodPost, "/plugins", `{"url":"http://x","upload":"y"}`) }, http.StatusBadRequest},
		{"unknown grant", func() (int, []byte) {
			return h.do(http.MethodPost, "/plugins", `{"upload":"y","grant":["root"]}`)
		}, http.StatusBadRequest},
	}
	for _, tc := range cases {
		if code, body := tc.do(); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
	}
	code, body = h.do(http.MethodGet, "/plugins/uploads/"+id, nil)
	if up := decode[uploadDoc](t, body); code != http.StatusOK || up.Received != 100 {
		t.Fatalf("progress: %d %s", code, body)
	}
	// An idle upload is discarded with its file.
	h.clk.Advance(UploadIdle)
	waitFor(t, "idle upload discarded", func() bool { _, ok := h.m.uploads.get(id); return !ok })
	ents, _ := os.ReadDir(filepath.Join(h.opts.Dir, uploadsDir))
	for _, e := range ents {
		if e.Name() == id {
			t.Fatal("the file of a discarded upload stayed")
		}
	}
}

// serveBytes serves b over http on loopback and returns its URL.
func serveBytes(t *testing.T, b []byte) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bundle":
			_, _ = w.Write(b)
		case "/chunked":
			w.(http.Flusher).Flush() // no Content-Length: the cap is enforced while reading
			_, _ = w.Write(b)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/bundle"
}

// TestInstallRefused: whatever is wrong with a bundle, the answer says so and nothing is
// stored.
func TestInstallRefused(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxBundle = 4 << 20 })
	h.run()
	pub, other := loadKey(t, "publisher"), loadKey(t, "other")
	good := pack(t, manifest("good"), pub)
	tampered := append([]byte(nil), good...)
	tampered[len(tampered)/2] ^= 1
	unsigned := append([]byte(nil), good[:len(good)-abi.SignatureSize-4]...)
	v2 := manifest("good")
	v2.ABI = 2
	newer, err := abi.Pack(v2, testModule(t), pub)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 5<<20)
	cases := []struct {
		name   string
		bundle []byte
		code   int
		want   string
	}{
		{"unknown key", pack(t, manifest("good"), other), http.StatusBadRequest, "not in the trust store"},
		{"tampered", tampered, http.StatusBadRequest, "bad signature"},
		{"unsigned", unsigned, http.StatusBadRequest, "not a plugin bundle"},
		{"not a bundle", []byte("hello"), http.StatusBadRequest, "not a plugin bundle"},
		{"bare module", testModule(t), http.StatusBadRequest, "devctl plugin pack"},
		{"newer ABI", newer, http.StatusBadRequest, "ABI 2"},
		{"too large", big, http.StatusRequestEntityTooLarge, "too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := serveBytes(t, tc.bundle)
			code, body := h.do(http.MethodPost, "/plugins", map[string]string{"url": url})
			if code != tc.code || !strings.Contains(string(body), tc.want) {
				t.Fatalf("install by URL: %d %s, want %d containing %q", code, body, tc.code, tc.want)
			}
			if len(tc.bundle) < 4<<20 {
				_, code, body = h.upload(tc.bundle, 8192)
				if code != tc.code || !strings.Contains(string(body), tc.want) {
					t.Fatalf("commit of an upload: %d %s", code, body)
				}
				if len(h.m.uploads.list()) != 0 {
					t.Fatal("a refused upload was kept")
				}
			}
			if ids, _ := h.m.part.list(); len(ids) != 0 {
				t.Fatalf("a refused bundle was stored: %v", ids)
			}
		})
	}
	for _, url := range []string{"ftp://x/y", "not a url", strings.TrimSuffix(serveBytes(t, nil), "/bundle") + "/missing"} {
		if code, body := h.do(http.MethodPost, "/plugins", map[string]string{"url": url}); code != http.StatusBadRequest {
			t.Errorf("url %q: %d %s", url, code, body)
		}
	}
	code, body := h.do(http.MethodPost, "/plugins", map[string]any{"url": serveBytes(t, good), "grant": []string{"gpio"}})
	if code != http.StatusBadRequest || !strings.Contains(string(body), `"path":"grant"`) {
		t.Fatalf("grant of a capability not asked: %d %s", code, body)
	}
	if ids, _ := h.m.part.list(); len(ids) != 0 {
		t.Fatalf("stored: %v", ids)
	}
	// Staging by URL shows the asks without installing.
	code, body = h.do(http.MethodPost, "/plugins/uploads", map[string]string{"url": serveBytes(t, good)})
	if code != http.StatusCreated || decode[uploadDoc](t, body).Bundle == nil {
		t.Fatalf("stage by URL: %d %s", code, body)
	}
	if st := h.m.List(); len(st.Plugins) != 0 {
		t.Fatal("staging installed the plugin")
	}
}

func TestKeysAPI(t *testing.T) {
	h := newHarness(t)
	h.run()
	other := loadKey(t, "other")
	pemOther, _ := abi.MarshalPublicKey(&other.PublicKey)
	otherID, _ := abi.KeyID(&other.PublicKey)
	builtinID, _ := abi.KeyID(&loadKey(t, "publisher").PublicKey)

	code, body := h.do(http.MethodGet, "/plugins/keys", nil)
	if code != http.StatusOK || !strings.Contains(string(body), builtinID) || !strings.Contains(string(body), `"builtin":true`) {
		t.Fatalf("list: %d %s", code, body)
	}
	steps := []struct {
		method, path string
		body         any
		code         int
	}{
		{http.MethodPost, "/plugins/keys", map[string]string{"pem": string(pemOther)}, http.StatusCreated},
		{http.MethodPost, "/plugins/keys", map[string]string{"pem": string(pemOther)}, http.StatusOK},
		{http.MethodPost, "/plugins/keys", map[string]string{"pem": "junk"}, http.StatusBadRequest},
		{http.MethodPost, "/plugins/keys", `{"pem":"x","extra":1}`, http.StatusBadRequest},
		{http.MethodGet, "/plugins/keys/" + otherID, nil, http.StatusOK},
		{http.MethodDelete, "/plugins/keys/" + builtinID, nil, http.StatusConflict},
		{http.MethodDelete, "/plugins/keys/0123456789abcdef", nil, http.StatusNotFound},
		{http.MethodPut, "/plugins/keys/" + otherID, `{}`, http.StatusMethodNotAllowed},
		{http.MethodDelete, "/plugins/keys", nil, http.StatusMethodNotAllowed},
		{http.MethodPost, "/plugins/keys/" + otherID, nil, http.StatusMethodNotAllowed},
	}
	for _, s := range steps {
		if code, body := h.do(s.method, s.path, s.body); code != s.code {
			t.Errorf("%s %s: %d %s, want %d", s.method, s.path, code, body, s.code)
		}
	}
	// Trusted now: a bundle signed by it installs, and the key survives a reboot.
	h.reboot()
	if _, ok := h.m.Trust().Lookup(otherID); !ok {
		t.Fatal("added key lost across a reboot")
	}
	if _, err := h.m.Install(pack(t, manifest("good"), other), nil); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.do(http.MethodDelete, "/plugins/keys/"+otherID, nil); code != http.StatusOK {
		t.Fatal("remove key")
	}
	if _, err := h.m.Install(pack(t, manifest("good2"), other), nil); err == nil || !strings.Contains(err.Error(), "trust store") {
		t.Fatalf("install after the key was removed: %v", err)
	}
}

// TestLifecycleAPI: list, get, stop, start, remove with and without the configuration, the
// `plugins` event on every change, and the paths that are not there.
func TestLifecycleAPI(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.start("good", abi.CapHTTP, abi.CapLog, abi.CapConfig, abi.CapPowerHold)
	if err := h.cfg.Set("f_good", "greeting", "ahoy"); err != nil {
		t.Fatal(err)
	}
	code, body := h.do(http.MethodGet, "/plugins/good", nil)
	st := decode[Status](t, body)
	if code != http.StatusOK || st.State != StateRunning || st.Memory == 0 || st.Calls < 1 || st.Namespace == nil {
		t.Fatalf("GET /plugins/good: %d %s", code, body)
	}
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/plugins/nosuch", http.StatusNotFound},
		{http.MethodPost, "/plugins/nosuch/start", http.StatusNotFound},
		{http.MethodPost, "/plugins/good/bogus", http.StatusNotFound},
		{http.MethodPut, "/plugins/good/start", http.StatusMethodNotAllowed},
		{http.MethodPost, "/plugins/good", http.StatusMethodNotAllowed},
		{http.MethodPut, "/plugins/good", http.StatusMethodNotAllowed},
		{http.MethodGet, "/plugins/good/start", http.StatusNotFound},
		{http.MethodDelete, "/plugins/uploads", http.StatusMethodNotAllowed},
	} {
		if code, body := h.do(c.method, c.path, nil); code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.code)
		}
	}

	code, body = h.do(http.MethodPost, "/plugins/good/stop", nil)
	if code != http.StatusOK || decode[Status](t, body).State != StateStopped {
		t.Fatalf("stop: %d %s", code, body)
	}
	if code, _ := h.do(http.MethodGet, "/good/info", nil); code != http.StatusNotFound {
		t.Fatalf("a stopped plugin's route answered %d", code)
	}
	h.reboot()
	h.waitState("good", StateStopped)
	code, body = h.do(http.MethodPost, "/plugins/good/start", nil)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	h.waitState("good", StateRunning)
	waitFor(t, "config read", func() bool {
		_, b := h.do(http.MethodGet, "/good/info", nil)
		return strings.Contains(string(b), "ahoy")
	})

	// Remove keeping the configuration: a reinstall finds it.
	code, body = h.do(http.MethodDelete, "/plugins/good", nil)
	if code != http.StatusOK {
		t.Fatalf("remove: %d %s", code, body)
	}
	if _, err := h.cfg.Get("f_good", "greeting"); err == nil {
		t.Fatal("the namespace of a removed plugin is still registered")
	}
	h.start("good", abi.CapHTTP, abi.CapLog, abi.CapConfig)
	waitFor(t, "config kept", func() bool { v, _ := h.cfg.Get("f_good", "greeting"); return v == "ahoy" })
	code, body = h.do(http.MethodDelete, "/plugins/good?purge=true", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"purged":true`) {
		t.Fatalf("remove with purge: %d %s", code, body)
	}
	h.start("good", abi.CapHTTP, abi.CapLog, abi.CapConfig)
	waitFor(t, "config purged", func() bool { v, _ := h.cfg.Get("f_good", "greeting"); return v == "hello" })
	if code, _ := h.do(http.MethodDelete, "/plugins/good", `{"purge":"yes"}`); code != http.StatusBadRequest {
		t.Fatal("a malformed purge member was accepted")
	}
	if code, _ := h.do(http.MethodDelete, "/plugins/good", `{"purge":true}`); code != http.StatusOK {
		t.Fatal("remove with a body")
	}
	if code, _ := h.do(http.MethodDelete, "/plugins/good", nil); code != http.StatusNotFound {
		t.Fatal("remove of a removed plugin")
	}
	if _, err := os.Stat(filepath.Join(h.opts.Dir, "good")); !os.IsNotExist(err) {
		t.Fatal("the removed plugin's files stayed")
	}

	// The event stream saw every state.
	var seen []string
	for _, e := range h.events.named(EventName) {
		doc := decode[ListDoc](t, e.data)
		for _, p := range doc.Plugins {
			if len(seen) == 0 || seen[len(seen)-1] != string(p.State) {
				seen = append(seen, string(p.State))
			}
		}
	}
	got := strings.Join(seen, ",")
	for _, want := range []string{"loading,running", "running,stopped", "stopped,loading"} {
		if !strings.Contains(got, want) {
			t.Errorf("plugins events %s: missing %s", got, want)
		}
	}
}

// TestCapabilitiesDenied: a plugin granted less than it asks gets permission denied from
// every other host function, and each denial is counted.
func TestCapabilitiesDenied(t *testing.T) {
	all := []abi.Capability{abi.CapHTTP, abi.CapLog, abi.CapConfig, abi.CapSKPublish, abi.CapSKSubscribe,
		abi.CapSKPut, abi.CapSKPutSend, abi.CapHealth, abi.CapTimer, abi.CapPowerHold, abi.CapClock,
		abi.CapEvents, abi.CapGPIO, abi.CapCAN, abi.CapBLE, abi.CapMDNS, abi.CapNetClient}
	for _, tc := range []struct {
		name  string
		grant []abi.Capability
	}{{"probe", []abi.Capability{abi.CapHTTP}}, {"probeall", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			fm := &fakeMDNS{svcs: map[string]abi.MDNSService{}}
			h := newHarness(t, func(o *Options) { o.MDNS = fm })
			h.run()
			h.install(pack(t, manifest(tc.name, all...), loadKey(t, "publisher")), tc.grant)
			h.waitState(tc.name, StateRunning)
			code, body := h.do(http.MethodGet, "/"+tc.name+"/results", nil)
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			rcs := decode[map[string]int32](t, body)
			st, _ := h.m.Status(tc.name)
			if tc.grant != nil {
				for fn, rc := range rcs {
					if fn != "http_reply" && rc != int32(abi.ErrPermission) {
						t.Errorf("%s answered %d without its capability", fn, rc)
					}
				}
				if want := uint64(len(rcs) - 1); st.Denied != want {
					t.Errorf("denied %d, want %d", st.Denied, want)
				}
				if h.power.count() != 0 || len(h.sk.published()) != 0 || len(fm.taken()) != 0 {
					t.Error("a denied call had an effect")
				}
				return
			}
			want := map[string]int32{"log": 0, "ns_register": 0, "config_get": 42, "sk_publish": 0, "sk_publish_ctx": 0, "sk_meta": 0,
				"sk_subscribe": 0, "sk_unsubscribe": 0, "sk_put_handle": 0, "sk_put_reply": int32(abi.ErrNotFound),
				"sk_put_send": 1, "health_report": 0, "health_reboot": int32(abi.ErrPermission), "timer_set": 0,
				"timer_cancel": 0, "power_hold": 0, "clock_now": abi.ClockSize, "http_reply": int32(abi.ErrNotFound),
				"sse_publish": 0, "gpio_read": 1, "gpio_write": 0, "gpio_watch": 0, "can_send": 0, "can_filter": 0,
				"ble_scan": 0, "ble_advertise": 0, "mdns_service": 0,
				"net_open": 1, "net_send": int32(abi.ErrState), "net_close": int32(abi.ErrNotFound)}
			for fn, w := range want {
				if rcs[fn] != w {
					t.Errorf("%s answered %d, want %d", fn, rcs[fn], w)
				}
			}
			if st.Denied != 1 {
				t.Errorf("denied %d, want 1 (the reboot flag)", st.Denied)
			}
			if h.power.count() != 1 || len(h.sk.published()) != 1 || h.sk.metas["test.value"] != `{"units":"m"}` {
				t.Errorf("effects: holds %d, published %v, metas %v", h.power.count(), h.sk.published(), h.sk.metas)
			}
			h.sk.mu.Lock()
			target := h.sk.ctxValues["vessels.urn:mrn:imo:mmsi:230123456"]
			h.sk.mu.Unlock()
			if len(target) != 2 || target[1].Path != "" || string(target[1].Value.(json.RawMessage)) != `{"name":"PROBE"}` {
				t.Errorf("published to the target %+v", target)
			}
			if c, ok := h.condition("probeall.probe"); !ok || c.State != "warn" || c.RebootOnAlarm {
				t.Errorf("plugin condition %+v", c)
			}
			if !h.gpio.wrote("2=true") || len(h.can.sent) != 1 || string(h.ble.adv) != "\x02\x01\x06" {
				t.Error("board calls had no effect")
			}
			if got := fm.taken(); len(got) != 1 || got[0] != "probeall/8080/[v=1]" {
				t.Errorf("mDNS services %v", got)
			}
			// The retained event is in the SSE snapshot.
			snap := h.m.Snapshot()
			if len(snap) != 2 || snap[1].Name != "probeall" {
				t.Errorf("snapshot %+v", snap)
			}
			// Stopping releases what the instance held.
			h.do(http.MethodPost, "/plugins/probeall/stop", nil)
			h.waitState("probeall", StateStopped)
			if h.power.count() != 0 || h.ble.scanning || len(fm.taken()) != 0 {
				t.Error("the power hold, the BLE scan or the mDNS service outlived the instance")
			}
		})
	}
}

// TestSignalKAndBoard: deltas in, PUTs with every result, deferred completion on a host timer,
// GPIO edges and CAN frames through the plugin.
func TestSignalKAndBoard(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.start("good", abi.CapHTTP, abi.CapSKPublish, abi.CapSKSubscribe, abi.CapSKPut,
		abi.CapTimer, abi.CapGPIO, abi.CapCAN)
	waitFor(t, "subscription", func() bool { return h.sk.handler("electrical.switches.*") != nil })
	for i := 0; i < 5; i++ {
		if !h.sk.deliver("environment.*", sk.Delta{Path: "environment.wind.speedApparent", Value: json.RawMessage(fmt.Sprint(i))}) {
			t.Fatal("no subscription for environment.*")
		}
	}
	waitFor(t, "deltas received", func() bool {
		_, b := h.do(http.MethodGet, "/good/info", nil)
		return strings.Contains(string(b), `"received":5`)
	})
	for _, c := range []struct {
		path, value string
		want        sk.PutResult
	}{
		{"electrical.switches.deck.state", "true", sk.PutSuccess},
		{"electrical.switches.deck.state", "3", sk.PutInvalid},
		{"electrical.switches.fault.state", "true", sk.PutFailure},
	} {
		if r := waitReply(t, h.sk.put(t, "electrical.switches.*", c.path, c.value)); r.result != c.want {
			t.Errorf("PUT %s=%s: %v %q, want %v", c.path, c.value, r.result, r.msg, c.want)
		}
	}
	ch := h.sk.put(t, "electrical.switches.*", "electrical.switches.later.state", "true")
	if r := waitReply(t, ch); r.result != sk.PutDeferred {
		t.Fatalf("deferred PUT: %v", r.result)
	}
	h.clk.Advance(100 * time.Millisecond)
	if r := waitReply(t, ch); r.result != sk.PutSuccess || r.msg != "done later" {
		t.Fatalf("deferred completion: %+v", r)
	}
	found := false
	for _, v := range h.sk.published() {
		found = found || (v.Path == "electrical.switches.deck.state" && v.Value == true)
	}
	if !found {
		t.Error("the switched value was not published")
	}
	if !h.gpio.edge(4, true) {
		t.Fatal("pin 4 not watched")
	}
	waitFor(t, "GPIO echo", func() bool { return h.gpio.wrote("5=true") })
	h.can.inject(CANFrame{ID: 0x200, Data: []byte{9}}) // filtered out
	h.can.inject(CANFrame{ID: 0x101, Data: []byte{1, 2}})
	waitFor(t, "CAN echo", func() bool {
		h.can.mu.Lock()
		defer h.can.mu.Unlock()
		return len(h.can.sent) == 1 && h.can.sent[0].ID == 0x102
	})
}

// TestDeferredPutExpires: a deferred PUT the plugin never completes fails after 30 s.
func TestDeferredPutExpires(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.start("good", abi.CapSKPut)
	waitFor(t, "handler", func() bool { return h.sk.handler("electrical.switches.*") != nil })
	// The plugin defers and arms timer 7 (100 ms) to complete; without the timer capability
	// that fails, so only the host's 30 s limit ends the PUT.
	ch := h.sk.put(t, "electrical.switches.*", "electrical.switches.later.state", "true")
	if r := waitReply(t, ch); r.result != sk.PutDeferred {
		t.Fatalf("%v", r)
	}
	h.clk.Advance(time.Duration(abi.PutDeferMs)*time.Millisecond - time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("completed early: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	h.clk.Advance(time.Millisecond)
	if r := waitReply(t, ch); r.result != sk.PutFailure {
		t.Fatalf("expired deferred PUT: %+v", r)
	}
}

// TestConfigChangeEvent: a change of the plugin's namespace reaches it as a config event.
func TestConfigChangeEvent(t *testing.T) {
	h := newHarness(t)
	h.cfg.OnChange(func(ns, key string) { h.m.ConfigChanged(ns, key) })
	h.run()
	h.start("good", abi.CapLog, abi.CapConfig)
	if err := h.cfg.Set("f_good", "level", 7); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "config event", func() bool { return h.logs.has(`"level":7`) })
}
