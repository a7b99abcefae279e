package plugin

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"devhost/abi"
)

// fakeMDNS is the device's responder as the host function sees it: slots, names, calls.
type fakeMDNS struct {
	mu    sync.Mutex
	svcs  map[string]abi.MDNSService
	calls []string
}

func (f *fakeMDNS) Register(s abi.MDNSService) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "register "+s.Instance)
	k := mdnsKey(s.Instance, s.Type, s.Proto)
	if _, ok := f.svcs[k]; ok {
		return fmt.Errorf("%w: taken", abi.ErrConflict)
	}
	if len(f.svcs) >= abi.MaxMDNSServices {
		return fmt.Errorf("%w: slots", abi.ErrLimit)
	}
	f.svcs[k] = s
	return nil
}

func (f *fakeMDNS) UpdateTXT(instance, typ, proto string, txt []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "txt "+instance)
	k := mdnsKey(instance, typ, proto)
	s, ok := f.svcs[k]
	if !ok {
		return abi.ErrNotFound
	}
	s.TXT = txt
	f.svcs[k] = s
	return nil
}

func (f *fakeMDNS) Unregister(instance, typ, proto string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "unregister "+instance)
	k := mdnsKey(instance, typ, proto)
	if _, ok := f.svcs[k]; !ok {
		return abi.ErrNotFound
	}
	delete(f.svcs, k)
	return nil
}

func (f *fakeMDNS) taken() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.svcs {
		out = append(out, fmt.Sprintf("%s/%d/%v", s.Instance, s.Port, s.TXT))
	}
	return out
}

func TestMDNSServiceHostFunction(t *testing.T) {
	m := fuzzManager(t)
	fm := &fakeMDNS{svcs: map[string]abi.MDNSService{}}
	// The device's own name is taken already.
	fm.svcs[mdnsKey("", "_http", "_tcp")] = abi.MDNSService{Type: "_http", Proto: "_tcp", Port: 80}
	m.opts.MDNS = fm
	p := m.newPlugin(record{ID: "md", Wanted: WantRunning})
	p.man = manifest("md", abi.CapMDNS)
	newS := func(grants ...string) *session {
		inst := &instance{alloc: &allocator{}, memory: &linearMem{buf: make([]byte, 4096)}}
		return newSession(p, inst, p.inbox.open(), grants)
	}
	call := func(s *session, svc abi.MDNSService) error {
		b := abi.AppendMDNSService(nil, svc)
		copy(s.inst.memory.buf, b)
		_, err := abi.Result(s.invoke(abi.CapMDNS, fnMDNSService, []uint64{0, uint64(len(b))}))
		return err
	}
	s := newS("mdns")
	logger := abi.MDNSService{Instance: "logger", Type: "_nmea-0183", Proto: "_udp", Port: 10110, TXT: []string{"v=1"}}

	steps := []struct {
		name string
		svc  abi.MDNSService
		want error
		call string
	}{
		{"register", logger, nil, "register logger"},
		{"same port: TXT update", abi.MDNSService{Instance: "LOGGER", Type: "_nmea-0183", Proto: "_udp", Port: 10110, TXT: []string{"v=2"}}, nil, "txt logger"},
		{"new port: withdrawn and registered again", abi.MDNSService{Instance: "logger", Type: "_nmea-0183", Proto: "_udp", Port: 10111}, nil, "register logger"},
		{"a name the device uses", abi.MDNSService{Type: "_http", Proto: "_tcp", Port: 81}, abi.ErrConflict, "register "},
		{"9 TXT items", abi.MDNSService{Instance: "x", Type: "_a", Proto: "_tcp", Port: 1, TXT: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}}, abi.ErrLimit, ""},
		{"bad type", abi.MDNSService{Instance: "x", Type: "a", Proto: "_tcp", Port: 1}, abi.ErrInvalid, ""},
		{"withdraw a service not ours", abi.MDNSService{Type: "_http", Proto: "_tcp"}, abi.ErrNotFound, ""},
	}
	for _, st := range steps {
		before := len(fm.calls)
		if err := call(s, st.svc); !errors.Is(err, st.want) || st.want == nil && err != nil {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
		last := ""
		if len(fm.calls) > before {
			last = fm.calls[len(fm.calls)-1]
		}
		if last != st.call {
			t.Fatalf("%s: responder's last call %q, want %q (all %q)", st.name, last, st.call, fm.calls)
		}
	}
	if got := len(fm.taken()); got != 2 {
		t.Fatalf("%d services, want 2: %v", got, fm.taken())
	}
	// Slots: 6 in all, the device's own included in this fake; the seventh is refused.
	for i := 0; i < 4; i++ {
		if err := call(s, abi.MDNSService{Instance: fmt.Sprint("s", i), Type: "_a", Proto: "_tcp", Port: 1}); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	if err := call(s, abi.MDNSService{Instance: "s9", Type: "_a", Proto: "_tcp", Port: 1}); !errors.Is(err, abi.ErrLimit) {
		t.Fatalf("full: %v", err)
	}
	// Without the capability: denied, nothing reaches the responder.
	other := newS("log")
	before := len(fm.calls)
	if err := call(other, abi.MDNSService{Instance: "y", Type: "_a", Proto: "_tcp", Port: 1}); !errors.Is(err, abi.ErrPermission) {
		t.Fatalf("without mdns: %v", err)
	}
	if len(fm.calls) != before {
		t.Fatal("a denied call reached the responder")
	}
	// The services die with the instance.
	s.end()
	other.end()
	if got := fm.taken(); !reflect.DeepEqual(got, []string{"/80/[]"}) {
		t.Fatalf("after the instance ended: %v", got)
	}

	// Without mDNS on the device.
	m.opts.MDNS = nil
	s2 := newS("mdns")
	defer s2.end()
	if err := call(s2, logger); !errors.Is(err, abi.ErrUnavailable) {
		t.Fatalf("without mDNS: %v", err)
	}
	p.inbox.close()
}
