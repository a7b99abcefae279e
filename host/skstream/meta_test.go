package skstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// metaServer is a scripted REST side: it knows which paths already have meta.
type metaServer struct {
	mu    sync.Mutex
	have  map[string]int // GET status per meta URL (default 404)
	calls []string
	puts  map[string]json.RawMessage
}

func (m *metaServer) do(_ context.Context, method, path string, body []byte) (int, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, method+" "+path)
	switch method {
	case http.MethodGet:
		if st, ok := m.have[path]; ok {
			return st, []byte(`{"units":"server"}`), nil
		}
		return 404, nil, nil
	case http.MethodPut:
		m.puts[path] = json.RawMessage(body)
		m.have[path] = 200
		return 202, []byte(`{"state":"COMPLETED","statusCode":200}`), nil
	}
	return 405, nil, nil
}

func (m *metaServer) log() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls...)
}

func TestMetaReconciliation(t *testing.T) {
	ms := &metaServer{have: map[string]int{
		"/signalk/v1/api/vessels/self/dev/probe/known/meta":  200,
		"/signalk/v1/api/vessels/self/dev/probe/broken/meta": 500,
	}, puts: map[string]json.RawMessage{}}
	f := newFixture(t, func(o *Options) { o.HTTP = ms.do })
	must(t, f.s.DeclareMeta("dev.probe.temp", map[string]any{"units": "K", "description": "probe"}, 2*time.Second))
	must(t, f.s.DeclareMeta("dev.probe.known", json.RawMessage(`{"units":"V"}`), 0))
	must(t, f.s.DeclareMeta("dev.probe.broken", json.RawMessage(`{"units":"A"}`), 0))
	if st := f.s.Status(); st.Meta.Declared != 3 || st.Meta.Reconciled != 0 {
		t.Fatalf("before connect %+v", st.Meta)
	}
	f.connect()
	eventually(t, "reconciled", func() bool { return len(ms.log()) == 4 && f.s.Status().Meta.Reconciled == 2 })
	want := []string{
		"GET /signalk/v1/api/vessels/self/dev/probe/temp/meta",
		"PUT /signalk/v1/api/vessels/self/dev/probe/temp/meta",
		"GET /signalk/v1/api/vessels/self/dev/probe/known/meta",
		"GET /signalk/v1/api/vessels/self/dev/probe/broken/meta",
	}
	if got := ms.log(); !slices.Equal(got, want) {
		t.Fatalf("calls %v", got)
	}
	var body struct {
		Value map[string]any `json:"value"`
	}
	ms.mu.Lock()
	must(t, json.Unmarshal(ms.puts["/signalk/v1/api/vessels/self/dev/probe/temp/meta"], &body))
	ms.mu.Unlock()
	if body.Value["units"] != "K" || body.Value["description"] != "probe" || body.Value["timeout"] != 5.0 {
		t.Fatalf("PUT body %+v", body)
	}
	// A declaration while connected is reconciled at once.
	must(t, f.s.DeclareMeta("dev.probe.new", json.RawMessage(`{"units":"Hz"}`), 100*time.Millisecond))
	eventually(t, "new one", func() bool { return f.s.Status().Meta.Reconciled == 3 })
	ms.mu.Lock()
	newBody := string(ms.puts["/signalk/v1/api/vessels/self/dev/probe/new/meta"])
	ms.mu.Unlock()
	if newBody != `{"value":{"timeout":0.25,"units":"Hz"}}` {
		t.Fatalf("new body %s", newBody)
	}
	// Every connect repeats the GETs; the server now has a copy of everything it was sent.
	ms.mu.Lock()
	ms.calls = nil
	ms.mu.Unlock()
	f.s.NetworkChanged()
	f.p.Accept(t)
	eventually(t, "reconciled again", func() bool { return len(ms.log()) == 4 && f.s.Status().Meta.Reconciled == 3 })
	for _, c := range ms.log() {
		if c[:3] != "GET" {
			t.Fatalf("unexpected %s after the server has every copy", c)
		}
	}
}

func TestDeclareMetaRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	cases := map[string]error{
		"not an object":   f.s.DeclareMeta("a.b", json.RawMessage(`[1]`), 0),
		"not json":        f.s.DeclareMeta("a.b", json.RawMessage(`{`), 0),
		"null":            f.s.DeclareMeta("a.b", nil, 0),
		"bad path":        f.s.DeclareMeta("a b", map[string]any{}, 0),
		"negative period": f.s.DeclareMeta("a.b", map[string]any{}, -time.Second),
	}
	for name, err := range cases {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for i := 0; i < MaxMetaDeclarations; i++ {
		must(t, f.s.DeclareMeta("a.b"+string(rune('a'+i%26))+string(rune('a'+i/26)), map[string]any{}, 0))
	}
	if err := f.s.DeclareMeta("a.overflow", map[string]any{}, 0); !errors.Is(err, ErrLimit) {
		t.Fatalf("over the cap: %v", err)
	}
	// Re-declaring an existing path replaces it, within the cap.
	must(t, f.s.DeclareMeta("a.baa", map[string]any{"units": "m"}, 0))
}
